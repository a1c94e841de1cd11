"""MarianMT (Helsinki-NLP opus-mt and friends) → ModelSpec."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import CheckpointError
from .._generation import generation_defaults
from .._spec import ModelSpec
from .._subgraphs import sinusoidal_positions
from . import Adapter, CheckpointData, register


def tie_weights(config: Any, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fill in the tables a safetensors file leaves out because HF ties them to another one."""
    tied = dict(tensors)
    if config.share_encoder_decoder_embeddings:
        for side in ("encoder", "decoder"):
            tied[f"model.{side}.embed_tokens.weight"] = tied["model.shared.weight"]
    if config.tie_word_embeddings:
        tied["lm_head.weight"] = tied["model.decoder.embed_tokens.weight"]
    return tied


def marian_spec(checkpoint: CheckpointData) -> ModelSpec:
    config = checkpoint.config
    tensors = tie_weights(config, checkpoint.tensors)
    generation, renormalize, forced_eos = generation_defaults(
        checkpoint.generation_config, config.max_position_embeddings
    )
    weights: dict[str, np.ndarray] = {}
    aliases: dict[str, str] = {}

    def tensor(name: str) -> np.ndarray:
        if name not in tensors:
            raise CheckpointError(f"{checkpoint.source}: the weights lack {name}")
        return tensors[name]

    def add_linear(name: str, hf_name: str) -> None:
        weights[f"{name}.weight"] = np.ascontiguousarray(tensor(f"{hf_name}.weight").T)
        weights[f"{name}.bias"] = tensor(f"{hf_name}.bias")

    def add_norm(name: str, hf_name: str) -> None:
        weights[f"{name}.weight"] = tensor(f"{hf_name}.weight")
        weights[f"{name}.bias"] = tensor(f"{hf_name}.bias")

    def add_layer(prefix: str, cross: bool) -> None:
        hf = f"model.{prefix}"
        for block in ("self_attn", "encoder_attn") if cross else ("self_attn",):
            for short, projection in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "out_proj")):
                add_linear(f"{prefix}.{block}.{short}", f"{hf}.{block}.{projection}")
            add_norm(f"{prefix}.{block}_layer_norm", f"{hf}.{block}_layer_norm")
        add_linear(f"{prefix}.fc1", f"{hf}.fc1")
        add_linear(f"{prefix}.fc2", f"{hf}.fc2")
        add_norm(f"{prefix}.final_layer_norm", f"{hf}.final_layer_norm")

    encoder_table = tensor("model.encoder.embed_tokens.weight")
    decoder_table = tensor("model.decoder.embed_tokens.weight")
    head = tensor("lm_head.weight")
    weights["encoder.embed_tokens"] = encoder_table
    # Tied tables are stored once: compare values, not object identity, so a checkpoint that
    # saved two equal copies is deduplicated too.
    if decoder_table.shape == encoder_table.shape and np.array_equal(decoder_table, encoder_table):
        aliases["decoder.embed_tokens"] = "encoder.embed_tokens"
    else:
        weights["decoder.embed_tokens"] = decoder_table
    if np.array_equal(head, decoder_table):
        aliases["lm_head.weight"] = "decoder.embed_tokens"
    else:
        weights["lm_head.weight"] = head
    weights["final_logits_bias"] = tensor("final_logits_bias").reshape(-1)
    weights["positions"] = sinusoidal_positions(config.max_position_embeddings, config.d_model)
    for index in range(config.encoder_layers):
        add_layer(f"encoder.layers.{index}", cross=False)
    for index in range(config.decoder_layers):
        add_layer(f"decoder.layers.{index}", cross=True)

    return ModelSpec(
        architecture="MarianMTModel",
        source=checkpoint.source,
        d_model=config.d_model,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        encoder_heads=config.encoder_attention_heads,
        decoder_heads=config.decoder_attention_heads,
        activation=config.activation_function,
        embed_scale=float(np.sqrt(config.d_model)) if config.scale_embedding else 1.0,
        max_positions=config.max_position_embeddings,
        source_vocab_size=encoder_table.shape[0],
        target_vocab_size=head.shape[0],
        pad_token_id=config.pad_token_id,
        eos_token_id=config.eos_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
        generation=generation,
        renormalize_logits=renormalize,
        forced_eos=forced_eos,
        weights=weights,
        aliases=aliases,
    )


register(Adapter(config_class="MarianConfig", model_class="MarianMTModel", to_spec=marian_spec))
