"""Added tokens typed inside a text, found in standard ONNX ops.

Before anything else touches a text, an HF tokenizer splits it at every occurrence of its added
tokens: the special tokens (``</s>``, ``<unk>``), the language codes (``eng_Latn``, ``__fr__``),
``<mask>``, T5's sentinels (``<extra_id_0>``). Each occurrence becomes that token's id, and the text
between occurrences is tokenized piece by piece as usual. The occurrences are found leftmost-longest
without overlaps (``tokenizers``' ``AddedVocabulary``, transformers' ``Trie.split``): from the left,
the longest token that starts at the first position where one does, then the same after its end.
A token with ``lstrip`` (``rstrip``) also takes the whitespace on its left (right) side, which then
belongs to no text.

In the graph every code point is a possible start: one trie walk (``trie.walk``) gives the longest
token starting at each, and a ``Loop`` drops the occurrences that start inside an earlier kept one
until nothing changes. The decision at a position depends only on the ones before it, so that fixed
point is the left-to-right scan's result; text whose tokens do not overlap, the usual case, needs
one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .builder import BOOL, INT64, GraphBuilder, i64
from .flat import Segments, first_index, last_where, next_where, positions, remaining, segment_end, shift, zeros
from .pretokenize import is_white_space
from .trie import CodepointTrie, walk


@dataclass(frozen=True)
class AddedToken:
    """One added token as the tokenizer declares it."""

    content: str
    id: int
    lstrip: bool = False  # takes the whitespace before it
    rstrip: bool = False  # takes the whitespace after it


@dataclass(frozen=True)
class Occurrences:
    """Where the added tokens are in a flat text (value names, each ``[T]``)."""

    begins: str  # bool: the first code point of an occurrence, its stripped whitespace included
    ids: str  # int64: the token's id where an occurrence begins, -1 elsewhere
    covered: str  # bool: inside an occurrence (the token or whitespace it took)


def find_added_tokens(
    b: GraphBuilder, codes: str, segments: Segments, tokens: Sequence[AddedToken], name: str
) -> Occurrences:
    """The occurrences of ``tokens`` in ``codes`` (int64 ``[T]`` code points), none across segments."""
    count = b.op("Shape", [codes])
    if not tokens:
        nothing = b.op("Expand", [b.const(np.array(False)), count])
        return Occurrences(nothing, b.op("Expand", [b.const(np.int64(-1)), count]), nothing)
    if len({token.content for token in tokens}) != len(tokens) or not all(token.content for token in tokens):
        raise ValueError("added tokens must be distinct and non-empty")
    trie = CodepointTrie.build(([ord(c) for c in token.content], index) for index, token in enumerate(tokens))
    depth = trie.depth
    found = walk(b, trie, codes, positions(b, codes), remaining(b, segments), name)  # [T, depth] token index
    lengths = b.op(
        "Where",
        [
            b.op("GreaterOrEqual", [found, b.const(np.int64(0))]),
            b.const(np.arange(1, depth + 1, dtype=np.int64)),
            b.const(np.int64(0)),
        ],
    )
    length = b.op("ReduceMax", [lengths, b.const(i64(1))], keepdims=0)  # the longest starting here, 0: none
    column = b.op(
        "Unsqueeze", [b.op("Max", [b.op("Sub", [length, b.const(np.int64(1))]), b.const(np.int64(0))]), b.const(i64(1))]
    )
    which = b.op("Squeeze", [b.op("GatherElements", [found, column], axis=1), b.const(i64(1))])
    candidate = b.op("Greater", [length, b.const(np.int64(0))])

    def scan(g: GraphBuilder, _: str, state: list[str]) -> tuple[str, list[str], list[tuple[str, int]]]:
        (kept,) = state
        kept_length = g.op("Where", [kept, length, g.const(np.int64(0))])
        inside = g.op("Expand", [g.const(np.array(False)), count])
        for back in range(1, depth):  # an occurrence kept ``back`` code points earlier reaches here
            reaching = g.op("Greater", [shift(g, kept_length, -back, np.int64(0)), g.const(np.int64(back))])
            inside = g.op("Or", [inside, reaching])
        now = g.op("And", [candidate, g.op("Not", [inside])])
        changed = g.op("Cast", [g.op("Xor", [now, kept])], to=INT64)
        go_on = g.op(
            "Greater", [g.op("ReduceMax", [g.op("Concat", [changed, g.const(i64(0))], axis=0)]), g.const(np.int64(0))]
        )
        return go_on, [now], []

    trips = b.add(count, b.const(i64(1)))  # a bound the fixed point never reaches
    (kept,) = b.loop(
        b.op("Squeeze", [trips]), [(candidate, BOOL)], scan, hint=f"{name}_scan", condition=b.const(np.array(True))
    )
    at = b.op("Compress", [positions(b, codes), kept], axis=0)  # the kept occurrences, [K]
    index = b.op("Gather", [which, at])
    begin, end = at, b.add(at, b.op("Gather", [length, at]))
    white = is_white_space(b, codes)
    flags = np.array([[token.lstrip, token.rstrip] for token in tokens], dtype=bool)
    if flags[:, 0].any():  # back over the whitespace before it, not past its segment's start
        before = shift(b, last_where(b, b.op("Not", [white])), -1, np.int64(-1))
        stripped = b.op(
            "Max",
            [b.add(b.op("Gather", [before, at]), b.const(np.int64(1))), b.op("Gather", [first_index(b, segments), at])],
        )
        lstrip = b.op("Gather", [b.const(flags[:, 0]), index])
        begin = b.op("Where", [lstrip, stripped, begin])
    if flags[:, 1].any():  # on over the whitespace after it, not past its segment's end
        after = b.op("Concat", [next_where(b, b.op("Not", [white])), count], axis=0)
        stripped = b.op("Min", [b.op("Gather", [after, end]), b.op("Gather", [segment_end(b, segments), at])])
        rstrip = b.op("Gather", [b.const(flags[:, 1]), index])
        end = b.op("Where", [rstrip, stripped, end])
    ids = b.op("Gather", [b.const(np.array([token.id for token in tokens], dtype=np.int64)), index])
    marks = zeros(b, b.add(count, b.const(i64(1))))
    ones = b.op("Expand", [b.const(np.int64(1)), b.op("Shape", [at])])
    marks = b.op("ScatterElements", [marks, begin, ones], reduction="add")
    minus = b.op("Expand", [b.const(np.int64(-1)), b.op("Shape", [at])])
    marks = b.op("ScatterElements", [marks, end, minus], reduction="add")
    depth_here = b.op("CumSum", [b.op("Slice", [marks, b.const(i64(0)), count]), b.const(np.int64(0))])
    covered = b.op("Greater", [depth_here, b.const(np.int64(0))])
    begins = b.op(
        "Greater", [b.op("ScatterElements", [zeros(b, count), begin, ones], reduction="add"), b.const(np.int64(0))]
    )
    id_at = b.op("ScatterElements", [b.op("Expand", [b.const(np.int64(-1)), count]), begin, ids])
    return Occurrences(begins, id_at, covered)


__all__ = ["AddedToken", "Occurrences", "find_added_tokens"]
