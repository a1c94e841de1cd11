"""The portable tokenizer: UTF-8 bytes in, the HF tokenizer's ids out, in standard ONNX ops only.

No custom-op library is needed to run it (domains ``ai.onnx`` and ``ai.onnx.ml``), so a text file
built with it translates from onnxruntime-node, onnxruntime-web, Android's stock AAR and every
other binding. What each family's HF tokenizer does is first read into a :class:`PortableSpec`
(``spec_for_marian``, ``spec_for_language``); ``add_portable_tokenizer`` builds the graph from the
spec alone, out of the blocks in ``custom_ops``:

1. ``utf8``: bytes → code points (``bytes.decode("utf-8", errors="replace")``, U+0000 dropped);
2. the special tokens typed in the text (``</s>``, ``<unk>``, ...) and Marian's leading ``>>xx<<``
   split off, as HF's added-token split and ``MarianTokenizer.remove_language_code`` do;
3. ``normalize``: the SentencePiece model's own ``precompiled_charsmap``, read as SentencePiece
   does (longest match: Marian, M2M100) or as HF ``tokenizers`` does (grapheme clusters: NLLB,
   mBART-50, T5);
4. ``pretokenize``: the whitespace rules (SentencePiece's, HF's Metaspace, or T5's WhitespaceSplit);
5. ``segment``: unigram Viterbi or BPE merges, unknown characters fused into one piece;
6. the family's ids: SentencePiece ids through ``vocab.json`` (Marian, M2M100; an unknown run's
   text is looked up too, as those tokenizers look up every piece's text), language and EOS tokens,
   truncation and the attention mask as the extensions-based graph has them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphgen._errors import UnsupportedModelError
from graphgen.custom_ops import GraphBuilder, ragged_to_padded
from graphgen.custom_ops.builder import INT64, i64
from graphgen.custom_ops.flat import (
    Segments,
    compact,
    first_index,
    from_flags,
    last_where,
    neighbour,
    next_where,
    positions,
    segment_end,
    shift,
    splits_from_counts,
    starts,
    sum_per_segment,
    zeros,
)
from graphgen.custom_ops.normalize import Charsmap, apply_units, grapheme_units, longest_units
from graphgen.custom_ops.pretokenize import metaspace, sentencepiece_spaces, whitespace_split
from graphgen.custom_ops.segment import Merges, Tokens, bpe, fuse_unknown, unigram
from graphgen.custom_ops.trie import CodepointTrie, lookup
from graphgen.custom_ops.utf8 import decode_utf8
from graphgen.text.sentencepiece import parse_model

METASPACE = "\u2581"


@dataclass(frozen=True)
class UnigramModel:
    pieces: dict[str, int]  # piece → id (the ids the model's scores are indexed by)
    scores: np.ndarray  # float32 (SentencePiece) or float64 (tokenizers), per id
    unk_id: int
    unk_score: float
    per_word: bool  # tokenizers runs the Viterbi per pre-tokenized word, SentencePiece per chunk


@dataclass(frozen=True)
class BpeModel:
    characters: dict[str, int]  # one-character pieces → id
    merges: dict[tuple[int, int], tuple[int, int]]  # (left, right) → (rank, merged id)
    vocab_size: int
    unk_id: int
    fuse_per_chunk: bool  # SentencePiece fuses unknown runs over the chunk, tokenizers per word


@dataclass(frozen=True)
class PortableSpec:
    """What one HF tokenizer does, as data the graph builder reads."""

    charsmap: bytes  # the SentencePiece model's precompiled_charsmap
    normalization: str  # "longest" (SentencePiece) or "grapheme" (tokenizers' Precompiled)
    spaces: str  # "sentencepiece", "metaspace" or "whitespace_split"
    model: UnigramModel | BpeModel
    to_model_ids: np.ndarray | None  # model piece id → the id the encoder reads; None: the same
    unknown_runs: dict[str, int]  # the text of a run of unknown pieces → id, where the tokenizer has one
    unk_id: int  # the encoder's unknown id
    split_tokens: dict[str, int]  # special tokens typed in the text, split off first
    lead_tokens: dict[str, int] | None  # Marian: ">>xx<<" at the start of a chunk; None: no such rule
    eos_id: int
    pad_id: int
    strip_right: bool = False
    collapse: bool = False
    notes: list[str] = field(default_factory=list)


def _codes(text: str) -> list[int]:
    return [ord(c) for c in text]


def _unknown_runs(vocab: dict[str, int], single: set[str]) -> dict[str, int]:
    """The vocabulary entries a run of unknown characters can equal: every character lacks a
    one-character piece (a character with one is never unknown)."""
    return {text: index for text, index in vocab.items() if text and not any(c in single for c in text)}


def _spm_proto(model: bytes) -> Any:
    proto = parse_model(model)
    return proto


def _check_sentencepiece(proto: Any, name: str) -> None:
    spec = proto.normalizer_spec
    trainer = proto.trainer_spec
    problems = []
    if trainer.byte_fallback:
        problems.append("byte fallback")
    if trainer.treat_whitespace_as_suffix:
        problems.append("whitespace as suffix")
    if not (spec.add_dummy_prefix and spec.remove_extra_whitespaces and spec.escape_whitespaces):
        problems.append("whitespace options other than SentencePiece's defaults")
    kinds = proto.SentencePiece
    if any(piece.type == kinds.USER_DEFINED for piece in proto.pieces):
        problems.append("user-defined pieces")
    if trainer.model_type not in (trainer.UNIGRAM, trainer.BPE):
        problems.append("a model type other than unigram and BPE")
    if problems:
        raise UnsupportedModelError(
            f"{name} has {', '.join(problems)}, which the portable tokenizer does not reproduce"
        )


def _spm_model(proto: Any, name: str) -> tuple[UnigramModel | BpeModel, dict[str, int], int]:
    """The SentencePiece model's pieces as graphgen's model: (model, piece → spm id, spm unk id)."""
    kinds = proto.SentencePiece
    normal = {piece.piece: index for index, piece in enumerate(proto.pieces) if piece.type == kinds.NORMAL}
    unk = next(index for index, piece in enumerate(proto.pieces) if piece.type == kinds.UNKNOWN)
    scores = np.array([piece.score for piece in proto.pieces], dtype=np.float32)
    if proto.trainer_spec.model_type == proto.trainer_spec.UNIGRAM:
        lowest = np.float32(min(scores[i] for i in normal.values()))
        return UnigramModel(normal, scores, unk, float(lowest - np.float32(10.0)), per_word=False), normal, unk
    if METASPACE not in normal:
        raise UnsupportedModelError(f"{name} is a BPE model without a '▁' piece")
    order = {score: rank for rank, score in enumerate(sorted({scores[i] for i in normal.values()}, reverse=True))}
    merges: dict[tuple[int, int], tuple[int, int]] = {}
    for piece, index in normal.items():
        for cut in range(1, len(piece)):
            left, right = normal.get(piece[:cut]), normal.get(piece[cut:])
            if left is not None and right is not None:
                merges[(left, right)] = (order[scores[index]], index)
    characters = {piece: index for piece, index in normal.items() if len(piece) == 1}
    if any(c not in characters for piece in normal for c in piece):
        raise UnsupportedModelError(f"{name} has BPE pieces with characters that are no piece of their own")
    model = BpeModel(characters, merges, len(proto.pieces), unk, fuse_per_chunk=True)
    return model, normal, unk


def spec_for_sentencepiece(
    spm: bytes,
    vocab: dict[str, int],
    unk_id: int,
    eos_id: int,
    pad_id: int,
    split_tokens: dict[str, int],
    *,
    marian: bool,
    name: str,
) -> PortableSpec:
    """Marian and M2M100: SentencePiece itself, each piece's text looked up in ``vocab``."""
    proto = _spm_proto(spm)
    _check_sentencepiece(proto, name)
    model, normal, _ = _spm_model(proto, name)
    to_model = np.full(len(proto.pieces), unk_id, dtype=np.int64)
    for piece, index in normal.items():
        to_model[index] = vocab.get(piece, unk_id)
    single = {piece for piece in normal if len(piece) == 1}
    leads = None
    if marian:
        leads = {t: i for t, i in vocab.items() if t.startswith(">>") and t.find("<<") == len(t) - 2 and len(t) >= 4}
    return PortableSpec(
        charsmap=bytes(proto.normalizer_spec.precompiled_charsmap),
        normalization="longest",
        spaces="sentencepiece",
        model=model,
        to_model_ids=to_model,
        unknown_runs=_unknown_runs(vocab, single),
        unk_id=unk_id,
        split_tokens=split_tokens,
        lead_tokens=leads,
        eos_id=eos_id,
        pad_id=pad_id,
    )


@dataclass(frozen=True)
class PipelineSteps:
    """A ``tokenizers`` pipeline's normalizer and pre-tokenizer steps (from its JSON)."""

    steps: list[dict[str, Any]]
    kinds: list[str | None]
    pre_steps: list[dict[str, Any]]
    pre_kinds: list[str | None]

    @classmethod
    def of(cls, pipeline: dict[str, Any]) -> PipelineSteps:
        normalizer = pipeline.get("normalizer") or {}
        steps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer]
        pre = pipeline.get("pre_tokenizer") or {}
        pre_steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
        return cls(steps, [s.get("type") for s in steps], pre_steps, [s.get("type") for s in pre_steps])


def spec_for_tokenizers(
    pipeline: dict[str, Any], split_tokens: dict[str, int], eos_id: int, pad_id: int, name: str
) -> PortableSpec:
    """NLLB, mBART-50, T5: the ``tokenizers`` pipeline that transformers 5 builds (its JSON)."""
    parts = PipelineSteps.of(pipeline)
    steps, kinds, pre_steps, pre_kinds = parts.steps, parts.kinds, parts.pre_steps, parts.pre_kinds
    meta = pre_steps[-1] if pre_steps else {}
    ok = (
        kinds
        and kinds[0] == "Precompiled"
        and pre_kinds in (["Metaspace"], ["WhitespaceSplit", "Metaspace"])
        and meta.get("replacement") == METASPACE
        and meta.get("prepend_scheme") == "always"
        and meta.get("split", True)
        and all(s.get("type") in ("Strip", "Replace") for s in steps[1:])
        and all(s.get("strip_right") and not s.get("strip_left") for s in steps if s.get("type") == "Strip")
        and all(
            s.get("pattern", {}).get("Regex") == " {2,}" and s.get("content") == " "
            for s in steps
            if s.get("type") == "Replace"
        )
    )
    if not ok:
        raise UnsupportedModelError(
            f"{name} runs normalizer={kinds}, pre_tokenizer={pre_kinds}; the portable tokenizer reproduces "
            "Precompiled [+ Strip(right)] [+ Replace(' {2,}')] with Metaspace, and Precompiled with "
            "WhitespaceSplit + Metaspace"
        )
    charsmap = base64.b64decode(steps[0].get("precompiled_charsmap") or "")
    spec = pipeline["model"]
    vocab: dict[str, int]
    model: UnigramModel | BpeModel
    if spec.get("type") == "Unigram" and not spec.get("byte_fallback"):
        entries = spec["vocab"]
        vocab = {piece: index for index, (piece, _) in enumerate(entries)}
        scores = np.array([score for _, score in entries], dtype=np.float64)
        unk = int(spec["unk_id"])
        model = UnigramModel(vocab, scores, unk, float(scores.min() - 10.0), per_word=True)
        unknown_runs = _unknown_runs(vocab, {piece for piece in vocab if len(piece) == 1})
    elif (
        spec.get("type") == "BPE"
        and spec.get("fuse_unk")
        and not spec.get("byte_fallback")
        and not spec.get("ignore_merges")
        and not spec.get("continuing_subword_prefix")
        and not spec.get("end_of_word_suffix")
        and spec.get("dropout") in (None, 0.0)
    ):
        vocab = dict(spec["vocab"])
        unk = vocab[spec["unk_token"]]
        merges: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, pair in enumerate(spec["merges"]):
            left, right = pair if isinstance(pair, list) else pair.split(" ", 1)
            merges.setdefault((vocab[left], vocab[right]), (rank, vocab[left + right]))
        characters = {piece: index for piece, index in vocab.items() if len(piece) == 1}
        model = BpeModel(characters, merges, max(vocab.values()) + 1, unk, fuse_per_chunk=False)
        unknown_runs = {}  # tokenizers' BPE gives a fused unknown run the unknown id, whatever its text
    else:
        raise UnsupportedModelError(
            f"{name} has a {spec.get('type')} model with options the portable tokenizer does not reproduce"
        )
    return PortableSpec(
        charsmap=charsmap,
        normalization="grapheme",
        spaces="whitespace_split" if pre_kinds[0] == "WhitespaceSplit" else "metaspace",
        model=model,
        to_model_ids=None,
        unknown_runs=unknown_runs,
        unk_id=unk,
        split_tokens=split_tokens,
        lead_tokens=None,
        eos_id=eos_id,
        pad_id=pad_id,
        strip_right="Strip" in kinds,
        collapse="Replace" in kinds,
    )


# --- the graph ---------------------------------------------------------------------------------


def _matches(b: GraphBuilder, codes: str, rows: Segments, literal: str) -> str:
    """bool ``[T]``: whether ``literal`` starts at each code point (inside one row)."""
    found = b.op("Equal", [codes, b.const(np.int64(ord(literal[0])))])
    for k, char in enumerate(literal[1:], start=1):
        found = b.op(
            "And", [found, b.op("Equal", [neighbour(b, codes, rows, k, np.int64(-1)), b.const(np.int64(ord(char)))])]
        )
    return found


def _split_literals(b: GraphBuilder, codes: str, rows: Segments, tokens: dict[str, int]) -> tuple[str, str, str]:
    """Special tokens typed in the text: (bool ``[T]`` first code point of one, int64 ``[T]`` its id or
    -1, bool ``[T]`` inside one). HF splits them off with a leftmost-longest search; the literals
    never overlap (checked), so every occurrence is one."""
    for first in tokens:
        for second in tokens:
            if (first != second and first in second) or any(second.startswith(first[i:]) for i in range(1, len(first))):
                raise ValueError(f"special tokens {first!r} and {second!r} can overlap")
    begins = b.op("Expand", [b.const(np.array(False)), b.op("Shape", [codes])])
    ids = b.op("Expand", [b.const(np.int64(-1)), b.op("Shape", [codes])])
    inside = begins
    for literal, index in tokens.items():
        here = _matches(b, codes, rows, literal)
        begins = b.op("Or", [begins, here])
        ids = b.op("Where", [here, b.const(np.int64(index)), ids])
        for k in range(len(literal)):
            inside = b.op("Or", [inside, shift(b, here, -k, np.bool_(False))])
    return begins, ids, inside


def _lead_tokens(
    b: GraphBuilder, codes: str, chunks: Segments, text: str, leads: dict[str, int], unk_id: int
) -> tuple[str, str]:
    """Marian's ``remove_language_code``: a chunk that starts with ``>>`` and has a ``<<`` loses
    everything up to the first ``<<`` (included) as one token, looked up whole. Returns (bool ``[T]``
    part of a lead token, int64 ``[C]`` the chunk's lead id or -1)."""
    gt, lt = np.int64(ord(">")), np.int64(ord("<"))

    def pair(value: np.int64) -> str:
        here = b.op("Equal", [codes, b.const(value)])
        return b.op("And", [here, b.op("Equal", [neighbour(b, codes, chunks, 1, np.int64(-1)), b.const(value)])])

    opens = b.op("And", [pair(gt), b.op("And", [starts(b, chunks), text])])
    closes = pair(lt)
    close_at = next_where(b, closes)
    end = segment_end(b, chunks)
    has = b.op("And", [opens, b.op("Less", [b.add(close_at, b.const(np.int64(1))), end])])
    length = b.op("Sub", [b.add(close_at, b.const(np.int64(2))), positions(b, codes)])
    length = b.op("Where", [has, length, b.const(np.int64(0))])
    # per chunk: the lead's length (0 = none), spread to the chunk's code points
    chunk_length = sum_per_segment(b, chunks, length)
    within = b.op(
        "Less", [b.op("Sub", [positions(b, codes), first_index(b, chunks)]), b.op("Gather", [chunk_length, chunks.seg])]
    )
    trie = CodepointTrie.build((_codes(token), index) for token, index in leads.items())
    chunk_begin = b.op("Slice", [chunks.splits, b.const(i64(0)), b.const(i64(-1))])
    found = lookup(b, trie, codes, chunk_begin, chunk_length, "lead_tokens")
    found = b.op("Where", [b.op("Less", [found, b.const(np.int64(0))]), b.const(np.int64(unk_id)), found])
    return within, b.op("Where", [b.op("Greater", [chunk_length, b.const(np.int64(0))]), found, b.const(np.int64(-1))])


def _segment(b: GraphBuilder, spec: PortableSpec, codes: str, chunks: Segments) -> tuple[Tokens, str]:
    """Normalize, apply the whitespace rules and segment. Returns the tokens (their ids as the model
    gives them) and, per token, its chunk."""
    charsmap = Charsmap.from_blob(spec.charsmap)
    if spec.normalization == "longest":
        unit_starts, value = longest_units(b, charsmap, codes, chunks)
    else:
        unit_starts, value = grapheme_units(b, charsmap, codes, chunks)
    codes, chunks, unit = apply_units(b, charsmap, codes, chunks, unit_starts, value)
    if spec.spaces == "sentencepiece":
        codes, chunks, word_starts = sentencepiece_spaces(b, codes, chunks, unit)
    elif spec.spaces == "metaspace":
        codes, chunks, word_starts = metaspace(b, codes, chunks, strip_right=spec.strip_right, collapse=spec.collapse)
    else:
        codes, chunks, word_starts = whitespace_split(b, codes, chunks)
    words = from_flags(b, b.op("Or", [word_starts, starts(b, chunks)]))
    word_chunk = b.op("Gather", [chunks.seg, b.op("Slice", [words.splits, b.const(i64(0)), b.const(i64(-1))])])
    model = spec.model
    if isinstance(model, UnigramModel):
        trie = CodepointTrie.build((_codes(piece), index) for piece, index in model.pieces.items())
        sequences = words if model.per_word else chunks
        tokens = fuse_unknown(
            b, unigram(b, trie, model.scores, model.unk_id, model.unk_score, codes, sequences), model.unk_id
        )
        chunk_of = b.op("Gather", [word_chunk, tokens.seq]) if model.per_word else tokens.seq
    else:
        characters = CodepointTrie.build((_codes(piece), index) for piece, index in model.characters.items())
        tokens = bpe(b, characters, Merges(model.merges, model.vocab_size), model.unk_id, codes, words)
        chunk_of = b.op("Gather", [word_chunk, tokens.seq])
        if model.fuse_per_chunk:  # SentencePiece merges unknown pieces over the whole chunk
            tokens = fuse_unknown(b, Tokens(tokens.ids, chunk_of, tokens.begin, tokens.length), model.unk_id)
            chunk_of = tokens.seq
    ids = tokens.ids
    unknown = b.op("Equal", [ids, b.const(np.int64(model.unk_id))])
    if spec.to_model_ids is not None:
        table = spec.to_model_ids.astype(np.int32 if spec.to_model_ids.max(initial=0) < 2**31 else np.int64)
        ids = b.op("Cast", [b.op("Gather", [b.derived("piece_to_model_ids", table), ids])], to=INT64)
    if spec.unknown_runs:
        trie = CodepointTrie.build((_codes(text), index) for text, index in spec.unknown_runs.items())
        found = lookup(b, trie, codes, tokens.begin, tokens.length, "unknown_runs")
        found = b.op("Where", [b.op("Less", [found, b.const(np.int64(0))]), b.const(np.int64(spec.unk_id)), found])
        ids = b.op("Where", [unknown, found, ids])
    return Tokens(ids, tokens.seq, tokens.begin, tokens.length), chunk_of


def add_portable_tokenizer(
    b: GraphBuilder,
    text_utf8: str,
    spec: PortableSpec,
    max_length: int | str,
    source_ids: str | None = None,
) -> tuple[str, str, str]:
    """Append the encoding nodes for uint8 ``[batch, bytes]`` ``text_utf8``; returns int32
    ``input_ids`` and ``attention_mask`` and the int64 ``[1]`` batch size. ``source_ids`` (int64
    ``[batch]``) are language tokens put first."""
    codes, rows = decode_utf8(b, text_utf8)
    batch = b.op("Shape", [text_utf8], start=0, end=1)
    # Chunks: each special token typed in the text is one, and so is each text between them.
    special_begins, special_ids, in_special = _split_literals(b, codes, rows, spec.split_tokens)
    after_special = b.op("And", [b.op("Not", [in_special]), neighbour(b, in_special, rows, -1, np.bool_(False))])
    chunk_flags = b.op("Or", [starts(b, rows), b.op("Or", [special_begins, after_special])])
    chunks = from_flags(b, chunk_flags)
    chunk_begin = b.op("Slice", [chunks.splits, b.const(i64(0)), b.const(i64(-1))])
    chunk_row = b.op("Gather", [rows.seg, chunk_begin])
    chunk_special = b.op("Gather", [special_ids, chunk_begin])  # -1 for text chunks
    text = b.op("Not", [in_special])
    lead_ids = None
    if spec.lead_tokens is not None:
        in_lead, lead_ids = _lead_tokens(b, codes, chunks, text, spec.lead_tokens, spec.unk_id)
        text = b.op("And", [text, b.op("Not", [in_lead])])
    text_chunks, (text_codes,) = compact(b, chunks, text, [codes])
    tokens, token_chunk = _segment(b, spec, text_codes, text_chunks)
    # Per chunk: its special or lead token first, then its pieces; chunks in order, rows in order.
    extra = b.op("Cast", [b.op("GreaterOrEqual", [chunk_special, b.const(np.int64(0))])], to=INT64)
    first_id = chunk_special
    if lead_ids is not None:
        extra = b.add(extra, b.op("Cast", [b.op("GreaterOrEqual", [lead_ids, b.const(np.int64(0))])], to=INT64))
        first_id = b.op("Max", [chunk_special, lead_ids])
    pieces = b.op(
        "ScatterElements",
        [
            b.op("Mul", [chunk_begin, b.const(np.int64(0))]),
            token_chunk,
            b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [token_chunk])]),
        ],
        reduction="add",
    )
    total = b.add(pieces, extra)
    offset = b.op("Sub", [b.op("CumSum", [total, b.const(np.int64(0))]), total])
    token_rank = b.op(
        "Sub",
        [
            positions(b, token_chunk),
            last_where(b, b.op("Not", [b.op("Equal", [shift(b, token_chunk, -1, np.int64(-1)), token_chunk])])),
        ],
    )
    token_at = b.add(b.add(b.op("Gather", [offset, token_chunk]), b.op("Gather", [extra, token_chunk])), token_rank)
    all_count = b.op("ReduceSum", [total], keepdims=1)
    values = zeros(b, all_count)
    values = b.op("ScatterElements", [values, token_at, tokens.ids])
    has_extra = b.op("Greater", [extra, b.const(np.int64(0))])
    values = b.op(
        "ScatterElements",
        [values, b.op("Compress", [offset, has_extra], axis=0), b.op("Compress", [first_id, has_extra], axis=0)],
    )
    per_row = b.op("ScatterElements", [zeros(b, batch), chunk_row, total], reduction="add")
    row_splits = splits_from_counts(b, per_row)
    has_source = None
    if source_ids is not None:
        has_source = b.op("Expand", [b.const(np.bool_(True)), batch])
    ids, mask = ragged_to_padded(
        b,
        values,
        row_splits,
        prefix=source_ids,
        has_prefix=has_source,
        suffix_id=spec.eos_id,
        pad_id=spec.pad_id,
        max_length=max_length,
    )
    return ids, mask, batch


__all__ = ["PipelineSteps", "PortableSpec", "add_portable_tokenizer", "spec_for_sentencepiece", "spec_for_tokenizers"]
