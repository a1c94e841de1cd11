"""MarianMT (Helsinki-NLP opus-mt and friends) → ModelSpec: post-norm layers, one sinusoidal table."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphgen.families import Adapter, CheckpointData, register
from graphgen.families._bart import bart_spec, tensor_reader
from graphgen.model.positions import sinusoidal_positions
from graphgen.model.spec import ModelSpec


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
    extra = {
        "final_logits_bias": tensor_reader(checkpoint, tensors)("final_logits_bias").reshape(-1),
        # computed, not stored; both stacks read the same table
        "encoder.positions": sinusoidal_positions(config.max_position_embeddings, config.d_model),
    }
    return bart_spec(checkpoint, tensors, "MarianMTModel", extra)


register(Adapter(config_class="MarianConfig", model_class="MarianMTModel", to_spec=marian_spec))
