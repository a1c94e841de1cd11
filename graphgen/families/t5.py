"""T5 and mT5 (``T5Config``, ``MT5Config``) → ModelSpec.

What differs from the BART shape, each a spec feature: relative position buckets instead of
position tables (a learned bias per head, stored in the first layer of each stack and shared by
all), root-mean-square norms without bias, pre-norm with a final norm per stack, no biases in
any projection, unscaled attention scores, a gated feed-forward in T5 v1.1 and mT5
(``gated-gelu``), and, in the original T5 only, the decoder output scaled by ``d_model ** -0.5``
before the tied output projection. HF keeps T5's layers as ``block.N.layer.M``: 0 self-attention,
1 cross-attention (decoder) or feed-forward, 2 the decoder's feed-forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphgen.families import Adapter, CheckpointData, register
from graphgen.families._bart import Tensors, checkpoint_fields, embedding_weights, shared_table_ties, tensor_reader
from graphgen.model.spec import ModelSpec, RelativeAttention
from graphgen.text.rules import TokenizerRule, register_tokenizer

# T5 marks no language with a token: the task is a text prefix ("translate English to German: ").
# MADLAD-400's T5 checkpoints take a "<2xx>" piece at the start of the text instead.
register_tokenizer("T5Tokenizer", TokenizerRule(None, metaspace=True, spm_file="vocab_file", target_tag=r"<2[^<>\s]+>"))

# T5 has no position limit; this bounds what a graph accepts (HF's tokenizer cuts at 512 when asked).
T5_MAX_POSITIONS = 1 << 16


def _layer_weights(config: Any, tensor: Callable[[str], np.ndarray]) -> Tensors:
    weights: Tensors = {}

    def linear(name: str, hf_name: str) -> None:
        weights[f"{name}.weight"] = tensor(f"{hf_name}.weight").T  # a view: written out transposed

    def attention(name: str, hf_name: str) -> None:
        for short, hf_short in (("q", "q"), ("k", "k"), ("v", "v"), ("out", "o")):
            linear(f"{name}.{short}", f"{hf_name}.{hf_short}")

    def feed_forward(prefix: str, hf_name: str) -> None:
        if config.is_gated_act:
            linear(f"{prefix}.fc1_gate", f"{hf_name}.wi_0")
            linear(f"{prefix}.fc1", f"{hf_name}.wi_1")
        else:
            linear(f"{prefix}.fc1", f"{hf_name}.wi")
        linear(f"{prefix}.fc2", f"{hf_name}.wo")

    for index in range(config.num_layers):
        prefix, hf = f"encoder.layers.{index}", f"encoder.block.{index}.layer"
        attention(f"{prefix}.self_attn", f"{hf}.0.SelfAttention")
        weights[f"{prefix}.self_attn_layer_norm.weight"] = tensor(f"{hf}.0.layer_norm.weight")
        feed_forward(prefix, f"{hf}.1.DenseReluDense")
        weights[f"{prefix}.final_layer_norm.weight"] = tensor(f"{hf}.1.layer_norm.weight")
    for index in range(config.num_decoder_layers):
        prefix, hf = f"decoder.layers.{index}", f"decoder.block.{index}.layer"
        attention(f"{prefix}.self_attn", f"{hf}.0.SelfAttention")
        weights[f"{prefix}.self_attn_layer_norm.weight"] = tensor(f"{hf}.0.layer_norm.weight")
        attention(f"{prefix}.encoder_attn", f"{hf}.1.EncDecAttention")
        weights[f"{prefix}.encoder_attn_layer_norm.weight"] = tensor(f"{hf}.1.layer_norm.weight")
        feed_forward(prefix, f"{hf}.2.DenseReluDense")
        weights[f"{prefix}.final_layer_norm.weight"] = tensor(f"{hf}.2.layer_norm.weight")
    return weights


def _t5_spec(checkpoint: CheckpointData, architecture: str, scale_output: bool) -> ModelSpec:
    config = checkpoint.config
    tensors = shared_table_ties(config, checkpoint.tensors, prefix="")
    tensor = tensor_reader(checkpoint, tensors)
    weights, aliases = embedding_weights(tensor, prefix="")
    weights |= _layer_weights(config, tensor)
    for side in ("encoder", "decoder"):
        weights[f"{side}.layer_norm.weight"] = tensor(f"{side}.final_layer_norm.weight")
        bias = f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        weights[f"{side}.relative_attention_bias"] = tensor(bias)
    vocab = tensor("lm_head.weight").shape[0]
    weights["final_logits_bias"] = np.zeros(vocab, dtype=np.float32)
    return ModelSpec(
        architecture=architecture,
        d_model=config.d_model,
        encoder_layers=config.num_layers,
        decoder_layers=config.num_decoder_layers,
        encoder_heads=config.num_heads,
        decoder_heads=config.num_heads,
        activation=config.dense_act_fn,
        embed_scale=1.0,
        max_positions=T5_MAX_POSITIONS,
        source_vocab_size=weights["encoder.embed_tokens"].shape[0],
        target_vocab_size=vocab,
        layer_norm_eps=float(config.layer_norm_epsilon),
        pre_layer_norm=True,
        final_layer_norm=True,
        norm="rms",
        linear_bias=False,
        scaled_attention=False,
        attention_head_dim=config.d_kv,
        gated_feed_forward=bool(config.is_gated_act),
        relative_attention=RelativeAttention(
            config.relative_attention_num_buckets, config.relative_attention_max_distance
        ),
        output_scale=float(np.float32(config.d_model**-0.5)) if scale_output else 1.0,
        weights=weights,
        aliases=aliases,
        **checkpoint_fields(checkpoint, T5_MAX_POSITIONS),
    )


def t5_spec(checkpoint: CheckpointData) -> ModelSpec:
    # transformers 5 reads the original T5's scaling from tie_word_embeddings (false in T5 v1.1)
    scale = bool(getattr(checkpoint.config, "scale_decoder_outputs", True))
    return _t5_spec(checkpoint, "T5ForConditionalGeneration", scale_output=scale)


def mt5_spec(checkpoint: CheckpointData) -> ModelSpec:
    return _t5_spec(checkpoint, "MT5ForConditionalGeneration", scale_output=False)


register(Adapter(config_class="T5Config", model_class="T5ForConditionalGeneration", to_spec=t5_spec))
register(Adapter(config_class="MT5Config", model_class="MT5ForConditionalGeneration", to_spec=mt5_spec))
