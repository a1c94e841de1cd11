"""Write a model whose weights were streamed to a data file as one self-contained ``.onnx`` file.

Protobuf serializes only a message it holds whole, so a single-file model used to have every
weight in memory twice at the end of an export (in the ``ModelProto`` and in its serialized
bytes: a peak of 1.6 GB for opus-mt's 312 MB file). Here the weights stay in the data file
they were streamed to (``deploy.save.StreamedWeights``) and the ``.onnx`` is written piece by
piece: the small messages serialized by protobuf, each streamed tensor as its header plus its
``raw_data`` field copied from the data file in blocks. The lengths that protobuf's wire format
puts in front of each message are summed from the pieces. A parser reads the result as the model
with each weight inline: the same messages as ``model.SerializeToString()`` of that model, only
some fields in another order (in the wire format a message's fields may come in any order, and a
repeated field's elements keep theirs).

Only the messages on the way to a streamed tensor are taken apart: the model, its graph and the
graphs in node attributes (the search loop's body, an ``If``'s branches), their nodes and
attributes. Everything else is serialized by protobuf as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from google.protobuf.message import Message
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto

from graphgen._wire import LENGTH_DELIMITED, varint

# A piece of the file: bytes to write, or (offset, length) of bytes to copy from the data file.
Piece = bytes | tuple[int, int]

_COPY_BLOCK = 16 * 2**20


def _number(message: type, field: str) -> int:
    return int(message.DESCRIPTOR.fields_by_name[field].number)  # type: ignore[attr-defined]


def _size(pieces: list[Piece]) -> int:
    return sum(len(piece) if isinstance(piece, bytes) else piece[1] for piece in pieces)


def _field(number: int, body: list[Piece]) -> list[Piece]:
    """``body`` (a message's pieces) as a length-delimited field ``number`` of the message around it."""
    return [varint(number << 3 | LENGTH_DELIMITED) + varint(_size(body)), *body]


def _without(message: Message, *fields: str) -> bytes:
    """``message`` serialized without ``fields``, which are written piece by piece after it."""
    rest = type(message)()
    rest.CopyFrom(message)
    for field in fields:
        rest.ClearField(field)
    return rest.SerializeToString()


class _Splicer:
    def __init__(self, data_name: str) -> None:
        self.data_name = data_name

    def streamed(self, tensor: TensorProto) -> tuple[int, int] | None:
        """(offset, length) of ``tensor``'s bytes in the data file, if that is where they are."""
        if tensor.data_location != TensorProto.EXTERNAL:
            return None
        entries = {entry.key: entry.value for entry in tensor.external_data}
        if entries.get("location") != self.data_name:
            return None
        return int(entries.get("offset", "0")), int(entries["length"])

    def tensor(self, tensor: TensorProto) -> list[Piece]:
        where = self.streamed(tensor)
        if where is None:
            return [tensor.SerializeToString()]
        header = _without(tensor, "external_data", "data_location")
        return [header, *_field(_number(TensorProto, "raw_data"), [where])]

    def attribute(self, attribute: AttributeProto) -> list[Piece]:
        if attribute.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            return [attribute.SerializeToString()]
        pieces: list[Piece] = [_without(attribute, "g", "graphs")]
        if attribute.HasField("g"):
            pieces += _field(_number(AttributeProto, "g"), self.graph(attribute.g))
        for graph in attribute.graphs:
            pieces += _field(_number(AttributeProto, "graphs"), self.graph(graph))
        return pieces

    def node(self, node: NodeProto) -> list[Piece]:
        if not any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            return [node.SerializeToString()]
        pieces: list[Piece] = [_without(node, "attribute")]
        for attribute in node.attribute:
            pieces += _field(_number(NodeProto, "attribute"), self.attribute(attribute))
        return pieces

    def graph(self, graph: GraphProto) -> list[Piece]:
        pieces: list[Piece] = [_without(graph, "node", "initializer")]
        for node in graph.node:
            pieces += _field(_number(GraphProto, "node"), self.node(node))
        for tensor in graph.initializer:
            pieces += _field(_number(GraphProto, "initializer"), self.tensor(tensor))
        return pieces

    def model(self, model: ModelProto) -> list[Piece]:
        return [_without(model, "graph"), *_field(_number(ModelProto, "graph"), self.graph(model.graph))]


def inline_pieces(model: ModelProto, data_name: str) -> list[Piece]:
    """The pieces of ``model``'s file with every tensor whose bytes are in the data file ``data_name``
    (external data with that location) inline: what ``write_inline`` writes."""
    return _Splicer(data_name).model(model)


def inline_size(pieces: list[Piece]) -> int:
    """The size of the file the pieces make (protobuf refuses to parse one past 2 GB)."""
    return _size(pieces)


def _copy(source: BinaryIO, offset: int, length: int) -> Iterator[bytes]:
    source.seek(offset)
    while length:
        block = source.read(min(length, _COPY_BLOCK))
        if not block:
            raise OSError(f"{source.name} ends before offset {offset + length}")
        length -= len(block)
        yield block


def write_inline(pieces: list[Piece], path: Path, data: Path) -> None:
    """Write the file of ``inline_pieces`` to ``path``, copying the weights' bytes from ``data`` in
    blocks, never all in memory at once."""
    with path.open("wb") as out, data.open("rb") as source:
        for piece in pieces:
            if isinstance(piece, bytes):
                out.write(piece)
            else:
                for block in _copy(source, *piece):
                    out.write(block)
