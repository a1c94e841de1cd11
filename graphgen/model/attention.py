"""Attention: ONNX Runtime's ``MultiHeadAttention`` (com.microsoft) for self-, cross- and cached
self-attention, the padding bias, and the scaling each family uses."""

from __future__ import annotations

import numpy as np

from graphgen.custom_ops.builder import MS_DOMAIN, i64
from graphgen.model.layers import Layers


class Attention(Layers):
    """The attention blocks, on top of :class:`~graphgen.model.layers.Layers`."""

    def split_heads(self, x: str, heads: int) -> str:
        """[B, T, D] → [B, H, T, D/H]."""
        head_dim = self.spec.head_dim(heads)
        # [0, 0, ...] rather than [0, -1, ...]: -1 cannot be inferred from an empty batch
        return self.b.transpose(self.b.reshape(x, [0, 0, heads, head_dim]), [0, 2, 1, 3])

    def attention(self, q: str, k: str, v: str, heads: int, attention_bias: str) -> str:
        """Self-attention over a source, as one com.microsoft ``MultiHeadAttention`` kernel.

        One kernel instead of the ~10 reshapes, transposes, matmuls and the softmax it replaces,
        each of which ORT dispatches on every decoding step. ``q``/``k``/``v`` are ``[B, T, D]``;
        ``attention_bias`` is :meth:`source_bias`.
        """
        return self.b.op(
            "MultiHeadAttention",
            [q, k, v, "", "", attention_bias],
            domain=MS_DOMAIN,
            num_heads=heads,
            scale=self.scale(heads),
        )

    def source_bias(self, mask: str, heads: int, position_bias: str = "") -> str:
        """The encoder's additive attention bias ``[B, H, S, S]``: the padding (the float32 minimum
        on padded keys, as HF's masks) plus T5's relative ``position_bias`` (``[B, H, S, S]``).

        Whole, rather than the int32 mask as MultiHeadAttention's ``key_padding_mask``: onnxruntime-web's
        WebGPU kernel takes neither a key padding mask nor a bias to broadcast. The scores are the same
        bits on the CPU (a kept score plus 0 is itself; a masked one becomes the float32 minimum
        either way, whose exponent is exactly 0). The bias is made once per call and read by every
        layer; ONNX Runtime's kernel holds scores of that size itself while it runs (peak RSS measured
        unchanged on the CPU, NLLB-600M shape up to 16 × 512 tokens: docs/performance.md).
        """
        b = self.b
        padding = self.padding_bias(mask, heads)  # [B, H, 1, S]
        if position_bias:
            return b.op("Add", [position_bias, padding])
        length = b.op("Shape", [mask], start=1, end=2)
        shape = b.op("Concat", [b.op("Shape", [padding], start=0, end=2), length, length], axis=0)
        return b.op("Expand", [padding, shape])

    def cross_attention(self, q: str, k: str, v: str, heads: int, bias: str) -> str:
        """Attention of ``q`` ``[B, 1, D]`` over the ``[B, H, S, D/H]`` cross caches.

        The padding goes in as an additive ``padding_bias`` rather than as the key padding mask:
        ONNX Runtime 1.17-1.20 misapply that mask when key and value come as such caches (padded
        rows decoded differently; measured), and the bias gives the same softmax on every release
        (a masked score becomes the float32 minimum either way, whose exponent is exactly 0).
        """
        return self.b.op(
            "MultiHeadAttention",
            [q, k, v, "", "", bias],
            domain=MS_DOMAIN,
            num_heads=heads,
            scale=self.scale(heads),
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
        self,
        q: str,
        k: str,
        v: str,
        heads: int,
        past: tuple[str, str] | None,
        position_bias: str = "",
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
