"""Put subgraphs, weights and the search node together into one ModelProto.

Every weight is stored exactly once, and where ORT prepacks it: in the subgraph that reads it
or in the graph directly around the BeamSearch node (ORT looks one level up, no further). With
one BeamSearch node, a weight read by one subgraph is that subgraph's initializer and one read by
both (the tied embedding table, the decoder layers that the 3-input encoder form also runs) goes
to the graph around the node. When two BeamSearch nodes share the subgraphs
(``_search.batch_safe_search``) every weight goes to the Loop body that holds both nodes. With
graphgen's own search (``_loop_search``) every weight is an initializer of the outer graph, which
runs the encoder and the first decoder step and holds the Loop whose body reads them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from custom_ops.builder import (
    EXTENSIONS_DOMAIN,
    FLOAT,
    INT32,
    INT64,
    ML_DOMAIN,
    ML_OPSET,
    MS_DOMAIN,
    OPSET,
    STRING,
    GraphBuilder,
    i64,
)
from custom_ops.text import join_strings
from custom_ops.utf8 import join_bytes

from ._compat import MIN_EXTENSIONS, MIN_ONNXRUNTIME, apply_compatibility_passes
from ._contract import EXTENSIONS, PORTABLE, TEXT_UTF8, TOKENIZERS, TRANSLATION_LENGTHS, TRANSLATION_UTF8, Key
from ._errors import GraphgenError, UnsupportedModelError
from ._language_tokenizers import (
    LanguageVocabulary,
    add_language_detokenizer,
    add_language_tokenizer,
    language_detokenizer_index,
    language_ids,
)
from ._loop_search import FORCED_BOS_INPUT, NO_FORCED_BOS, loop_search
from ._portable_tokenizer import add_portable_tokenizer
from ._quantize import Int8Weights
from ._search import (
    CHECKED_INPUT_IDS,
    ID_INPUTS,
    RAW_SEQUENCES,
    SEARCH_CONSTANTS,
    batch_safe_search,
    batched_search,
    id_level_io,
    op_max_length,
    parameter_defaults,
    search_node,
    source_length_check,
    trim_sequences,
)
from ._spec import ModelSpec
from ._subgraphs import build_decoder_graph, build_encoder_graph
from ._tokenizer_graphs import MarianVocabulary, add_detokenizer, add_tokenizer, detokenizer_index

TEXT_INPUT = "text"
TEXT_OUTPUT = "translation"
TRUNCATE_INPUT = "truncate"
SOURCE_LANGUAGE_INPUT = "source_language"
TARGET_LANGUAGE_INPUT = "target_language"

IR_VERSION = 9  # opset 20's IR version


def _weight_values(spec: ModelSpec, builders: Sequence[GraphBuilder]) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    for builder in builders:
        for name in builder.weights_used:
            values[name] = spec.weights[name]
        for name, array in builder.derived_weights.items():
            if name in values and not np.array_equal(values[name], array, equal_nan=True):
                raise ValueError(f"derived weight {name} differs between subgraphs")
            values[name] = array
    return values


def place_weights(
    spec: ModelSpec, parts: Sequence[tuple[GraphProto, GraphBuilder]], all_outer: bool = False
) -> list[TensorProto]:
    """Attach single-use weights to their subgraph; return the shared ones for the graph around.

    With ``all_outer`` every weight is returned (for subgraphs used by two nodes).
    """
    builders = [builder for _, builder in parts]
    values = _weight_values(spec, builders)
    usage = Counter(name for b in builders for name in {*b.weights_used, *b.derived_weights})
    outer: list[TensorProto] = []
    for name in sorted(values):
        tensor = numpy_helper.from_array(values[name], name)
        if usage[name] > 1 or all_outer:
            outer.append(tensor)
            continue
        for graph, builder in parts:
            if name in builder.weights_used or name in builder.derived_weights:
                graph.initializer.append(tensor)
    return outer


def metadata(spec: ModelSpec, interface: str, int8: bool = False, search: str = "op") -> dict[str, str]:
    from . import __version__

    defaults = {name: value.item() for name, value in parameter_defaults(spec).items()}
    defaults |= {
        "early_stopping": spec.generation.early_stopping,
        "no_repeat_ngram_size": spec.generation.no_repeat_ngram_size,
        "bad_token_ids": list(spec.generation.bad_token_ids),
    }
    return {
        "graphgen.version": __version__,
        "graphgen.source": spec.source,
        "graphgen.architecture": spec.architecture,
        "graphgen.interface": interface,
        "graphgen.search": search,
        "graphgen.precision": "int8" if int8 else "float32",
        "graphgen.generation_defaults": json.dumps(defaults, sort_keys=True),
        "graphgen.custom_op_domains": json.dumps([MS_DOMAIN]),
        "graphgen.max_positions": str(spec.max_positions),
        "graphgen.min_onnxruntime": MIN_ONNXRUNTIME,
        "graphgen.special_ids": json.dumps(
            {"pad": spec.pad_token_id, "eos": spec.eos_token_id, "decoder_start": spec.decoder_start_token_id}
        ),
    }


def set_precision(model: ModelProto, precision: str) -> None:
    for prop in model.metadata_props:
        if prop.key == "graphgen.precision":
            prop.value = precision


def make_model(graph: GraphProto, props: dict[str, str], domains: Sequence[tuple[str, int]] = ()) -> ModelProto:
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    opsets += [helper.make_opsetid(domain, version) for domain, version in domains]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="graphgen")
    model.ir_version = IR_VERSION
    helper.set_model_props(model, props)
    return model


@dataclass
class _SearchCore:
    """ids → ``sequences``/``sequence_scores``: what both interfaces share."""

    nodes: list[NodeProto]
    initializers: list[TensorProto]  # weights shared by the subgraphs, defaults, search constants
    inputs: list[ValueInfoProto]  # input_ids, attention_mask, then the optional search parameters
    outputs: list[ValueInfoProto]


def _loop_search_core(spec: ModelSpec, int8: bool, too_long_remedy: str) -> _SearchCore:
    """The search in standard ops (``_loop_search``): every weight in the outer graph, which the
    loop body reads directly (one level down, where ORT still prepacks)."""
    weights = Int8Weights(spec) if int8 else None
    search = loop_search(spec, weights, CHECKED_INPUT_IDS, "attention_mask", RAW_SEQUENCES, "sequence_scores")
    tensors = [numpy_helper.from_array(a, n) for n, a in sorted(_weight_values(spec, search.builders).items())]
    inputs, defaults, outputs = id_level_io(spec)
    inputs.append(helper.make_tensor_value_info(FORCED_BOS_INPUT, INT32, ["forced_bos_rows"]))
    defaults.append(numpy_helper.from_array(forced_bos_default(spec), FORCED_BOS_INPUT))
    check = source_length_check(spec, too_long_remedy)
    trim = trim_sequences(spec)
    return _SearchCore(
        nodes=[*check.nodes, *search.nodes, *trim.nodes],
        initializers=[*defaults, *check.constants, *search.constants, *trim.constants, *tensors],
        inputs=inputs,
        outputs=outputs,
    )


def forced_bos_default(spec: ModelSpec) -> np.ndarray:
    forced = spec.generation.forced_bos_token_id
    return np.array([NO_FORCED_BOS if forced is None else forced], dtype=np.int32)


def _search_core(spec: ModelSpec, int8: bool, too_long_remedy: str, search: str = "op") -> _SearchCore:
    if search == "loop":
        return _loop_search_core(spec, int8, too_long_remedy)
    if spec.generation.forced_bos_token_id is not None:
        raise UnsupportedModelError(
            "the checkpoint's generation config forces a first token (forced_bos_token_id), "
            "which only graphgen's own search does: export with search='loop' (the default)"
        )
    weights = Int8Weights(spec) if int8 else None
    encoder = build_encoder_graph(spec, weights)
    decoder = build_decoder_graph(spec, weights)
    # With early stopping one batched BeamSearch node is exact: single-use weights become subgraph
    # initializers, shared ones go one level up. Otherwise two BeamSearch nodes share the subgraphs
    # and every weight goes to the Loop body around them (see batch_safe_search).
    early_stopping = spec.generation.early_stopping
    shared = place_weights(spec, [encoder, decoder], all_outer=not early_stopping)
    # after place_weights: search_node copies the subgraphs
    node, extras = search_node(spec, encoder[0], decoder[0], input_ids=CHECKED_INPUT_IDS)
    if early_stopping:
        outer_weights, search = shared, batched_search(node)
    else:
        outer_weights, search = [], batch_safe_search(node, shared)
    inputs, defaults, outputs = id_level_io(spec)
    check = source_length_check(spec, too_long_remedy)
    trim = trim_sequences(spec)
    return _SearchCore(
        nodes=[*check.nodes, *op_max_length(spec), *search, *trim.nodes],
        initializers=[*defaults, *extras, *SEARCH_CONSTANTS, *check.constants, *trim.constants, *outer_weights],
        inputs=inputs,
        outputs=outputs,
    )


def build_id_model(spec: ModelSpec, *, int8: bool = False, search: str = "op") -> ModelProto:
    """ids in, ids out: the BeamSearch node over the encoder and decoder subgraphs."""
    core = _search_core(spec, int8, "pass at most that many ids per row", search)
    graph = helper.make_graph(core.nodes, "graphgen", core.inputs, core.outputs, initializer=core.initializers)
    model = make_model(graph, metadata(spec, "ids", int8, search))
    apply_compatibility_passes(model)
    return model


def _language_defaults(spec: ModelSpec, vocabulary: LanguageVocabulary) -> tuple[str, str]:
    """Default source and target codes: the tokenizer's ``src_lang``, the generation config's forced token."""
    forced = spec.generation.forced_bos_token_id
    if forced is None:
        return vocabulary.default_source, ""
    by_id = {index: code for code, index in vocabulary.languages.items()}
    if forced not in by_id:
        raise UnsupportedModelError(
            f"the generation config forces token {forced}, which is no language code of the tokenizer"
        )
    return vocabulary.default_source, by_id[forced]


def build_text_model(
    spec: ModelSpec,
    vocabulary: MarianVocabulary | LanguageVocabulary,
    *,
    int8: bool = False,
    search: str = "op",
    tokenizer: str = EXTENSIONS,
) -> ModelProto:
    """strings in, strings out: tokenizer → search → detokenizer in one graph.

    ``tokenizer`` ``"onnx"`` (``PORTABLE``) builds the tokenizer in standard ONNX ops: the file takes
    the texts as zero-padded UTF-8 bytes (``text_utf8``, uint8 ``[batch, bytes]``) and also returns
    the translations as bytes (``translation_utf8``, ``translation_lengths``), and needs no custom-op
    library. ``"extensions"`` uses onnxruntime-extensions' SentencePiece op on a string ``text`` input.

    A source with more tokens than the model has positions stops the run with a message naming
    the limit, unless the optional ``truncate`` input is true: then it is cut as HF's
    ``truncation=True`` cuts it, to the tokenizer's ``model_max_length`` (or the positions, when fewer).
    With a language-coded tokenizer (NLLB, mBART-50, M2M100) the optional string inputs
    ``source_language`` and ``target_language`` (one code, or one per text) choose the languages;
    the target's token is forced as the first one generated, and ``""`` forces nothing.
    """
    coded = vocabulary if isinstance(vocabulary, LanguageVocabulary) and vocabulary.languages else None
    if coded is not None and search != "loop":
        raise UnsupportedModelError("target languages are forced by graphgen's own search: use search='loop'")
    core = _search_core(spec, int8, f"shorten it, or set the optional input {TRUNCATE_INPUT} to true to cut it", search)
    pre = GraphBuilder("tokenizer")
    limit = pre.op(
        "Where",
        [
            TRUNCATE_INPUT,
            pre.const(i64(min(vocabulary.max_length, spec.max_positions))),
            pre.const(i64(np.iinfo(np.int64).max)),
        ],
    )
    post = GraphBuilder("detokenizer")
    optional: list[tuple[ValueInfoProto, TensorProto]] = []
    portable = tokenizer == PORTABLE
    if tokenizer not in TOKENIZERS:
        raise GraphgenError(f"unknown tokenizer {tokenizer!r}; choose one of {', '.join(TOKENIZERS)}")
    rows = pre.op("Shape", [TEXT_UTF8], start=0, end=1) if portable else pre.op("Shape", [TEXT_INPUT])
    extra_outputs: list[ValueInfoProto] = []
    if portable:
        if isinstance(vocabulary, MarianVocabulary):
            portable_spec = vocabulary.portable_spec(spec.eos_token_id, spec.pad_token_id)
            index, table, texts = detokenizer_index(post, "sequences", vocabulary)
        else:
            portable_spec = vocabulary.portable_spec()
            index, table, texts = language_detokenizer_index(post, "sequences", vocabulary, spec.target_vocab_size)
        source_ids = None
        if coded is not None:
            source_ids = pre.op(
                "Cast", [language_ids(pre, SOURCE_LANGUAGE_INPUT, coded, SOURCE_LANGUAGE_INPUT, rows)], to=INT64
            )
        ids, mask, _ = add_portable_tokenizer(pre, TEXT_UTF8, portable_spec, max_length=limit, source_ids=source_ids)
        detokenized = join_strings(post, index, table)
        utf8, lengths = join_bytes(post, index, [str(text) for text in texts], "id_to_text")
        post.op("Identity", [utf8], outputs=[TRANSLATION_UTF8])
        post.op("Identity", [lengths], outputs=[TRANSLATION_LENGTHS])
        extra_outputs = [
            helper.make_tensor_value_info(
                TRANSLATION_UTF8, TensorProto.UINT8, ["batch", "num_return_sequences", "translation_bytes"]
            ),
            helper.make_tensor_value_info(TRANSLATION_LENGTHS, INT64, ["batch", "num_return_sequences"]),
        ]
    elif isinstance(vocabulary, MarianVocabulary):
        ids, mask = add_tokenizer(pre, TEXT_INPUT, vocabulary, spec.eos_token_id, spec.pad_token_id, max_length=limit)
        detokenized = add_detokenizer(post, "sequences", vocabulary)
    else:
        source = SOURCE_LANGUAGE_INPUT if coded is not None else None
        ids, mask = add_language_tokenizer(pre, TEXT_INPUT, source, vocabulary, max_length=limit)
        detokenized = add_language_detokenizer(post, "sequences", vocabulary, spec.target_vocab_size)
    if coded is not None:
        target = language_ids(pre, TARGET_LANGUAGE_INPUT, coded, TARGET_LANGUAGE_INPUT, rows)
        pre.op("Identity", [target], outputs=[FORCED_BOS_INPUT])
        for name, default in zip(
            (SOURCE_LANGUAGE_INPUT, TARGET_LANGUAGE_INPUT), _language_defaults(spec, coded), strict=True
        ):
            optional.append(
                (
                    helper.make_tensor_value_info(name, STRING, [f"{name}_rows"]),
                    numpy_helper.from_array(np.array([default], dtype=object), name),
                )
            )
    pre.op("Identity", [ids], outputs=["input_ids"])
    pre.op("Identity", [mask], outputs=["attention_mask"])
    post.op("Identity", [detokenized], outputs=[TEXT_OUTPUT])

    # The forced first token is an id-level input; text graphs choose it by target_language, or keep
    # the checkpoint's default as a constant.
    search_inputs = [i for i in core.inputs[len(ID_INPUTS) :] if i.name != FORCED_BOS_INPUT]
    initializers = [t for t in core.initializers if not (coded is not None and t.name == FORCED_BOS_INPUT)]
    text_input = (
        helper.make_tensor_value_info(TEXT_UTF8, TensorProto.UINT8, ["batch", "text_bytes"])
        if portable
        else helper.make_tensor_value_info(TEXT_INPUT, STRING, ["batch"])
    )
    inputs = [
        text_input,
        *search_inputs,
        *(info for info, _ in optional),
        helper.make_tensor_value_info(TRUNCATE_INPUT, TensorProto.BOOL, [1]),
    ]
    outputs = [
        helper.make_tensor_value_info(TEXT_OUTPUT, STRING, ["batch", "num_return_sequences"]),
        *extra_outputs,
        *core.outputs,
    ]
    tables = [numpy_helper.from_array(array, name) for b in (pre, post) for name, array in b.derived_weights.items()]
    graph = helper.make_graph(
        [*pre.nodes, *core.nodes, *post.nodes],
        "graphgen",
        inputs,
        outputs,
        initializer=[
            *initializers,
            *(default for _, default in optional),
            numpy_helper.from_array(np.array([False]), TRUNCATE_INPUT),  # the default: no truncation
            *pre.constants,
            *post.constants,
            *tables,
        ],
    )
    props = metadata(spec, "text", int8, search)
    props[Key.TOKENIZER] = tokenizer
    if not portable:
        props[Key.CUSTOM_OP_DOMAINS] = json.dumps([MS_DOMAIN, EXTENSIONS_DOMAIN])
        props[Key.MIN_EXTENSIONS] = MIN_EXTENSIONS
    if coded is not None:
        source, target = _language_defaults(spec, coded)
        props["graphgen.languages"] = json.dumps(sorted(coded.languages))
        props["graphgen.source_language"] = source
        props["graphgen.target_language"] = target
    domains = [(ML_DOMAIN, ML_OPSET)] if portable else [(EXTENSIONS_DOMAIN, 1), (ML_DOMAIN, ML_OPSET)]
    model = make_model(graph, props, domains=domains)
    apply_compatibility_passes(model)
    return model


def standalone_subgraph(spec: ModelSpec, part: tuple[GraphProto, GraphBuilder]) -> ModelProto:
    """A subgraph as a model of its own (all weights inside, outer values as inputs), for tests."""
    graph, builder = part
    standalone = GraphProto()
    standalone.CopyFrom(graph)
    for name, array in _weight_values(spec, [builder]).items():
        standalone.initializer.append(numpy_helper.from_array(array, name))
    for name in sorted(builder.outer_used):
        standalone.input.append(helper.make_tensor_value_info(name, INT32, [1]))
    return make_model(standalone, {})


__all__ = ["FLOAT", "build_id_model", "build_text_model", "place_weights", "standalone_subgraph"]
