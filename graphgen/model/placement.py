"""Where each weight lives in the finished model, and how it gets there without a second copy.

Every weight is stored exactly once, and where ONNX Runtime prepacks it: in the subgraph that reads
it or in the graph directly around the node that holds the subgraph (ORT looks one level up, no
further). The searches choose the placement (see ``graphgen.search``); this module gives them the
means: the values their builders read, a lazy ``Weight`` that becomes a ``TensorProto`` only as it
is added, and the attachment of subgraph weights once the model is assembled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, helper, numpy_helper

from graphgen.checkpoint.safetensors import release_pages
from graphgen.custom_ops.builder import GraphBuilder, derived_array
from graphgen.deploy.save import StreamedWeights
from graphgen.model.spec import ModelSpec


def _same(a: np.ndarray | Callable[[], np.ndarray], b: np.ndarray | Callable[[], np.ndarray]) -> bool:
    """Whether two builders derived the same weight: equal arrays, or the same deferred computation
    (one weight format serves every builder of a model, ``model.weights``)."""
    if callable(a) or callable(b):
        return a is b
    return bool(np.array_equal(a, b, equal_nan=True))


class WeightValues(Mapping[str, np.ndarray]):
    """The weights some builders read, by name: the spec's are looked up in it when read (a float16
    spec converts each then, ``passes.fp16``), the derived ones are the builders' own arrays."""

    def __init__(self, spec: ModelSpec, builders: Sequence[GraphBuilder]) -> None:
        self._spec_weights = spec.weights
        self._read: set[str] = set()
        self._derived: dict[str, np.ndarray | Callable[[], np.ndarray]] = {}
        for builder in builders:
            self._read |= builder.weights_used
            for name, value in builder.derived_weights.items():
                if name in self._derived and not _same(self._derived[name], value):
                    raise ValueError(f"derived weight {name} differs between subgraphs")
                self._derived[name] = value

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._derived:
            return derived_array(self._derived[name])
        if name in self._read:
            return self._spec_weights[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._read | self._derived.keys()))

    def __len__(self) -> int:
        return len(self._read | self._derived.keys())


@dataclass(frozen=True)
class Weight:
    """A weight that becomes a ``TensorProto`` only as it is added to the finished model: its array
    is read from ``values`` then (a float16 weight is made at that moment)."""

    name: str
    values: Mapping[str, np.ndarray]

    @property
    def array(self) -> np.ndarray:
        return self.values[self.name]


Initializer = TensorProto | Weight


def add_initializers(graph: GraphProto, items: Iterable[Initializer], streamed: StreamedWeights | None = None) -> None:
    """Append ``items`` to ``graph`` in order, making each weight's ``TensorProto`` just before.

    The model's bytes then exist once: a list of ``TensorProto``s handed to ``make_graph``, the
    graph and the model would each hold a copy (10.1 GB peak RSS to export NLLB-600M's 2.4 GB).
    """
    for item in items:
        if isinstance(item, TensorProto):
            graph.initializer.append(item)
            continue
        array = item.array
        if array.dtype.kind not in "biuf":
            graph.initializer.append(numpy_helper.from_array(array, item.name))
            continue
        # Made in place, as numpy_helper.from_array makes it (an appended TensorProto would be
        # copied once more), then the checkpoint's pages behind the array let go.
        tensor = graph.initializer.add()
        tensor.name = item.name
        tensor.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        tensor.dims.extend(array.shape)
        if streamed is not None and streamed.holds(array):
            streamed.write(tensor, array)
        else:
            tensor.raw_data = array.tobytes()
        release_pages(array)


class ConvertedValues(Mapping[str, np.ndarray]):
    """``values`` with ``convert(array, name)`` applied to each as it is read (so a converted weight,
    too, exists only until it is in the file)."""

    def __init__(self, values: Mapping[str, np.ndarray], convert: Callable[[np.ndarray, str], np.ndarray]) -> None:
        self._values = values
        self._convert = convert

    def __getitem__(self, name: str) -> np.ndarray:
        return self._convert(self._values[name], name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def place_weights(
    spec: ModelSpec,
    parts: Sequence[tuple[GraphProto, GraphBuilder]],
    all_outer: bool = False,
    convert: Callable[[np.ndarray, str], np.ndarray] | None = None,
) -> tuple[list[Initializer], dict[str, list[Initializer]]]:
    """Which weights the graph around the subgraphs holds, and which each subgraph holds (by graph
    name): a weight read by one subgraph is that subgraph's; with ``all_outer`` (subgraphs used by
    two nodes) every weight is outer. The subgraphs' own weights are attached once the model is
    assembled (``attach_weights``). ``convert`` changes each weight as it is read (``passes.fp16``)."""
    builders = [builder for _, builder in parts]
    values: Mapping[str, np.ndarray] = WeightValues(spec, builders)
    if convert is not None:
        values = ConvertedValues(values, convert)
    usage = Counter(name for b in builders for name in {*b.weights_used, *b.derived_weights})
    outer: list[Initializer] = []
    own: dict[str, list[Initializer]] = {}
    for name in sorted(values):
        tensor = Weight(name, values)
        if usage[name] > 1 or all_outer:
            outer.append(tensor)
            continue
        for graph, builder in parts:
            if name in builder.weights_used or name in builder.derived_weights:
                own.setdefault(graph.name, []).append(tensor)
    return outer, own


def attach_weights(
    model: ModelProto, weights: dict[str, list[Initializer]], streamed: StreamedWeights | None = None
) -> None:
    """Append each subgraph's weights to it, found by graph name, in the finished model.

    Done last because protobuf copies a message by serializing it, which fails past 2 GB: a
    subgraph holding NLLB-600M's weights cannot be copied into a node attribute, while the
    tensors added one by one to the graph already in place can (and the file is written with
    external data, ``deploy.save``).
    """
    found: Counter[str] = Counter()

    def visit(graph: GraphProto) -> None:
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    if attribute.g.name in weights:
                        found[attribute.g.name] += 1
                        add_initializers(attribute.g, weights[attribute.g.name], streamed)
                    visit(attribute.g)

    visit(model.graph)
    if any(found[name] != 1 for name in weights):
        raise ValueError(f"subgraphs for weights not found exactly once: {dict(found)}")
