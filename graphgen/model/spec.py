"""The architecture-neutral description of a seq2seq model that the graph builders consume.

An adapter (one per architecture, see ``graphgen.families``) fills a :class:`ModelSpec` from a
checkpoint; everything downstream reads only the spec. Linear weights are stored as ``[in, out]``
so the builders can use them in ``MatMul`` without a transpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

ACTIVATIONS = ("relu", "gelu", "gelu_new", "swish", "silu")
NORMS = ("layer", "rms")


@dataclass(frozen=True)
class GenerationDefaults:
    """Search settings read from the checkpoint's ``generation_config.json``."""

    max_length: int = 512
    min_length: int = 0
    num_beams: int = 1
    num_return_sequences: int = 1
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    early_stopping: bool = False
    no_repeat_ngram_size: int = 0
    bad_token_ids: tuple[int, ...] = ()
    forced_bos_token_id: int | None = None  # the first generated token (a target language), or none


@dataclass(frozen=True)
class RelativeAttention:
    """T5's position scheme: a learned bias per head for each bucket of key - query distance, added to
    the attention scores of every self-attention layer (tables ``{side}.relative_attention_bias``,
    ``[num_buckets, heads]``); no position tables."""

    num_buckets: int
    max_distance: int


@dataclass
class ModelSpec:
    """Shapes, special ids and weights of an encoder-decoder transformer.

    ``weights`` maps canonical names (see :func:`layer_weight_names`) to float32 arrays;
    ``aliases`` maps a canonical name to another one whose array it shares (tied embeddings,
    one position table for both stacks), so a tied table is stored once. What differs between
    architectures is a named field below, never the architecture's name: the builders read only
    these fields.
    """

    architecture: str
    source: str
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    activation: str
    embed_scale: float
    max_positions: int
    source_vocab_size: int
    target_vocab_size: int
    pad_token_id: int
    eos_token_id: int
    decoder_start_token_id: int
    generation: GenerationDefaults
    renormalize_logits: bool = True
    forced_eos: bool = False
    layer_norm_eps: float = 1e-5
    # Architecture features the builders read (the defaults are Marian's):
    pre_layer_norm: bool = False  # x + f(norm(x)) (fairseq's normalize_before) rather than norm(x + f(x))
    final_layer_norm: bool = False  # a norm after the last layer of each stack ({side}.layer_norm)
    embedding_layer_norm: bool = False  # a norm right after token + position embedding ({side}.embedding_norm)
    position_offset: int = 0  # row of the position tables that position 0 reads
    # fairseq's padding-aware positions: a pad token reads this row and the others count only
    # non-pad tokens before them; None: position = index (+ offset)
    padding_position: int | None = None
    norm: str = "layer"  # "layer": LayerNormalization (weight, bias); "rms": T5's root-mean-square norm (weight)
    linear_bias: bool = True  # whether the attention and feed-forward projections have biases
    scaled_attention: bool = True  # scores scaled by head_dim ** -0.5 (T5 folds that into its weights)
    attention_head_dim: int = 0  # 0: d_model // heads (T5's d_kv may differ)
    gated_feed_forward: bool = False  # act(fc1_gate(x)) * fc1(x) before fc2 (T5 v1.1, mT5)
    relative_attention: RelativeAttention | None = None  # None: absolute position tables
    output_scale: float = 1.0  # the decoder output's factor before the output projection (T5: d_model ** -0.5)
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def weight_name(self, name: str) -> str:
        """The canonical name whose array ``name`` uses (itself unless tied)."""
        while name in self.aliases:
            name = self.aliases[name]
        return name

    def weight(self, name: str) -> np.ndarray:
        return self.weights[self.weight_name(name)]

    def head_dim(self, heads: int) -> int:
        return self.attention_head_dim or self.d_model // heads

    def validate(self) -> None:
        """Fail early, with the offending field named, rather than deep inside graph building."""
        problems: list[str] = []
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation {self.activation!r} is not one of {ACTIVATIONS}")
        if self.norm not in NORMS:
            problems.append(f"norm {self.norm!r} is not one of {NORMS}")
        for side, heads in (("encoder", self.encoder_heads), ("decoder", self.decoder_heads)):
            if heads <= 0 or (not self.attention_head_dim and self.d_model % heads):
                problems.append(f"d_model {self.d_model} is not divisible by {side} heads {heads}")
        for name in required_weight_names(self):
            resolved = self.weight_name(name)
            if resolved not in self.weights:
                problems.append(f"missing weight {name}")
                continue
            array = self.weights[resolved]
            if array.dtype != np.float32:
                problems.append(f"weight {name} is {array.dtype}, expected float32")
        for side in ("encoder", "decoder"):
            table = self.weights.get(self.weight_name(f"{side}.positions"))
            if table is not None and table.shape[0] < self.max_positions + self.position_offset:
                problems.append(f"{side}.positions has {table.shape[0]} rows; {self.max_positions} positions need more")
        relative = self.relative_attention
        for side, heads in (("encoder", self.encoder_heads), ("decoder", self.decoder_heads)):
            table = self.weights.get(self.weight_name(f"{side}.relative_attention_bias"))
            if relative is not None and table is not None and table.shape != (relative.num_buckets, heads):
                problems.append(f"{side}.relative_attention_bias must be [{relative.num_buckets}, {heads}]")
        head = self.weights.get(self.weight_name("lm_head.weight"))
        if head is not None and head.shape != (self.target_vocab_size, self.d_model):
            problems.append("lm_head.weight must be [target_vocab, d_model]")
        if not 0 <= self.pad_token_id < self.target_vocab_size:
            problems.append(f"pad_token_id {self.pad_token_id} outside the target vocabulary")
        if problems:
            raise ValueError("invalid model spec: " + "; ".join(problems))


def layer_weight_names(prefix: str, cross_attention: bool, spec: ModelSpec | None = None) -> list[str]:
    """Canonical per-layer weight names; ``prefix`` is e.g. ``decoder.layers.3``. Without ``spec``:
    every name a BART-shaped layer has (biases, LayerNorm biases, no gate)."""
    biases = spec is None or spec.linear_bias
    norm_biases = spec is None or spec.norm == "layer"
    blocks = ["self_attn", "encoder_attn"] if cross_attention else ["self_attn"]
    linears = [f"{prefix}.{block}.{projection}" for block in blocks for projection in ("q", "k", "v", "out")]
    linears += [f"{prefix}.fc1", f"{prefix}.fc2"]
    if spec is not None and spec.gated_feed_forward:
        linears.append(f"{prefix}.fc1_gate")
    norms = [f"{prefix}.{block}_layer_norm" for block in blocks] + [f"{prefix}.final_layer_norm"]
    names = [f"{name}.weight" for name in linears] + ([f"{name}.bias" for name in linears] if biases else [])
    names += [f"{name}.weight" for name in norms] + ([f"{name}.bias" for name in norms] if norm_biases else [])
    return names


def required_weight_names(spec: ModelSpec) -> list[str]:
    names = ["lm_head.weight", "final_logits_bias"]
    norm_parts = ("weight", "bias") if spec.norm == "layer" else ("weight",)
    for side in ("encoder", "decoder"):
        names.append(f"{side}.embed_tokens")
        if spec.relative_attention is None:
            names.append(f"{side}.positions")
        else:
            names.append(f"{side}.relative_attention_bias")
        if spec.final_layer_norm:
            names += [f"{side}.layer_norm.{part}" for part in norm_parts]
        if spec.embedding_layer_norm:
            names += [f"{side}.embedding_norm.{part}" for part in norm_parts]
    for index in range(spec.encoder_layers):
        names += layer_weight_names(f"encoder.layers.{index}", cross_attention=False, spec=spec)
    for index in range(spec.decoder_layers):
        names += layer_weight_names(f"decoder.layers.{index}", cross_attention=True, spec=spec)
    return names
