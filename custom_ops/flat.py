"""Flat segmented arrays: a whole batch of variable-length sequences as one 1-D tensor.

The portable tokenizer keeps every text of a batch in one flat array of code points (or pieces) and
says where each sequence starts with :class:`Segments`: ``seg`` (the sequence of each element,
non-decreasing) and ``splits`` (``[S + 1]`` start offsets; empty sequences allowed). Every step is
then one vectorized op over the whole batch: looking at a neighbour is a shift plus a "same
segment?" test, dropping or inserting elements is a compaction or an expansion, and a dynamic
programme that must run position by position gets a padded ``[S, W]`` copy (``to_padded``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import numpy_helper

from .builder import BOOL, INT64, GraphBuilder, i64


@dataclass(frozen=True)
class Segments:
    """Value names: ``seg`` int64 ``[T]`` (the segment of each element) and ``splits`` int64 ``[S + 1]``."""

    seg: str
    splits: str


def arange(b: GraphBuilder, count: str) -> str:
    """int64 ``[n]``: 0..n-1 for an int64 ``[1]`` ``count``."""
    return b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [count]), b.const(np.int64(1))])


def size(b: GraphBuilder, values: str) -> str:
    """int64 ``[1]``: the length of a 1-D tensor."""
    return b.op("Shape", [values])


def positions(b: GraphBuilder, values: str) -> str:
    """int64 ``[T]``: 0..T-1 for a 1-D tensor."""
    return arange(b, size(b, values))


def shift(b: GraphBuilder, values: str, by: int, fill: np.generic) -> str:
    """``out[t] = values[t + by]``, ``fill`` where ``t + by`` is outside (``values`` 1-D)."""
    if by == 0:
        return values
    pad = b.const(np.full(abs(by), fill))
    if by > 0:
        padded = b.op("Concat", [values, pad], axis=0)
        return b.op("Slice", [padded, b.const(i64(by)), b.add(size(b, values), b.const(i64(by)))])
    padded = b.op("Concat", [pad, values], axis=0)
    return b.op("Slice", [padded, b.const(i64(0)), size(b, values)])


def same_segment(b: GraphBuilder, segments: Segments, by: int) -> str:
    """bool ``[T]``: whether element ``t + by`` exists and is in the segment of element ``t``."""
    return b.op("Equal", [shift(b, segments.seg, by, np.int64(-1)), segments.seg])


def neighbour(b: GraphBuilder, values: str, segments: Segments, by: int, fill: np.generic) -> str:
    """``values[t + by]`` where that element is in ``t``'s segment, else ``fill``."""
    shifted = shift(b, values, by, fill)
    same = same_segment(b, segments, by)
    if isinstance(fill, (bool, np.bool_)):  # ONNX Runtime has no Where for bool
        return b.op("And", [same, shifted]) if not fill else b.op("Or", [b.op("Not", [same]), shifted])
    return b.op("Where", [same, shifted, b.const(np.array(fill))])


def starts(b: GraphBuilder, segments: Segments) -> str:
    """bool ``[T]``: whether each element is the first of its segment."""
    return b.op("Not", [same_segment(b, segments, -1)])


def from_flags(b: GraphBuilder, flags: str) -> Segments:
    """Segments that start where ``flags`` (bool ``[T]``) is true; ``flags[0]`` must be true when T > 0."""
    counted = b.op("Cast", [flags], to=INT64)
    seg = b.op("Sub", [b.op("CumSum", [counted, b.const(np.int64(0))]), b.const(np.int64(1))])
    first = b.op("Compress", [positions(b, flags), flags], axis=0)
    return Segments(seg, b.op("Concat", [first, size(b, flags)], axis=0))


def from_splits(b: GraphBuilder, splits: str, total: str) -> Segments:
    """Segments from ``splits`` (int64 ``[S + 1]``) over ``total`` (int64 ``[1]``) elements."""
    inner = b.op("Slice", [splits, b.const(i64(1)), b.const(i64(-1))])
    marks = zeros(b, b.add(total, b.const(i64(1))))
    ones = b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [inner])])
    marks = b.op("ScatterElements", [marks, inner, ones], reduction="add")
    seg = b.op("CumSum", [b.op("Slice", [marks, b.const(i64(0)), total]), b.const(np.int64(0))])
    return Segments(seg, splits)


def counts(b: GraphBuilder, segments: Segments) -> str:
    """int64 ``[S]``: the length of each segment."""
    return b.op(
        "Sub",
        [
            b.op("Slice", [segments.splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))]),
            b.op("Slice", [segments.splits, b.const(i64(0)), b.const(i64(-1))]),
        ],
    )


def segment_end(b: GraphBuilder, segments: Segments) -> str:
    """int64 ``[T]``: one past the last element of each element's segment."""
    ends = b.op("Slice", [segments.splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))])
    return b.op("Gather", [ends, segments.seg])


def remaining(b: GraphBuilder, segments: Segments) -> str:
    """int64 ``[T]``: how many elements there are from each one to the end of its segment."""
    return b.op("Sub", [segment_end(b, segments), positions(b, segments.seg)])


def first_index(b: GraphBuilder, segments: Segments) -> str:
    """int64 ``[T]``: the position of the first element of each element's segment."""
    return b.op("Gather", [segments.splits, segments.seg])


def index_in_segment(b: GraphBuilder, segments: Segments, values: str) -> str:
    """int64 ``[T]``: each element's offset in its segment."""
    return b.op("Sub", [positions(b, values), first_index(b, segments)])


def splits_from_counts(b: GraphBuilder, per_segment: str) -> str:
    return b.op("Concat", [b.const(i64(0)), b.op("CumSum", [per_segment, b.const(np.int64(0))])], axis=0)


def sum_per_segment(b: GraphBuilder, segments: Segments, values: str) -> str:
    """int64 ``[S]``: the sum of ``values`` (int64 ``[T]``) over each segment."""
    number = b.op("Sub", [b.op("Shape", [segments.splits]), b.const(i64(1))])
    return b.op("ScatterElements", [zeros(b, number), segments.seg, values], reduction="add")


def compact(b: GraphBuilder, segments: Segments, keep: str, values: list[str]) -> tuple[Segments, list[str]]:
    """Drop the elements where ``keep`` is false; segments keep their identity (and may become empty)."""
    kept = [b.op("Compress", [value, keep], axis=0) for value in values]
    splits = splits_from_counts(b, sum_per_segment(b, segments, b.op("Cast", [keep], to=INT64)))
    return from_splits(b, splits, size(b, kept[0]) if kept else b.const(i64(0))), kept


def expand(b: GraphBuilder, repeat: str) -> tuple[str, str]:
    """Element ``t`` repeated ``repeat[t]`` (int64 ``[T]``, ≥ 0) times: ``(source [T2], k [T2])``, the
    element each output comes from and which of its copies it is."""
    ends = b.op("CumSum", [repeat, b.const(np.int64(0))])
    begins = b.op("Sub", [ends, repeat])
    total = b.op("ReduceSum", [repeat], keepdims=1)
    used = b.op("Greater", [repeat, b.const(np.int64(0))])
    sources = b.op("Compress", [positions(b, repeat), used], axis=0)
    marks = zeros(b, b.add(total, b.const(i64(1))))
    at = b.op("Gather", [begins, sources])
    marks = b.op("ScatterElements", [marks, at, b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [at])])])
    rank = b.op(
        "Sub",
        [b.op("CumSum", [b.op("Slice", [marks, b.const(i64(0)), total]), b.const(np.int64(0))]), b.const(np.int64(1))],
    )
    source = b.op("Gather", [b.op("Concat", [sources, b.const(i64(0))], axis=0), rank])
    k = b.op("Sub", [arange(b, total), b.op("Gather", [b.op("Concat", [begins, b.const(i64(0))], axis=0), source])])
    return source, k


def insert_before(b: GraphBuilder, values: str, flags: str, fill: np.generic) -> tuple[str, str, str]:
    """``fill`` inserted before each element whose ``flags`` is set. Returns the new values, the
    source element of each, and whether each is an inserted one."""
    repeat = b.add(b.op("Cast", [flags], to=INT64), b.const(np.int64(1)))
    source, k = expand(b, repeat)
    inserted = b.op("And", [b.op("Gather", [flags, source]), b.op("Equal", [k, b.const(np.int64(0))])])
    out = b.op("Where", [inserted, b.const(np.array(fill)), b.op("Gather", [values, source])])
    return out, source, inserted


def to_padded(b: GraphBuilder, values: str, segments: Segments, fill: np.generic) -> tuple[str, str]:
    """``[S, W]`` with each segment's elements at the start of its row, ``fill`` after; W the longest
    segment (at least 1). Returns the padded values and the flat index of each element in it."""
    lengths = counts(b, segments)
    width = b.op("ReduceMax", [b.op("Concat", [lengths, b.const(i64(1))], axis=0)], keepdims=1)
    number = b.op("Sub", [b.op("Shape", [segments.splits]), b.const(i64(1))])
    index = b.add(b.mul(segments.seg, width), index_in_segment(b, segments, values))
    blank = b.op("Expand", [b.const(np.array(fill)), b.mul(number, width)])
    padded = b.op("ScatterElements", [blank, index, values])
    return b.op("Reshape", [padded, b.op("Concat", [number, width], axis=0)], allowzero=1), index


def last_where(b: GraphBuilder, flags: str) -> str:
    """int64 ``[T]``: the largest position ``p ≤ t`` with ``flags[p]``, or -1 (``flags`` bool ``[T]``)."""
    rank = b.op("CumSum", [b.op("Cast", [flags], to=INT64), b.const(np.int64(0))])
    marked = b.op("Compress", [positions(b, flags), flags], axis=0)
    table = b.op("Concat", [b.const(i64(-1)), marked], axis=0)
    return b.op("Gather", [table, rank])


def zeros(b: GraphBuilder, count: str) -> str:
    """int64 zeros, ``count`` (int64 ``[1]``) of them."""
    return b.op("ConstantOfShape", [count], value=numpy_helper.from_array(np.zeros(1, dtype=np.int64)))


def next_where(b: GraphBuilder, flags: str) -> str:
    """int64 ``[T]``: the smallest position ``p ≥ t`` with ``flags[p]``, or T (``last_where`` reversed)."""
    backwards = b.const(i64(np.iinfo(np.int64).min))
    reversed_flags = b.op("Slice", [flags, b.const(i64(-1)), backwards, b.const(i64(0)), b.const(i64(-1))])
    last = last_where(b, reversed_flags)
    back = b.op("Slice", [last, b.const(i64(-1)), backwards, b.const(i64(0)), b.const(i64(-1))])
    total = b.op("Shape", [flags])
    found = b.op("Sub", [b.op("Sub", [total, b.const(np.int64(1))]), back])
    return b.op("Where", [b.op("Less", [back, b.const(np.int64(0))]), total, found])


__all__ = [
    "BOOL",
    "Segments",
    "arange",
    "compact",
    "counts",
    "expand",
    "first_index",
    "from_flags",
    "from_splits",
    "index_in_segment",
    "insert_before",
    "last_where",
    "neighbour",
    "next_where",
    "positions",
    "remaining",
    "same_segment",
    "segment_end",
    "shift",
    "size",
    "splits_from_counts",
    "starts",
    "sum_per_segment",
    "to_padded",
    "zeros",
]
