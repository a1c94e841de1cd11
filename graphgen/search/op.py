"""ONNX Runtime's ``com.microsoft.BeamSearch`` op as the search (``export --search op``), and the
nodes that make it exact for batches (see :func:`batch_safe_search`)."""

from __future__ import annotations

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from graphgen.contract import (
    ATTENTION_MASK,
    INPUT_IDS,
    LENGTH_PENALTY,
    MAX_LENGTH,
    MIN_LENGTH,
    NUM_BEAMS,
    NUM_RETURN_SEQUENCES,
    REPETITION_PENALTY,
    SEQUENCE_SCORES,
)
from graphgen.custom_ops.builder import FLOAT, INT32, INT64, MS_DOMAIN, GraphBuilder, i64
from graphgen.model.placement import place_weights
from graphgen.model.spec import ModelSpec
from graphgen.model.transformer import Transformer, final_logits_bias
from graphgen.model.weights import INT4_BLOCK, QuantizedWeights, quantized_weights
from graphgen.passes.fp16 import half_weight
from graphgen.search.io import (
    CHECKED_INPUT_IDS,
    RAW_SEQUENCES,
    SearchCore,
    id_level_io,
    source_length_check,
    trim_sequences,
)
from graphgen.search.processors import PLAIN, TOO_SHORT, processor_masks

# Where search_node puts each of these in the BeamSearch op's input list.
SEARCH_INPUT_POSITIONS = {
    INPUT_IDS: 0,
    MAX_LENGTH: 1,
    MIN_LENGTH: 2,
    NUM_BEAMS: 3,
    NUM_RETURN_SEQUENCES: 4,
    ATTENTION_MASK: 9,
}
OP_MAX_LENGTH = "search_max_length"


def output_bias(b: GraphBuilder, spec: ModelSpec, current_length: str) -> str:
    """The op's decoder output bias for a step of ``current_length`` tokens: the checkpoint's bias
    plus the step's :func:`~graphgen.search.processors.processor_masks` row. The op bans tokens and
    applies min_length itself, after its log-softmax; where HF renormalises (log-softmax after the
    bans), the bans and the min-length state go into the bias instead, before the op's log-softmax."""
    renormalise = spec.renormalize_logits
    masks = processor_masks(spec, bans=renormalise, min_length=renormalise)
    variants = [final_logits_bias(spec) + mask for mask in masks]
    if len(variants) == 1:
        return b.derived("logits_bias", variants[0])
    length32 = b.op("Cast", [current_length], to=INT32)
    row = b.const(np.array([PLAIN], dtype=np.int32))
    if renormalise:
        too_short = b.op("Less", [length32, b.outer(MIN_LENGTH)])
        row = b.op("Where", [too_short, b.const(np.array([TOO_SHORT], dtype=np.int32)), row])
    if spec.forced_eos:  # applied after min_length, as HF orders them: it wins when both apply
        last = b.op("Sub", [b.outer(MAX_LENGTH), b.const(np.array([1], dtype=np.int32))])
        forced = b.const(np.array([len(variants) - 1], dtype=np.int32))
        row = b.op("Where", [b.op("Equal", [length32, last]), forced, row])
    table = b.derived("logits_bias_variants", np.stack(variants))
    return b.op("Gather", [table, b.op("Squeeze", [row])])


def _cache_shape(spec: ModelSpec, length: str | int) -> list[int | str]:
    heads = spec.decoder_heads
    return ["batch", heads, length, spec.head_dim(heads)]


def build_encoder_graph(spec: ModelSpec, quantized: QuantizedWeights | None = None) -> tuple[GraphProto, GraphBuilder]:
    """The op's encoder subgraph: encoder + first decoder step (its 3-input encoder form)."""
    b = GraphBuilder("encoder")
    t = Transformer(b, spec, quantized)
    input_ids = b.input("encoder_input_ids", INT32, ["batch", "source"])
    mask = b.input("encoder_attention_mask", INT32, ["batch", "source"])
    decoder_ids = b.input("decoder_input_ids", INT32, ["batch", 1])
    states = t.encoder(input_ids, mask)
    cross = t.cross_caches(states)
    logits, presents = t.decoder_step(decoder_ids, b.const(i64(0)), None, cross, mask, processors=output_bias)
    b.output(logits, "logits", FLOAT, ["batch", 1, spec.target_vocab_size])
    b.output(states, "encoder_hidden_states", FLOAT, ["batch", "source", spec.d_model])
    for index, (key, value) in enumerate(presents):
        b.output(key, f"present_key_self_{index}", FLOAT, _cache_shape(spec, 1))
        b.output(value, f"present_value_self_{index}", FLOAT, _cache_shape(spec, 1))
    for index, (key, value) in enumerate(cross):
        b.output(key, f"present_key_cross_{index}", FLOAT, _cache_shape(spec, "source"))
        b.output(value, f"present_value_cross_{index}", FLOAT, _cache_shape(spec, "source"))
    return b.graph(), b


def build_decoder_graph(spec: ModelSpec, quantized: QuantizedWeights | None = None) -> tuple[GraphProto, GraphBuilder]:
    """The op's decoder subgraph: one KV-cached decoding step, in the names the op feeds."""
    b = GraphBuilder("decoder")
    t = Transformer(b, spec, quantized)
    input_ids = b.input("input_ids", INT32, ["batch", 1])
    mask = b.input("encoder_attention_mask", INT32, ["batch", "source"])
    past_self, cross = [], []
    for index in range(spec.decoder_layers):
        key = b.input(f"past_key_self_{index}", FLOAT, _cache_shape(spec, "past"))
        value = b.input(f"past_value_self_{index}", FLOAT, _cache_shape(spec, "past"))
        past_self.append((key, value))
    for index in range(spec.decoder_layers):
        key = b.input(f"past_key_cross_{index}", FLOAT, _cache_shape(spec, "source"))
        value = b.input(f"past_value_cross_{index}", FLOAT, _cache_shape(spec, "source"))
        cross.append((key, value))
    past_length = b.op(
        "Slice", [b.op("Shape", [past_self[0][0]]), *(b.const(np.array([v], dtype=np.int64)) for v in (2, 3))]
    )
    logits, presents = t.decoder_step(input_ids, past_length, past_self, cross, mask, processors=output_bias)
    b.output(logits, "logits", FLOAT, ["batch", 1, spec.target_vocab_size])
    for index, (key, value) in enumerate(presents):
        b.output(key, f"present_key_self_{index}", FLOAT, _cache_shape(spec, "past_plus_1"))
        b.output(value, f"present_value_self_{index}", FLOAT, _cache_shape(spec, "past_plus_1"))
    return b.graph(), b


def search_node(
    spec: ModelSpec, encoder: GraphProto, decoder: GraphProto, input_ids: str = INPUT_IDS
) -> tuple[NodeProto, list[TensorProto]]:
    """The BeamSearch node over ``input_ids``, plus the small constants it needs (as initializers)."""
    extra: list[TensorProto] = []
    # When HF renormalises, min_length and banned tokens are applied inside the subgraphs
    # (before the softmax); ORT's own versions must then stay off.
    min_length = MIN_LENGTH
    vocab_mask = ""
    if spec.renormalize_logits:
        min_length = "search_min_length_off"
        extra.append(numpy_helper.from_array(np.array([0], dtype=np.int32), min_length))
    elif spec.generation.bad_token_ids:
        vocab_mask = "search_vocab_mask"
        mask = np.ones(spec.target_vocab_size, dtype=np.int32)
        mask[list(spec.generation.bad_token_ids)] = 0
        extra.append(numpy_helper.from_array(mask, vocab_mask))
    max_length = OP_MAX_LENGTH if spec.forced_eos else MAX_LENGTH  # see op_max_length
    inputs = [
        input_ids,
        max_length,
        min_length,
        NUM_BEAMS,
        NUM_RETURN_SEQUENCES,
        LENGTH_PENALTY,
        REPETITION_PENALTY,
        vocab_mask,
        "",  # prefix_vocab_mask
        ATTENTION_MASK,  # explicit: without it ORT only masks *leading* pads
    ]
    node = helper.make_node(
        "BeamSearch",
        inputs,
        [RAW_SEQUENCES, SEQUENCE_SCORES],
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


def op_max_length(spec: ModelSpec) -> list[NodeProto]:
    """The op's ``max_length``: at least 3, because ORT 1.32 fails at ``max_length`` 2.

    At 2 (one new token) ORT still runs the decoder once, on an uninitialised id (measured:
    "indices element out of data bounds"). With a forced EOS the subgraphs force that one token
    from the caller's ``max_length`` anyway, so giving the op room for one more changes nothing.
    """
    if not spec.forced_eos:
        return []
    return [helper.make_node("Max", [MAX_LENGTH, "search_min_max_length"], [OP_MAX_LENGTH])]


def _renamed(search: NodeProto, outputs: list[str], early_stopping: int | None = None) -> NodeProto:
    node = NodeProto()
    node.CopyFrom(search)
    node.output[:] = outputs
    if early_stopping is not None:
        for attribute in node.attribute:
            if attribute.name == "early_stopping":
                attribute.i = early_stopping
    return node


def _pick(condition: str, outputs: list[str], when_true: list[str], when_false: list[str], name: str) -> NodeProto:
    """An If that only forwards existing values: choose one of two lists of names."""

    def branch(values: list[str], label: str) -> GraphProto:
        names = [f"{name}/{label}/{out}" for out in outputs]
        nodes = [helper.make_node("Identity", [v], [n]) for v, n in zip(values, names, strict=True)]
        return helper.make_graph(nodes, f"{name}_{label}", [], [ValueInfoProto(name=n) for n in names])

    then_branch, else_branch = branch(when_true, "then"), branch(when_false, "else")
    return helper.make_node("If", [condition], outputs, name=name, then_branch=then_branch, else_branch=else_branch)


def batched_search(search: NodeProto) -> list[NodeProto]:
    """``search`` over the whole batch in one call: exact when ``early_stopping`` is on (below)."""
    return [_renamed(search, [RAW_SEQUENCES, SEQUENCE_SCORES])]


# The Loop body that holds both BeamSearch nodes and, attached after assembly, every weight.
SEARCH_CHUNKS = "search_chunks"


def batch_safe_search(search: NodeProto) -> list[NodeProto]:
    """Nodes running ``search`` over a whole batch, exactly as HF does, with prepacked weights.

    ORT's beam scorer decides that batch item ``b`` is finished by looking at the candidate
    scores at offset ``b * num_beams`` instead of ``b * 2 * num_beams`` (ORT 1.32,
    ``BeamSearchScorer::Process``), so in a batch every item but the first reads its neighbours'
    scores and is usually never marked done: the search then runs to ``max_length`` (512 steps
    for opus-mt, measured 6.7 s instead of 0.1 s for 8 sentences). Two ways around it are exact:

    * beam search one item per call (offset 0), each item keeping its padded row and mask;
    * greedy search (``num_beams == 1``) batched with ``early_stopping=1``, which for one beam is
      HF's greedy rule (an item is finished at its first EOS) and never reads the scores.

    The two need different ``early_stopping`` attributes, hence two BeamSearch nodes. ORT prepacks
    a weight for a subgraph's MatMul only when the weight is an initializer of the subgraph or of
    the graph directly around the BeamSearch node, not further out (``SessionState::
    PrepackConstantInitializedTensors``); unpacked weights made full-size search 1.6-2.2x slower.
    So both nodes sit in one Loop body (``SEARCH_CHUNKS``) that also holds every weight, stored once
    (``model.placement.attach_weights`` adds them to the finished model). The Loop runs
    once over the whole batch for greedy search and once per item for beam search; in each
    iteration the node not needed gets a one-token throwaway input (an encoder pass and at most
    two decoder steps are the whole overhead).
    """
    greedy = _renamed(search, ["greedy_sequences", "greedy_scores"], early_stopping=1)
    beams = _renamed(search, ["beam_sequences", "beam_scores"], early_stopping=0)
    greedy.name, beams.name = "greedy_search", "beam_search"
    eos = next(a.i for a in search.attribute if a.name == "eos_token_id")
    # The op inputs that differ between a pass's real search and its idle one, with the idle values
    # (a one-token source; max_length 3 because ORT fails at 2, see op_max_length).
    idle_values = {
        INPUT_IDS: np.array([[eos]], dtype=np.int32),
        ATTENTION_MASK: np.array([[1]], dtype=np.int32),
        MAX_LENGTH: np.array([3], dtype=np.int32),
        MIN_LENGTH: np.array([0], dtype=np.int32),
        NUM_BEAMS: np.array([1], dtype=np.int32),
        NUM_RETURN_SEQUENCES: np.array([1], dtype=np.int32),
    }
    real = {name: search.input[SEARCH_INPUT_POSITIONS[name]] for name in idle_values}
    real |= {INPUT_IDS: "chunk_input_ids", ATTENTION_MASK: "chunk_attention_mask"}
    idle = {name: f"idle_{name}" for name in idle_values}
    for node, role in ((greedy, "greedy"), (beams, "beam")):
        for name in idle_values:
            node.input[SEARCH_INPUT_POSITIONS[name]] = f"{role}_{name}"
    body_nodes = [
        helper.make_node("Mul", ["step", "chunk_size"], ["chunk_start"]),
        helper.make_node("Add", ["chunk_start", "chunk_size"], ["chunk_end"]),
        helper.make_node("Unsqueeze", ["chunk_start", "axis_0"], ["chunk_start_1d"]),
        helper.make_node("Unsqueeze", ["chunk_end", "axis_0"], ["chunk_end_1d"]),
        helper.make_node("Slice", [search.input[0], "chunk_start_1d", "chunk_end_1d", "axis_0"], ["chunk_input_ids"]),
        helper.make_node(
            "Slice", [search.input[9], "chunk_start_1d", "chunk_end_1d", "axis_0"], ["chunk_attention_mask"]
        ),
        _pick(
            "search_is_greedy",
            [f"greedy_{name}" for name in idle_values] + [f"beam_{name}" for name in idle_values],
            [*real.values(), *idle.values()],
            [*idle.values(), *real.values()],
            "route",
        ),
        greedy,
        beams,
        _pick(
            "search_is_greedy",
            ["chunk_sequences", "chunk_scores"],
            ["greedy_sequences", "greedy_scores"],
            ["beam_sequences", "beam_scores"],
            "result",
        ),
        helper.make_node("Identity", ["loop_condition"], ["loop_condition_out"]),
    ]
    body = helper.make_graph(
        body_nodes,
        SEARCH_CHUNKS,
        [
            helper.make_tensor_value_info("step", INT64, []),
            helper.make_tensor_value_info("loop_condition", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("loop_condition_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("chunk_sequences", INT32, ["chunk", "num_return_sequences", "max_length"]),
            helper.make_tensor_value_info("chunk_scores", FLOAT, ["chunk", "num_return_sequences"]),
        ],
        initializer=[
            numpy_helper.from_array(i64(0), "axis_0"),
            *(numpy_helper.from_array(value, idle[name]) for name, value in idle_values.items()),
        ],
    )
    return [
        helper.make_node("Equal", [NUM_BEAMS, "search_one_beam"], ["search_is_greedy_1d"]),
        helper.make_node("Squeeze", ["search_is_greedy_1d"], ["search_is_greedy"]),
        helper.make_node("Shape", [search.input[0]], ["search_batch_1d"], start=0, end=1),
        helper.make_node("Squeeze", ["search_batch_1d"], ["search_batch"]),
        helper.make_node("Min", ["search_batch", "search_one"], ["search_one_or_none"]),
        helper.make_node("Where", ["search_is_greedy", "search_one_or_none", "search_batch"], ["search_steps"]),
        helper.make_node("Where", ["search_is_greedy", "search_batch", "search_one"], ["chunk_size"]),
        helper.make_node("Loop", ["search_steps", ""], ["search_chunks", "search_chunk_scores"], body=body),
        # Chunks are [returned, max_length] per item (ORT pads to max_length). Spelling the shape
        # out, rather than reading it off the Loop output, also covers an empty batch (no chunk).
        helper.make_node("Cast", [NUM_RETURN_SEQUENCES], ["search_returned"], to=INT64),
        helper.make_node("Cast", [search.input[1]], ["search_width"], to=INT64),
        helper.make_node(
            "Concat", ["search_minus_one", "search_returned", "search_width"], ["search_flat_shape"], axis=0
        ),
        helper.make_node("Reshape", ["search_chunks", "search_flat_shape"], [RAW_SEQUENCES]),
        helper.make_node("Concat", ["search_minus_one", "search_returned"], ["search_flat_score_shape"], axis=0),
        helper.make_node("Reshape", ["search_chunk_scores", "search_flat_score_shape"], [SEQUENCE_SCORES]),
    ]


SEARCH_CONSTANTS = [
    numpy_helper.from_array(np.int64(1), "search_one"),
    numpy_helper.from_array(np.array([3], dtype=np.int32), "search_min_max_length"),
    numpy_helper.from_array(i64(-1), "search_minus_one"),
    numpy_helper.from_array(np.array([1], dtype=np.int32), "search_one_beam"),
]


def build_core(
    spec: ModelSpec,
    quantization: str,
    too_long_remedy: str,
    float16: bool = False,
    mapped: bool = False,
    int4_block: int = INT4_BLOCK,
) -> SearchCore:
    """The BeamSearch op over the encoder and decoder subgraphs. ``float16``: the weights are
    converted as they are written (``passes.fp16.half_weight``); the graphs are built in float32 and
    export's ``passes.fp16.to_float16`` converts their types and constants."""
    weights = quantized_weights(spec, quantization, mapped=mapped, int4_block=int4_block)
    encoder = build_encoder_graph(spec, weights)
    decoder = build_decoder_graph(spec, weights)
    # With early stopping one batched BeamSearch node is exact: single-use weights become subgraph
    # initializers, shared ones go one level up. Otherwise two BeamSearch nodes share the subgraphs
    # and every weight goes to the Loop body around them (see batch_safe_search).
    early_stopping = spec.generation.early_stopping
    convert = half_weight if float16 else None
    shared, own = place_weights(spec, [encoder, decoder], all_outer=not early_stopping, convert=convert)
    node, extras = search_node(spec, encoder[0], decoder[0], input_ids=CHECKED_INPUT_IDS)
    if early_stopping:
        outer_weights, search = shared, batched_search(node)
    else:
        outer_weights, search, own = [], batch_safe_search(node), {SEARCH_CHUNKS: shared}
    inputs, defaults, outputs = id_level_io(spec)
    check = source_length_check(spec, too_long_remedy)
    trim = trim_sequences(spec)
    return SearchCore(
        nodes=[*check.nodes, *op_max_length(spec), *search, *trim.nodes],
        initializers=[*defaults, *extras, *SEARCH_CONSTANTS, *check.constants, *trim.constants, *outer_weights],
        inputs=inputs,
        outputs=outputs,
        subgraph_weights=own,
    )
