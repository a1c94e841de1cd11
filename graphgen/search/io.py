"""What every search shares: the id-level inputs with their defaults, the source-length check, the
outputs and their trimming.

A graph input that has an initializer of the same name is optional in ONNX: a caller may pass
only the ids and get the checkpoint's generation defaults. A search reads ``checked_input_ids``
(``input_ids`` after the length check) and writes ``search_sequences`` (padded to ``max_length``)
and ``sequence_scores``; :func:`trim_sequences` cuts the former to ``sequences``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from graphgen._errors import SOURCE_TOO_LONG_PREFIX
from graphgen.contract import (
    GENERATION_PARAMETERS,
    ID_INPUTS,
    INPUT_IDS,
    LENGTH_PENALTY,
    MAX_LENGTH,
    MIN_LENGTH,
    NUM_BEAMS,
    NUM_RETURN_SEQUENCES,
    REPETITION_PENALTY,
    SEQUENCE_SCORES,
    SEQUENCES,
)
from graphgen.custom_ops import fail_when
from graphgen.custom_ops.builder import FLOAT, INT32, INT64, GraphBuilder, i64
from graphgen.model.placement import Initializer
from graphgen.model.spec import ModelSpec

RAW_SEQUENCES = "search_sequences"
CHECKED_INPUT_IDS = "checked_input_ids"


def source_too_long_message(limit: int, remedy: str) -> str:
    """The error a run stops with when a source exceeds ``limit`` tokens (the failing node's name)."""
    return f"{SOURCE_TOO_LONG_PREFIX} {limit} tokens; {remedy}"


def source_length_check(spec: ModelSpec, remedy: str) -> GraphBuilder:
    """``input_ids`` → ``checked_input_ids``, stopping the run when a source has more tokens than positions.

    Without it a long source fails deep in the encoder with a broadcast error that names neither
    the cause nor the limit.
    """
    b = GraphBuilder("source_check")
    width = b.op("Shape", [INPUT_IDS], start=1, end=2)
    too_long = b.op("Greater", [width, b.const(i64(spec.max_positions))])
    checked = fail_when(b, too_long, source_too_long_message(spec.max_positions, remedy), INPUT_IDS)
    b.op("Identity", [checked], outputs=[CHECKED_INPUT_IDS])
    return b


def trim_sequences(spec: ModelSpec) -> GraphBuilder:
    """Nodes cutting the op's ``[batch, beams, max_length]`` output to the longest hypothesis.

    ORT pads every hypothesis with ``pad`` up to ``max_length`` (512 for opus-mt); the length
    kept is one past the last non-pad position of any hypothesis.
    """
    b = GraphBuilder("trim")
    is_token = b.op(
        "Cast", [b.op("Not", [b.op("Equal", [RAW_SEQUENCES, b.const(np.int32(spec.pad_token_id))])])], to=INT64
    )
    width = b.op("Gather", [b.op("Shape", [RAW_SEQUENCES]), b.const(i64(2))])
    positions = b.op(
        "Range",
        [b.const(np.int64(1)), b.op("Add", [b.op("Squeeze", [width]), b.const(np.int64(1))]), b.const(np.int64(1))],
    )
    last = b.op("ReduceMax", [b.op("Mul", [is_token, positions])], keepdims=0)
    length = b.op(
        "Max",
        [b.op("Unsqueeze", [last, b.const(i64(0))]), b.const(i64(1))],
    )
    b.op(
        "Slice",
        [RAW_SEQUENCES, b.const(i64(0)), length, b.const(i64(2))],
        outputs=[SEQUENCES],
    )
    return b


def parameter_defaults(spec: ModelSpec) -> dict[str, np.ndarray]:
    """Each generation parameter's default (the checkpoint's value), as the initializer of its input."""
    g = spec.generation
    values = {
        MAX_LENGTH: g.max_length,
        MIN_LENGTH: g.min_length,
        NUM_BEAMS: g.num_beams,
        NUM_RETURN_SEQUENCES: g.num_return_sequences,
        LENGTH_PENALTY: g.length_penalty,
        REPETITION_PENALTY: g.repetition_penalty,
    }
    return {p.name: p.array(values[p.name]) for p in GENERATION_PARAMETERS}


def id_level_io(spec: ModelSpec) -> tuple[list[ValueInfoProto], list[TensorProto], list[ValueInfoProto]]:
    """Graph inputs (ids + optional search parameters), their default initializers, graph outputs."""
    inputs = [helper.make_tensor_value_info(name, INT32, ["batch", "source"]) for name in ID_INPUTS]
    defaults = []
    for name, value in parameter_defaults(spec).items():
        elem = INT32 if value.dtype == np.int32 else FLOAT
        inputs.append(helper.make_tensor_value_info(name, elem, [1]))
        defaults.append(numpy_helper.from_array(value, name))
    outputs = [
        helper.make_tensor_value_info(SEQUENCES, INT32, ["batch", "num_return_sequences", "length"]),
        helper.make_tensor_value_info(SEQUENCE_SCORES, FLOAT, ["batch", "num_return_sequences"]),
    ]
    return inputs, defaults, outputs


@dataclass
class SearchCore:
    """A search built: ids → ``sequences``/``sequence_scores``, what the id-level and text-level files share."""

    nodes: list[NodeProto]
    initializers: list[Initializer]  # weights shared by the subgraphs, defaults, search constants
    inputs: list[ValueInfoProto]  # input_ids, attention_mask, then the optional search parameters
    outputs: list[ValueInfoProto]
    subgraph_weights: dict[str, list[Initializer]] = field(default_factory=dict)  # see attach_weights
