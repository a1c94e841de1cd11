"""The exported file's contract with its users: input, output and metadata names, in one place.

Every other module spells these names through this one: the builders that create the inputs, the
runtime that feeds them, ``bake``, ``triton`` and the CLI. :func:`read_file_info` reads what a file
declares about itself without onnx and without a session (a few top-level protobuf fields), so a
host can decide, before loading, whether it needs the onnxruntime-extensions library.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphgen._wire import fields

# Inputs of a text-level file.
TEXT = "text"  # string [batch]: the extensions-based tokenizer's input
TEXT_UTF8 = "text_utf8"  # uint8 [batch, bytes]: the portable tokenizer's input, zero-padded UTF-8 (trailing zeros)
TRUNCATE = "truncate"
SOURCE_LANGUAGE = "source_language"
TARGET_LANGUAGE = "target_language"
# The same as UTF-8 bytes (uint8 [1 or batch, bytes]), in a file without strings (export --no-strings).
SOURCE_LANGUAGE_UTF8 = "source_language_utf8"
TARGET_LANGUAGE_UTF8 = "target_language_utf8"
# Inputs of an id-level file (and of the search inside every file).
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
ID_INPUTS = (INPUT_IDS, ATTENTION_MASK)
FORCED_BOS_TOKEN_ID = "forced_bos_token_id"  # id-level loop files: the forced first token, -1 for none
# id-level loop files: each row's decoder start (int32 [1] or [batch]), the checkpoint's by default
# (HF generate's decoder_start_token_id); not an input of text files, where it is the checkpoint's
# or, where the target language starts the decoder (MBartTokenizer), computed from target_language.
DECODER_START_TOKEN_ID = "decoder_start_token_id"
# Generation parameters: optional inputs of every file (see GENERATION_PARAMETERS).
MAX_LENGTH = "max_length"
MIN_LENGTH = "min_length"
NUM_BEAMS = "num_beams"
NUM_RETURN_SEQUENCES = "num_return_sequences"
LENGTH_PENALTY = "length_penalty"
REPETITION_PENALTY = "repetition_penalty"
# Outputs.
TRANSLATION = "translation"  # string [batch, num_return_sequences]
TRANSLATION_UTF8 = "translation_utf8"  # uint8 [batch, num_return_sequences, bytes], zero-padded
TRANSLATION_LENGTHS = "translation_lengths"  # int64 [batch, num_return_sequences]: bytes of each
SEQUENCES = "sequences"
SEQUENCE_SCORES = "sequence_scores"


@dataclass(frozen=True)
class Parameter:
    """A generation parameter: an optional graph input (shape ``[1]``) whose default, an initializer of
    the same name, is the checkpoint's generation-config value of the same name."""

    name: str
    dtype: type[np.int32] | type[np.float32]

    def array(self, value: float) -> np.ndarray:
        """``value`` as the graph input."""
        return np.array([value], dtype=self.dtype)


# In this order in every file (and in ORT's BeamSearch op, after input_ids).
GENERATION_PARAMETERS = (
    Parameter(MAX_LENGTH, np.int32),
    Parameter(MIN_LENGTH, np.int32),
    Parameter(NUM_BEAMS, np.int32),
    Parameter(NUM_RETURN_SEQUENCES, np.int32),
    Parameter(LENGTH_PENALTY, np.float32),
    Parameter(REPETITION_PENALTY, np.float32),
)
INT_PARAMETERS = tuple(p.name for p in GENERATION_PARAMETERS if p.dtype == np.int32)
FLOAT_PARAMETERS = tuple(p.name for p in GENERATION_PARAMETERS if p.dtype == np.float32)
LANGUAGE_PARAMETERS = (SOURCE_LANGUAGE, TARGET_LANGUAGE)
LANGUAGE_UTF8_INPUTS = {SOURCE_LANGUAGE: SOURCE_LANGUAGE_UTF8, TARGET_LANGUAGE: TARGET_LANGUAGE_UTF8}


def generation_settings(
    defaults: dict[str, Any], max_positions: int | None, overrides: dict[str, Any]
) -> dict[str, Any]:
    """``defaults`` (a file's ``graphgen.generation_defaults``) with ``overrides`` applied, validated.

    The file checks the same rules itself (a run from any binding fails with a message); checked
    here first so that a Python caller gets a ``ValueError`` naming the setting.
    """
    unknown = set(overrides) - set(INT_PARAMETERS) - set(FLOAT_PARAMETERS)
    if unknown:
        raise TypeError(f"unknown generation setting(s): {', '.join(sorted(unknown))}")
    values = {p.name: defaults[p.name] for p in GENERATION_PARAMETERS}
    values.update({k: v for k, v in overrides.items() if v is not None})
    for name in INT_PARAMETERS:
        if isinstance(values[name], bool) or int(values[name]) != values[name]:
            raise ValueError(f"{name} must be an integer, got {values[name]!r}")
    for name in FLOAT_PARAMETERS:
        if not math.isfinite(float(values[name])):
            raise ValueError(f"{name} must be finite, got {values[name]!r}")
    if values[NUM_BEAMS] < 1:
        raise ValueError(f"num_beams must be at least 1, got {values[NUM_BEAMS]}")
    if not 1 <= values[NUM_RETURN_SEQUENCES] <= values[NUM_BEAMS]:
        raise ValueError(
            f"num_return_sequences must be between 1 and num_beams ({values[NUM_BEAMS]}), "
            f"got {values[NUM_RETURN_SEQUENCES]}"
        )
    if values[MAX_LENGTH] < 2:
        raise ValueError(f"max_length must be at least 2, got {values[MAX_LENGTH]}")
    if max_positions and values[MAX_LENGTH] > max_positions:
        raise ValueError(f"max_length {values[MAX_LENGTH]} exceeds the model's {max_positions} positions")
    if not 0 <= values[MIN_LENGTH] <= values[MAX_LENGTH]:
        raise ValueError(f"min_length must be between 0 and max_length, got {values[MIN_LENGTH]}")
    if values[REPETITION_PENALTY] <= 0:
        raise ValueError(f"repetition_penalty must be positive, got {values[REPETITION_PENALTY]}")
    return values


@dataclass(frozen=True)
class Port:
    """One input or output of a text-level file, as docs/io-contract.md's table lists it."""

    name: str
    direction: str  # "in", "in, optional" (an initializer holds the default) or "out"
    dtype: str
    shapes: tuple[str, ...]  # alternatives, e.g. ("[1]", "[batch]")


TEXT_FILE_PORTS = (
    Port(TEXT_UTF8, "in", "uint8", ("[batch, bytes]",)),
    Port(TEXT, "in", "string", ("[batch]",)),
    Port(SOURCE_LANGUAGE, "in, optional", "string", ("[1]", "[batch]")),
    Port(TARGET_LANGUAGE, "in, optional", "string", ("[1]", "[batch]")),
    *(
        Port(p.name, "in, optional", "int32" if p.dtype == np.int32 else "float", ("[1]",))
        for p in GENERATION_PARAMETERS
    ),
    Port(TRUNCATE, "in, optional", "bool", ("[1]",)),
    Port(TRANSLATION, "out", "string", ("[batch, num_return_sequences]",)),
    Port(TRANSLATION_UTF8, "out", "uint8", ("[batch, num_return_sequences, bytes]",)),
    Port(TRANSLATION_LENGTHS, "out", "int64", ("[batch, num_return_sequences]",)),
    Port(SEQUENCES, "out", "int32", ("[batch, num_return_sequences, length]",)),
    Port(SEQUENCE_SCORES, "out", "float", ("[batch, num_return_sequences]",)),
)

# Interfaces (metadata graphgen.interface): text in and out, or token ids in and out (export --no-tokenizer).
TEXT_LEVEL = "text"
ID_LEVEL = "ids"

# Tokenizer kinds of a text-level file (metadata graphgen.tokenizer).
PORTABLE = "onnx"  # standard ONNX ops over UTF-8 bytes
EXTENSIONS = "extensions"  # onnxruntime-extensions' SentencePiece op over strings
TOKENIZERS = (PORTABLE, EXTENSIONS)

EXTENSIONS_DOMAIN = "ai.onnx.contrib"

# Every node of a text file's tokenizer and detokenizer carries this layering annotation (the
# ``layer_ann`` entry of its NodeProto metadata; a Loop's body nodes inherit their Loop's), and the
# file's metadata (Key.SESSION_CONFIG) asks sessions for the setting that assigns them to the CPU.
# ONNX Runtime reads both from 1.25 on (annotation-based partitioning); older releases, which
# ignore both, run the file the same. Without it a CUDA session places most of these integer ops
# on the GPU (they have CUDA kernels): thousands of tiny kernels per call, a loop over the bytes
# of the text, and a wait for the GPU on every size that depends on the text.
LAYER_ANNOTATION = "layer_ann"
TEXT_LAYER = "graphgen.text"
LAYER_ASSIGNMENT = "session.layer_assignment_settings"
TEXT_ON_CPU = {LAYER_ASSIGNMENT: f"cpu({TEXT_LAYER})"}
ORT_FORMAT_IDENTIFIER = b"ORTM"  # the flatbuffer file identifier of .ort files


class Key:
    """Metadata keys (``ModelProto.metadata_props``)."""

    VERSION = "graphgen.version"
    SOURCE = "graphgen.source"
    ARCHITECTURE = "graphgen.architecture"
    INTERFACE = "graphgen.interface"  # TEXT_LEVEL or ID_LEVEL
    TOKENIZER = "graphgen.tokenizer"  # PORTABLE or EXTENSIONS (text files)
    STRINGS = "graphgen.strings"  # "none" in a file without string tensors (export --no-strings)
    SEARCH = "graphgen.search"
    PRECISION = "graphgen.precision"  # float32, float16, int8 or int4
    INT4_BLOCK_SIZE = "graphgen.int4_block_size"  # int4 files: inputs per scale (export --int4-block-size)
    INT8_ACTIVATIONS = "graphgen.int8_activations"  # int8 files: "row" (one scale per row; since 2026-12-07)
    GENERATION_DEFAULTS = "graphgen.generation_defaults"
    CUSTOM_OP_DOMAINS = "graphgen.custom_op_domains"
    MAX_POSITIONS = "graphgen.max_positions"
    MIN_ONNXRUNTIME = "graphgen.min_onnxruntime"
    MIN_EXTENSIONS = "graphgen.min_extensions"
    SPECIAL_IDS = "graphgen.special_ids"
    LANGUAGES = "graphgen.languages"
    SOURCE_LANGUAGE = "graphgen.source_language"
    TARGET_LANGUAGE = "graphgen.target_language"
    TARGET_TAGS = "graphgen.target_tags"  # JSON: tokens typed first in a text that choose the target
    BAKED = "graphgen.baked"
    SESSION_CONFIG = "graphgen.session_config"  # JSON: session config entries the file asks for


# The target tags a file lists: the examples' parsers of a JSON list (C, Rust, Java) read strings
# without whitespace, quotes, commas or backslashes, as language codes and real tags are
# (>>cmn_Hans<<, <2de>); a tag with one of those still works typed in a text, but is not listed.
_LISTABLE_TAG = re.compile(r'[^\s",\\]+')


def listed_tags(tags: Sequence[str]) -> list[str]:
    """The ``tags`` a file's ``graphgen.target_tags`` lists (see ``_LISTABLE_TAG``)."""
    return [tag for tag in tags if _LISTABLE_TAG.fullmatch(tag)]


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
        if self.interface != TEXT_LEVEL:
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
    def precision(self) -> str | None:
        """``float32``, ``float16``, ``int8`` or ``int4``."""
        return self.metadata.get(Key.PRECISION)

    @property
    def int4_block_size(self) -> int | None:
        """An int4 file's inputs per scale (None for other files, and int4 files from before it was recorded)."""
        return int(self.metadata[Key.INT4_BLOCK_SIZE]) if Key.INT4_BLOCK_SIZE in self.metadata else None

    @property
    def int8_activations(self) -> str | None:
        """How an int8 file quantizes its activations: ``"row"`` (each row its own scale, so an input's
        result does not depend on its batch) or ``"tensor"`` (one scale for the whole batch: files
        exported before 2026-12-07, which do not record it); None for other files."""
        if self.precision != "int8":
            return None
        return self.metadata.get(Key.INT8_ACTIVATIONS, "tensor")

    @property
    def generation_defaults(self) -> dict[str, Any]:
        return dict(json.loads(self.metadata.get(Key.GENERATION_DEFAULTS, "{}")))

    @property
    def max_positions(self) -> int | None:
        """The model's positions (the longest source and output), when the file records them."""
        return int(self.metadata.get(Key.MAX_POSITIONS, 0)) or None

    @property
    def baked(self) -> dict[str, Any]:
        """The settings ``graphgen bake`` fixed in this copy (empty for an exported file)."""
        return dict(json.loads(self.metadata.get(Key.BAKED, "{}")))

    @property
    def special_ids(self) -> dict[str, int]:
        """The ids the search uses: ``pad``, ``eos`` and ``decoder_start``."""
        return {str(k): int(v) for k, v in json.loads(self.metadata.get(Key.SPECIAL_IDS, "{}")).items()}

    @property
    def session_config(self) -> dict[str, str]:
        """Session config entries (``SessionOptions.add_session_config_entry`` and its equivalents
        in every binding) to set before loading the file: for text files, ``TEXT_ON_CPU``."""
        return dict(json.loads(self.metadata.get(Key.SESSION_CONFIG, "{}")))

    @property
    def languages(self) -> list[str]:
        """The language codes of an NLLB, M2M100 or mBART-50 text file (empty otherwise)."""
        return list(json.loads(self.metadata.get(Key.LANGUAGES, "[]")))

    @property
    def source_language(self) -> str | None:
        return self.metadata.get(Key.SOURCE_LANGUAGE)

    @property
    def target_language(self) -> str | None:
        return self.metadata.get(Key.TARGET_LANGUAGE)

    @property
    def target_tags(self) -> list[str]:
        """The tokens that, typed at the start of a text, choose the target language (opus-mt's
        ``>>fra<<``, MADLAD-400's ``<2de>``) of a text file; empty otherwise."""
        return list(json.loads(self.metadata.get(Key.TARGET_TAGS, "[]")))


def _metadata(buffer: bytes | mmap.mmap) -> dict[str, str]:
    """``ModelProto.metadata_props`` from a file's bytes; the other top-level fields are skipped unread."""
    if buffer[4:8] == ORT_FORMAT_IDENTIFIER:
        raise ValueError("an ORT-format (.ort) file, not an ONNX protobuf")
    metadata = {}
    for entry in fields(buffer, 0, len(buffer)):
        if entry.number == 14:  # ModelProto.metadata_props: StringStringEntryProto key = 1, value = 2
            parts = {part.number: buffer[part.value : part.end] for part in fields(buffer, entry.value, entry.end)}
            metadata[bytes(parts.get(1, b"")).decode("utf-8")] = bytes(parts.get(2, b"")).decode("utf-8")
    return metadata


@dataclass(frozen=True)
class FileInputs:
    """A file's graph inputs as a host sees them, and where its weights are."""

    required: tuple[str, ...]
    # with a default (an initializer of the same name): Python and the C API feed them; Java and
    # JavaScript cannot (graphgen bake fixes them, or keeps them as required inputs)
    optional: tuple[str, ...]
    external_data: tuple[str, ...]  # the data files its weights are in (--external-data), beside it


def _inputs(buffer: bytes | mmap.mmap) -> FileInputs:
    """The main graph's inputs and initializers (names only; the weights' bytes are skipped unread)."""
    if buffer[4:8] == ORT_FORMAT_IDENTIFIER:
        raise ValueError("an ORT-format (.ort) file, not an ONNX protobuf")
    inputs: list[str] = []
    initializers: set[str] = set()
    locations: dict[str, None] = {}
    for graph in (entry for entry in fields(buffer, 0, len(buffer)) if entry.number == 7):  # ModelProto.graph
        for entry in fields(buffer, graph.value, graph.end):
            if entry.number == 11:  # GraphProto.input: ValueInfoProto, name = 1
                names = [part for part in fields(buffer, entry.value, entry.end) if part.number == 1]
                inputs += [bytes(buffer[part.value : part.end]).decode("utf-8") for part in names]
            elif entry.number == 5:  # GraphProto.initializer: TensorProto, name = 8, external_data = 13
                for part in fields(buffer, entry.value, entry.end):
                    if part.number == 8:
                        initializers.add(bytes(buffer[part.value : part.end]).decode("utf-8"))
                    elif part.number == 13:  # StringStringEntryProto: key = 1, value = 2
                        pair = {f.number: bytes(buffer[f.value : f.end]) for f in fields(buffer, part.value, part.end)}
                        if pair.get(1) == b"location":
                            locations[pair.get(2, b"").decode("utf-8")] = None
    return FileInputs(
        required=tuple(name for name in inputs if name not in initializers),
        optional=tuple(name for name in inputs if name in initializers),
        external_data=tuple(locations),
    )


def read_file_inputs(model: str | Path) -> FileInputs:
    """Which inputs of an ONNX file a host must feed and which have defaults, read without loading it."""
    with open(model, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            raise ValueError(f"{model} is empty")
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            return _inputs(buffer)


def read_file_info(model: str | Path | bytes) -> FileInfo:
    """The metadata of an ONNX file (a path or its bytes), read without loading the graph."""
    if isinstance(model, bytes):
        return FileInfo(_metadata(model))
    with open(model, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return FileInfo({})
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            return FileInfo(_metadata(buffer))
