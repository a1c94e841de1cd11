"""One weight, two initializers over the same bytes of the data file: a packed copy and a mapped one.

ONNX Runtime's CPU kernels for matrix products (``MatMul``, ``Gemm``, ``MatMulIntegerToFloat``,
``MatMulNBits``) copy a constant weight into a layout of their own when the session loads
("prepacking") and free the original once no other node reads it. A tied embedding table is read by
the output projection (prepacked) and by the embedding lookups (``Gather``, which reads the
original), so the whole original stays in memory beside its packed copy: 1 GB for NLLB-600M's
float32 table, 250 MB for its int8 one.

When the weights live in a data file beside the model, ONNX Runtime maps each initializer from the
file rather than reading it into memory. So the file can give the lookups their own initializer
that points at the same bytes (the same offset and length): the product's original is then freed
after packing, and the lookups' mapping only brings into memory the rows they gather. The data file
does not grow. ``separate_unpacked_readers`` makes these twins as a file is written;
``merge_shared_data`` undoes them when graphgen reads a file back to rewrite it (``bake``, the
``.ort`` conversion), so that no writer stores the bytes twice.
"""

from __future__ import annotations

from collections.abc import Iterator

from onnx import GraphProto, ModelProto, NodeProto, TensorProto

from graphgen._graphs import all_nodes
from graphgen.runtime.mapped_weights import PREPACKED_INPUTS, UNPACKED  # also what a single file's loading twins


def node_inputs(graph: GraphProto) -> Iterator[tuple[NodeProto, int, bool]]:
    """(node, input index, whether ONNX Runtime prepacks that input) for every input of every node,
    in ``graph`` and the subgraphs nested in it."""
    for node in all_nodes(graph):
        prepacked = PREPACKED_INPUTS.get((node.domain or "", node.op_type), frozenset())
        for index, name in enumerate(node.input):
            if name:
                yield node, index, index in prepacked


def _location(tensor: TensorProto) -> tuple[str, str, str] | None:
    if tensor.data_location != TensorProto.EXTERNAL:
        return None
    entries = {entry.key: entry.value for entry in tensor.external_data}
    return entries.get("location", ""), entries.get("offset", "0"), entries.get("length", "")


def separate_unpacked_readers(model: ModelProto) -> list[str]:
    """Give the non-prepacking readers of each external weight that is also prepacked a twin
    initializer over the same bytes; returns the weights twinned. Only the main graph's external
    initializers are considered (graphgen places every large weight there)."""
    readers: dict[str, list[tuple[NodeProto, int, bool]]] = {}
    for node, index, prepacked in node_inputs(model.graph):
        readers.setdefault(node.input[index], []).append((node, index, prepacked))
    taken = {tensor.name for tensor in model.graph.initializer}
    twinned = []
    for tensor in list(model.graph.initializer):
        uses = readers.get(tensor.name, [])
        if _location(tensor) is None or not any(p for *_, p in uses) or all(p for *_, p in uses):
            continue
        twin_name = tensor.name + UNPACKED
        if twin_name in taken:
            raise ValueError(f"cannot twin {tensor.name}: {twin_name} exists")
        twin = model.graph.initializer.add()
        twin.CopyFrom(tensor)
        twin.name = twin_name
        for node, index, prepacked in uses:
            if not prepacked:
                node.input[index] = twin_name
        twinned.append(tensor.name)
    return twinned


def merge_shared_data(model: ModelProto) -> list[str]:
    """The inverse of ``separate_unpacked_readers`` on a model read without its external data:
    main-graph initializers that point at the same bytes as an earlier one are removed and their
    readers read the earlier one. Returns the names removed."""
    first: dict[tuple[str, str, str], str] = {}
    renamed: dict[str, str] = {}
    kept = []
    for tensor in model.graph.initializer:
        location = _location(tensor)
        if location is not None and location in first:
            renamed[tensor.name] = first[location]
            continue
        if location is not None:
            first[location] = tensor.name
        kept.append(tensor)
    if renamed:
        del model.graph.initializer[:]
        model.graph.initializer.extend(kept)
        for node, index, _ in node_inputs(model.graph):
            if node.input[index] in renamed:
                node.input[index] = renamed[node.input[index]]
    return list(renamed)


__all__ = ["PREPACKED_INPUTS", "UNPACKED", "merge_shared_data", "node_inputs", "separate_unpacked_readers"]
