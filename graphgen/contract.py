"""The exported file's contract with its users: input, output and metadata names, in one place.

Every other module spells these names through this one: the builders that create the inputs, the
runtime that feeds them, ``bake``, ``triton`` and the CLI. :func:`read_file_info` reads what a file
declares about itself without onnx and without a session (a few top-level protobuf fields), so a
host can decide, before loading, whether it needs the onnxruntime-extensions library.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from io import BufferedReader, BytesIO
from pathlib import Path
from typing import Any

# Inputs of a text-level file.
TEXT = "text"  # string [batch]: the extensions-based tokenizer's input
TEXT_UTF8 = "text_utf8"  # uint8 [batch, bytes]: the portable tokenizer's input, zero-padded UTF-8
TRUNCATE = "truncate"
SOURCE_LANGUAGE = "source_language"
TARGET_LANGUAGE = "target_language"
# The same as UTF-8 bytes (uint8 [1 or batch, bytes]), in a file without strings (export --no-strings).
SOURCE_LANGUAGE_UTF8 = "source_language_utf8"
TARGET_LANGUAGE_UTF8 = "target_language_utf8"
# Inputs of an id-level file (and of the search inside every file).
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
INT_PARAMETERS = ("max_length", "min_length", "num_beams", "num_return_sequences")
FLOAT_PARAMETERS = ("length_penalty", "repetition_penalty")
LANGUAGE_PARAMETERS = (SOURCE_LANGUAGE, TARGET_LANGUAGE)
LANGUAGE_UTF8_INPUTS = {SOURCE_LANGUAGE: SOURCE_LANGUAGE_UTF8, TARGET_LANGUAGE: TARGET_LANGUAGE_UTF8}
# Outputs.
TRANSLATION = "translation"  # string [batch, num_return_sequences]
TRANSLATION_UTF8 = "translation_utf8"  # uint8 [batch, num_return_sequences, bytes], zero-padded
TRANSLATION_LENGTHS = "translation_lengths"  # int64 [batch, num_return_sequences]: bytes of each
SEQUENCES = "sequences"
SEQUENCE_SCORES = "sequence_scores"

# Tokenizer kinds of a text-level file (metadata graphgen.tokenizer).
PORTABLE = "onnx"  # standard ONNX ops over UTF-8 bytes
EXTENSIONS = "extensions"  # onnxruntime-extensions' SentencePiece op over strings
TOKENIZERS = (PORTABLE, EXTENSIONS)

EXTENSIONS_DOMAIN = "ai.onnx.contrib"
ORT_FORMAT_IDENTIFIER = b"ORTM"  # the flatbuffer file identifier of .ort files


class Key:
    """Metadata keys (``ModelProto.metadata_props``)."""

    VERSION = "graphgen.version"
    SOURCE = "graphgen.source"
    ARCHITECTURE = "graphgen.architecture"
    INTERFACE = "graphgen.interface"  # "text" or "ids"
    TOKENIZER = "graphgen.tokenizer"  # PORTABLE or EXTENSIONS (text files)
    STRINGS = "graphgen.strings"  # "none" in a file without string tensors (export --no-strings)
    SEARCH = "graphgen.search"
    PRECISION = "graphgen.precision"
    GENERATION_DEFAULTS = "graphgen.generation_defaults"
    CUSTOM_OP_DOMAINS = "graphgen.custom_op_domains"
    MAX_POSITIONS = "graphgen.max_positions"
    MIN_ONNXRUNTIME = "graphgen.min_onnxruntime"
    MIN_EXTENSIONS = "graphgen.min_extensions"
    SPECIAL_IDS = "graphgen.special_ids"
    LANGUAGES = "graphgen.languages"
    SOURCE_LANGUAGE = "graphgen.source_language"
    TARGET_LANGUAGE = "graphgen.target_language"
    BAKED = "graphgen.baked"


@dataclass(frozen=True)
class FileInfo:
    """What a graphgen file says about itself (its metadata), parsed."""

    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def interface(self) -> str | None:
        return self.metadata.get(Key.INTERFACE)

    @property
    def tokenizer(self) -> str | None:
        """``PORTABLE`` or ``EXTENSIONS`` for a text file (files from before the choice: extensions)."""
        if self.interface != "text":
            return None
        return self.metadata.get(Key.TOKENIZER, EXTENSIONS)

    @property
    def custom_op_domains(self) -> list[str]:
        return list(json.loads(self.metadata.get(Key.CUSTOM_OP_DOMAINS, "[]")))

    @property
    def needs_extensions(self) -> bool:
        """Whether a session must register the onnxruntime-extensions library to load the file."""
        return EXTENSIONS_DOMAIN in self.custom_op_domains

    @property
    def generation_defaults(self) -> dict[str, Any]:
        return dict(json.loads(self.metadata.get(Key.GENERATION_DEFAULTS, "{}")))

    @property
    def languages(self) -> list[str]:
        return list(json.loads(self.metadata.get(Key.LANGUAGES, "[]")))


def _varint(stream: BufferedReader | BytesIO) -> int | None:
    shift = value = 0
    while True:
        byte = stream.read(1)
        if not byte:
            return None
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7


def _fields(stream: BufferedReader | BytesIO, wanted: int) -> list[bytes]:
    """The length-delimited top-level fields numbered ``wanted``; the others are skipped unread."""
    found = []
    while (tag := _varint(stream)) is not None:
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _varint(stream)
        elif wire == 1:
            stream.seek(8, 1)
        elif wire == 5:
            stream.seek(4, 1)
        elif wire == 2:
            length = _varint(stream) or 0
            if number == wanted:
                found.append(stream.read(length))
            else:
                stream.seek(length, 1)
        else:
            raise ValueError("not an ONNX model")
    return found


def read_file_info(model: str | Path | bytes) -> FileInfo:
    """The metadata of an ONNX file (a path or its bytes), read without loading the graph."""
    metadata: dict[str, str] = {}

    def read(stream: BufferedReader | BytesIO) -> None:
        for entry in _fields(stream, 14):  # ModelProto.metadata_props
            parts = dict.fromkeys((1, 2), b"")
            inner = BytesIO(entry)
            while (tag := _varint(inner)) is not None:
                length = _varint(inner) or 0
                parts[tag >> 3] = inner.read(length)
            metadata[parts[1].decode("utf-8")] = parts[2].decode("utf-8")

    if isinstance(model, bytes):
        stream: BufferedReader | BytesIO = BytesIO(model)
    else:
        stream = open(model, "rb")  # noqa: SIM115 (closed below)
    try:
        if stream.read(8)[4:] == ORT_FORMAT_IDENTIFIER:
            raise ValueError("an ORT-format (.ort) file, not an ONNX protobuf")
        stream.seek(0)
        read(stream)
    finally:
        stream.close()
    return FileInfo(metadata)
