"""Every position scheme in one place: sinusoidal tables (Marian), learned tables with an offset
(mBART, M2M100's sinusoidal table counted from the padding), and T5's relative attention buckets,
each for the whole source and for one decoding step."""

from __future__ import annotations

import math

import numpy as np
from onnx import helper

from graphgen.custom_ops.builder import INT32, i64
from graphgen.model.layers import Layers
from graphgen.model.spec import RelativeAttention


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


class Positions(Layers):
    """Embeddings with their positions, and T5's relative position bias."""

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
        tokens = self.weights.lookup(b, self.spec.weight_name(table), ids)
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

    def step_positions(self, input_ids: str, past_length: str, ids_type: int = INT32) -> str | None:
        """Position rows of one decoding step's tokens ``[B, 1]`` (of ONNX element type ``ids_type``)
        after ``past_length`` (int64 [1]) tokens."""
        b, spec = self.b, self.spec
        if spec.relative_attention is not None:
            return None
        table = self.w("decoder.positions")
        index = b.op("Add", [past_length, b.const(i64(spec.position_offset))]) if spec.position_offset else past_length
        if spec.padding_position is None:
            return b.op("Gather", [table, index])  # [1, D]: the same for every row
        pad = np.array(spec.pad_token_id, dtype=helper.tensor_dtype_to_np_dtype(ids_type))
        is_pad = b.op("Equal", [input_ids, b.const(pad)])
        index = b.op("Where", [is_pad, b.const(np.int64(spec.padding_position)), index])
        # as int32: onnxruntime-web's WebGPU provider, given two int64 [B, 1] indices in a step (these
        # and the tokens'), hands the token embedding's Gather these (measured; docs/platforms.md)
        return b.op("Gather", [table, b.op("Cast", [index], to=INT32)])  # [B, 1, D]
