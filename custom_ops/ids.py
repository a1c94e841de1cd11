"""Id-side building blocks: remap tables and ragged → padded batches with masks."""

from __future__ import annotations

import numpy as np

from .builder import BOOL, INT32, INT64, GraphBuilder, i64


def remap(b: GraphBuilder, ids: str, table: np.ndarray, name: str) -> str:
    """``table[ids]``: e.g. SentencePiece ids → model vocabulary ids."""
    return b.op("Gather", [b.derived(name, table), ids])


def ragged_to_padded(
    b: GraphBuilder,
    values: str,
    row_splits: str,
    *,
    pad_id: int,
    prefix: str | None = None,
    has_prefix: str | None = None,
    suffix_id: int | None = None,
    last: str | None = None,
    max_length: int | str | None = None,
) -> tuple[str, str]:
    """Build ``[prefix?] + row[:room] + [suffix?] + [last?]``, right-padded, from a ragged batch.

    ``values`` (int, flat) and ``row_splits`` (int64 [N+1]) are a ragged batch as the
    SentencePiece op returns it; ``prefix`` (int64 [N]) is an optional first token per row,
    present where ``has_prefix`` (bool [N]); ``last`` (int64 [N]) an optional token per row after the
    suffix (a source language written last: MBartTokenizer, NLLB's legacy_behaviour). With
    ``max_length``, rows are cut at the end so that they hold at most that many tokens, suffix and
    ``last`` included, as HF's ``truncation=True`` does; it is a
    number, or the name of an int64 [1] value when the limit is chosen at run time. Returns
    int32 ids and an int32 mask, both [N, width] with width the longest row (at least 1).
    """
    starts = b.op("Slice", [row_splits, b.const(i64(0)), b.const(i64(-1))])
    ends = b.op("Slice", [row_splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))])
    kept = b.op("Sub", [ends, starts])
    prefix_count = b.op("Cast", [has_prefix], to=INT64) if has_prefix is not None else None
    if prefix_count is not None:
        kept = b.add(kept, prefix_count)
    suffix_count = (suffix_id is not None) + (last is not None)
    if isinstance(max_length, int):
        kept = b.op("Min", [kept, b.const(i64(max_length - suffix_count))])  # tokens before the suffixes
    elif max_length is not None:
        kept = b.op("Min", [kept, b.op("Sub", [max_length, b.const(i64(suffix_count))])])
    width = b.op(
        "ReduceMax", [b.op("Concat", [b.add(kept, b.const(i64(suffix_count))), b.const(i64(1))], axis=0)], keepdims=1
    )
    column = b.op(
        "Unsqueeze",
        [b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [width]), b.const(np.int64(1))]), b.const(i64(0))],
    )  # [1, W]

    def per_row(value: str) -> str:
        return b.op("Unsqueeze", [value, b.const(i64(1))])  # [N] → [N, 1]

    # Gather the row's own tokens; pad `values` by one so an empty batch still has something to gather.
    values64 = b.op("Concat", [b.op("Cast", [values], to=INT64), b.const(i64(pad_id))], axis=0)
    final = b.op("Sub", [b.op("Shape", [values64]), b.const(i64(1))])
    offset = column if prefix_count is None else b.op("Sub", [column, per_row(prefix_count)])
    position = b.op("Max", [b.op("Min", [b.add(per_row(starts), offset), final]), b.const(i64(0))])
    tokens = b.op("Gather", [values64, position])
    if prefix is not None and has_prefix is not None:
        is_prefix = b.op("And", [b.op("Equal", [column, b.const(i64(0))]), per_row(has_prefix)])
        tokens = b.op("Where", [is_prefix, per_row(prefix), tokens])
    kept_col = per_row(kept)
    if suffix_id is not None:
        tokens = b.op("Where", [b.op("Equal", [column, kept_col]), b.const(i64(suffix_id)), tokens])
    if last is not None:
        at = b.add(kept_col, b.const(i64(suffix_count - 1)))
        tokens = b.op("Where", [b.op("Equal", [column, at]), per_row(last), tokens])
        inside = b.op("LessOrEqual", [column, at])
    elif suffix_id is not None:
        inside = b.op("LessOrEqual", [column, kept_col])
    else:
        inside = b.op("Less", [column, kept_col])
    tokens = b.op("Where", [inside, tokens, b.const(i64(pad_id))])
    return b.op("Cast", [tokens], to=INT32), b.op("Cast", [inside], to=INT32)


def padded_to_ragged(b: GraphBuilder, ids: str, mask: str) -> tuple[str, str]:
    """[N, W] ids with a right-padding mask → flat values and row splits."""
    keep = b.op("Cast", [b.reshape(mask, [-1])], to=BOOL)
    values = b.op("Compress", [b.reshape(ids, [-1]), keep], axis=0)
    lengths = b.op("ReduceSum", [b.op("Cast", [mask], to=INT64), b.const(i64(1))], keepdims=0)
    splits = b.op("Concat", [b.const(i64(0)), b.op("CumSum", [lengths, b.const(np.int64(0))])], axis=0)
    return values, splits


def append_where(b: GraphBuilder, ids: str, mask: str, flag: str, token: int) -> tuple[str, str]:
    """Padded ``[N, W]`` ids and mask → ``[N, W + 1]`` with ``token`` after the last token of each row
    where ``flag`` (bool ``[N]``) is true."""
    pad = b.const(i64(0, 0, 0, 1))
    ids = b.op("Pad", [ids, pad, b.op("CastLike", [b.const(i64(0)), ids])])
    mask = b.op("Pad", [mask, pad, b.op("CastLike", [b.const(i64(0)), mask])])
    length = b.op("ReduceSum", [b.op("Cast", [mask], to=INT64), b.const(i64(1))], keepdims=1)  # [N, 1]
    width = b.op("Shape", [ids], start=1, end=2)
    column = b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [width]), b.const(np.int64(1))])
    here = b.op("And", [b.op("Equal", [column, length]), b.op("Unsqueeze", [flag, b.const(i64(1))])])
    ids = b.op("Where", [here, b.op("CastLike", [b.const(np.int64(token)), ids]), ids])
    mask = b.op("Where", [here, b.op("CastLike", [b.const(np.int64(1)), mask]), mask])
    return ids, mask


def drop_marked(b: GraphBuilder, ids: str, marked: np.ndarray, filler: int, name: str) -> str:
    """int ``[B, R, L]`` ids → int64 ``[B, R, L]`` with the ids where ``marked[id]`` removed and the rest
    moved left, ``filler`` after them: what a decoder sees once special tokens are skipped.

    Each kept id is scattered to its rank among the kept ids of its row; a dropped id goes to one
    spare column that is cut off again.
    """
    ids = b.op("Cast", [ids], to=INT64)
    is_marked = b.op("Gather", [b.derived(name, marked), ids])
    kept = b.op("Cast", [b.op("Not", [is_marked])], to=INT64)
    rank = b.op("CumSum", [kept, b.const(np.int64(2))], exclusive=1)
    length = b.op("Shape", [ids], start=2, end=3)
    target = b.op("Where", [is_marked, length, rank])
    shape = b.op("Concat", [b.op("Shape", [ids], start=0, end=2), b.op("Add", [length, b.const(i64(1))])], axis=0)
    blank = b.op("Expand", [b.const(np.int64(filler)), shape])
    moved = b.op("ScatterElements", [blank, target, ids], axis=2)
    return b.op("Slice", [moved, b.const(i64(0)), length, b.const(i64(2))])


def follows_marked(b: GraphBuilder, ids: str, marked: np.ndarray, ignored: np.ndarray, name: str) -> str:
    """bool ``[B, R, L]``: whether the last id before each position (on the last axis) that is not
    ``ignored`` is ``marked``; false where there is none.

    ``ignored`` ids are looked through (SentencePiece keeps dropping leading spaces while the pieces
    decode to nothing). The ids that count are compacted to the front, and each position gathers
    the one whose rank is the number of such ids before it.
    """
    ids = b.op("Cast", [ids], to=INT64)
    counted = b.op("Cast", [b.op("Not", [b.op("Gather", [b.derived(f"{name}_ignored", ignored), ids])])], to=INT64)
    before = b.op("CumSum", [counted, b.const(np.int64(2))], exclusive=1)
    compact = drop_marked(b, ids, ignored, 0, f"{name}_ignored")
    previous = b.op(
        "GatherElements",
        [compact, b.op("Max", [b.op("Sub", [before, b.const(np.int64(1))]), b.const(np.int64(0))])],
        axis=2,
    )
    is_marked = b.op("Gather", [b.derived(name, marked), previous])
    return b.op("And", [is_marked, b.op("Greater", [before, b.const(np.int64(0))])])


def merge_rows(b: GraphBuilder, inner_splits: str, outer_splits: str) -> str:
    """Splits of a ragged-of-ragged batch with the inner level dissolved (chunks → whole rows)."""
    return b.op("Gather", [inner_splits, outer_splits])


def collapse_marked_runs(
    b: GraphBuilder, values: str, row_splits: str, marked: str, replacement: int
) -> tuple[str, str]:
    """In a ragged batch, replace every run of ≥ 2 adjacent marked tokens by one ``replacement``.

    Runs never cross rows. A single marked token is kept as it is. Returns the new flat values
    and row splits.
    """
    count = b.op("Shape", [values])
    no = b.const(np.array([False]))
    previous = b.op("Slice", [b.op("Concat", [no, marked], axis=0), b.const(i64(0)), count])
    following = b.op("Slice", [b.op("Concat", [marked, no], axis=0), b.const(i64(1)), b.add(count, b.const(i64(1)))])
    # Row starts as a flag per position (one slot more so an empty last row has somewhere to land).
    flags = b.op("ConstantOfShape", [b.add(count, b.const(i64(1)))], value=_int64_tensor(0))
    starts = b.op("Slice", [row_splits, b.const(i64(0)), b.const(i64(-1))])
    flags = b.op("ScatterElements", [flags, starts, b.op("Expand", [b.const(i64(1)), b.op("Shape", [starts])])])
    is_start = b.op("Cast", [flags], to=BOOL)
    starts_here = b.op("Slice", [is_start, b.const(i64(0)), count])
    starts_next = b.op("Slice", [is_start, b.const(i64(1)), b.add(count, b.const(i64(1)))])
    joins_previous = b.op("And", [marked, b.op("And", [previous, b.op("Not", [starts_here])])])
    joins_next = b.op("And", [marked, b.op("And", [following, b.op("Not", [starts_next])])])
    replaced = b.op("Where", [joins_next, b.op("CastLike", [b.const(i64(replacement)), values]), values])
    keep = b.op("Not", [joins_previous])
    compact = b.op("Compress", [replaced, keep], axis=0)
    kept_before = b.op("CumSum", [b.op("Cast", [keep], to=INT64), b.const(np.int64(0))], exclusive=1)
    total = b.op("ReduceSum", [b.op("Cast", [keep], to=INT64)], keepdims=1)
    new_splits = b.op("Gather", [b.op("Concat", [kept_before, total], axis=0), row_splits])
    return compact, new_splits


def _int64_tensor(value: int):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array([value], dtype=np.int64))
