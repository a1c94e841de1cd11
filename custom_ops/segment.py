"""Segmentation into vocabulary pieces in standard ONNX ops: unigram (Viterbi) and BPE.

Both take code points and the sequences to segment (words, or whole chunks where SentencePiece
runs its Viterbi over the chunk) and return the pieces in order as a flat list of
``Tokens``: piece id, sequence, first code point and length (in code points).

Unigram is SentencePiece's and ``tokenizers``' optimized Viterbi: the best score ending at each
position is the best over the pieces ending there of (best score at its start + its score); ties go
to the earliest start; a position where no one-character piece starts gets the unknown piece with
the lowest score minus 10. Scores add in float32 (SentencePiece) or float64 (``tokenizers``), in the
same order, so the same path wins. The positions run in a ``Loop`` (the only sequential part);
the best path is read back with binary lifting instead of a second loop.

BPE merges, in each word, the adjacent pair with the lowest merge rank (the leftmost of equals),
until no pair has a rank, one merge per word per ``Loop`` step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builder import BOOL, DOUBLE, FLOAT, INT32, INT64, ML_DOMAIN, GraphBuilder, i64
from .flat import Segments, counts, first_index, neighbour, positions, same_segment, sum_per_segment, to_padded
from .trie import CodepointTrie, walk

LIFTING_LEVELS = 24  # binary lifting reaches back 2**24 positions: sequences up to 16M code points


@dataclass(frozen=True)
class Tokens:
    """Flat pieces in order: int64 ``[N]`` each."""

    ids: str
    seq: str
    begin: str  # position of the first code point in the flat text
    length: str


def _remaining(b: GraphBuilder, segments: Segments, codes: str) -> str:
    ends = b.op("Slice", [segments.splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))])
    return b.op("Sub", [b.op("Gather", [ends, segments.seg]), positions(b, codes)])


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
    """Viterbi segmentation. ``pieces`` maps each piece to its id; ``scores[id]`` is its score (the
    dtype, float32 or float64, is the arithmetic's)."""
    dtype = scores.dtype.type
    kind = FLOAT if dtype is np.float32 else DOUBLE
    depth = pieces.depth
    ninf = dtype(-np.inf)
    found = walk(b, pieces, codes, positions(b, codes), _remaining(b, sequences, codes), name)  # [T, D] ids
    score_table = b.derived(f"{name}_scores", np.append(scores.astype(dtype), ninf))  # id -1 → -inf
    piece_scores = b.op("Gather", [score_table, found])
    # A position without a one-character piece gets the unknown piece for its character.
    single = b.op("Slice", [found, b.const(i64(0)), b.const(i64(1)), b.const(i64(1))])
    no_single = b.op("Less", [single, b.const(np.int64(0))])
    column = b.op("Equal", [b.const(np.arange(depth, dtype=np.int64)), b.const(np.int64(0))])
    use_unk = b.op("And", [no_single, column])
    found = b.op("Where", [use_unk, b.const(np.int64(unk_id)), found])
    piece_scores = b.op("Where", [use_unk, b.const(np.array(dtype(unk_score)), keep_float64=True), piece_scores])
    # [S, W, D] by start position, then [S, W, D] by end position (end j holds pieces ending after j).
    lengths = counts(b, sequences)
    width = b.op("ReduceMax", [b.op("Concat", [lengths, b.const(i64(1))], axis=0)], keepdims=1)
    number = b.op("Sub", [b.op("Shape", [sequences.splits]), b.const(i64(1))])
    offset = b.op("Sub", [positions(b, codes), first_index(b, sequences)])
    index = b.add(b.mul(sequences.seg, width), offset)
    grid = b.op("Concat", [b.mul(number, width), b.const(i64(depth))], axis=0)
    where = b.op("Expand", [b.op("Unsqueeze", [index, b.const(i64(1))]), b.op("Shape", [found])])

    def by_start(values: str, fill: np.generic) -> str:
        blank = b.op("Expand", [b.const(np.array(fill), keep_float64=True), grid])
        scattered = b.op("ScatterElements", [blank, where, values], axis=0)
        return b.op("Reshape", [scattered, b.op("Concat", [number, width, b.const(i64(depth))], axis=0)], allowzero=1)

    def by_end(values: str, fill: np.generic) -> str:
        lead = b.op("Expand", [b.const(np.array(fill), keep_float64=True), b.op("Concat", [number, b.const(i64(depth, depth))], axis=0)])
        padded = b.op("Concat", [lead, values], axis=1)  # row r + depth holds start r
        end = b.op("Unsqueeze", [b.op("Range", [b.const(np.int64(1)), b.add(b.op("Squeeze", [width]), b.const(np.int64(1))), b.const(np.int64(1))]), b.const(i64(1))])
        rows = b.add(b.op("Sub", [end, b.const(np.arange(1, depth + 1, dtype=np.int64))]), b.const(np.int64(depth)))
        rows = b.op("Expand", [b.op("Unsqueeze", [rows, b.const(i64(0))]), b.op("Concat", [number, width, b.const(i64(depth))], axis=0)])
        return b.op("GatherElements", [padded, rows], axis=1)

    end_scores = by_end(by_start(piece_scores, ninf), ninf)
    end_ids = by_end(by_start(found, np.int64(-1)), np.int64(-1))
    window = b.op(
        "Expand",
        [b.const(np.array([0] + [-np.inf] * (depth - 1), dtype=dtype), keep_float64=True), b.op("Concat", [number, b.const(i64(depth))], axis=0)],
    )

    def step(g: GraphBuilder, j: str, state: list[str]) -> tuple[None, list[str], list[tuple[str, int]]]:
        (best_before,) = state  # [S, D]: best score ending at j, j - 1, ..., j - D + 1
        here = g.op("Gather", [end_scores, j], axis=1)
        candidates = g.add(best_before, here)
        best = g.op("ReduceMax", [candidates, g.const(i64(1))], keepdims=1)
        choice = g.op("ArgMax", [candidates], axis=1, keepdims=0, select_last_index=1)
        moved = g.op("Slice", [best_before, g.const(i64(0)), g.const(i64(depth - 1)), g.const(i64(1))])
        return None, [g.op("Concat", [best, moved], axis=1)], [(choice, INT64)]

    _, choices = b.loop(b.op("Squeeze", [width]), [(window, kind)], step, hint=f"{name}_viterbi")
    choices = b.op("Transpose", [choices], perm=[1, 0])  # [S, W]: at end j + 1, the chosen length - 1
    spans = b.add(choices, b.const(np.int64(1)))
    ends = b.op("Unsqueeze", [b.op("Range", [b.const(np.int64(1)), b.add(b.op("Squeeze", [width]), b.const(np.int64(1))), b.const(np.int64(1))]), b.const(i64(0))])
    back = b.op("Concat", [b.op("Expand", [b.const(i64(0)), b.op("Concat", [number, b.const(i64(1))], axis=0)]), b.op("Max", [b.op("Sub", [ends, spans]), b.const(np.int64(0))])], axis=1)
    # Binary lifting from each sequence's end: up[k][j] = back applied 2**k times.
    levels = [back]
    for _ in range(LIFTING_LEVELS - 1):
        levels.append(b.op("GatherElements", [levels[-1], levels[-1]], axis=1))
    slots = b.op("Unsqueeze", [b.op("Range", [b.const(np.int64(0)), b.add(b.op("Squeeze", [width]), b.const(np.int64(1))), b.const(np.int64(1))]), b.const(i64(0))])
    at = b.op("Expand", [b.op("Unsqueeze", [lengths, b.const(i64(1))]), b.op("Shape", [back])])
    for level in reversed(levels):
        jumped = b.op("GatherElements", [level, at], axis=1)
        at = b.op("Where", [b.op("GreaterOrEqual", [jumped, slots]), jumped, at])
    on_path = b.op("And", [b.op("Equal", [at, slots]), b.op("Greater", [slots, b.const(np.int64(0))])])
    on_path = b.op("And", [on_path, b.op("LessOrEqual", [slots, b.op("Unsqueeze", [lengths, b.const(i64(1))])])])
    flat_on_path = b.op("Reshape", [b.op("Slice", [on_path, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max)), b.const(i64(1))]), b.const(i64(-1))])
    chosen = b.op("Reshape", [choices, b.const(i64(-1))])
    picked_ids = b.op("GatherElements", [b.op("Reshape", [end_ids, b.op("Concat", [b.const(i64(-1)), b.const(i64(depth))], axis=0)]), b.op("Unsqueeze", [chosen, b.const(i64(1))])], axis=1)
    ids = b.op("Compress", [b.op("Squeeze", [picked_ids, b.const(i64(1))]), flat_on_path], axis=0)
    length = b.op("Compress", [b.add(chosen, b.const(np.int64(1))), flat_on_path], axis=0)
    end_slot = b.op("Reshape", [b.op("Expand", [ends, b.op("Shape", [choices])]), b.const(i64(-1))])
    seq = b.op("Reshape", [b.op("Expand", [b.op("Unsqueeze", [b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [number]), b.const(np.int64(1))]), b.const(i64(1))]), b.op("Shape", [choices])]), b.const(i64(-1))])
    seq = b.op("Compress", [seq, flat_on_path], axis=0)
    end_slot = b.op("Compress", [end_slot, flat_on_path], axis=0)
    starts_at = b.op("Gather", [sequences.splits, seq])
    begin = b.add(starts_at, b.op("Sub", [end_slot, length]))
    return Tokens(ids, seq, begin, length)


def fuse_unknown(b: GraphBuilder, tokens: Tokens, unk_id: int) -> Tokens:
    """Runs of adjacent unknown pieces in a sequence become one (SentencePiece and ``tokenizers``
    both do), spanning the run's code points."""
    unknown = b.op("Equal", [tokens.ids, b.const(np.int64(unk_id))])
    same = b.op("Equal", [_shift_back(b, tokens.seq), tokens.seq])
    follows = b.op("And", [unknown, b.op("And", [same, _shift_back_bool(b, unknown)])])
    head = b.op("Not", [follows])
    run = b.op("Sub", [b.op("CumSum", [b.op("Cast", [head], to=INT64), b.const(np.int64(0))]), b.const(np.int64(1))])
    total = b.op("ScatterElements", [b.op("Mul", [tokens.length, b.const(np.int64(0))]), run, tokens.length], reduction="add")
    return Tokens(
        ids=b.op("Compress", [tokens.ids, head], axis=0),
        seq=b.op("Compress", [tokens.seq, head], axis=0),
        begin=b.op("Compress", [tokens.begin, head], axis=0),
        length=b.op("Compress", [b.op("Gather", [total, run]), head], axis=0),
    )


def _shift_back(b: GraphBuilder, values: str) -> str:
    padded = b.op("Concat", [b.const(i64(-1)), values], axis=0)
    return b.op("Slice", [padded, b.const(i64(0)), b.op("Shape", [values])])


def _shift_back_bool(b: GraphBuilder, values: str) -> str:
    padded = b.op("Concat", [b.const(np.array([False])), values], axis=0)
    return b.op("Slice", [padded, b.const(i64(0)), b.op("Shape", [values])])


@dataclass(frozen=True)
class Merges:
    """BPE merges: pair (left id, right id) → rank (lower first) and merged id."""

    pairs: dict[tuple[int, int], tuple[int, int]]
    vocab_size: int


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
    first = walk(b, characters, codes, positions(b, codes), b.op("Min", [_remaining(b, words, codes), b.const(np.int64(1))]), f"{name}_chars")
    ids = b.op("Squeeze", [b.op("Slice", [first, b.const(i64(0)), b.const(i64(1)), b.const(i64(1))]), b.const(i64(1))])
    ids = b.op("Where", [b.op("Less", [ids, b.const(np.int64(0))]), b.const(np.int64(unk_id)), ids])
    unknown = b.op("Equal", [ids, b.const(np.int64(unk_id))])
    follows = b.op("And", [unknown, neighbour(b, unknown, words, -1, np.bool_(False))])
    head = b.op("Not", [follows])
    run = b.op("Sub", [b.op("CumSum", [b.op("Cast", [head], to=INT64), b.const(np.int64(0))]), b.const(np.int64(1))])
    ones = b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [ids])])
    run_length = b.op("ScatterElements", [b.op("Mul", [ones, b.const(np.int64(0))]), run, ones], reduction="add")
    char_length = b.op("Gather", [run_length, run])
    symbols, symbol_words = b.op("Compress", [ids, head], axis=0), b.op("Compress", [words.seg, head], axis=0)
    symbol_length = b.op("Compress", [char_length, head], axis=0)
    symbol_segments = Segments(symbol_words, b.op("Concat", [b.const(i64(0)), b.op("CumSum", [sum_per_segment(b, words, b.op("Cast", [head], to=INT64)), b.const(np.int64(0))])], axis=0))
    padded_ids, _ = to_padded(b, symbols, symbol_segments, np.int64(-1))
    padded_length, _ = to_padded(b, symbol_length, symbol_segments, np.int64(0))
    keys = sorted(merges.pairs)
    pair_keys = [left * merges.vocab_size + right for left, right in keys]
    rank_table = b.derived(f"{name}_ranks", np.array([merges.pairs[k][0] for k in keys] + [np.iinfo(np.int64).max], dtype=np.int64))
    merged_table = b.derived(f"{name}_merged", np.array([merges.pairs[k][1] for k in keys] + [-1], dtype=np.int64))
    never = np.iinfo(np.int64).max

    def step(g: GraphBuilder, _: str, state: list[str]) -> tuple[str, list[str], list]:
        symbols_now, lengths_now = state
        width = g.op("Shape", [symbols_now], start=1, end=2)
        left = g.op("Slice", [symbols_now, g.const(i64(0)), g.op("Sub", [width, g.const(i64(1))]), g.const(i64(1))])
        right = g.op("Slice", [symbols_now, g.const(i64(1)), width, g.const(i64(1))])
        valid = g.op("And", [g.op("GreaterOrEqual", [left, g.const(np.int64(0))]), g.op("GreaterOrEqual", [right, g.const(np.int64(0))])])
        key = g.add(g.mul(left, g.const(np.int64(merges.vocab_size))), right)
        key = g.op("Where", [valid, key, g.const(np.int64(-1))])
        pair = g.op(
            "LabelEncoder", [key], domain=ML_DOMAIN, keys_int64s=pair_keys or [-2], values_int64s=list(range(len(pair_keys))) or [0], default_int64=-1
        )
        rank = g.op("Gather", [rank_table, pair])
        # one spare column so that a one-symbol word still has a (never chosen) pair
        rank = g.op("Concat", [rank, g.op("Expand", [g.const(np.array([[never]], dtype=np.int64)), g.op("Concat", [g.op("Shape", [rank], start=0, end=1), g.const(i64(1))], axis=0)])], axis=1)
        pair = g.op("Concat", [pair, g.op("Expand", [g.const(np.array([[-1]], dtype=np.int64)), g.op("Concat", [g.op("Shape", [pair], start=0, end=1), g.const(i64(1))], axis=0)])], axis=1)
        lowest = g.op("ReduceMin", [rank, g.const(i64(1))], keepdims=1)
        # int32 for ArgMin (ORT 1.17 has no int64 one); ranks are below 2**31, "never" becomes 2**31 - 1
        where = g.op("ArgMin", [g.op("Cast", [g.op("Min", [rank, g.const(np.int64(2**31 - 1))])], to=INT32)], axis=1, keepdims=1)
        merging = g.op("Less", [lowest, g.const(np.int64(never))])
        merged = g.op("Gather", [merged_table, g.op("GatherElements", [pair, where], axis=1)])
        columns = g.op("Unsqueeze", [g.op("Range", [g.const(np.int64(0)), g.op("Squeeze", [width]), g.const(np.int64(1))]), g.const(i64(0))])
        shifted = g.op("Concat", [right, g.op("Expand", [g.const(np.array([[-1]], dtype=np.int64)), g.op("Concat", [g.op("Shape", [right], start=0, end=1), g.const(i64(1))], axis=0)])], axis=1)
        moved = g.op("Where", [g.op("Less", [columns, where]), symbols_now, g.op("Where", [g.op("Equal", [columns, where]), merged, shifted])])
        length_right = g.op("Slice", [lengths_now, g.const(i64(1)), width, g.const(i64(1))])
        length_shifted = g.op("Concat", [length_right, g.op("Expand", [g.const(np.array([[0]], dtype=np.int64)), g.op("Concat", [g.op("Shape", [right], start=0, end=1), g.const(i64(1))], axis=0)])], axis=1)
        joined = g.add(g.op("GatherElements", [lengths_now, where], axis=1), g.op("GatherElements", [length_shifted, where], axis=1))
        moved_length = g.op("Where", [g.op("Less", [columns, where]), lengths_now, g.op("Where", [g.op("Equal", [columns, where]), joined, length_shifted])])
        out = g.op("Where", [merging, moved, symbols_now])
        out_length = g.op("Where", [merging, moved_length, lengths_now])
        go_on = g.op("Greater", [g.op("ReduceSum", [g.op("Cast", [merging], to=INT64)], keepdims=0), g.const(np.int64(0))])
        return go_on, [out, out_length], []

    trips = b.op("Squeeze", [b.op("Shape", [padded_ids], start=1, end=2)])
    final, final_length = b.loop(trips, [(padded_ids, INT64), (padded_length, INT64)], step, hint=f"{name}_merges")
    flat = b.op("Reshape", [final, b.const(i64(-1))])
    flat_length = b.op("Reshape", [final_length, b.const(i64(-1))])
    kept = b.op("GreaterOrEqual", [flat, b.const(np.int64(0))])
    width = b.op("Shape", [final], start=1, end=2)
    rows = b.op("Div", [b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [b.op("Shape", [flat])]), b.const(np.int64(1))]), b.op("Max", [width, b.const(i64(1))])])
    seq = b.op("Compress", [rows, kept], axis=0)
    length = b.op("Compress", [flat_length, kept], axis=0)
    token_ids = b.op("Compress", [flat, kept], axis=0)
    # first code point: the word's start plus the lengths of the word's earlier pieces
    within = b.op("Sub", [b.op("CumSum", [length, b.const(np.int64(0))]), length])
    first_of_word = b.op("Gather", [within, _first_positions(b, seq)])
    begin = b.add(b.op("Gather", [words.splits, seq]), b.op("Sub", [within, first_of_word]))
    return Tokens(token_ids, seq, begin, length)


def _first_positions(b: GraphBuilder, seq: str) -> str:
    """int64 ``[N]``: for each element, the position of the first element with its ``seq``."""
    from .flat import last_where

    change = b.op("Not", [b.op("Equal", [_shift_back(b, seq), seq])])
    return last_where(b, change)


__all__ = ["BOOL", "Merges", "Tokens", "bpe", "fuse_unknown", "same_segment", "unigram"]
