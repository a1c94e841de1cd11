"""Encoder and KV-cached decoder subgraphs in the form ORT's BeamSearch op (model_type=1) runs.

The encoder subgraph uses the op's 3-input form: it encodes the source *and* runs the first
decoder step, returning that step's logits, the self-attention caches of length 1 and the
cross-attention caches. The decoder subgraph then runs one token per call. Both are written
from the weights, op by op, so no exporter version can change what they contain.

Three HF logits processors are applied inside the subgraphs, before ORT's log-softmax, because
ORT applies its own versions after the log-softmax without renormalising (see
``shared/brief/engineering-notes.md``): banned tokens (``bad_words_ids``), ``min_length`` and
``forced_eos_token_id``. Banning a token by a ``-inf`` logit before the softmax gives exactly
HF's ``renormalize_logits=True`` scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from graphgen.custom_ops.builder import FLOAT, FLOAT16, INT32, MS_DOMAIN, GraphBuilder, i64
from graphgen.model.spec import ModelSpec, RelativeAttention
from graphgen.model.weights import QuantizedWeights

NEG_INF = np.float32(-np.inf)
MASKED = np.float32(np.finfo(np.float32).min)

# Makes the output bias of a decoder step from its length (int64 [1], decoder start included):
# the BeamSearch op's in-graph logits processors (search/op.py).
OutputBias = Callable[[GraphBuilder, ModelSpec, str], str]


def sinusoidal_positions(count: int, dim: int) -> np.ndarray:
    """Marian's table: sines in the first half of each row, cosines in the second."""
    exponents = 2 * (np.arange(dim) // 2) / dim
    angles = np.arange(count)[:, None] / np.power(10000, exponents)[None, :]
    half = dim // 2 + dim % 2
    table = np.zeros((count, dim), dtype=np.float32)
    table[:, :half] = np.sin(angles[:, 0::2])
    table[:, half:] = np.cos(angles[:, 1::2])
    return table


def relative_buckets(relative: RelativeAttention, *, bidirectional: bool) -> np.ndarray:
    """Bucket of each key - query distance in ``[-max_distance, max_distance]`` (beyond, the end
    buckets repeat), computed in float32 step by step as HF's ``_relative_position_bucket`` does."""
    limit = relative.max_distance
    distance = np.arange(-limit, limit + 1, dtype=np.int64)
    count = relative.num_buckets
    buckets = np.zeros_like(distance)
    if bidirectional:
        count //= 2
        buckets += (distance > 0).astype(np.int64) * count
        magnitude = np.abs(distance)
    else:
        magnitude = -np.minimum(distance, 0)
    exact = count // 2
    ratio = np.maximum(magnitude, 1).astype(np.float32) / np.float32(exact)
    scaled = np.log(ratio) / np.float32(math.log(limit / exact)) * np.float32(count - exact)
    large = np.minimum(exact + scaled.astype(np.int64), count - 1)
    return buckets + np.where(magnitude < exact, magnitude, large)


class Transformer:
    """The layer code both subgraphs share; one instance per subgraph being built.

    ``float16`` builds the layers in float16 from a spec whose weights are float16
    (``ModelSpec.in_float16``), the way HF runs a ``model.half()``: activations, caches and
    logits in float16, with the steps torch computes in float32 inside one kernel (the
    activation functions, T5's RMS norm, scaling by a Python float) done in float32 between
    two casts, and the logits handed over as float32 (``generate`` casts them before its
    log-softmax).
    """

    def __init__(
        self, b: GraphBuilder, spec: ModelSpec, quantized: QuantizedWeights | None, *, float16: bool = False
    ) -> None:
        self.b = b
        self.spec = spec
        self.quantized = quantized
        self.float16 = float16
        self.float_type = FLOAT16 if float16 else FLOAT
        # HF masks with the compute type's minimum (torch.finfo(dtype).min).
        self.masked = np.float16(np.finfo(np.float16).min) if float16 else MASKED

    def scalar(self, value: float, hint: str = "const") -> str:
        """A float constant in the compute type."""
        return self.b.const(np.float16(value) if self.float16 else np.float32(value), hint)

    def in_float32(self, x: str, compute: Callable[[str], str]) -> str:
        """``compute(x)`` in float32: as it is for float32 layers, between two casts for float16."""
        if not self.float16:
            return compute(x)
        return self.b.op("Cast", [compute(self.b.op("Cast", [x], to=FLOAT))], to=FLOAT16)

    def scale_by(self, x: str, factor: float, hint: str) -> str:
        """``x * factor`` with a Python float ``factor``: torch multiplies in float32 and rounds once."""
        return self.in_float32(x, lambda h: self.b.mul(h, self.b.const(np.float32(factor), hint)))

    def w(self, name: str) -> str:
        """A weight reference by the name it is stored under (tied tables resolve to one)."""
        return self.b.weight(self.spec.weight_name(name))

    def linear(self, x: str, prefix: str) -> str:
        bias = self.w(f"{prefix}.bias") if self.spec.linear_bias else ""
        if self.quantized is None:
            y = self.b.matmul(x, self.w(f"{prefix}.weight"))
            return self.b.add(y, bias) if bias else y
        return self.quantized.matmul(self.b, x, self.spec.weight_name(f"{prefix}.weight"), bias)

    def fused_linear(self, x: str, prefixes: list[str]) -> list[str]:
        """Several linears that read the same input as one matmul, split after: one pass over ``x`` and,
        quantized, one activation quantization instead of one per projection."""
        b = self.b
        names = [self.spec.weight_name(f"{p}.weight") for p in prefixes]
        fused = "+".join(names)
        bias = ""
        if self.spec.linear_bias:
            bias = b.derived(f"{fused}.bias", np.concatenate([self.spec.weight(f"{p}.bias") for p in prefixes]))
        if self.quantized is None:
            weight = b.derived(fused, np.concatenate([self.spec.weights[n] for n in names], axis=1))
            y = b.matmul(x, weight)
            y = b.add(y, bias) if bias else y
        else:
            y = self.quantized.fused_matmul(b, x, fused, names, bias)
        return b.op_multi("Split", [y], len(prefixes), axis=-1, num_outputs=len(prefixes))

    def layer_norm(self, x: str, prefix: str) -> str:
        b = self.b
        if self.spec.norm == "rms":  # T5: x / sqrt(mean(x²) + eps) * weight; no mean, no bias

            def normalized(h: str) -> str:  # in float32 for float16 layers too, as HF's T5LayerNorm
                mean_square = b.op("ReduceMean", [b.mul(h, h), b.const(i64(-1))], keepdims=1)
                eps = b.const(np.float32(self.spec.layer_norm_eps), "norm_eps")
                return b.op("Div", [h, b.op("Sqrt", [b.add(mean_square, eps)])])

            return b.mul(self.in_float32(x, normalized), self.w(f"{prefix}.weight"))
        return b.op(
            "LayerNormalization",
            [x, self.w(f"{prefix}.weight"), self.w(f"{prefix}.bias")],
            axis=-1,
            epsilon=self.spec.layer_norm_eps,
        )

    def activation(self, x: str) -> str:
        """The feed-forward activation, in float32 (torch's float16 kernels compute it so too)."""
        return self.in_float32(x, self.activation_float32)

    def activation_float32(self, x: str) -> str:
        b, kind = self.b, self.spec.activation
        if kind == "relu":
            return b.op("Relu", [x])
        if kind in ("swish", "silu"):
            return b.mul(x, b.op("Sigmoid", [x]))
        if kind == "gelu":  # exact erf form, as torch's default GELU
            inner = b.op("Erf", [b.mul(x, b.const(np.float32(1 / np.sqrt(2))))])
            return b.mul(b.mul(x, b.const(np.float32(0.5))), b.add(inner, b.const(np.float32(1.0))))
        if kind == "gelu_new":  # tanh approximation
            cube = b.mul(b.const(np.float32(0.044715)), b.op("Pow", [x, b.const(np.float32(3.0))]))
            inner = b.op("Tanh", [b.mul(b.const(np.float32(np.sqrt(2 / np.pi))), b.add(x, cube))])
            return b.mul(b.mul(x, b.const(np.float32(0.5))), b.add(inner, b.const(np.float32(1.0))))
        raise ValueError(f"unsupported activation {kind}")

    def split_heads(self, x: str, heads: int) -> str:
        """[B, T, D] → [B, H, T, D/H]."""
        head_dim = self.spec.head_dim(heads)
        # [0, 0, ...] rather than [0, -1, ...]: -1 cannot be inferred from an empty batch
        return self.b.transpose(self.b.reshape(x, [0, 0, heads, head_dim]), [0, 2, 1, 3])

    def attention(self, q: str, k: str, v: str, heads: int, mask: str, position_bias: str = "") -> str:
        """Self-attention over unmasked keys, as one com.microsoft ``MultiHeadAttention`` kernel.

        One kernel instead of the ~10 reshapes, transposes, matmuls and the softmax it replaces,
        each of which ORT dispatches on every decoding step. ``q``/``k``/``v`` are ``[B, T, D]``;
        ``mask`` is the int32 ``[B, S]`` padding mask, whose zeros get the float32 minimum, as HF's
        masks do. ``position_bias`` (``[B, H, T, T]``) is T5's relative position bias.
        """
        return self.b.op(
            "MultiHeadAttention",
            [q, k, v, "", mask, *([position_bias] if position_bias else [])],
            domain=MS_DOMAIN,
            num_heads=heads,
            scale=self.scale(heads),
            mask_filter_value=float(self.masked),
        )

    def cross_attention(self, q: str, k: str, v: str, heads: int, bias: str) -> str:
        """Attention of ``q`` ``[B, 1, D]`` over the ``[B, H, S, D/H]`` cross caches.

        The padding goes in as an additive ``padding_bias`` rather than as the key padding mask:
        ONNX Runtime 1.17-1.20 misapply that mask when key and value come as such caches (padded
        rows decoded differently; measured), and the bias gives the same softmax on every release
        (a masked score becomes the float32 minimum either way, whose exponent is exactly 0).
        """
        return self.b.op(
            "MultiHeadAttention", [q, k, v, "", "", bias], domain=MS_DOMAIN, num_heads=heads, scale=self.scale(heads)
        )

    def padding_bias(self, mask: str, heads: int) -> str:
        """int32 ``[B, S]`` mask → float ``[B, H, 1, S]``: 0 where kept, the float32 minimum where padded."""
        b = self.b
        padded = b.op("Equal", [mask, b.const(np.int32(0))])
        bias = b.op("Where", [padded, b.const(self.masked, "masked"), self.scalar(0.0)])
        rows = b.op("Unsqueeze", [bias, b.const(i64(1, 2))])  # [B, 1, 1, S]
        shape = b.op("Shape", [rows])
        expanded = b.op("ScatterElements", [shape, b.const(i64(1)), b.const(i64(heads))])
        return b.op("Expand", [rows, expanded])

    def cached_self_attention(
        self, q: str, k: str, v: str, heads: int, past: tuple[str, str] | None, position_bias: str = ""
    ) -> tuple[str, str, str]:
        """A decoding step's self-attention: the output and the key/value caches with this step appended."""
        cache = ["", "", position_bias, *past] if past is not None else ["", "", position_bias] if position_bias else []
        output, key, value = self.b.op_multi(
            "MultiHeadAttention", [q, k, v, *cache], 3, domain=MS_DOMAIN, num_heads=heads, scale=self.scale(heads)
        )
        return output, key, value

    def scale(self, heads: int) -> float:
        if not self.spec.scaled_attention:
            return 1.0
        return float(np.float32(self.spec.head_dim(heads) ** -0.5))

    def relative_bias(self, side: str, distances: str) -> str:
        """T5's position bias: int64 key - query ``distances`` ``[...]`` → float ``[..., H]``."""
        b, relative = self.b, self.spec.relative_attention
        assert relative is not None
        limit = relative.max_distance
        clipped = b.op("Min", [b.op("Max", [distances, b.const(np.int64(-limit))]), b.const(np.int64(limit))])
        table = b.derived(f"{side}.relative_buckets", relative_buckets(relative, bidirectional=side == "encoder"))
        bucket = b.op("Gather", [table, b.add(clipped, b.const(np.int64(limit)))])
        return b.op("Gather", [self.w(f"{side}.relative_attention_bias"), bucket])

    def source_relative_bias(self, input_ids: str) -> str:
        """``[B, H, S, S]``: every source position over every other (computed once, shared by the layers)."""
        b = self.b
        length = b.op("Squeeze", [b.op("Shape", [input_ids], start=1, end=2)])
        position = b.op("Range", [b.const(np.int64(0)), length, b.const(np.int64(1))])
        distances = b.op(
            "Sub", [b.op("Unsqueeze", [position, b.const(i64(0))]), b.op("Unsqueeze", [position, b.const(i64(1))])]
        )
        values = self.relative_bias("encoder", distances)  # [S, S, H]
        return self.per_row(b.op("Unsqueeze", [b.transpose(values, [2, 0, 1]), b.const(i64(0))]), input_ids)

    def step_relative_bias(self, input_ids: str, past_length: str) -> str:
        """``[B, H, 1, past + 1]``: the new token over itself and every earlier one."""
        b = self.b
        total = b.op("Squeeze", [b.op("Add", [past_length, b.const(i64(1))])])
        keys = b.op("Range", [b.const(np.int64(0)), total, b.const(np.int64(1))])
        values = self.relative_bias("decoder", b.op("Sub", [keys, past_length]))  # [T, H]
        return self.per_row(b.reshape(b.transpose(values, [1, 0]), [1, self.spec.decoder_heads, 1, -1]), input_ids)

    def per_row(self, bias: str, input_ids: str) -> str:
        """A ``[1, H, T, S]`` position bias repeated for each row of ``input_ids``.

        ONNX Runtime 1.17's MultiHeadAttention does not broadcast the bias over the batch: it reads
        a ``[1, ...]`` bias as if it held every row (measured: every row after the first attends
        with garbage; 1.20 and newer broadcast correctly). The copy is ``[B, H, T, S]`` floats, made
        once per call or decoding step and shared by every layer.
        """
        b = self.b
        rows = b.op("Shape", [input_ids], start=0, end=1)
        return b.op("Expand", [bias, b.op("Concat", [rows, b.const(i64(1, 1, 1))], axis=0)])

    def embed(self, ids: str, side: str, positions: str | None) -> str:
        """Token embedding (scaled) + ``positions`` rows, then the embedding norm where the model has one."""
        b = self.b
        table = f"{side}.embed_tokens"
        if self.quantized is None:
            tokens = b.op("Gather", [self.w(table), ids])
        else:
            tokens = self.quantized.lookup(b, self.spec.weight_name(table), ids)
        if self.spec.embed_scale != 1.0:
            tokens = self.scale_by(tokens, self.spec.embed_scale, "embed_scale")
        x = tokens if positions is None else b.add(tokens, positions)
        if self.spec.embedding_layer_norm:
            x = self.layer_norm(x, f"{side}.embedding_norm")
        return x

    def source_positions(self, input_ids: str) -> str | None:
        """Position rows of the source tokens: ``[S, D]``, or ``[B, S, D]`` when they depend on padding;
        ``None`` for relative positions."""
        b, spec = self.b, self.spec
        if spec.relative_attention is not None:
            return None
        table = self.w("encoder.positions")
        if spec.padding_position is None:
            length = b.op("Shape", [input_ids], start=1, end=2)
            if not spec.position_offset:
                return b.op("Slice", [table, b.const(i64(0)), length])
            start = b.const(i64(spec.position_offset))
            return b.op("Slice", [table, start, b.op("Add", [length, start])])
        is_pad = b.op("Equal", [input_ids, b.const(np.int32(spec.pad_token_id))])
        counted = b.op("CumSum", [b.op("Cast", [b.op("Not", [is_pad])], to=INT32), b.const(np.int32(1))])
        index = b.add(counted, b.const(np.int32(spec.position_offset - 1)))
        return b.op("Gather", [table, b.op("Where", [is_pad, b.const(np.int32(spec.padding_position)), index])])

    def step_positions(self, input_ids: str, past_length: str) -> str | None:
        """Position rows of one decoding step's tokens ``[B, 1]`` after ``past_length`` (int64 [1]) tokens."""
        b, spec = self.b, self.spec
        if spec.relative_attention is not None:
            return None
        table = self.w("decoder.positions")
        index = b.op("Add", [past_length, b.const(i64(spec.position_offset))]) if spec.position_offset else past_length
        if spec.padding_position is None:
            return b.op("Gather", [table, index])  # [1, D]: the same for every row
        is_pad = b.op("Equal", [input_ids, b.const(np.int32(spec.pad_token_id))])
        index = b.op("Where", [is_pad, b.const(np.int64(spec.padding_position)), index])
        return b.op("Gather", [table, index])  # [B, 1, D]

    def sublayer(self, x: str, norm: str, transform: Callable[[str], str]) -> str:
        """A residual block: ``norm(x + f(x))`` (post-norm) or ``x + f(norm(x))`` (pre-norm)."""
        if self.spec.pre_layer_norm:
            return self.b.add(x, transform(self.layer_norm(x, norm)))
        return self.layer_norm(self.b.add(x, transform(x)), norm)

    def feed_forward(self, x: str, prefix: str) -> str:
        if self.spec.gated_feed_forward:
            gate = self.activation(self.linear(x, f"{prefix}.fc1_gate"))
            return self.linear(self.b.mul(gate, self.linear(x, f"{prefix}.fc1")), f"{prefix}.fc2")
        return self.linear(self.activation(self.linear(x, f"{prefix}.fc1")), f"{prefix}.fc2")

    def stack_end(self, x: str, side: str) -> str:
        return self.layer_norm(x, f"{side}.layer_norm") if self.spec.final_layer_norm else x

    def encoder(self, input_ids: str, mask: str) -> str:
        spec = self.spec
        x = self.embed(input_ids, "encoder", self.source_positions(input_ids))
        heads = spec.encoder_heads
        position_bias = self.source_relative_bias(input_ids) if spec.relative_attention is not None else ""
        for index in range(spec.encoder_layers):
            prefix = f"encoder.layers.{index}"

            def attend(h: str, prefix: str = prefix) -> str:
                q, k, v = self.fused_linear(h, [f"{prefix}.self_attn.{p}" for p in "qkv"])
                attended = self.attention(q, k, v, heads, mask, position_bias)
                return self.linear(attended, f"{prefix}.self_attn.out")

            x = self.sublayer(x, f"{prefix}.self_attn_layer_norm", attend)
            x = self.sublayer(x, f"{prefix}.final_layer_norm", partial(self.feed_forward, prefix=prefix))
        return self.stack_end(x, "encoder")

    def cross_caches(self, encoder_states: str) -> list[tuple[str, str]]:
        heads = self.spec.decoder_heads
        caches = []
        for index in range(self.spec.decoder_layers):
            prefix = f"decoder.layers.{index}.encoder_attn"
            key = self.split_heads(self.linear(encoder_states, f"{prefix}.k"), heads)
            value = self.split_heads(self.linear(encoder_states, f"{prefix}.v"), heads)
            caches.append((key, value))
        return caches

    def decoder_step(
        self,
        input_ids: str,
        past_length: str,
        past_self: list[tuple[str, str]] | None,
        cross: list[tuple[str, str]],
        mask: str,
        *,
        cross_bias: str | None = None,
        processors: OutputBias | None = None,
    ) -> tuple[str, list[tuple[str, str]]]:
        """One decoding step for ``input_ids`` [B, 1]; returns logits [B, 1, V] and the new self caches.

        ``cross_bias`` is ``padding_bias(mask)`` when the caller has it already (a search loop computes
        it once, not per step). Without ``processors`` the logits are the model's own (HF's
        ``outputs.logits``): the caller applies the logits processors itself; with them, the output
        bias is what ``processors`` makes of the step's length (the BeamSearch op's subgraphs).
        """
        b, spec = self.b, self.spec
        heads = spec.decoder_heads
        x = self.embed(input_ids, "decoder", self.step_positions(input_ids, past_length))
        position_bias = self.step_relative_bias(input_ids, past_length) if spec.relative_attention is not None else ""
        presents = []
        if cross_bias is None:
            cross_bias = self.padding_bias(mask, heads)
        for index in range(spec.decoder_layers):
            prefix = f"decoder.layers.{index}"
            past = past_self[index] if past_self is not None else None

            def attend_self(h: str, prefix: str = prefix, past: tuple[str, str] | None = past) -> str:
                q, k, v = self.fused_linear(h, [f"{prefix}.self_attn.{p}" for p in "qkv"])
                attended, key, value = self.cached_self_attention(q, k, v, heads, past, position_bias)
                presents.append((key, value))
                return self.linear(attended, f"{prefix}.self_attn.out")

            def attend_source(h: str, prefix: str = prefix, index: int = index) -> str:
                q = self.linear(h, f"{prefix}.encoder_attn.q")
                attended = self.cross_attention(q, *cross[index], heads, cross_bias)
                return self.linear(attended, f"{prefix}.encoder_attn.out")

            x = self.sublayer(x, f"{prefix}.self_attn_layer_norm", attend_self)
            x = self.sublayer(x, f"{prefix}.encoder_attn_layer_norm", attend_source)
            x = self.sublayer(x, f"{prefix}.final_layer_norm", partial(self.feed_forward, prefix=prefix))
        x = self.stack_end(x, "decoder")
        if processors is None:
            return self.logits(x), presents
        current_length = b.op("Add", [past_length, b.const(i64(1))])
        return self.logits(x, lambda: processors(b, spec, current_length)), presents

    def logits(self, hidden: str, output_bias: Callable[[], str] | None = None) -> str:
        """Output projection with the checkpoint's bias, or the bias ``output_bias`` makes (after the
        scaling, before the projection: the order the nodes have always had)."""
        b, spec = self.b, self.spec
        if spec.output_scale != 1.0:
            hidden = self.scale_by(hidden, spec.output_scale, "output_scale")
        flat = b.reshape(hidden, [-1, spec.d_model])
        if output_bias is None and self.float16:
            # HF: the projection, rounded to float16, plus the float16 bias, then float32 for generate.
            logits = b.op("Gemm", [flat, self.w("lm_head.weight")], transB=1)
            bias_row = final_logits_bias(spec)
            if np.any(bias_row):
                logits = b.add(logits, b.derived("final_logits_bias_row.float16", bias_row.astype(np.float16)))
            return b.reshape(b.op("Cast", [logits], to=FLOAT), [-1, 1, spec.target_vocab_size])
        bias = b.derived("final_logits_bias_row", final_logits_bias(spec)) if output_bias is None else output_bias()
        if self.quantized is None:
            logits = b.op("Gemm", [flat, self.w("lm_head.weight"), bias], transB=1)
        else:
            logits = self.quantized.output_projection(b, flat, self.spec.weight_name("lm_head.weight"), bias)
        return b.reshape(logits, [-1, 1, spec.target_vocab_size])


def final_logits_bias(spec: ModelSpec) -> np.ndarray:
    return spec.weight("final_logits_bias").reshape(-1).astype(np.float32).copy()
