"""Protobuf's wire format, the little of it graphgen reads and writes without a message class: a
model file's fields walked without reading the weights' bytes (``runtime.mapped_weights``), and
lengths written in front of pieces serialized apart (``deploy.inline``), a file's metadata read
without loading it (``contract.read_file_info``). Malformed bytes raise ``ValueError``."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from typing import NamedTuple

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5  # wire types


class Field(NamedTuple):
    number: int
    begin: int  # where the field's tag starts
    value: int  # where its value starts (after a length-delimited field's length)
    end: int


def read_varint(buffer: bytes | mmap.mmap, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(buffer):
            raise ValueError(f"the bytes end inside a number at byte {at}: not an ONNX model")
        byte = buffer[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def fields(buffer: bytes | mmap.mmap, start: int, end: int) -> Iterator[Field]:
    """The fields of the message in ``buffer[start:end]``, in file order."""
    at = start
    while at < end:
        tag, value = read_varint(buffer, at)
        wire = tag & 7
        if wire == VARINT:
            _, stop = read_varint(buffer, value)
        elif wire == FIXED64:
            stop = value + 8
        elif wire == FIXED32:
            stop = value + 4
        elif wire == LENGTH_DELIMITED:
            length, value = read_varint(buffer, value)
            stop = value + length
        else:
            raise ValueError(f"wire type {wire} at byte {at}: not an ONNX model")
        if stop > end:
            raise ValueError(f"a field at byte {at} runs past its message: not an ONNX model")
        yield Field(tag >> 3, at, value, stop)
        at = stop


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def length_delimited(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | LENGTH_DELIMITED) + varint(len(payload)) + payload


__all__ = [
    "FIXED32",
    "FIXED64",
    "LENGTH_DELIMITED",
    "VARINT",
    "Field",
    "fields",
    "length_delimited",
    "read_varint",
    "varint",
]
