"""Open a single-file model with its weights mapped from the file, as if they were external data.

ONNX Runtime reads a single ``.onnx`` file whole: every weight is parsed into memory, then copied
into the session's tensors, and a tied embedding table keeps its original beside the projection's
packed copy (``PREPACKED_INPUTS``). A file whose weights are external data loads differently: each
weight is mapped from the data file, the originals ORT prepacks are unmapped once packed, and the
embedding lookups' own twin initializer brings into memory only the rows they gather
(``graphgen.deploy.shared_data``). On the opus-mt shape (fp32, 298 MB) that is 324 MB of heap after
loading instead of 566, in 0.32 s instead of 1.36 (``benchmarks/mapped_load.py``).

A single file holds its weights as ``raw_data`` fields at fixed places in the file, and external
data may point anywhere in any file. So ``mapped_model`` reads the file's protobuf wire format
(never the weights' bytes) and writes a small copy of the model in which each large weight of the
main graph is external data pointing at its own ``raw_data`` in the ``.onnx`` file, with the same
twins as an ``--external-data`` file. ONNX Runtime loads that copy from memory and maps the file;
the session config entry ``FOLDER_ENTRY`` (ONNX Runtime 1.21 and later) says where the file is.
The file itself is not changed, and the translations are the same (tests/test_mapped_weights.py).

Pure Python over the wire format (``graphgen._wire``): the runtime path has no ``onnx`` package.
The field numbers below are onnx.proto's (tests/test_mapped_weights.py compares them).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort

from graphgen._wire import VARINT, Field, fields, length_delimited, read_varint, varint
from graphgen.contract import ORT_FORMAT_IDENTIFIER

# The ONNX Runtime release from which a model loaded from bytes finds its external data in the folder
# FOLDER_ENTRY names (1.20 looks in the working directory).
MIN_ONNXRUNTIME = (1, 21)
FOLDER_ENTRY = "session.model_external_initializers_file_folder_path"
# Weights below this many bytes stay inline: mapping them saves nothing.
SMALLEST_MAPPED = 4096

# Inputs that ONNX Runtime's CPU kernels prepack when they are constant: (domain, op) -> input indices.
PREPACKED_INPUTS: dict[tuple[str, str], frozenset[int]] = {
    ("", "MatMul"): frozenset({1}),
    ("", "Gemm"): frozenset({1}),
    ("com.microsoft", "DynamicQuantizeMatMul"): frozenset({1}),  # int8 files before 2026-12-07
    ("com.microsoft", "MatMulIntegerToFloat"): frozenset({1}),
    ("com.microsoft", "MatMulNBits"): frozenset({1, 2}),
}
# The twin of weight W is named W + UNPACKED: the same bytes, for the readers that do not prepack.
UNPACKED = ".unpacked"

# onnx.proto field numbers
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 4, 5, 7
_ATTRIBUTE_G, _ATTRIBUTE_GRAPHS = 6, 11
_TENSOR_NAME, _TENSOR_RAW_DATA, _TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 8, 9, 13, 14
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_TENSOR_DATA_TYPE, _STRING = 2, 8  # TensorProto.data_type, TensorProto.STRING
# The ops of ONNX's own domains whose attributes hold graphs (graphgen's files use Loop and If).
_CONTROL_FLOW = frozenset({"Loop", "If", "Scan", "SequenceMap"})
_ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


def _text(buffer: bytes | mmap.mmap, field: Field) -> str:
    return bytes(buffer[field.value : field.end]).decode("utf-8")


@dataclass
class _Node:
    """What the rewrite needs of a NodeProto."""

    op: tuple[str, str]  # (domain, op type)
    inputs: list[str]
    subgraphs: list[Field]  # the GraphProtos in its attributes


def _node(buffer: bytes | mmap.mmap, start: int, end: int) -> _Node:
    domain = op_type = ""
    inputs: list[str] = []
    attributes: list[Field] = []
    for field in fields(buffer, start, end):
        if field.number == _NODE_INPUT:
            inputs.append(_text(buffer, field))
        elif field.number == _NODE_OP_TYPE:
            op_type = _text(buffer, field)
        elif field.number == _NODE_DOMAIN:
            domain = _text(buffer, field)
        elif field.number == _NODE_ATTRIBUTE:
            attributes.append(field)
    subgraphs: list[Field] = []
    # ONNX's own ops hold graphs only in control flow; other domains' may (BeamSearch's subgraphs). A
    # tokenizer's tables are long attributes, not walked through.
    if op_type in _CONTROL_FLOW or domain not in _ONNX_DOMAINS:
        for attribute in attributes:
            subgraphs += [
                f
                for f in fields(buffer, attribute.value, attribute.end)
                if f.number in (_ATTRIBUTE_G, _ATTRIBUTE_GRAPHS)
            ]
    return _Node((domain if domain != "ai.onnx" else "", op_type), inputs, subgraphs)


class _Rewriter:
    """Writes the model's messages again with its large main-graph weights as references into the file."""

    def __init__(self, buffer: bytes | mmap.mmap, location: str) -> None:
        self.buffer = buffer
        self.location = location
        self.readers: dict[str, list[bool]] = {}  # name -> for each reader: whether it prepacks it
        self.mapped: set[str] = set()  # the weights to map
        self.twins: set[str] = set()  # mapped weights whose non-prepacking readers read name + UNPACKED

    # --- first pass: who reads what, which weights are mapped ---------------------------------------

    def collect(self, start: int, end: int, *, main: bool) -> None:
        for field in fields(self.buffer, start, end):
            if field.number == _GRAPH_NODE:
                node = _node(self.buffer, field.value, field.end)
                prepacked = PREPACKED_INPUTS.get(node.op, frozenset())
                for index, name in enumerate(node.inputs):
                    if name:
                        self.readers.setdefault(name, []).append(index in prepacked)
                for graph in node.subgraphs:
                    self.collect(graph.value, graph.end, main=False)
            elif field.number == _GRAPH_INITIALIZER and main:
                name, data = self.tensor(field)
                if data is not None and data.end - data.value >= SMALLEST_MAPPED:
                    self.mapped.add(name)

    def tensor(self, field: Field) -> tuple[str, Field | None]:
        """An initializer's name and its ``raw_data`` field."""
        name, data = "", None
        for inner in fields(self.buffer, field.value, field.end):
            if inner.number == _TENSOR_DATA_TYPE and inner.value < inner.end:
                if read_varint(self.buffer, inner.value)[0] == _STRING:  # no raw data: not walked through
                    return name, None
            elif inner.number == _TENSOR_NAME:
                name = _text(self.buffer, inner)
            elif inner.number == _TENSOR_RAW_DATA:
                data = inner
            elif inner.number in (_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION):
                raise _HasExternalData
        return name, data

    # --- second pass: the rewrite ------------------------------------------------------------------

    def graph(self, start: int, end: int, *, main: bool) -> bytes:
        out = bytearray()
        for field in fields(self.buffer, start, end):
            if field.number == _GRAPH_NODE:
                out += self.node(field)
            elif field.number == _GRAPH_INITIALIZER and main:
                out += self.initializer(field)
            else:
                out += self.buffer[field.begin : field.end]
        return bytes(out)

    def node(self, field: Field) -> bytes:
        node = _node(self.buffer, field.value, field.end)
        prepacked = PREPACKED_INPUTS.get(node.op, frozenset())
        renamed = any(name in self.twins and index not in prepacked for index, name in enumerate(node.inputs))
        if not renamed and not node.subgraphs:
            return bytes(self.buffer[field.begin : field.end])
        out = bytearray()
        index = 0
        for inner in fields(self.buffer, field.value, field.end):
            if inner.number == _NODE_INPUT:
                name = node.inputs[index]
                if name in self.twins and index not in prepacked:
                    name += UNPACKED
                out += length_delimited(_NODE_INPUT, name.encode("utf-8"))
                index += 1
            elif inner.number == _NODE_ATTRIBUTE and any(inner.value <= g.begin < inner.end for g in node.subgraphs):
                out += length_delimited(_NODE_ATTRIBUTE, self.attribute(inner))
            else:
                out += self.buffer[inner.begin : inner.end]
        return length_delimited(_GRAPH_NODE, bytes(out))

    def attribute(self, field: Field) -> bytes:
        out = bytearray()
        for inner in fields(self.buffer, field.value, field.end):
            if inner.number in (_ATTRIBUTE_G, _ATTRIBUTE_GRAPHS):
                out += length_delimited(inner.number, self.graph(inner.value, inner.end, main=False))
            else:
                out += self.buffer[inner.begin : inner.end]
        return bytes(out)

    def initializer(self, field: Field) -> bytes:
        name, data = self.tensor(field)
        if name not in self.mapped or data is None:
            return bytes(self.buffer[field.begin : field.end])
        kept = b"".join(  # the tensor's fields but its name and data
            self.buffer[inner.begin : inner.end]
            for inner in fields(self.buffer, field.value, field.end)
            if inner.number not in (_TENSOR_NAME, _TENSOR_RAW_DATA)
        )
        reference = varint(_TENSOR_DATA_LOCATION << 3 | VARINT) + varint(_EXTERNAL)
        for key, value in (("location", self.location), ("offset", data.value), ("length", data.end - data.value)):
            entry = length_delimited(_ENTRY_KEY, key.encode()) + length_delimited(_ENTRY_VALUE, str(value).encode())
            reference += length_delimited(_TENSOR_EXTERNAL_DATA, entry)
        names = [name, name + UNPACKED] if name in self.twins else [name]
        return b"".join(
            length_delimited(_GRAPH_INITIALIZER, kept + length_delimited(_TENSOR_NAME, n.encode()) + reference)
            for n in names
        )

    def model(self) -> bytes:
        out = bytearray()
        top = list(fields(self.buffer, 0, len(self.buffer)))
        for field in top:
            if field.number == _MODEL_GRAPH:
                self.collect(field.value, field.end, main=True)
        for name in self.mapped:
            uses = self.readers.get(name, [])
            if any(uses) and not all(uses):  # prepacked by some readers, read as it is by others
                if name + UNPACKED in self.readers or name + UNPACKED in self.mapped:
                    raise ValueError(f"cannot twin {name}: {name + UNPACKED} exists")
                self.twins.add(name)
        for field in top:
            if field.number == _MODEL_GRAPH:
                out += length_delimited(_MODEL_GRAPH, self.graph(field.value, field.end, main=True))
            else:
                out += self.buffer[field.begin : field.end]
        return bytes(out)


class _HasExternalData(Exception):
    """The file already keeps weights outside itself: ONNX Runtime maps those on its own."""


@dataclass(frozen=True)
class SessionSource:
    """What to load with ``InferenceSession(model, options)``, ``config`` set on the options first."""

    model: str | bytes  # the file's path, or its messages with each large weight a reference into it
    config: dict[str, str]  # where ONNX Runtime finds the file of a model given as bytes
    mapped_weights: int  # how many weights are mapped from the file (twins not counted); 0 for a path


def mapped_model(path: str | Path) -> SessionSource | None:
    """``path``'s model with its large weights mapped from the file, or None where there is nothing
    to map: no weight large enough, or weights already in a data file."""
    path = Path(path).resolve()
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        if buffer[4:8] == ORT_FORMAT_IDENTIFIER:
            return None
        rewriter = _Rewriter(buffer, path.name)
        try:
            model = rewriter.model()
        except _HasExternalData:
            return None
    if not rewriter.mapped:
        return None
    return SessionSource(model, {FOLDER_ENTRY: str(path.parent)}, len(rewriter.mapped))


def supported(version: str) -> bool:
    """Whether ONNX Runtime ``version`` finds the weights of a mapped model."""
    release = tuple(int(part) for part in version.split("+")[0].split(".")[:2] if part.isdigit())
    return release >= MIN_ONNXRUNTIME


def session_source(path: str | Path, *, map_weights: bool = True) -> SessionSource:
    """What to load for the file at ``path``: its model with the weights mapped where this ONNX Runtime
    finds them and the file has weights to map, else the path (also for a file that is not an ONNX
    protobuf, an ``.ort`` file, which ONNX Runtime then reads or judges itself)."""
    if map_weights and supported(ort.__version__):
        try:
            mapped = mapped_model(path)
        except ValueError:  # not ONNX's protobuf, or an empty file
            mapped = None
        if mapped is not None:
            return mapped
    return SessionSource(str(path), {}, 0)


__all__ = [
    "FOLDER_ENTRY",
    "PREPACKED_INPUTS",
    "UNPACKED",
    "SessionSource",
    "mapped_model",
    "session_source",
    "supported",
]
