"""Segmentation into vocabulary pieces in standard ONNX ops: unigram (Viterbi) and BPE.

Both take code points and the sequences to segment (words, or whole chunks where SentencePiece
runs its Viterbi over the chunk) and return the pieces in order as flat ``Tokens``: piece id,
sequence, first code point and length (in code points).

Unigram is SentencePiece's and ``tokenizers``' optimized Viterbi: the best score ending at each
position is the best over the pieces ending there of (best score at its start + its score); ties go
to the earliest start; a position where no one-character piece starts gets the unknown piece, with
the lowest score minus 10. Scores add in float32 (SentencePiece) or float64 (``tokenizers``), in the
same order, so the same path wins. The positions run in a ``Loop`` (the only sequential part); the
best path is read back with binary lifting instead of a second loop.

BPE merges, in each word, the adjacent pair with the lowest merge rank (the leftmost of equals),
until no pair has a rank: one merge per word per ``Loop`` step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builder import DOUBLE, FLOAT, INT64, ML_DOMAIN, GraphBuilder, i64
from .flat import (
    Segments,
    counts,
    first_index,
    last_where,
    neighbour,
    positions,
    remaining,
    shift,
    sum_per_segment,
    to_padded,
)
from .trie import CodepointTrie, walk

LIFTING_LEVELS = 24  # binary lifting reaches back 2**24 positions: sequences up to 16M code points
NEVER = np.iinfo(np.int32).max  # the rank of a pair that no merge joins


@dataclass(frozen=True)
class Tokens:
    """Flat pieces in order: int64 ``[N]`` each."""

    ids: str
    seq: str
    begin: str  # position of the first code point in the flat text
    length: str


def _span(b: GraphBuilder, first: int, stop: str, axis: int) -> str:
    """int64 ``first .. stop - 1 + first`` (``stop`` an int64 ``[1]``) as a row (axis 0) or a column (1)."""
    values = b.op(
        "Range",
        [b.const(np.int64(first)), b.add(b.op("Squeeze", [stop]), b.const(np.int64(first))), b.const(np.int64(1))],
    )
    return b.op("Unsqueeze", [values, b.const(i64(axis))])


@dataclass(frozen=True)
class _Grid:
    """The sequences as ``[S, W]`` positions, W the longest (at least 1)."""

    number: str  # int64 [1]: S
    width: str  # int64 [1]: W
    lengths: str  # int64 [S]


def _grid(b: GraphBuilder, sequences: Segments) -> _Grid:
    lengths = counts(b, sequences)
    width = b.op("ReduceMax", [b.op("Concat", [lengths, b.const(i64(1))], axis=0)], keepdims=1)
    number = b.op("Sub", [b.op("Shape", [sequences.splits]), b.const(i64(1))])
    return _Grid(number, width, lengths)


def _by_end(b: GraphBuilder, grid: _Grid, sequences: Segments, values: str, fill: np.generic, depth: int) -> str:
    """Per code point ``values[t, d]`` about the piece of length ``d + 1`` starting there (``[T, D]``) →
    ``[S, W, D]`` about the piece of length ``d + 1`` *ending* after position ``w`` (``fill`` where
    it would start before the sequence)."""
    offset = b.op("Sub", [positions(b, sequences.seg), first_index(b, sequences)])
    where = b.add(b.mul(sequences.seg, grid.width), offset)
    where = b.op("Expand", [b.op("Unsqueeze", [where, b.const(i64(1))]), b.op("Shape", [values])])
    blank = b.op(
        "Expand",
        [
            b.const(np.array(fill), keep_float64=True),
            b.op("Concat", [b.mul(grid.number, grid.width), b.const(i64(depth))], axis=0),
        ],
    )
    cube = b.op("Concat", [grid.number, grid.width, b.const(i64(depth))], axis=0)
    by_start = b.op("Reshape", [b.op("ScatterElements", [blank, where, values], axis=0), cube], allowzero=1)
    lead = b.op(
        "Expand",
        [b.const(np.array(fill), keep_float64=True), b.op("Concat", [grid.number, b.const(i64(depth, depth))], axis=0)],
    )
    padded = b.op("Concat", [lead, by_start], axis=1)  # row r + depth holds the pieces starting at r
    start_row = b.op("Sub", [_span(b, 1 + depth, grid.width, 1), b.const(np.arange(1, depth + 1, dtype=np.int64))])
    rows = b.op("Expand", [b.op("Unsqueeze", [start_row, b.const(i64(0))]), cube])
    return b.op("GatherElements", [padded, rows], axis=1)


def unigram(
    b: GraphBuilder,
    pieces: CodepointTrie,
    scores: np.ndarray,
    unk_id: int,
    unk_score: float,
    codes: str,
    sequences: Segments,
    name: str = "unigram",
) -> Tokens:
    """Viterbi segmentation. ``pieces`` maps each piece to its id; ``scores[id]`` is its score (its
    dtype, float32 or float64, is the arithmetic's)."""
    dtype = scores.dtype.type
    depth = pieces.depth
    ninf = dtype(-np.inf)
    found = walk(b, pieces, codes, positions(b, codes), remaining(b, sequences), name)  # [T, D] ids
    piece_scores = b.op("Gather", [b.derived(f"{name}_scores", np.append(scores.astype(dtype), ninf)), found])
    # A position without a one-character piece gets the unknown piece for its character.
    no_single = b.op(
        "Less", [b.op("Slice", [found, b.const(i64(0)), b.const(i64(1)), b.const(i64(1))]), b.const(np.int64(0))]
    )
    use_unk = b.op("And", [no_single, b.const(np.arange(depth) == 0)])
    found = b.op("Where", [use_unk, b.const(np.int64(unk_id)), found])
    piece_scores = b.op("Where", [use_unk, b.const(np.array(dtype(unk_score)), keep_float64=True), piece_scores])
    grid = _grid(b, sequences)
    end_scores = _by_end(b, grid, sequences, piece_scores, ninf, depth)
    end_ids = _by_end(b, grid, sequences, found, np.int64(-1), depth)
    first = np.array([0] + [-np.inf] * (depth - 1), dtype=dtype)  # nothing before the start: score 0
    window = b.op(
        "Expand", [b.const(first, keep_float64=True), b.op("Concat", [grid.number, b.const(i64(depth))], axis=0)]
    )

    def step(g: GraphBuilder, j: str, state: list[str]) -> tuple[None, list[str], list[tuple[str, int]]]:
        (best_before,) = state  # [S, D]: best score ending at j, j - 1, ..., j - D + 1
        candidates = g.add(best_before, g.op("Gather", [end_scores, j], axis=1))
        best = g.op("ReduceMax", [candidates, g.const(i64(1))], keepdims=1)
        longest_of_best = g.op("ArgMax", [candidates], axis=1, keepdims=0, select_last_index=1)  # earliest start
        moved = g.op("Slice", [best_before, g.const(i64(0)), g.const(i64(depth - 1)), g.const(i64(1))])
        return None, [g.op("Concat", [best, moved], axis=1)], [(longest_of_best, INT64)]

    kind = FLOAT if dtype is np.float32 else DOUBLE
    _, choices = b.loop(b.op("Squeeze", [grid.width]), [(window, kind)], step, hint=f"{name}_viterbi")
    choices = b.op("Transpose", [choices], perm=[1, 0])  # [S, W]: ending after w, the best piece's length - 1
    return _best_path(b, grid, sequences, choices, end_ids, depth)


def _best_path(b: GraphBuilder, grid: _Grid, sequences: Segments, choices: str, end_ids: str, depth: int) -> Tokens:
    """The pieces on the path back from each sequence's end (``choices``: per end, the length of the
    best piece ending there, minus one). ``back[j]`` (where the piece ending at ``j`` starts) applied
    2**k times for every k at once tells, for every position, the path's first position at or after
    it: a position is on the path when that is itself."""
    ends = _span(b, 1, grid.width, 0)  # [1, W]: the end after each position
    back = b.op("Max", [b.op("Sub", [ends, b.add(choices, b.const(np.int64(1)))]), b.const(np.int64(0))])
    back = b.op(
        "Concat",
        [b.op("Expand", [b.const(i64(0)), b.op("Concat", [grid.number, b.const(i64(1))], axis=0)]), back],
        axis=1,
    )
    levels = [back]
    for _ in range(LIFTING_LEVELS - 1):
        levels.append(b.op("GatherElements", [levels[-1], levels[-1]], axis=1))
    slots = _span(b, 0, b.add(grid.width, b.const(i64(1))), 0)  # [1, W + 1]
    at = b.op("Expand", [b.op("Unsqueeze", [grid.lengths, b.const(i64(1))]), b.op("Shape", [back])])
    for level in reversed(levels):
        jumped = b.op("GatherElements", [level, at], axis=1)
        at = b.op("Where", [b.op("GreaterOrEqual", [jumped, slots]), jumped, at])
    on_path = b.op("And", [b.op("Equal", [at, slots]), b.op("Greater", [slots, b.const(np.int64(0))])])
    on_path = b.op(
        "Reshape",
        [
            b.op("Slice", [on_path, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max)), b.const(i64(1))]),
            b.const(i64(-1)),
        ],
    )
    chosen = b.op("Reshape", [choices, b.const(i64(-1))])
    ids = b.op(
        "GatherElements",
        [b.op("Reshape", [end_ids, b.const(i64(-1, depth))]), b.op("Unsqueeze", [chosen, b.const(i64(1))])],
        axis=1,
    )
    ids = b.op("Compress", [b.op("Squeeze", [ids, b.const(i64(1))]), on_path], axis=0)
    length = b.op("Compress", [b.add(chosen, b.const(np.int64(1))), on_path], axis=0)
    end = b.op(
        "Compress",
        [b.op("Reshape", [b.op("Expand", [ends, b.op("Shape", [choices])]), b.const(i64(-1))]), on_path],
        axis=0,
    )
    rows = b.op("Expand", [_span(b, 0, grid.number, 1), b.op("Shape", [choices])])
    seq = b.op("Compress", [b.op("Reshape", [rows, b.const(i64(-1))]), on_path], axis=0)
    begin = b.add(b.op("Gather", [sequences.splits, seq]), b.op("Sub", [end, length]))
    return Tokens(ids, seq, begin, length)


def _runs(b: GraphBuilder, marked: str, same: str, lengths: str) -> tuple[str, str]:
    """Runs of adjacent ``marked`` elements (``same``: the previous one is of the same sequence):
    (bool: each element starts a run or is unmarked, int64: its run's total of ``lengths``)."""
    follows = b.op("And", [marked, b.op("And", [same, shift(b, marked, -1, np.bool_(False))])])
    head = b.op("Not", [follows])
    run = b.op("Sub", [b.op("CumSum", [b.op("Cast", [head], to=INT64), b.const(np.int64(0))]), b.const(np.int64(1))])
    total = b.op("ScatterElements", [b.op("Mul", [lengths, b.const(np.int64(0))]), run, lengths], reduction="add")
    return head, b.op("Gather", [total, run])


def fuse_unknown(b: GraphBuilder, tokens: Tokens, unk_id: int) -> Tokens:
    """Runs of adjacent unknown pieces in a sequence become one (SentencePiece and ``tokenizers``
    both do), spanning the run's code points."""
    unknown = b.op("Equal", [tokens.ids, b.const(np.int64(unk_id))])
    same = b.op("Equal", [shift(b, tokens.seq, -1, np.int64(-1)), tokens.seq])
    head, length = _runs(b, unknown, same, tokens.length)
    return Tokens(
        *(b.op("Compress", [value, head], axis=0) for value in (tokens.ids, tokens.seq, tokens.begin, length))
    )


@dataclass(frozen=True)
class Merges:
    """BPE merges: pair (left id, right id) → rank (lower first) and merged id."""

    pairs: dict[tuple[int, int], tuple[int, int]]
    vocab_size: int


def _merge_step(merges: Merges, pair_keys: list[int], ranks: str, merged: str):
    """The ``Loop`` body of ``bpe``: in every word, the lowest-ranked adjacent pair (leftmost of
    equals) becomes its merged piece; the loop goes on while some word merged."""

    def step(g: GraphBuilder, _: str, state: list[str]) -> tuple[str, list[str], list]:
        symbols, lengths = state  # [W, L]: piece ids (-1 after the word's end), their code points
        width = g.op("Shape", [symbols], start=1, end=2)
        rows = g.op("Shape", [symbols], start=0, end=1)
        left = g.op("Slice", [symbols, g.const(i64(0)), g.op("Sub", [width, g.const(i64(1))]), g.const(i64(1))])
        right = g.op("Slice", [symbols, g.const(i64(1)), width, g.const(i64(1))])
        valid = g.op(
            "And",
            [
                g.op("GreaterOrEqual", [left, g.const(np.int64(0))]),
                g.op("GreaterOrEqual", [right, g.const(np.int64(0))]),
            ],
        )
        key = g.op(
            "Where", [valid, g.add(g.mul(left, g.const(np.int64(merges.vocab_size))), right), g.const(np.int64(-1))]
        )
        values = list(range(len(pair_keys))) if pair_keys != [-2] else [-1]
        pair = g.op(
            "LabelEncoder", [key], domain=ML_DOMAIN, keys_int64s=pair_keys, values_int64s=values, default_int64=-1
        )
        spare = g.op("Concat", [rows, g.const(i64(1))], axis=0)  # a column no pair is in: one-symbol words
        pair = g.op("Concat", [pair, g.op("Expand", [g.const(np.array([[-1]], dtype=np.int64)), spare])], axis=1)
        rank = g.op("Gather", [ranks, pair])  # int32 (ORT 1.17 has no int64 ArgMin)
        lowest = g.op("ReduceMin", [rank, g.const(i64(1))], keepdims=1)
        where = g.op("ArgMin", [rank], axis=1, keepdims=1)
        merging = g.op("Less", [lowest, g.const(np.int32(NEVER))])
        joined = g.op("Gather", [merged, g.op("GatherElements", [pair, where], axis=1)])
        columns = _span(g, 0, width, 0)
        before, here = g.op("Less", [columns, where]), g.op("Equal", [columns, where])
        shifted = g.op("Concat", [right, g.op("Expand", [g.const(np.array([[-1]], dtype=np.int64)), spare])], axis=1)
        new_symbols = g.op("Where", [before, symbols, g.op("Where", [here, joined, shifted])])
        right_lengths = g.op("Slice", [lengths, g.const(i64(1)), width, g.const(i64(1))])
        shifted_lengths = g.op(
            "Concat", [right_lengths, g.op("Expand", [g.const(np.array([[0]], dtype=np.int64)), spare])], axis=1
        )
        both = g.add(
            g.op("GatherElements", [lengths, where], axis=1), g.op("GatherElements", [shifted_lengths, where], axis=1)
        )
        new_lengths = g.op("Where", [before, lengths, g.op("Where", [here, both, shifted_lengths])])
        go_on = g.op(
            "Greater", [g.op("ReduceSum", [g.op("Cast", [merging], to=INT64)], keepdims=0), g.const(np.int64(0))]
        )
        return (
            go_on,
            [g.op("Where", [merging, new_symbols, symbols]), g.op("Where", [merging, new_lengths, lengths])],
            [],
        )

    return step


def bpe(
    b: GraphBuilder,
    characters: CodepointTrie,
    merges: Merges,
    unk_id: int,
    codes: str,
    words: Segments,
    name: str = "bpe",
) -> Tokens:
    """BPE in each word. ``characters`` maps one code point to its piece id (others are unknown;
    adjacent unknown characters start as one piece, as ``tokenizers`` with ``fuse_unk`` does)."""
    one = b.op("Min", [remaining(b, words), b.const(np.int64(1))])
    ids = b.op("Squeeze", [walk(b, characters, codes, positions(b, codes), one, f"{name}_chars"), b.const(i64(1))])
    ids = b.op("Where", [b.op("Less", [ids, b.const(np.int64(0))]), b.const(np.int64(unk_id)), ids])
    unknown = b.op("Equal", [ids, b.const(np.int64(unk_id))])
    same = neighbour(b, b.op("Expand", [b.const(np.array(True)), b.op("Shape", [ids])]), words, -1, np.bool_(False))
    head, run_length = _runs(b, unknown, same, b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [ids])]))
    symbol_splits = b.op(
        "Concat",
        [
            b.const(i64(0)),
            b.op("CumSum", [sum_per_segment(b, words, b.op("Cast", [head], to=INT64)), b.const(np.int64(0))]),
        ],
        axis=0,
    )
    symbols = Segments(b.op("Compress", [words.seg, head], axis=0), symbol_splits)
    padded_ids, _ = to_padded(b, b.op("Compress", [ids, head], axis=0), symbols, np.int64(-1))
    padded_lengths, _ = to_padded(b, b.op("Compress", [run_length, head], axis=0), symbols, np.int64(0))
    keys = sorted(merges.pairs)
    ranks = b.derived(f"{name}_ranks", np.array([merges.pairs[k][0] for k in keys] + [NEVER], dtype=np.int32))
    merged = b.derived(f"{name}_merged", np.array([merges.pairs[k][1] for k in keys] + [-1], dtype=np.int64))
    if any(merges.pairs[k][0] >= NEVER for k in keys):
        raise ValueError("more BPE merges than int32 ranks")
    step = _merge_step(merges, [left * merges.vocab_size + right for left, right in keys] or [-2], ranks, merged)
    trips = b.op("Squeeze", [b.op("Shape", [padded_ids], start=1, end=2)])
    final, final_lengths = b.loop(trips, [(padded_ids, INT64), (padded_lengths, INT64)], step, hint=f"{name}_merges")
    flat = b.op("Reshape", [final, b.const(i64(-1))])
    kept = b.op("GreaterOrEqual", [flat, b.const(np.int64(0))])
    width = b.op("Shape", [final], start=1, end=2)
    seq = b.op("Compress", [b.op("Div", [positions(b, flat), b.op("Max", [width, b.const(i64(1))])]), kept], axis=0)
    length = b.op("Compress", [b.op("Reshape", [final_lengths, b.const(i64(-1))]), kept], axis=0)
    # the first code point: the word's start plus the lengths of the word's earlier pieces
    before = b.op("Sub", [b.op("CumSum", [length, b.const(np.int64(0))]), length])
    word_change = b.op("Not", [b.op("Equal", [shift(b, seq, -1, np.int64(-1)), seq])])
    first_of_word = b.op("Gather", [before, last_where(b, word_change)])
    begin = b.add(b.op("Gather", [words.splits, seq]), b.op("Sub", [before, first_of_word]))
    return Tokens(b.op("Compress", [flat, kept], axis=0), seq, begin, length)


__all__ = ["Merges", "Tokens", "bpe", "fuse_unknown", "unigram"]
