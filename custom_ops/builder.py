"""GraphBuilder: write ONNX graphs as straight-line Python.

Each call appends one node and returns the name of its (first) output, so graph code reads like
the numpy it replaces. Weights are not copied here: a builder records which named weights the
graph reads, and the search decides where each one is stored (see ``graphgen.model.placement``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

OPSET = 20  # StringSplit, StringConcat, RegexFullMatch; ONNX Runtime 1.17 and later
MS_DOMAIN = "com.microsoft"
ML_DOMAIN = "ai.onnx.ml"
ML_OPSET = 3


def derived_array(value: np.ndarray | Callable[[], np.ndarray]) -> np.ndarray:
    """The array of a derived weight (``GraphBuilder.derived``): computed now if it was deferred."""
    return value() if callable(value) else value


class GraphBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[NodeProto] = []
        self.inputs: list[ValueInfoProto] = []
        self.outputs: list[ValueInfoProto] = []
        self.value_info: list[ValueInfoProto] = []  # shapes ONNX Runtime's inference cannot find itself
        self.constants: list[TensorProto] = []
        self.weights_used: set[str] = set()
        self.derived_weights: dict[str, np.ndarray | Callable[[], np.ndarray]] = {}
        self.outer_used: set[str] = set()
        self._ids = itertools.count()

    def fresh(self, hint: str) -> str:
        return f"{self.name}/{hint}_{next(self._ids)}"  # unique across builders sharing a graph

    def input(self, name: str, elem_type: int, shape: Sequence[int | str | None] | None) -> str:
        """A graph input; ``shape`` ``None`` leaves its rank unknown (loop-carried values)."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, None if shape is None else list(shape)))
        return name

    def output(self, value: str, name: str, elem_type: int, shape: Sequence[int | str | None]) -> None:
        """Expose ``value`` as graph output ``name``."""
        if value != name:
            producer = next((node for node in self.nodes if value in node.output), None)
            if producer is None:  # a graph input or constant: it needs a node to become an output
                self.op("Identity", [value], outputs=[name])
            else:  # rename at the source: an Identity would copy the tensor on every call
                for node in self.nodes:
                    node.input[:] = [name if x == value else x for x in node.input]
                    node.output[:] = [name if x == value else x for x in node.output]
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    def declare(self, value: str, elem_type: int, shape: Sequence[int | str]) -> str:
        """State ``value``'s type and shape (symbolic dimensions by name) in the graph: ONNX Runtime
        merges it with what its shape inference finds, and its fusions match on shapes."""
        self.value_info.append(helper.make_tensor_value_info(value, elem_type, list(shape)))
        return value

    def weight(self, name: str) -> str:
        """Refer to a model weight by its canonical name; the value is supplied at assembly."""
        self.weights_used.add(name)
        return name

    def derived(self, name: str, array: np.ndarray | Callable[[], np.ndarray]) -> str:
        """A weight computed from the spec (e.g. a masked bias); stored once like the others. A
        callable is called only as the weight is written out (``derived_array``): a large computed
        weight, a quantized matrix, then exists only until it is in the file."""
        self.derived_weights[name] = array
        return name

    def outer(self, name: str) -> str:
        """Read a value of the enclosing graph (a subgraph's implicit input)."""
        self.outer_used.add(name)
        return name

    def const(
        self, value: np.ndarray | float | int | Sequence[int], hint: str = "const", keep_float64: bool = False
    ) -> str:
        """A constant; float64 values become float32 unless ``keep_float64``."""
        array = np.asarray(value)
        if array.dtype == np.float64 and not keep_float64:
            array = array.astype(np.float32)
        name = self.fresh(hint)
        self.constants.append(numpy_helper.from_array(array, name))
        return name

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: Sequence[str] | int = 1,
        domain: str = "",
        **attributes: Any,
    ) -> str:
        if isinstance(outputs, int):
            outputs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        if op_type == "Slice" and domain == "" and len(inputs) == 3:
            inputs = [*inputs, self._slice_axes(inputs[1])]
        self.nodes.append(
            helper.make_node(
                op_type, list(inputs), list(outputs), name=self.fresh(op_type), domain=domain, **attributes
            )
        )
        return outputs[0]

    def _slice_axes(self, starts: str) -> str:
        """``Slice``'s ``axes`` spelled out, ``[0, ..., len(starts) - 1]`` (ONNX's default):
        onnxruntime-web's WebGPU kernel takes a missing ``axes`` to mean every axis of the data and
        fails when ``starts`` has fewer. A ``Slice`` whose ``starts`` this builder did not make as a
        constant has no known length: the caller passes its ``axes``."""
        for constant in self.constants:
            if constant.name == starts:
                return self.const(np.arange(max(1, int(np.prod(constant.dims))), dtype=np.int64), "axes")
        raise ValueError(f"Slice of starts {starts!r} (not a constant of this builder): pass its axes")

    def op_multi(self, op_type: str, inputs: Sequence[str], count: int, **attributes: Any) -> list[str]:
        outputs = [self.fresh(op_type.lower()) for _ in range(count)]
        self.op(op_type, inputs, outputs=outputs, **attributes)
        return outputs

    def graph(self, initializers: Sequence[TensorProto] = ()) -> GraphProto:
        return helper.make_graph(
            self.nodes,
            self.name,
            self.inputs,
            self.outputs,
            initializer=[*self.constants, *initializers],
            value_info=self.value_info,
        )

    def loop(
        self,
        trip_count: str,
        carried: Sequence[tuple[str, int]],
        body: Callable[[GraphBuilder, str, list[str]], tuple[str | None, list[str], list[tuple[str, int]]]],
        hint: str = "loop",
        condition: str = "",
    ) -> list[str]:
        """A ``Loop`` whose body ``body(builder, iteration, carried values)`` returns (condition or
        ``None`` to keep going, the carried values' next state, scan outputs with their types).
        ``carried`` pairs each initial value with its element type. Returns the final carried values,
        then the stacked scan outputs. The body reads outer values by name; the weights it derives
        are stored once, in this builder."""
        sub = GraphBuilder(self.fresh(hint))
        iteration = sub.input(f"{sub.name}/iteration", INT64, [])
        go_on = sub.input(f"{sub.name}/condition", BOOL, [])
        states = [sub.input(f"{sub.name}/state_{i}", kind, None) for i, (_, kind) in enumerate(carried)]
        next_condition, next_states, scans = body(sub, iteration, states)
        if next_condition is None:
            next_condition = sub.op("Identity", [go_on])
        outputs = [next_condition, *next_states, *(value for value, _ in scans)]
        # A graph output must be produced by a node of the body: pass-throughs get an Identity.
        produced = {name for node in sub.nodes for name in node.output}
        unique: list[str] = []
        for name in outputs:
            unique.append(name if name in produced and name not in unique else sub.op("Identity", [name]))
        outputs = unique
        kinds = [BOOL, *(kind for _, kind in carried), *(kind for _, kind in scans)]
        sub.outputs = [
            helper.make_tensor_value_info(name, kind, None) for name, kind in zip(outputs, kinds, strict=True)
        ]
        self.derived_weights.update(sub.derived_weights)
        self.weights_used |= sub.weights_used
        results = [self.fresh(f"{hint}_out") for _ in range(len(carried) + len(scans))]
        self.op("Loop", [trip_count, condition, *(value for value, _ in carried)], outputs=results, body=sub.graph())
        return results

    # Shorthands for the few ops the transformer code uses over and over.
    def matmul(self, a: str, b: str) -> str:
        return self.op("MatMul", [a, b])

    def add(self, a: str, b: str) -> str:
        return self.op("Add", [a, b])

    def mul(self, a: str, b: str) -> str:
        return self.op("Mul", [a, b])

    def reshape(self, value: str, shape: Sequence[int]) -> str:
        return self.op("Reshape", [value, self.const(np.array(shape, dtype=np.int64), "shape")])

    def transpose(self, value: str, perm: Sequence[int]) -> str:
        return self.op("Transpose", [value], perm=list(perm))


FLOAT = TensorProto.FLOAT
DOUBLE = TensorProto.DOUBLE
FLOAT16 = TensorProto.FLOAT16
INT32 = TensorProto.INT32
INT64 = TensorProto.INT64
STRING = TensorProto.STRING
EXTENSIONS_DOMAIN = "ai.onnx.contrib"
BOOL = TensorProto.BOOL


def i64(*values: int) -> np.ndarray:
    """A 1-D int64 array, the type every shape/index input of ONNX wants."""
    return np.array(values, dtype=np.int64)
