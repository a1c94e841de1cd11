"""Passes over the assembled model that let older ONNX Runtime releases load it.

Newer releases accept more than the ONNX spec asks for; older ones need two things spelled out.
Each pass is a function of the finished ``ModelProto``, changes no result, and is pinned by a test
that loads the file in the old release (``tests/test_compat_matrix.py``).

* ``declare_outer_scope_types``: ORT ≤ 1.26 type-checks a subgraph node that reads a weight of an
  enclosing graph only if the subgraph itself declares the weight's type ("input arg ... does not
  have type information set by parent node"). A ``value_info`` entry per such weight does it.
* ``balance_search_subgraphs``: ORT 1.20 feeds *every* outer value that the BeamSearch node uses
  to *both* its encoder and decoder subgraphs (ORT issue 23043, fixed in 1.21), and fails at
  session start when one of them does not read it ("Could not find OrtValue with name ...").
  Each subgraph gets an ``If`` that reads the values only the other one uses, in a branch that is
  never taken: one scalar comparison and one pass-through per call, nothing else at run time.
"""

from __future__ import annotations

from collections.abc import Iterator

from onnx import GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, helper

from graphgen._graphs import subgraphs
from graphgen.custom_ops.builder import MS_DOMAIN

# The oldest releases the exported file was run on (the matrix test); see docs/platforms.md's table.
MIN_ONNXRUNTIME = "1.17"
MIN_EXTENSIONS = "0.13"


def outer_reads(graph: GraphProto) -> set[str]:
    """Names ``graph`` (or a graph nested in it) reads without defining them: its implicit inputs."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    read: set[str] = set()
    for node in graph.node:
        read.update(name for name in node.input if name and name not in defined)
        for sub in subgraphs(node):
            read.update(name for name in outer_reads(sub) if name not in defined)
        defined.update(node.output)
    return read


def declare_outer_scope_types(model: ModelProto) -> None:
    """Give every subgraph a ``value_info`` for each enclosing-graph initializer it reads."""

    def visit(graph: GraphProto, visible: dict[str, TensorProto]) -> None:
        scope = visible | {t.name: t for t in graph.initializer}
        for node in graph.node:
            for sub in subgraphs(node):
                declared = {v.name for v in sub.value_info}
                for name in sorted(outer_reads(sub) - declared):
                    if name in scope:
                        tensor = scope[name]
                        sub.value_info.append(helper.make_tensor_value_info(name, tensor.data_type, tensor.dims))
                visit(sub, scope)

    visit(model.graph, {})


def _search_nodes(graph: GraphProto) -> Iterator[NodeProto]:
    for node in graph.node:
        if node.op_type == "BeamSearch" and node.domain == MS_DOMAIN:
            yield node
        for sub in subgraphs(node):
            yield from _search_nodes(sub)


def _read_unused(graph: GraphProto, names: list[str]) -> None:
    """Make ``graph`` read ``names`` in a never-taken branch that its first input passes through.

    The branch expands each value to a shape computed from the input, so that no constant folding
    can resolve it and drop the reads; the condition (an input's size below 0) is computed too.
    """
    first = graph.input[0]
    passed = f"{first.name}/balanced"
    for node in graph.node:
        node.input[:] = [passed if x == first.name else x for x in node.input]
    prefix = f"{graph.name}/balance"
    element = helper.make_tensor_value_info(passed, first.type.tensor_type.elem_type, None)
    then_nodes = [
        helper.make_node("ReduceMin", [first.name], [f"{prefix}/min"], keepdims=0),
        helper.make_node("Cast", [f"{prefix}/min"], [f"{prefix}/min64"], to=TensorProto.INT64),
        helper.make_node("Mul", [f"{prefix}/min64", f"{prefix}/zero"], [f"{prefix}/zero_at_run_time"]),
        helper.make_node("Add", [f"{prefix}/zero_at_run_time", f"{prefix}/one"], [f"{prefix}/one_at_run_time"]),
        helper.make_node("Unsqueeze", [f"{prefix}/one_at_run_time", f"{prefix}/axes"], [f"{prefix}/index"]),
    ]
    picked = []
    for i, name in enumerate(names):
        grown, value, total = f"{prefix}/grown_{i}", f"{prefix}/value_{i}", f"{prefix}/total_{i}"
        then_nodes += [  # Expand to a run-time shape: never folded, whatever the type or rank
            helper.make_node("Expand", [name, f"{prefix}/index"], [grown]),
            helper.make_node("Cast", [grown], [value], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", [value], [total], keepdims=0),
        ]
        picked.append(total)
    then_nodes += [
        helper.make_node("Sum", picked, [f"{prefix}/sum"]),
        helper.make_node("Cast", [f"{prefix}/sum"], [f"{prefix}/sum_cast"], to=first.type.tensor_type.elem_type),
        helper.make_node("Add", [first.name, f"{prefix}/sum_cast"], [f"{prefix}/then_out"]),
    ]
    constants = [
        helper.make_tensor(f"{prefix}/zero", TensorProto.INT64, [], [0]),
        helper.make_tensor(f"{prefix}/axes", TensorProto.INT64, [1], [0]),
        helper.make_tensor(f"{prefix}/one", TensorProto.INT64, [], [1]),
    ]
    then_branch = helper.make_graph(
        then_nodes, f"{prefix}/then", [], [ValueInfoProto(name=f"{prefix}/then_out")], initializer=constants
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", [first.name], [f"{prefix}/else_out"])],
        f"{prefix}/else",
        [],
        [ValueInfoProto(name=f"{prefix}/else_out")],
    )
    guard = [
        helper.make_node("Size", [first.name], [f"{prefix}/size"]),
        helper.make_node("Less", [f"{prefix}/size", f"{prefix}/zero_scalar"], [f"{prefix}/never"]),
        helper.make_node(
            "If", [f"{prefix}/never"], [passed], name=prefix, then_branch=then_branch, else_branch=else_branch
        ),
    ]
    graph.initializer.append(helper.make_tensor(f"{prefix}/zero_scalar", TensorProto.INT64, [], [0]))
    graph.value_info.append(element)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend([*guard, *nodes])


def balance_search_subgraphs(model: ModelProto) -> None:
    """Make the encoder and decoder of every BeamSearch node read the same outer values."""
    types: dict[str, int] = {}

    def collect(graph: GraphProto) -> None:
        types.update({t.name: t.data_type for t in graph.initializer})
        types.update({v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info]})
        for node in graph.node:
            for sub in subgraphs(node):
                collect(sub)

    collect(model.graph)
    for node in _search_nodes(model.graph):
        parts = {a.name: a.g for a in node.attribute if a.name in ("encoder", "decoder")}
        reads = {role: outer_reads(graph) for role, graph in parts.items()}
        every = set().union(*reads.values())
        for role, graph in parts.items():
            missing = sorted(name for name in every - reads[role] if name in types)
            if missing:
                _read_unused(graph, missing)


def apply_compatibility_passes(model: ModelProto) -> None:
    balance_search_subgraphs(model)
    declare_outer_scope_types(model)
