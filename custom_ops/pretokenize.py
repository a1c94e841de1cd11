"""Whitespace rules between normalization and segmentation, in standard ONNX ops.

Each function takes normalized code points with their segments (one per text chunk) and returns the
text the model segments, with ``▁`` (U+2581) for the spaces, and where each word starts:

* ``sentencepiece_spaces``: SentencePiece's own rules (``remove_extra_whitespaces``,
  ``add_dummy_prefix``, ``escape_whitespaces``), which look at the normalizer's units;
* ``metaspace``: HF's ``[Strip(right)] → Replace(" {2,}", " ") → Metaspace(prepend always, split)``;
* ``whitespace_split``: HF's ``WhitespaceSplit → Metaspace(prepend always, split)`` (T5).
"""

from __future__ import annotations

import numpy as np

from .builder import INT64, ML_DOMAIN, GraphBuilder
from .flat import (
    Segments,
    compact,
    insert_before,
    last_where,
    neighbour,
    positions,
    same_segment,
    shift,
    starts,
)
from .unicode_data import WHITE_SPACE

SPACE = 0x20
METASPACE = 0x2581


def _is(b: GraphBuilder, codes: str, value: int) -> str:
    return b.op("Equal", [codes, b.const(np.int64(value))])


def _trailing(b: GraphBuilder, flags: str, segments: Segments) -> str:
    """bool ``[T]``: whether every element from here to the end of the segment has ``flags``."""
    other = b.op("Cast", [b.op("Not", [flags])], to=INT64)
    after = b.op("CumSum", [other, b.const(np.int64(0))], reverse=1)  # this one and the rest, whole array
    end = b.op("Gather", [b.op("Concat", [after, b.const(np.array([0], np.int64))], axis=0), _segment_end(b, segments)])
    return b.op("Equal", [after, end])


def _segment_end(b: GraphBuilder, segments: Segments) -> str:
    from .builder import i64

    ends = b.op("Slice", [segments.splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))])
    return b.op("Gather", [ends, segments.seg])


def _word_starts(b: GraphBuilder, codes: str, segments: Segments) -> str:
    return b.op("Or", [starts(b, segments), _is(b, codes, METASPACE)])


def sentencepiece_spaces(b: GraphBuilder, codes: str, segments: Segments, unit: str) -> tuple[str, Segments, str]:
    """SentencePiece's whitespace rules on normalized text whose code points came from the units
    ``unit`` (int64 ``[T]``, the unit of each). Returns (text, segments, word starts)."""
    space = _is(b, codes, SPACE)
    first_of_unit = b.op("Or", [starts(b, segments), b.op("Not", [b.op("Equal", [shift(b, unit, -1, np.int64(-1)), unit])])])
    unit_begin = last_where(b, first_of_unit)
    other = b.op("Cast", [b.op("Not", [space])], to=INT64)
    seen = b.op("CumSum", [other, b.const(np.int64(0))])
    before_unit = b.op("Sub", [b.op("Gather", [seen, unit_begin]), b.op("Gather", [other, unit_begin])])
    leading = b.op("Equal", [seen, before_unit])  # only spaces so far in this unit's output
    previous_space = neighbour(b, space, segments, -1, np.bool_(True))  # a segment start counts as a space
    drop = b.op("And", [space, b.op("And", [leading, b.op("Gather", [previous_space, unit_begin])])])
    segments, (codes,) = compact(b, segments, b.op("Not", [drop]), [codes])
    codes, _, _ = insert_before(b, codes, starts(b, segments), np.int64(METASPACE))
    from .flat import from_flags  # noqa: F401  (segments of the inserted text)

    segments = _segments_after_insert(b, segments, codes)
    codes = b.op("Where", [space_or_meta(b, codes), b.const(np.int64(METASPACE)), codes])
    segments, (codes,) = compact(b, segments, b.op("Not", [_trailing(b, _is(b, codes, METASPACE), segments)]), [codes])
    return codes, segments, _word_starts(b, codes, segments)


def space_or_meta(b: GraphBuilder, codes: str) -> str:
    return b.op("Or", [_is(b, codes, SPACE), _is(b, codes, METASPACE)])


def _segments_after_insert(b: GraphBuilder, segments: Segments, codes: str) -> Segments:
    """Segments grown by one element each where they were non-empty (``insert_before`` at starts)."""
    from .builder import i64
    from .flat import counts, from_splits, size, splits_from_counts

    grown = b.add(counts(b, segments), b.op("Cast", [b.op("Greater", [counts(b, segments), b.const(np.int64(0))])], to=INT64))
    del i64
    return from_splits(b, splits_from_counts(b, grown), size(b, codes))


def metaspace(
    b: GraphBuilder, codes: str, segments: Segments, *, strip_right: bool, collapse: bool
) -> tuple[str, Segments, str]:
    """HF's Metaspace pipeline. Returns (text, segments, word starts)."""
    keep = b.const(np.array(True))
    if strip_right:
        keep = b.op("Not", [_trailing(b, is_white_space(b, codes), segments)])
    if collapse:
        space = _is(b, codes, SPACE)
        repeated = b.op("And", [space, neighbour(b, space, segments, -1, np.bool_(False))])
        keep = b.op("And", [keep, b.op("Not", [repeated])])
    if strip_right or collapse:
        keep = b.op("And", [keep, b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])])])
        segments, (codes,) = compact(b, segments, keep, [codes])
    codes = b.op("Where", [_is(b, codes, SPACE), b.const(np.int64(METASPACE)), codes])
    prepend = b.op("And", [starts(b, segments), b.op("Not", [_is(b, codes, METASPACE)])])
    codes, _, _ = insert_before(b, codes, prepend, np.int64(METASPACE))
    segments = _segments_grown_where(b, segments, prepend, codes)
    return codes, segments, _word_starts(b, codes, segments)


def _segments_grown_where(b: GraphBuilder, segments: Segments, flags: str, codes: str) -> Segments:
    from .flat import counts, from_splits, size, splits_from_counts, sum_per_segment

    grown = b.add(counts(b, segments), sum_per_segment(b, segments, b.op("Cast", [flags], to=INT64)))
    return from_splits(b, splits_from_counts(b, grown), size(b, codes))


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


def whitespace_split(b: GraphBuilder, codes: str, segments: Segments) -> tuple[str, Segments, str]:
    """HF's ``WhitespaceSplit`` then ``Metaspace`` (T5). Returns (text, segments, word starts)."""
    white = is_white_space(b, codes)
    word_start = b.op("And", [b.op("Not", [white]), neighbour(b, white, segments, -1, np.bool_(True))])
    segments, (codes, word_start) = compact(b, segments, b.op("Not", [white]), [codes, word_start])
    prepend = b.op("And", [word_start, b.op("Not", [_is(b, codes, METASPACE)])])
    codes, source, inserted = insert_before(b, codes, prepend, np.int64(METASPACE))
    segments = _segments_grown_where(b, segments, prepend, codes)
    word_start = b.op("Or", [b.op("Gather", [word_start, source]), _is(b, codes, METASPACE)])
    word_start = b.op("And", [word_start, b.op("Or", [inserted, b.op("Not", [b.op("Gather", [prepend, source])])])])
    return codes, segments, b.op("Or", [word_start, starts(b, segments)])


__all__ = ["METASPACE", "is_white_space", "metaspace", "positions", "same_segment", "sentencepiece_spaces", "whitespace_split"]
