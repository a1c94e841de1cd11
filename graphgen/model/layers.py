"""What every layer is made of: weight references, linear maps (float or quantized, see
``weights.py``), norms, activations, the feed-forward block and the residual wiring, in float32
or, HF's ``model.half()`` way, in float16."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphgen.custom_ops.builder import FLOAT, FLOAT16, GraphBuilder, i64
from graphgen.model.spec import ModelSpec
from graphgen.model.weights import FloatWeights, QuantizedWeights, WeightFormat

MASKED = np.float32(np.finfo(np.float32).min)


class Layers:
    """The layer code every stack is made of; one instance per graph being built.

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
        self.weights: WeightFormat = quantized if quantized is not None else FloatWeights(spec)
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
        return self.weights.matmul(self.b, x, self.spec.weight_name(f"{prefix}.weight"), bias)

    def fused_projections(self, x: str, prefixes: list[str]) -> list[str]:
        """Several linears that read the same input as one matmul, split after (one pass over ``x`` and,
        quantized, one activation quantization instead of one per projection), biases included.

        The biases are the matmul's (an ``Add`` for float weights), not ``MultiHeadAttention``'s
        bias input, which would save that node per attention block and step: onnxruntime-web's
        WebGPU kernel cannot add its bias input to a single query position (a decoding step)."""
        b = self.b
        names = [self.spec.weight_name(f"{p}.weight") for p in prefixes]
        fused = "+".join(names)
        bias = ""
        if self.spec.linear_bias:
            bias = b.derived(f"{fused}.bias", np.concatenate([self.spec.weight(f"{p}.bias") for p in prefixes]))
        y = self.weights.fused_matmul(b, x, fused, names, bias)
        # the sizes spelled out: onnxruntime-web's WebGPU kernel ignores num_outputs
        sizes = b.const(
            np.array([self.spec.weight(f"{p}.weight").shape[1] for p in prefixes], dtype=np.int64)
        )  # [in, out]
        return b.op_multi("Split", [y, sizes], len(prefixes), axis=-1)

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
