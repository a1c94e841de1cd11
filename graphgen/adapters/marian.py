"""MarianMT (Helsinki-NLP opus-mt and friends) → ModelSpec."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._generation import generation_defaults
from .._spec import ModelSpec
from .._subgraphs import sinusoidal_positions
from . import Adapter, register


def _array(tensor: Any) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().cpu().float().numpy())


def marian_spec(model: Any, source: str) -> ModelSpec:
    config = model.config
    inner = model.model
    generation, renormalize, forced_eos = generation_defaults(model.generation_config, config.max_position_embeddings)
    weights: dict[str, np.ndarray] = {}
    aliases: dict[str, str] = {}

    def add_linear(name: str, module: Any) -> None:
        weights[f"{name}.weight"] = np.ascontiguousarray(_array(module.weight).T)
        weights[f"{name}.bias"] = _array(module.bias)

    def add_norm(name: str, module: Any) -> None:
        weights[f"{name}.weight"] = _array(module.weight)
        weights[f"{name}.bias"] = _array(module.bias)

    def add_layer(prefix: str, layer: Any, cross: bool) -> None:
        blocks = [("self_attn", layer.self_attn)] + ([("encoder_attn", layer.encoder_attn)] if cross else [])
        for block, attention in blocks:
            for short, projection in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "out_proj")):
                add_linear(f"{prefix}.{block}.{short}", getattr(attention, projection))
            add_norm(f"{prefix}.{block}_layer_norm", getattr(layer, f"{block}_layer_norm"))
        add_linear(f"{prefix}.fc1", layer.fc1)
        add_linear(f"{prefix}.fc2", layer.fc2)
        add_norm(f"{prefix}.final_layer_norm", layer.final_layer_norm)

    encoder_table = _array(inner.encoder.embed_tokens.weight)
    decoder_table = _array(inner.decoder.embed_tokens.weight)
    head = _array(model.lm_head.weight)
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
    weights["final_logits_bias"] = _array(model.final_logits_bias).reshape(-1)
    weights["positions"] = sinusoidal_positions(config.max_position_embeddings, config.d_model)
    for index, layer in enumerate(inner.encoder.layers):
        add_layer(f"encoder.layers.{index}", layer, cross=False)
    for index, layer in enumerate(inner.decoder.layers):
        add_layer(f"decoder.layers.{index}", layer, cross=True)

    return ModelSpec(
        architecture="MarianMTModel",
        source=source,
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
