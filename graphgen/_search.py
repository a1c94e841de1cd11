"""The BeamSearch node and the outer graph's inputs, each with a default from the checkpoint.

A graph input that has an initializer of the same name is optional in ONNX: a caller may pass
only the ids and get the checkpoint's generation defaults.
"""

from __future__ import annotations

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from custom_ops.builder import FLOAT, INT32, INT64, MS_DOMAIN, GraphBuilder, i64

from ._spec import ModelSpec

# (name, dtype) of the op's scalar inputs, in the op's input order after input_ids.
SEARCH_PARAMETERS = (
    ("max_length", np.int32),
    ("min_length", np.int32),
    ("num_beams", np.int32),
    ("num_return_sequences", np.int32),
    ("length_penalty", np.float32),
    ("repetition_penalty", np.float32),
)

ID_INPUTS = ("input_ids", "attention_mask")
RAW_SEQUENCES = "search_sequences"


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
        outputs=["sequences"],
    )
    return b


def parameter_defaults(spec: ModelSpec) -> dict[str, np.ndarray]:
    g = spec.generation
    values = {
        "max_length": g.max_length,
        "min_length": g.min_length,
        "num_beams": g.num_beams,
        "num_return_sequences": g.num_return_sequences,
        "length_penalty": g.length_penalty,
        "repetition_penalty": g.repetition_penalty,
    }
    return {name: np.array([values[name]], dtype=dtype) for name, dtype in SEARCH_PARAMETERS}


def search_node(spec: ModelSpec, encoder: GraphProto, decoder: GraphProto) -> tuple[NodeProto, list[TensorProto]]:
    """The BeamSearch node plus the small constants it needs (returned as initializers)."""
    extra: list[TensorProto] = []
    # When HF renormalises, min_length and banned tokens are applied inside the subgraphs
    # (before the softmax); ORT's own versions must then stay off.
    min_length = "min_length"
    vocab_mask = ""
    if spec.renormalize_logits:
        min_length = "search_min_length_off"
        extra.append(numpy_helper.from_array(np.array([0], dtype=np.int32), min_length))
    elif spec.generation.bad_token_ids:
        vocab_mask = "search_vocab_mask"
        mask = np.ones(spec.target_vocab_size, dtype=np.int32)
        mask[list(spec.generation.bad_token_ids)] = 0
        extra.append(numpy_helper.from_array(mask, vocab_mask))
    inputs = [
        "input_ids",
        "max_length",
        min_length,
        "num_beams",
        "num_return_sequences",
        "length_penalty",
        "repetition_penalty",
        vocab_mask,
        "",  # prefix_vocab_mask
        "attention_mask",  # explicit: without it ORT only masks *leading* pads
    ]
    node = helper.make_node(
        "BeamSearch",
        inputs,
        [RAW_SEQUENCES, "sequence_scores"],
        name="beam_search",
        domain=MS_DOMAIN,
        eos_token_id=spec.eos_token_id,
        pad_token_id=spec.pad_token_id,
        decoder_start_token_id=spec.decoder_start_token_id,
        no_repeat_ngram_size=spec.generation.no_repeat_ngram_size,
        early_stopping=int(spec.generation.early_stopping),
        model_type=1,
        encoder=encoder,
        decoder=decoder,
    )
    return node, extra


def _renamed(search: NodeProto, outputs: list[str], early_stopping: int | None = None) -> NodeProto:
    node = NodeProto()
    node.CopyFrom(search)
    node.output[:] = outputs
    if early_stopping is not None:
        for attribute in node.attribute:
            if attribute.name == "early_stopping":
                attribute.i = early_stopping
    return node


def one_item_at_a_time(search: NodeProto, outputs: list[str]) -> list[NodeProto]:
    """Run ``search`` in a Loop over the batch, one item per BeamSearch call.

    ORT's beam scorer decides that batch item ``b`` is finished by looking at the candidate
    scores at offset ``b * num_beams`` instead of ``b * 2 * num_beams`` (ORT 1.32,
    ``BeamSearchScorer::Process``), so in a batch every item but the first reads its neighbours'
    scores and is usually never marked done: the search then runs to ``max_length`` (512 steps
    for opus-mt, measured 6.7 s instead of 0.1 s for 8 sentences). With one item per call that
    offset is 0 and correct. Each item keeps its padded row and mask, so results equal a batched
    HF ``generate``.
    """
    inner = _renamed(search, ["item_sequences", "item_scores"])
    renames = {"input_ids": "item_input_ids", "attention_mask": "item_attention_mask"}
    inner.input[:] = [renames.get(name, name) for name in search.input]
    body_nodes = [
        helper.make_node("Unsqueeze", ["item", "item_axes"], ["item_index"]),
        helper.make_node("Gather", ["input_ids", "item_index"], ["item_input_ids"], axis=0),
        helper.make_node("Gather", ["attention_mask", "item_index"], ["item_attention_mask"], axis=0),
        inner,
        helper.make_node("Identity", ["loop_condition"], ["loop_condition_out"]),
    ]
    body = helper.make_graph(
        body_nodes,
        "search_one_item",
        [
            helper.make_tensor_value_info("item", INT64, []),
            helper.make_tensor_value_info("loop_condition", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("loop_condition_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("item_sequences", INT32, [1, "num_return_sequences", "max_length"]),
            helper.make_tensor_value_info("item_scores", FLOAT, [1, "num_return_sequences"]),
        ],
        initializer=[numpy_helper.from_array(i64(0), "item_axes")],
    )
    return [
        helper.make_node("Shape", ["input_ids"], ["search_batch_shape"], start=0, end=1),
        helper.make_node("Squeeze", ["search_batch_shape"], ["search_batch"]),
        helper.make_node("Loop", ["search_batch", ""], ["search_items", "search_item_scores"], body=body),
        helper.make_node("Squeeze", ["search_items", "search_squeeze_axis"], [outputs[0]]),
        helper.make_node("Squeeze", ["search_item_scores", "search_squeeze_axis"], [outputs[1]]),
    ]


def batch_safe_search(search: NodeProto, early_stopping: bool) -> list[NodeProto]:
    """Nodes running ``search`` over a whole batch without ORT's batch done-check bug.

    With ``early_stopping`` ORT marks an item done once it has ``num_beams`` finished hypotheses,
    without reading the misplaced scores, so one batched call is exact. Otherwise beam search runs
    one item at a time (:func:`one_item_at_a_time`), while greedy search (``num_beams == 1``)
    still runs batched with early stopping on, which for one beam is exactly HF's greedy rule:
    an item is finished at its first EOS.
    """
    outputs = [RAW_SEQUENCES, "sequence_scores"]
    if early_stopping:
        return [_renamed(search, outputs)]
    greedy = helper.make_graph(
        [_renamed(search, ["greedy_sequences", "greedy_scores"], early_stopping=1)],
        "greedy_batched",
        [],
        [
            helper.make_tensor_value_info("greedy_sequences", INT32, ["batch", 1, "max_length"]),
            helper.make_tensor_value_info("greedy_scores", FLOAT, ["batch", 1]),
        ],
    )
    beams = helper.make_graph(
        one_item_at_a_time(search, ["beam_sequences", "beam_scores"]),
        "beams_per_item",
        [],
        [
            helper.make_tensor_value_info("beam_sequences", INT32, ["batch", "num_return_sequences", "max_length"]),
            helper.make_tensor_value_info("beam_scores", FLOAT, ["batch", "num_return_sequences"]),
        ],
    )
    return [
        helper.make_node("Equal", ["num_beams", "search_one_beam"], ["search_is_greedy_1d"]),
        helper.make_node("Squeeze", ["search_is_greedy_1d"], ["search_is_greedy"]),
        helper.make_node("If", ["search_is_greedy"], outputs, then_branch=greedy, else_branch=beams),
    ]


SEARCH_CONSTANTS = [
    numpy_helper.from_array(i64(1), "search_squeeze_axis"),
    numpy_helper.from_array(np.array([1], dtype=np.int32), "search_one_beam"),
]


def id_level_io(spec: ModelSpec) -> tuple[list[ValueInfoProto], list[TensorProto], list[ValueInfoProto]]:
    """Graph inputs (ids + optional search parameters), their default initializers, graph outputs."""
    inputs = [helper.make_tensor_value_info(name, INT32, ["batch", "source"]) for name in ID_INPUTS]
    defaults = []
    for name, value in parameter_defaults(spec).items():
        elem = INT32 if value.dtype == np.int32 else FLOAT
        inputs.append(helper.make_tensor_value_info(name, elem, [1]))
        defaults.append(numpy_helper.from_array(value, name))
    outputs = [
        helper.make_tensor_value_info("sequences", INT32, ["batch", "num_return_sequences", "length"]),
        helper.make_tensor_value_info("sequence_scores", FLOAT, ["batch", "num_return_sequences"]),
    ]
    return inputs, defaults, outputs
