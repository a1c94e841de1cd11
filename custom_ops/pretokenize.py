"""Whitespace rules between normalization and segmentation, in standard ONNX ops.

Each function takes normalized code points with their segments (one per text chunk) and returns the
text the model segments, with ``▁`` (U+2581) for the spaces, its segments, and where each word
starts (a ``▁``, or a segment's first code point):

* ``sentencepiece_spaces``: SentencePiece's own rules (``remove_extra_whitespaces``,
  ``add_dummy_prefix``, ``escape_whitespaces``), which look at the normalizer's units;
* ``metaspace``: HF's ``[Strip(right)] → Replace(" {2,}", " ") → Metaspace(prepend always, split)``;
* ``whitespace_split``: HF's ``[Strip(right) → Replace(" {2,}", "▁")] → WhitespaceSplit →
  Metaspace(prepend always, split)`` (T5 without the brackets, MBartTokenizer with them).
"""

from __future__ import annotations

import numpy as np

from .builder import INT64, ML_DOMAIN, GraphBuilder, i64
from .flat import (
    Segments,
    compact,
    counts,
    from_splits,
    insert_before,
    last_where,
    neighbour,
    segment_end,
    shift,
    size,
    splits_from_counts,
    starts,
    sum_per_segment,
)
from .unicode_data import WHITE_SPACE

SPACE = 0x20
METASPACE = 0x2581
Result = tuple[str, Segments, str]  # code points, their segments, word starts


def _is(b: GraphBuilder, codes: str, value: int) -> str:
    return b.op("Equal", [codes, b.const(np.int64(value))])


def _trailing(b: GraphBuilder, flags: str, segments: Segments) -> str:
    """bool ``[T]``: whether every element from here to the end of its segment has ``flags``."""
    other = b.op("Cast", [b.op("Not", [flags])], to=INT64)
    after = b.op("CumSum", [other, b.const(np.int64(0))], reverse=1)  # this one and all later ones
    beyond = b.op("Gather", [b.op("Concat", [after, b.const(i64(0))], axis=0), segment_end(b, segments)])
    return b.op("Equal", [after, beyond])


def _grown(b: GraphBuilder, segments: Segments, inserted: str, codes: str) -> Segments:
    """The segments after ``insert_before`` added an element before each flagged one (``inserted``)."""
    grown = b.add(counts(b, segments), sum_per_segment(b, segments, b.op("Cast", [inserted], to=INT64)))
    return from_splits(b, splits_from_counts(b, grown), size(b, codes))


def _word_starts(b: GraphBuilder, codes: str, segments: Segments) -> str:
    return b.op("Or", [starts(b, segments), _is(b, codes, METASPACE)])


def _prepend_metaspace(b: GraphBuilder, codes: str, segments: Segments, where: str) -> tuple[str, Segments, str, str]:
    """A ``▁`` before each code point where ``where`` is set: (codes, segments, source, inserted)."""
    codes, source, inserted = insert_before(b, codes, where, np.int64(METASPACE))
    return codes, _grown(b, segments, where, codes), source, inserted


def sentencepiece_spaces(b: GraphBuilder, codes: str, segments: Segments, unit: str) -> Result:
    """SentencePiece's whitespace rules on normalized text whose code points came from the normalizer's
    units ``unit`` (int64 ``[T]``, the unit of each).

    SentencePiece appends each unit's output, dropping its leading spaces while the text so far
    ends in a space (or is empty), then escapes the spaces, puts one ``▁`` first and removes every
    trailing ``▁``. Spaces inside a unit's output are kept as they are.
    """
    space = _is(b, codes, SPACE)
    first_of_unit = b.op(
        "Or", [starts(b, segments), b.op("Not", [b.op("Equal", [shift(b, unit, -1, np.int64(-1)), unit])])]
    )
    unit_begin = last_where(b, first_of_unit)
    other = b.op("Cast", [b.op("Not", [space])], to=INT64)
    seen = b.op("CumSum", [other, b.const(np.int64(0))])
    before_unit = b.op("Sub", [b.op("Gather", [seen, unit_begin]), b.op("Gather", [other, unit_begin])])
    leading = b.op("Equal", [seen, before_unit])  # nothing but spaces so far in this unit's output
    after_space = neighbour(b, space, segments, -1, np.bool_(True))  # a segment's start counts as one
    drop = b.op("And", [space, b.op("And", [leading, b.op("Gather", [after_space, unit_begin])])])
    segments, (codes,) = compact(b, segments, b.op("Not", [drop]), [codes])
    codes, segments, _, _ = _prepend_metaspace(b, codes, segments, starts(b, segments))
    codes = b.op("Where", [space_or_metaspace(b, codes), b.const(np.int64(METASPACE)), codes])
    segments, (codes,) = compact(b, segments, b.op("Not", [_trailing(b, _is(b, codes, METASPACE), segments)]), [codes])
    return codes, segments, _word_starts(b, codes, segments)


def space_or_metaspace(b: GraphBuilder, codes: str) -> str:
    return b.op("Or", [_is(b, codes, SPACE), _is(b, codes, METASPACE)])


def metaspace(b: GraphBuilder, codes: str, segments: Segments, *, strip_right: bool, collapse: bool) -> Result:
    """HF's Metaspace pipeline: [trailing whitespace dropped], runs of spaces collapsed, spaces as
    ``▁``, one ``▁`` put first unless the text starts with one, a word at each ``▁``."""
    keep = b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])])
    if strip_right:
        keep = b.op("And", [keep, b.op("Not", [_trailing(b, is_white_space(b, codes), segments)])])
    if collapse:
        space = _is(b, codes, SPACE)
        keep = b.op(
            "And", [keep, b.op("Not", [b.op("And", [space, neighbour(b, space, segments, -1, np.bool_(False))])])]
        )
    if strip_right or collapse:
        segments, (codes,) = compact(b, segments, keep, [codes])
    codes = b.op("Where", [_is(b, codes, SPACE), b.const(np.int64(METASPACE)), codes])
    prepend = b.op("And", [starts(b, segments), b.op("Not", [_is(b, codes, METASPACE)])])
    codes, segments, _, _ = _prepend_metaspace(b, codes, segments, prepend)
    return codes, segments, _word_starts(b, codes, segments)


def strip_trailing_whitespace(b: GraphBuilder, codes: str, segments: Segments) -> tuple[str, Segments]:
    """HF's ``Strip(right)``: each segment without its trailing whitespace (Unicode White_Space)."""
    keep = b.op("Not", [_trailing(b, is_white_space(b, codes), segments)])
    segments, (codes,) = compact(b, segments, keep, [codes])
    return codes, segments


def is_white_space(b: GraphBuilder, codes: str) -> str:
    """bool: Unicode White_Space (Rust's ``char::is_whitespace``)."""
    found = b.op(
        "LabelEncoder",
        [codes],
        domain=ML_DOMAIN,
        keys_int64s=list(WHITE_SPACE),
        values_int64s=[1] * len(WHITE_SPACE),
        default_int64=0,
    )
    return b.op("Equal", [found, b.const(np.int64(1))])


def whitespace_split(
    b: GraphBuilder, codes: str, segments: Segments, *, strip_right: bool = False, runs_to_metaspace: bool = False
) -> Result:
    """HF's ``WhitespaceSplit`` then ``Metaspace`` (T5): words are the runs without whitespace, each
    gets a ``▁`` first unless it has one, and a ``▁`` inside a word starts another.

    MBartTokenizer's normalizer comes first: ``strip_right`` drops trailing whitespace, and
    ``runs_to_metaspace`` replaces each run of two or more spaces (U+0020) by one ``▁``, as its
    ``Replace`` step does (a ``▁``, which the split does not treat as whitespace). With the nmt_nfkc
    normalization its checkpoints use, which maps a typed ``▁`` to a space, the pieces come out as
    without the step; with one that keeps a typed ``▁`` (SentencePiece's ``nfkc``) they do not
    (``"a  ▁b"``): tests/test_pipeline_shape.py checks both against ``tokenizers``."""
    if strip_right or runs_to_metaspace:
        keep = b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])])
        if strip_right:
            keep = b.op("And", [keep, b.op("Not", [_trailing(b, is_white_space(b, codes), segments)])])
        if runs_to_metaspace:
            space = _is(b, codes, SPACE)
            after_space = b.op("And", [space, neighbour(b, space, segments, -1, np.bool_(False))])
            before_space = b.op("And", [space, neighbour(b, space, segments, 1, np.bool_(False))])
            run_start = b.op("And", [before_space, b.op("Not", [after_space])])
            codes = b.op("Where", [run_start, b.const(np.int64(METASPACE)), codes])
            keep = b.op("And", [keep, b.op("Not", [after_space])])
        segments, (codes,) = compact(b, segments, keep, [codes])
    white = is_white_space(b, codes)
    word_start = b.op("And", [b.op("Not", [white]), neighbour(b, white, segments, -1, np.bool_(True))])
    segments, (codes, word_start) = compact(b, segments, b.op("Not", [white]), [codes, word_start])
    prepend = b.op("And", [word_start, b.op("Not", [_is(b, codes, METASPACE)])])
    codes, segments, source, inserted = _prepend_metaspace(b, codes, segments, prepend)
    # A word starts at each inserted ▁, and at each old start that got none (it starts with ▁).
    old_start = b.op("And", [b.op("Gather", [word_start, source]), b.op("Not", [b.op("Gather", [prepend, source])])])
    return codes, segments, b.op("Or", [b.op("Or", [inserted, old_start]), _word_starts(b, codes, segments)])


__all__ = [
    "METASPACE",
    "SPACE",
    "is_white_space",
    "metaspace",
    "sentencepiece_spaces",
    "strip_trailing_whitespace",
    "whitespace_split",
]
