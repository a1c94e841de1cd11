"""Join the stages into one ModelProto: the search (``graphgen.search``, ids in and out), for a
text file the tokenizer and detokenizer around it (``graphgen.text``), and the metadata the file
declares about itself (``graphgen.contract.Key``).

Weights are added last, each exactly once and where ONNX Runtime prepacks it
(``graphgen.model.placement``): the loop search keeps every weight in the outer graph, which its
loop body reads one level down; the op search in the subgraph that reads it, or in the graph
around its BeamSearch nodes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from onnx import GraphProto, ModelProto, TensorProto, ValueInfoProto, helper, numpy_helper

from graphgen._errors import GraphgenError, UnsupportedModelError
from graphgen._graphs import set_layer
from graphgen.contract import (
    ATTENTION_MASK,
    DECODER_START_TOKEN_ID,
    EXTENSIONS,
    FORCED_BOS_TOKEN_ID,
    ID_INPUTS,
    ID_LEVEL,
    INPUT_IDS,
    LAYER_ANNOTATION,
    PORTABLE,
    SEQUENCES,
    SOURCE_LANGUAGE,
    SOURCE_LANGUAGE_UTF8,
    TARGET_LANGUAGE,
    TARGET_LANGUAGE_UTF8,
    TEXT,
    TEXT_LAYER,
    TEXT_LEVEL,
    TEXT_ON_CPU,
    TEXT_UTF8,
    TOKENIZERS,
    TRANSLATION,
    TRANSLATION_LENGTHS,
    TRANSLATION_UTF8,
    TRUNCATE,
    Key,
    listed_tags,
)
from graphgen.custom_ops.builder import (
    EXTENSIONS_DOMAIN,
    INT32,
    INT64,
    ML_DOMAIN,
    ML_OPSET,
    MS_DOMAIN,
    OPSET,
    STRING,
    GraphBuilder,
    derived_array,
    i64,
)
from graphgen.custom_ops.text import join_strings
from graphgen.custom_ops.utf8 import join_bytes
from graphgen.deploy.save import StreamedWeights
from graphgen.model.placement import Initializer, WeightValues, add_initializers, attach_weights
from graphgen.model.spec import ModelSpec
from graphgen.model.weights import INT4_BLOCK, INT8_ACTIVATIONS
from graphgen.passes.compat import MIN_EXTENSIONS, MIN_ONNXRUNTIME
from graphgen.search import SEARCHES
from graphgen.search.io import (
    SearchCore,
    parameter_defaults,
)
from graphgen.text.languages import (
    language_ids,
)
from graphgen.text.portable import add_portable_tokenizer
from graphgen.text.vocabulary import Vocabulary

IR_VERSION = 9  # opset 20's IR version


def metadata(
    spec: ModelSpec,
    interface: str,
    quantization: str = "",
    search: str = "op",
    float16: bool = False,
    int4_block: int = INT4_BLOCK,
) -> dict[str, str]:
    """``quantization``: ``""`` (float weights), ``"int8"`` or ``"int4"`` (``int4_block`` inputs per scale)."""
    from graphgen import __version__

    defaults = {name: value.item() for name, value in parameter_defaults(spec).items()}
    defaults |= {
        "early_stopping": spec.generation.early_stopping,
        "no_repeat_ngram_size": spec.generation.no_repeat_ngram_size,
        "bad_token_ids": list(spec.generation.bad_token_ids),
    }
    props = {
        Key.VERSION: __version__,
        Key.SOURCE: spec.source,
        Key.ARCHITECTURE: spec.architecture,
        Key.INTERFACE: interface,
        Key.SEARCH: search,
        Key.PRECISION: quantization or ("float16" if float16 else "float32"),
        Key.GENERATION_DEFAULTS: json.dumps(defaults, sort_keys=True),
        Key.CUSTOM_OP_DOMAINS: json.dumps([MS_DOMAIN]),
        Key.MAX_POSITIONS: str(spec.max_positions),
        Key.MIN_ONNXRUNTIME: MIN_ONNXRUNTIME,
        Key.SPECIAL_IDS: json.dumps(
            {"pad": spec.pad_token_id, "eos": spec.eos_token_id, "decoder_start": spec.decoder_start_token_id}
        ),
    }
    if quantization == "int4":  # hosts whose kernels take only some block sizes read it (WebGPU: 16, 32)
        props[Key.INT4_BLOCK_SIZE] = str(int4_block)
    if quantization == "int8":  # files from before it (one scale per tensor) lack the key
        props[Key.INT8_ACTIVATIONS] = INT8_ACTIVATIONS
    return props


def make_model(graph: GraphProto, props: dict[str, str], domains: Sequence[tuple[str, int]] = ()) -> ModelProto:
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    opsets += [helper.make_opsetid(domain, version) for domain, version in domains]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="graphgen")
    model.ir_version = IR_VERSION
    helper.set_model_props(model, props)
    return model


def _quantization(int8: bool, int4: bool) -> str:
    if int8 and int4:
        raise GraphgenError("--int8 and --int4 cannot be combined")
    return "int8" if int8 else "int4" if int4 else ""


def _search_core(
    spec: ModelSpec,
    quantization: str,
    too_long_remedy: str,
    search: str,
    float16: bool = False,
    streamed: StreamedWeights | None = None,
    int4_block: int = INT4_BLOCK,
) -> SearchCore:
    """``streamed``: the weights go to a data file as they are added; when it is the file's external
    data, ONNX Runtime memory-maps it (the weight formats lay some tables out for that, see
    ``model.weights``). ``int4_block``: inputs per int4 scale."""
    chosen = SEARCHES[search]
    chosen.check(spec, quantization)
    mapped = streamed is not None and streamed.mapped
    return chosen.build_core(spec, quantization, too_long_remedy, float16, mapped, int4_block)


def build_id_model(
    spec: ModelSpec,
    *,
    int8: bool = False,
    int4: bool = False,
    int4_block: int = INT4_BLOCK,
    search: str = "op",
    float16: bool = False,
    streamed: StreamedWeights | None = None,
) -> ModelProto:
    """ids in, ids out: the search over the encoder and decoder (``int4``: loop search only; ``float16``:
    the loop search's layers, or the op search's weights as they are written).

    With ``streamed`` the weights go to that data file as they are added (``deploy.save``)."""
    quantization = _quantization(int8, int4)
    remedy = "pass at most that many ids per row"
    core = _search_core(spec, quantization, remedy, search, float16, streamed, int4_block)
    graph = helper.make_graph(core.nodes, "graphgen", core.inputs, core.outputs)
    model = make_model(graph, metadata(spec, ID_LEVEL, quantization, search, float16, int4_block))
    add_initializers(model.graph, core.initializers, streamed)
    attach_weights(model, core.subgraph_weights, streamed)
    return model


def _language_defaults(spec: ModelSpec, vocabulary: Vocabulary) -> tuple[str, str]:
    """Default source and target codes: the tokenizer's ``src_lang``; the generation config's forced
    token, or where the target starts the decoder (MBartTokenizer), the checkpoint's decoder start
    when it is a language code (mbart-large-en-ro's ``ro_RO``), else ``""``: the checkpoint's own."""
    by_id = {index: code for code, index in vocabulary.languages.items()}
    if vocabulary.target_starts_decoder:
        return vocabulary.default_source, by_id.get(spec.decoder_start_token_id, "")
    forced = spec.generation.forced_bos_token_id
    if forced is None:
        return vocabulary.default_source, ""
    if forced not in by_id:
        raise UnsupportedModelError(
            f"the generation config forces token {forced}, which is no language code of the tokenizer"
        )
    return vocabulary.default_source, by_id[forced]


@dataclass
class _TextEnds:
    """The tokenizer and detokenizer halves of a text file: their builders, inputs and outputs."""

    pre: GraphBuilder
    post: GraphBuilder
    inputs: list[ValueInfoProto]  # the text, then the language inputs
    defaults: list[TensorProto]  # the language inputs' defaults
    outputs: list[ValueInfoProto]  # before sequences and sequence_scores


def _language_input(name: str, default: str, utf8: bool) -> tuple[ValueInfoProto, TensorProto]:
    """An optional language input: string ``[n]``, or (a file without strings) uint8 ``[n, bytes]``."""
    if not utf8:
        return (
            helper.make_tensor_value_info(name, STRING, [f"{name}_rows"]),
            numpy_helper.from_array(np.array([default], dtype=object), name),
        )
    data = np.frombuffer(default.encode("utf-8"), dtype=np.uint8).reshape(1, -1)
    return (
        helper.make_tensor_value_info(name, TensorProto.UINT8, [f"{name}_rows", f"{name}_bytes"]),
        numpy_helper.from_array(data, name),
    )


def _text_ends(
    spec: ModelSpec,
    vocabulary: Vocabulary,
    coded: Vocabulary | None,
    tokenizer: str,
    strings: bool,
) -> _TextEnds:
    """Tokenizer (into ``input_ids``, ``attention_mask`` and, with languages, the forced first token)
    and detokenizer (from ``sequences``) of a text file of the given kind."""
    pre, post = GraphBuilder("tokenizer"), GraphBuilder("detokenizer")
    limit = pre.op(
        "Where",
        [
            TRUNCATE,
            pre.const(i64(min(vocabulary.max_length, spec.max_positions))),
            pre.const(i64(np.iinfo(np.int64).max)),
        ],
    )
    portable = tokenizer == PORTABLE
    # The batch size, for the language inputs. (A plain Shape of the 1-D string input: ONNX Runtime 1.17
    # then fails in the search's trim with a Shape(start, end) of it in the graph, even unused.)
    rows = pre.op("Shape", [TEXT_UTF8], start=0, end=1) if portable else pre.op("Shape", [TEXT])
    languages = (SOURCE_LANGUAGE, TARGET_LANGUAGE) if strings else (SOURCE_LANGUAGE_UTF8, TARGET_LANGUAGE_UTF8)
    outputs: list[ValueInfoProto] = []
    if portable:
        portable_spec = vocabulary.portable_tokenizer(spec)
        index, texts = vocabulary.detokenizer_table(post, SEQUENCES, spec)
        source_ids = None
        if coded is not None:
            source = language_ids(pre, languages[0], coded, SOURCE_LANGUAGE, rows, utf8=not strings)
            source_ids = pre.op("Cast", [source], to=INT64)
        ids, mask, _ = add_portable_tokenizer(
            pre,
            TEXT_UTF8,
            portable_spec,
            max_length=limit,
            source_ids=source_ids,
            source_last=vocabulary.source_last,
        )
        if strings:
            post.op("Identity", [join_strings(post, index, texts, "id_to_text")], outputs=[TRANSLATION])
        utf8, lengths = join_bytes(post, index, [str(t) for t in texts], "id_to_text")
        post.op("Identity", [utf8], outputs=[TRANSLATION_UTF8])
        post.op("Identity", [lengths], outputs=[TRANSLATION_LENGTHS])
        outputs += [
            helper.make_tensor_value_info(
                TRANSLATION_UTF8, TensorProto.UINT8, ["batch", "num_return_sequences", "translation_bytes"]
            ),
            helper.make_tensor_value_info(TRANSLATION_LENGTHS, INT64, ["batch", "num_return_sequences"]),
        ]
    else:
        source_input = SOURCE_LANGUAGE if coded is not None else None
        ids, mask = vocabulary.add_extensions_tokenizer(pre, TEXT, source_input, spec, limit)
        post.op("Identity", [vocabulary.add_extensions_detokenizer(post, SEQUENCES, spec)], outputs=[TRANSLATION])
    if strings:
        outputs.insert(0, helper.make_tensor_value_info(TRANSLATION, STRING, ["batch", "num_return_sequences"]))
    pre.op("Identity", [ids], outputs=[INPUT_IDS])
    pre.op("Identity", [mask], outputs=[ATTENTION_MASK])
    text_input = (
        helper.make_tensor_value_info(TEXT_UTF8, TensorProto.UINT8, ["batch", "text_bytes"])
        if portable
        else helper.make_tensor_value_info(TEXT, STRING, ["batch"])
    )
    inputs, defaults = [text_input], []
    if coded is not None:
        target = language_ids(pre, languages[1], coded, TARGET_LANGUAGE, rows, utf8=not strings)
        if coded.target_starts_decoder:  # "" (-1): the checkpoint's decoder start
            none = pre.op("Equal", [target, pre.const(np.int32(-1))])
            start = pre.const(np.int32(spec.decoder_start_token_id))
            pre.op("Where", [none, start, target], outputs=[DECODER_START_TOKEN_ID])
        else:
            pre.op("Identity", [target], outputs=[FORCED_BOS_TOKEN_ID])
        for name, default in zip(languages, _language_defaults(spec, coded), strict=True):
            info, tensor = _language_input(name, default, utf8=not strings)
            inputs.append(info)
            defaults.append(tensor)
    return _TextEnds(pre, post, inputs, defaults, outputs)


def build_text_model(
    spec: ModelSpec,
    vocabulary: Vocabulary,
    *,
    int8: bool = False,
    int4: bool = False,
    int4_block: int = INT4_BLOCK,
    search: str = "op",
    tokenizer: str = EXTENSIONS,
    strings: bool = True,
    float16: bool = False,
    streamed: StreamedWeights | None = None,
) -> ModelProto:
    """strings in, strings out: tokenizer → search → detokenizer in one graph.

    ``tokenizer`` ``"onnx"`` (``PORTABLE``) builds the tokenizer in standard ONNX ops: the file takes
    the texts as zero-padded UTF-8 bytes (``text_utf8``, uint8 ``[batch, bytes]``) and also returns
    the translations as bytes (``translation_utf8``, ``translation_lengths``), and needs no custom-op
    library. ``"extensions"`` uses onnxruntime-extensions' SentencePiece op on a string ``text`` input.
    ``strings=False`` (portable only) leaves every string tensor out, for ONNX Runtime builds without
    the string type: no ``translation`` output, and the languages as UTF-8 bytes too
    (``source_language_utf8``, ``target_language_utf8``, uint8 ``[1 or batch, bytes]``).

    A source with more tokens than the model has positions stops the run with a message naming
    the limit, unless the optional ``truncate`` input is true: then it is cut as HF's
    ``truncation=True`` cuts it, to the tokenizer's ``model_max_length`` (or the positions, when fewer).
    With a language-coded tokenizer (NLLB, mBART-50, M2M100) the optional inputs
    ``source_language`` and ``target_language`` (one code, or one per text) choose the languages;
    the target's token is forced as the first one generated, and ``""`` forces nothing (with
    MBartTokenizer, mBART-25's, the target's token starts the decoder, and ``""`` is the checkpoint's
    decoder start).
    """
    if tokenizer not in TOKENIZERS:
        raise GraphgenError(f"unknown tokenizer {tokenizer!r}; choose one of {', '.join(TOKENIZERS)}")
    if not strings and tokenizer != PORTABLE:
        raise GraphgenError("a file without strings needs the portable tokenizer (--tokenizer onnx)")
    coded = vocabulary if vocabulary.languages else None
    if coded is not None and not SEARCHES[search].forced_first_token:
        raise UnsupportedModelError("target languages are forced by graphgen's own search: use search='loop'")
    remedy = f"shorten it, or set the optional input {TRUNCATE} to true to cut it"
    quantization = _quantization(int8, int4)
    core = _search_core(spec, quantization, remedy, search, float16, streamed, int4_block)
    ends = _text_ends(spec, vocabulary, coded, tokenizer, strings)
    # The forced first token is an id-level input; text graphs choose it (or, for MBartTokenizer's
    # checkpoints, the decoder start) by target_language, and keep the other as a constant.
    chosen = None if coded is None else DECODER_START_TOKEN_ID if coded.target_starts_decoder else FORCED_BOS_TOKEN_ID
    search_inputs = [
        i for i in core.inputs[len(ID_INPUTS) :] if i.name not in (FORCED_BOS_TOKEN_ID, DECODER_START_TOKEN_ID)
    ]
    initializers = [t for t in core.initializers if t.name != chosen]
    inputs = [
        *ends.inputs[:1],
        *search_inputs,
        *ends.inputs[1:],
        helper.make_tensor_value_info(TRUNCATE, TensorProto.BOOL, [1]),
    ]
    pre, post = ends.pre, ends.post
    set_layer([*pre.nodes, *post.nodes], LAYER_ANNOTATION, TEXT_LAYER)  # see contract.TEXT_LAYER
    tables = [
        numpy_helper.from_array(derived_array(value), name)
        for b in (pre, post)
        for name, value in b.derived_weights.items()
    ]
    graph = helper.make_graph(
        [*pre.nodes, *core.nodes, *post.nodes], "graphgen", inputs, [*ends.outputs, *core.outputs]
    )
    all_initializers: list[Initializer] = [
        *initializers,
        *ends.defaults,
        numpy_helper.from_array(np.array([False]), TRUNCATE),  # the default: no truncation
        *pre.constants,
        *post.constants,
        *tables,
    ]
    props = metadata(spec, TEXT_LEVEL, quantization, search, float16, int4_block)
    props[Key.TOKENIZER] = tokenizer
    props[Key.SESSION_CONFIG] = json.dumps(TEXT_ON_CPU)
    if not strings:
        props[Key.STRINGS] = "none"
    if tokenizer == EXTENSIONS:
        props[Key.CUSTOM_OP_DOMAINS] = json.dumps([MS_DOMAIN, EXTENSIONS_DOMAIN])
        props[Key.MIN_EXTENSIONS] = MIN_EXTENSIONS
    tags = listed_tags(vocabulary.target_tags)
    if tags:
        props[Key.TARGET_TAGS] = json.dumps(tags, ensure_ascii=False)
    if coded is not None:
        source, target = _language_defaults(spec, coded)
        props[Key.LANGUAGES] = json.dumps(sorted(coded.languages))
        props[Key.SOURCE_LANGUAGE] = source
        props[Key.TARGET_LANGUAGE] = target
    domains = [(ML_DOMAIN, ML_OPSET)] if tokenizer == PORTABLE else [(EXTENSIONS_DOMAIN, 1), (ML_DOMAIN, ML_OPSET)]
    model = make_model(graph, props, domains=domains)
    add_initializers(model.graph, all_initializers, streamed)
    attach_weights(model, core.subgraph_weights, streamed)
    return model


def standalone_subgraph(spec: ModelSpec, part: tuple[GraphProto, GraphBuilder]) -> ModelProto:
    """A subgraph as a model of its own (all weights inside, outer values as inputs), for tests."""
    graph, builder = part
    standalone = GraphProto()
    standalone.CopyFrom(graph)
    for name, array in WeightValues(spec, [builder]).items():
        standalone.initializer.append(numpy_helper.from_array(array, name))
    for name in sorted(builder.outer_used):
        standalone.input.append(helper.make_tensor_value_info(name, INT32, [1]))
    return make_model(standalone, {})


__all__ = ["build_id_model", "build_text_model", "standalone_subgraph"]
