"""M2M100 and NLLB-200 (an M2M100 checkpoint with another tokenizer) → ModelSpec.

Pre-norm layers with a final norm per stack, no embedding norm, no output bias, and fairseq's
sinusoidal positions: computed (the checkpoint does not store them), counted from
``pad + 1`` over non-pad tokens only, with the pad row all zeros.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphgen.families import Adapter, CheckpointData, register
from graphgen.families._bart import bart_spec, norm_weights, shared_table_ties, tensor_reader
from graphgen.model.spec import ModelSpec
from graphgen.text.rules import TokenizerRule, lang_code_to_id, register_tokenizer


def nllb_languages(tokenizer: Any) -> dict[str, int]:
    """NLLB's codes are its extra special tokens (``eng_Latn``, ...), the named special tokens aside."""
    named = {str(token) for token in tokenizer.special_tokens_map.values() if isinstance(token, str)}
    return {code: tokenizer.convert_tokens_to_ids(code) for code in tokenizer.extra_special_tokens if code not in named}


register_tokenizer("NllbTokenizer", TokenizerRule(nllb_languages, metaspace=True, spm_file="vocab_file"))
register_tokenizer(
    "M2M100Tokenizer", TokenizerRule(lang_code_to_id, metaspace=False, spm_file="spm_file", unknown_verbatim=True)
)


def fairseq_positions(count: int, dim: int, padding_row: int) -> np.ndarray:
    """fairseq's table: sines of all frequencies, then cosines; the padding row zero."""
    half = dim // 2
    frequencies = np.exp(np.arange(half, dtype=np.float32) * np.float32(-math.log(10000) / (half - 1)))
    angles = np.arange(count, dtype=np.float32)[:, None] * frequencies[None, :]
    table = np.zeros((count, dim), dtype=np.float32)
    table[:, :half] = np.sin(angles)
    table[:, half : 2 * half] = np.cos(angles)
    table[padding_row] = 0.0
    return table


def m2m100_spec(checkpoint: CheckpointData) -> ModelSpec:
    config = checkpoint.config
    tensors = shared_table_ties(config, checkpoint.tensors)
    tensor = tensor_reader(checkpoint, tensors)
    pad = config.pad_token_id
    vocab = tensor("lm_head.weight").shape[0]
    extra = norm_weights(
        tensor, {"encoder.layer_norm": "model.encoder.layer_norm", "decoder.layer_norm": "model.decoder.layer_norm"}
    )
    extra["final_logits_bias"] = np.zeros(vocab, dtype=np.float32)
    extra["encoder.positions"] = fairseq_positions(config.max_position_embeddings + pad + 1, config.d_model, pad)
    return bart_spec(
        checkpoint,
        tensors,
        "M2M100ForConditionalGeneration",
        extra,
        pre_layer_norm=True,
        final_layer_norm=True,
        position_offset=pad + 1,
        padding_position=pad,
    )


register(Adapter(config_class="M2M100Config", model_class="M2M100ForConditionalGeneration", to_spec=m2m100_spec))
