"""What the BART-shaped checkpoints share: HF's parameter names for layers, embeddings and head.

Marian, M2M100 (NLLB) and mBART store their layers under the same names
(``model.encoder.layers.N.self_attn.q_proj``, ...); they differ in features (norm placement,
position tables, embedding norm, output bias) that each adapter states in the spec it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphgen._errors import CheckpointError
from graphgen.checkpoint.generation import generation_defaults
from graphgen.checkpoint.safetensors import release_pages
from graphgen.families import CheckpointData
from graphgen.model.spec import ModelSpec

Tensors = dict[str, np.ndarray]


def tensor_reader(checkpoint: CheckpointData, tensors: Tensors) -> Callable[[str], np.ndarray]:
    def tensor(name: str) -> np.ndarray:
        if name not in tensors:
            raise CheckpointError(f"{checkpoint.source}: the weights lack {name}")
        return tensors[name]

    return tensor


def layer_weights(config: Any, tensor: Callable[[str], np.ndarray]) -> Tensors:
    """Every encoder and decoder layer's weights under graphgen's names, linears as ``[in, out]``."""
    weights: Tensors = {}

    def add_linear(name: str, hf_name: str) -> None:
        weights[f"{name}.weight"] = tensor(f"{hf_name}.weight").T  # a view: written out transposed
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

    for index in range(config.encoder_layers):
        add_layer(f"encoder.layers.{index}", cross=False)
    for index in range(config.decoder_layers):
        add_layer(f"decoder.layers.{index}", cross=True)
    return weights


def norm_weights(tensor: Callable[[str], np.ndarray], names: dict[str, str]) -> Tensors:
    """graphgen name → HF name of LayerNorms outside the layers (final and embedding norms)."""
    weights: Tensors = {}
    for name, hf_name in names.items():
        weights[f"{name}.weight"] = tensor(f"{hf_name}.weight")
        weights[f"{name}.bias"] = tensor(f"{hf_name}.bias")
    return weights


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two tables hold the same values. A tie filled in by name is the same array and is not
    read; tables that are read to compare let their pages go again (they are written out much later,
    and NLLB's is 1 GB)."""
    if a.shape != b.shape:
        return False
    if a.__array_interface__ == b.__array_interface__:  # the same view of the same memory
        return True
    equal = bool(np.array_equal(a, b))
    release_pages(a)
    release_pages(b)
    return equal


def embedding_weights(tensor: Callable[[str], np.ndarray], prefix: str = "model.") -> tuple[Tensors, dict[str, str]]:
    """Token tables and output projection, each distinct array stored once.

    Tied tables are found by comparing values, not names or object identity, so a checkpoint that
    saved two equal copies is deduplicated too. ``prefix``: where HF keeps the stacks (T5: none).
    """
    encoder_table = tensor(f"{prefix}encoder.embed_tokens.weight")
    decoder_table = tensor(f"{prefix}decoder.embed_tokens.weight")
    head = tensor("lm_head.weight")
    weights: Tensors = {"encoder.embed_tokens": encoder_table}
    aliases: dict[str, str] = {}
    if _equal(decoder_table, encoder_table):
        aliases["decoder.embed_tokens"] = "encoder.embed_tokens"
    else:
        weights["decoder.embed_tokens"] = decoder_table
    if _equal(head, decoder_table):
        aliases["lm_head.weight"] = "decoder.embed_tokens"
    else:
        weights["lm_head.weight"] = head
    return weights, aliases


def shared_table_ties(config: Any, tensors: Tensors, prefix: str = "model.") -> Tensors:
    """Fill in what a safetensors file leaves out of a ``model.shared`` checkpoint (M2M100, mBART;
    T5's ``shared`` with ``prefix=""``): both token tables are the shared one, and the head too when
    the config ties it. A file that stores one token table and no shared one (MADLAD-400's T5 files
    keep ``decoder.embed_tokens``) has it read as the shared one, as transformers loads it."""
    tied = dict(tensors)
    shared = f"{prefix}shared.weight"
    if shared not in tied:  # HF ties both token tables to the shared one: a file may store one of them only
        stored = [t for t in (f"{prefix}{side}.embed_tokens.weight" for side in ("encoder", "decoder")) if t in tied]
        if len(stored) == 1:
            tied[shared] = tied[stored[0]]
    if shared in tied:
        for side in ("encoder", "decoder"):
            tied.setdefault(f"{prefix}{side}.embed_tokens.weight", tied[shared])
        if getattr(config, "tie_word_embeddings", True):
            tied.setdefault("lm_head.weight", tied[shared])
    return tied


def decoder_start(config: Any, generation_config: Any) -> int:
    """HF's rule: the generation config's start token, else the model config's, else BOS."""
    candidates = (
        getattr(generation_config, "decoder_start_token_id", None),
        getattr(config, "decoder_start_token_id", None),
        getattr(config, "bos_token_id", None),  # T5's config has none
    )
    for value in candidates:
        if value is not None:
            return int(value)
    raise CheckpointError("the checkpoint names no decoder_start_token_id (nor a bos_token_id)")


def checkpoint_fields(checkpoint: CheckpointData, max_positions: int) -> dict[str, Any]:
    """The ModelSpec fields every adapter reads the same way: source, special ids, generation defaults."""
    config = checkpoint.config
    generation, renormalize, forced_eos = generation_defaults(checkpoint.generation_config, max_positions)
    return {
        "source": checkpoint.source,
        "pad_token_id": config.pad_token_id,
        "eos_token_id": config.eos_token_id,
        "decoder_start_token_id": decoder_start(config, checkpoint.generation_config),
        "generation": generation,
        "renormalize_logits": renormalize,
        "forced_eos": forced_eos,
    }


def bart_spec(
    checkpoint: CheckpointData,
    tensors: Tensors,
    architecture: str,
    extra_weights: Tensors,
    **features: Any,
) -> ModelSpec:
    """The spec every BART-shaped adapter returns; ``extra_weights`` hold the positions, output bias and
    norms outside the layers, ``features`` the spec's architecture fields."""
    config = checkpoint.config
    tensor = tensor_reader(checkpoint, tensors)
    weights, aliases = embedding_weights(tensor)
    weights |= layer_weights(config, tensor) | extra_weights
    if "decoder.positions" not in weights:
        aliases["decoder.positions"] = "encoder.positions"
    return ModelSpec(
        architecture=architecture,
        d_model=config.d_model,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        encoder_heads=config.encoder_attention_heads,
        decoder_heads=config.decoder_attention_heads,
        activation=config.activation_function,
        embed_scale=float(np.sqrt(config.d_model)) if config.scale_embedding else 1.0,
        max_positions=config.max_position_embeddings,
        source_vocab_size=weights["encoder.embed_tokens"].shape[0],
        target_vocab_size=tensor("lm_head.weight").shape[0],
        weights=weights,
        aliases=aliases,
        **checkpoint_fields(checkpoint, config.max_position_embeddings),
        **features,
    )
