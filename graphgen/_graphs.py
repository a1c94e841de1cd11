"""Walking a model's graphs. ONNX keeps subgraphs (a ``Loop`` body, an ``If``'s branches, the
BeamSearch op's encoder and decoder) inside node attributes, so every question about "the whole
file" (which ops, which initializers, who reads what) walks the same tree: it is walked here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from onnx import AttributeProto, GraphProto, NodeProto, TensorProto


def subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    """The graphs held by ``node``'s attributes (single graphs and lists of graphs)."""
    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            yield from attribute.graphs


def all_graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """``graph`` and every graph nested in it, outermost first."""
    yield graph
    for node in graph.node:
        for sub in subgraphs(node):
            yield from all_graphs(sub)


def all_nodes(graph: GraphProto) -> Iterator[NodeProto]:
    """The nodes of ``graph`` and of every graph nested in it."""
    for each in all_graphs(graph):
        yield from each.node


def all_initializers(graph: GraphProto) -> Iterator[TensorProto]:
    """The initializers of ``graph`` and of every graph nested in it."""
    for each in all_graphs(graph):
        yield from each.initializer


def layer(node: NodeProto, key: str) -> str | None:
    """The value of ``node``'s metadata entry ``key`` (ONNX Runtime's layering annotation is ``layer_ann``)."""
    return next((entry.value for entry in node.metadata_props if entry.key == key), None)


def set_layer(nodes: Iterable[NodeProto], key: str, value: str) -> None:
    """Give each of ``nodes`` the metadata entry ``key`` = ``value`` (nested graphs' nodes are left
    bare: ONNX Runtime's annotation-based partitioning gives them their parent node's layer)."""
    for node in nodes:
        for entry in node.metadata_props:
            if entry.key == key:
                entry.value = value
                break
        else:
            entry = node.metadata_props.add()
            entry.key, entry.value = key, value


def _defined(graph: GraphProto) -> set[str]:
    names = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
    for node in graph.node:
        names.update(node.output)
        for sub in subgraphs(node):
            names |= _defined(sub)
    return names


def _read(graph: GraphProto) -> set[str]:
    names: set[str] = set()
    for node in graph.node:
        names.update(node.input)
        for sub in subgraphs(node):
            names |= _read(sub)
    return names - {""}


def implicit_inputs(node: NodeProto) -> set[str]:
    """The outer values ``node``'s subgraphs read (ONNX Runtime's implicit inputs of the node)."""
    return {name for sub in subgraphs(node) for name in _read(sub) - _defined(sub)}


__all__ = ["all_graphs", "all_initializers", "all_nodes", "implicit_inputs", "layer", "set_layer", "subgraphs"]
