"""The architecture-neutral description of a seq2seq model that the graph builders consume.

An adapter (one per architecture, see ``graphgen.adapters``) fills a :class:`ModelSpec` from a
checkpoint; everything downstream reads only the spec. Linear weights are stored as ``[in, out]``
so the builders can use them in ``MatMul`` without a transpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ACTIVATIONS = ("relu", "gelu", "gelu_new", "swish", "silu")


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
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def weight_name(self, name: str) -> str:
        """The canonical name whose array ``name`` uses (itself unless tied)."""
        while name in self.aliases:
            name = self.aliases[name]
        return name

    def weight(self, name: str) -> np.ndarray:
        return self.weights[self.weight_name(name)]

    def validate(self) -> None:
        """Fail early, with the offending field named, rather than deep inside graph building."""
        problems: list[str] = []
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation {self.activation!r} is not one of {ACTIVATIONS}")
        for side, heads in (("encoder", self.encoder_heads), ("decoder", self.decoder_heads)):
            if heads <= 0 or self.d_model % heads:
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
        head = self.weights.get(self.weight_name("lm_head.weight"))
        if head is not None and head.shape != (self.target_vocab_size, self.d_model):
            problems.append("lm_head.weight must be [target_vocab, d_model]")
        if not 0 <= self.pad_token_id < self.target_vocab_size:
            problems.append(f"pad_token_id {self.pad_token_id} outside the target vocabulary")
        if problems:
            raise ValueError("invalid model spec: " + "; ".join(problems))


def layer_weight_names(prefix: str, cross_attention: bool) -> list[str]:
    """Canonical per-layer weight names; ``prefix`` is e.g. ``decoder.layers.3``."""
    blocks = ["self_attn", "encoder_attn"] if cross_attention else ["self_attn"]
    names = []
    for block in blocks:
        for projection in ("q", "k", "v", "out"):
            names += [f"{prefix}.{block}.{projection}.weight", f"{prefix}.{block}.{projection}.bias"]
        names += [f"{prefix}.{block}_layer_norm.weight", f"{prefix}.{block}_layer_norm.bias"]
    names += [f"{prefix}.fc1.weight", f"{prefix}.fc1.bias", f"{prefix}.fc2.weight", f"{prefix}.fc2.bias"]
    names += [f"{prefix}.final_layer_norm.weight", f"{prefix}.final_layer_norm.bias"]
    return names


def required_weight_names(spec: ModelSpec) -> list[str]:
    names = ["lm_head.weight", "final_logits_bias"]
    for side in ("encoder", "decoder"):
        names += [f"{side}.embed_tokens", f"{side}.positions"]
        if spec.final_layer_norm:
            names += [f"{side}.layer_norm.weight", f"{side}.layer_norm.bias"]
        if spec.embedding_layer_norm:
            names += [f"{side}.embedding_norm.weight", f"{side}.embedding_norm.bias"]
    for index in range(spec.encoder_layers):
        names += layer_weight_names(f"encoder.layers.{index}", cross_attention=False)
    for index in range(spec.decoder_layers):
        names += layer_weight_names(f"decoder.layers.{index}", cross_attention=True)
    return names
