"""The portable tokenizer: UTF-8 bytes in, the HF tokenizer's ids out, in standard ONNX ops only.

No custom-op library is needed to run it (domains ``ai.onnx`` and ``ai.onnx.ml``), so a text file
built with it translates from onnxruntime-node, onnxruntime-web, Android's stock AAR and every
other binding. What each family's HF tokenizer does is first read into a :class:`PortableSpec`
(``spec_for_marian``, ``spec_for_language``); ``add_portable_tokenizer`` builds the graph from the
spec alone, out of the blocks in ``custom_ops``:

1. ``utf8``: bytes → code points (``bytes.decode("utf-8", errors="replace")``; the zero bytes that
   end a row are padding);
2. the added tokens typed in the text (``</s>``, ``<unk>``, language codes, ``<mask>``, sentinels)
   and Marian's leading ``>>xx<<`` split off, as HF's added-token split and
   ``MarianTokenizer.remove_language_code`` do (``custom_ops.added_tokens``); the tokens that
   ``tokenizers`` looks for in the normalized text (``normalized=True``) after step 3;
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphgen._errors import UnsupportedModelError
from graphgen.custom_ops import GraphBuilder, ragged_to_padded
from graphgen.custom_ops.added_tokens import AddedToken, Occurrences, find_added_tokens
from graphgen.custom_ops.builder import INT64, i64
from graphgen.custom_ops.flat import (
    Segments,
    compact,
    first_index,
    from_flags,
    from_splits,
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
from graphgen.custom_ops.pretokenize import (
    metaspace,
    sentencepiece_spaces,
    strip_trailing_whitespace,
    whitespace_split,
)
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
    added_tokens: tuple[AddedToken, ...]  # typed in the text, split off first (language codes, </s>, ...)
    lead_tokens: dict[str, int] | None  # Marian: ">>xx<<" at the start of a chunk; None: no such rule
    eos_id: int
    pad_id: int
    strip_right: bool = False
    collapse: bool = False  # runs of spaces become one space (Replace(" {2,}", " "), metaspace)
    runs_to_metaspace: bool = False  # runs of spaces become one "▁" (Replace(" {2,}", "▁"), whitespace_split)
    # added tokens the tokenizer finds in the normalized text (``tokenizers``' ``normalized=True``)
    normalized_tokens: tuple[AddedToken, ...] = ()
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
    added_tokens: Sequence[AddedToken],
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
        added_tokens=tuple(added_tokens),
        lead_tokens=leads,
        eos_id=eos_id,
        pad_id=pad_id,
    )


@dataclass(frozen=True)
class PipelineShape:
    """What a ``tokenizers`` pipeline converted from a SentencePiece model does around the model, as
    the tokenizer graphs build it. transformers' converters write SentencePiece's normaliser
    (``Precompiled``), then optionally ``Strip`` (right only), then optionally ``Replace(' {2,}', ...)``;
    then either ``Metaspace`` alone (mBART-50, NLLB, M2M100's unigram converter) or ``WhitespaceSplit``
    + ``Metaspace`` (T5; MBartTokenizer, after a collapse into ``▁``). :meth:`of` is the one place
    that reads those steps: both tokenizer graphs take their options from it, and each refuses the
    shapes it cannot build."""

    charsmap: bytes  # the Precompiled step's normalisation table
    word_split: bool  # WhitespaceSplit before Metaspace (drops whitespace) rather than Metaspace alone
    strip_right: bool  # a Strip(right) step: trailing whitespace removed before the model sees it
    # a Replace(' {2,}', ...) step: runs of spaces become one " " (Metaspace alone) or one "▁"
    # (before a WhitespaceSplit, MBartTokenizer)
    collapse: bool

    @classmethod
    def of(cls, pipeline: dict[str, Any], name: str) -> PipelineShape:
        """Read ``pipeline`` (the ``tokenizers`` JSON); any other shape is refused, naming its steps."""
        normalizer = pipeline.get("normalizer") or {}
        steps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer]
        pre = pipeline.get("pre_tokenizer") or {}
        pre_steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
        kinds = [s.get("type") for s in steps]
        pre_kinds = [s.get("type") for s in pre_steps]
        meta = pre_steps[-1] if pre_steps else {}
        word_split = pre_kinds == ["WhitespaceSplit", "Metaspace"]
        collapsed_into = METASPACE if word_split else " "
        ok = (
            kinds[:1] == ["Precompiled"]
            and kinds[1:] in ([], ["Replace"], ["Strip", "Replace"], ["Strip"])
            and (pre_kinds == ["Metaspace"] or word_split)
            and meta.get("replacement") == METASPACE
            and meta.get("prepend_scheme") == "always"
            and meta.get("split", True)
            and all(s.get("strip_right") and not s.get("strip_left") for s in steps if s.get("type") == "Strip")
            and all(
                s.get("pattern", {}).get("Regex") == " {2,}" and s.get("content") == collapsed_into
                for s in steps
                if s.get("type") == "Replace"
            )
        )
        if not ok:
            raise UnsupportedModelError(
                f"{name} runs normalizer={kinds}, pre_tokenizer={pre_kinds}; graphgen's tokenizer graphs "
                "reproduce Precompiled [+ Strip(right)] [+ Replace(' {2,}', ' ')] with Metaspace, and "
                "Precompiled [+ Strip(right)] [+ Replace(' {2,}', '▁')] with WhitespaceSplit + Metaspace"
            )
        return cls(
            charsmap=base64.b64decode(steps[0].get("precompiled_charsmap") or ""),
            word_split=word_split,
            strip_right="Strip" in kinds,
            collapse="Replace" in kinds,
        )

    def describe(self) -> str:
        """The steps, as the refusals name them."""
        steps = ["Precompiled"] + ["Strip(right)"] * self.strip_right
        steps += [f"Replace(' {{2,}}', '{METASPACE if self.word_split else ' '}')"] * self.collapse
        return " + ".join(steps) + (" with WhitespaceSplit + Metaspace" if self.word_split else " with Metaspace")


def spec_for_tokenizers(
    pipeline: dict[str, Any],
    added_tokens: Sequence[AddedToken],
    normalized_tokens: Sequence[AddedToken],
    eos_id: int,
    pad_id: int,
    name: str,
) -> PortableSpec:
    """NLLB, mBART-50, T5: the ``tokenizers`` pipeline that transformers 5 builds (its JSON).
    ``added_tokens`` are found in the text as typed, ``normalized_tokens`` after normalization."""
    shape = PipelineShape.of(pipeline, name)
    if shape.word_split and shape.collapse and normalized_tokens:
        raise UnsupportedModelError(
            f"{name} has added tokens matched after normalization and collapses runs of spaces into '▁' "
            "before a WhitespaceSplit; the portable tokenizer does not reproduce the two together"
        )
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
        charsmap=shape.charsmap,
        normalization="grapheme",
        spaces="whitespace_split" if shape.word_split else "metaspace",
        model=model,
        to_model_ids=None,
        unknown_runs=unknown_runs,
        unk_id=unk,
        added_tokens=tuple(added_tokens),
        normalized_tokens=tuple(normalized_tokens),
        lead_tokens=None,
        eos_id=eos_id,
        pad_id=pad_id,
        strip_right=shape.strip_right,
        collapse=shape.collapse and not shape.word_split,
        runs_to_metaspace=shape.collapse and shape.word_split,
    )


# --- the graph ---------------------------------------------------------------------------------


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


def _split_at(b: GraphBuilder, found: Occurrences, segments: Segments) -> Segments:
    """``segments`` cut where each occurrence of an added token begins and where the text after it
    begins: an occurrence is a piece of its own."""
    after = b.op("And", [b.op("Not", [found.covered]), neighbour(b, found.covered, segments, -1, np.bool_(False))])
    return from_flags(b, b.op("Or", [starts(b, segments), b.op("Or", [found.begins, after])]))


def _split_normalized(
    b: GraphBuilder, spec: PortableSpec, codes: str, chunks: Segments
) -> tuple[str, Segments, str, str]:
    """``tokenizers`` looks for its ``normalized`` added tokens in each chunk's normalized text (after
    its right strip, if the pipeline has one) and splits the chunk there. Returns the text's code
    points, its sub-chunks (one per text between the tokens and one, emptied, per token), and per
    sub-chunk its chunk and its token's id (-1 for text)."""
    if spec.strip_right:
        codes, chunks = strip_trailing_whitespace(b, codes, chunks)
    found = find_added_tokens(b, codes, chunks, spec.normalized_tokens, "normalized_tokens")
    subs = _split_at(b, found, chunks)
    first = b.op("Slice", [subs.splits, b.const(i64(0)), b.const(i64(-1))])
    parent = b.op("Gather", [chunks.seg, first])
    token = b.op("Gather", [found.ids, first])
    subs, (codes,) = compact(b, subs, b.op("Not", [found.covered]), [codes])
    return codes, subs, parent, token


def _segment(b: GraphBuilder, spec: PortableSpec, codes: str, chunks: Segments) -> tuple[str, str]:
    """Normalize, apply the whitespace rules and segment. Returns the ids in order (as the encoder
    reads them) and, per id, its chunk."""
    charsmap = Charsmap.from_blob(spec.charsmap)
    if spec.normalization == "longest":
        unit_starts, value = longest_units(b, charsmap, codes, chunks)
    else:
        unit_starts, value = grapheme_units(b, charsmap, codes, chunks)
    codes, chunks, unit = apply_units(b, charsmap, codes, chunks, unit_starts, value)
    split = None
    if spec.normalized_tokens:
        if spec.spaces == "sentencepiece":
            raise ValueError("SentencePiece's own pipeline has no normalized added tokens")
        codes, chunks, parent, sub_token = _split_normalized(b, spec, codes, chunks)
        split = parent, sub_token
    if spec.spaces == "sentencepiece":
        codes, chunks, word_starts = sentencepiece_spaces(b, codes, chunks, unit)
    elif spec.spaces == "metaspace":
        strip = spec.strip_right and split is None  # else stripped before the split
        codes, chunks, word_starts = metaspace(b, codes, chunks, strip_right=strip, collapse=spec.collapse)
    else:
        strip = spec.strip_right and split is None  # else stripped before the split
        codes, chunks, word_starts = whitespace_split(
            b, codes, chunks, strip_right=strip, runs_to_metaspace=spec.runs_to_metaspace
        )
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
    if split is not None:  # the normalized tokens between their sub-chunks' pieces
        parent, sub_token = split
        ids, per_sub = _interleave(b, sub_token, chunk_of, ids)
        sub_of = from_splits(b, splits_from_counts(b, per_sub), b.op("Shape", [ids])).seg
        chunk_of = b.op("Gather", [parent, sub_of])
    return ids, chunk_of


def _interleave(b: GraphBuilder, leads: str, item_group: str, items: str) -> tuple[str, str]:
    """Groups in order, each with its lead id first (where it is ≥ 0), then its items in order.
    ``leads`` int64 ``[G]``; ``item_group`` int64 ``[N]`` (non-decreasing) and ``items`` int64 ``[N]``.
    Returns the ids (int64 ``[M]``) and how many each group has (int64 ``[G]``)."""
    extra = b.op("Cast", [b.op("GreaterOrEqual", [leads, b.const(np.int64(0))])], to=INT64)
    ones = b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [item_group])])
    pieces = b.op("ScatterElements", [b.op("Mul", [leads, b.const(np.int64(0))]), item_group, ones], reduction="add")
    total = b.add(pieces, extra)
    offset = b.op("Sub", [b.op("CumSum", [total, b.const(np.int64(0))]), total])
    rank = b.op(
        "Sub",
        [
            positions(b, item_group),
            last_where(b, b.op("Not", [b.op("Equal", [shift(b, item_group, -1, np.int64(-1)), item_group])])),
        ],
    )
    at = b.add(b.add(b.op("Gather", [offset, item_group]), b.op("Gather", [extra, item_group])), rank)
    values = b.op("ScatterElements", [zeros(b, b.op("ReduceSum", [total], keepdims=1)), at, items])
    has = b.op("Greater", [extra, b.const(np.int64(0))])
    values = b.op(
        "ScatterElements", [values, b.op("Compress", [offset, has], axis=0), b.op("Compress", [leads, has], axis=0)]
    )
    return values, total


def add_portable_tokenizer(
    b: GraphBuilder,
    text_utf8: str,
    spec: PortableSpec,
    max_length: int | str,
    source_ids: str | None = None,
    source_last: bool = False,
) -> tuple[str, str, str]:
    """Append the encoding nodes for uint8 ``[batch, bytes]`` ``text_utf8``; returns int32
    ``input_ids`` and ``attention_mask`` and the int64 ``[1]`` batch size. ``source_ids`` (int64
    ``[batch]``) are language tokens put first, or with ``source_last`` after the ``</s>``
    (MBartTokenizer, NLLB's ``legacy_behaviour``)."""
    codes, rows = decode_utf8(b, text_utf8)
    batch = b.op("Shape", [text_utf8], start=0, end=1)
    # Chunks: each added token typed in the text is one, and so is each text between them.
    added = find_added_tokens(b, codes, rows, spec.added_tokens, "added_tokens")
    chunks = _split_at(b, added, rows)
    chunk_begin = b.op("Slice", [chunks.splits, b.const(i64(0)), b.const(i64(-1))])
    chunk_row = b.op("Gather", [rows.seg, chunk_begin])
    first_id = b.op("Gather", [added.ids, chunk_begin])  # -1 for text chunks
    text = b.op("Not", [added.covered])
    if spec.lead_tokens is not None:  # a text chunk's lead token: never in an added token's chunk
        in_lead, lead_ids = _lead_tokens(b, codes, chunks, text, spec.lead_tokens, spec.unk_id)
        text = b.op("And", [text, b.op("Not", [in_lead])])
        first_id = b.op("Max", [first_id, lead_ids])
    text_chunks, (text_codes,) = compact(b, chunks, text, [codes])
    ids, token_chunk = _segment(b, spec, text_codes, text_chunks)
    # Per chunk: its added or lead token first, then its pieces; chunks in order, rows in order.
    values, total = _interleave(b, first_id, token_chunk, ids)
    per_row = b.op("ScatterElements", [zeros(b, batch), chunk_row, total], reduction="add")
    row_splits = splits_from_counts(b, per_row)
    has_source = first = last = None
    if source_ids is not None and source_last:
        last = source_ids
    elif source_ids is not None:
        first = source_ids
        has_source = b.op("Expand", [b.const(np.bool_(True)), batch])
    ids, mask = ragged_to_padded(
        b,
        values,
        row_splits,
        prefix=first,
        has_prefix=has_source,
        suffix_id=spec.eos_id,
        last=last,
        pad_id=spec.pad_id,
        max_length=max_length,
    )
    return ids, mask, batch


__all__ = [
    "AddedToken",
    "PipelineShape",
    "PortableSpec",
    "add_portable_tokenizer",
    "spec_for_sentencepiece",
    "spec_for_tokenizers",
]
