"""SentencePiece normalization in standard ONNX ops, from the model's own ``precompiled_charsmap``.

A charsmap is a set of rules "this code point sequence → that one" (NFKC and the like). Two readers
of it exist and differ, and each is reproduced:

* ``longest``: SentencePiece's normalizer. From the start of the text, the longest rule that
  matches is applied (or one character copied), and matching goes on after it.
* ``grapheme``: HF ``tokenizers``' ``Precompiled`` normalizer (NLLB, mBART-50, T5 in transformers 5).
  The text is cut into extended grapheme clusters; a cluster shorter than six bytes whose start
  matches a rule becomes the *shortest* matching rule's output (the rest of the cluster is
  dropped); any other cluster is mapped character by character.

Both return *units*: a unit starts at a character and is either a rule (its output replaces it) or
the character itself; the normalized text is the units' outputs in order (``apply_units``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .builder import BOOL, INT64, GraphBuilder, i64
from .flat import (
    Segments,
    sum_per_segment,
    expand,
    from_flags,
    from_splits,
    last_where,
    neighbour,
    positions,
    same_segment,
    shift,
    size,
    splits_from_counts,
    starts,
)
from .trie import CodepointTrie, walk
from .unicode_data import (
    CLASS_MASK,
    CONTROL,
    CR,
    EXTEND,
    EXTENDED_PICTOGRAPHIC,
    INCB_CONSONANT,
    INCB_EXTEND,
    INCB_LINKER,
    INCB_SHIFT,
    LF,
    LV,
    LVT,
    PREPEND,
    REGIONAL_INDICATOR,
    SPACING_MARK,
    ZWJ,
    L,
    T,
    V,
    grapheme_classes,
    to_blocks,
)


def read_charsmap(blob: bytes) -> dict[str, str]:
    """The rules of a SentencePiece ``precompiled_charsmap``: ``[u32 trie size][darts-clone double
    array][NUL-terminated outputs]``, each key of the trie a UTF-8 input, its value an output offset."""
    if not blob:
        return {}
    (size_,) = struct.unpack_from("<I", blob, 0)
    units = struct.unpack_from(f"<{size_ // 4}I", blob, 4)
    outputs = blob[4 + size_ :]

    def offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    rules: dict[str, str] = {}
    stack = [(offset(units[0]), b"")]
    while stack:
        node, key = stack.pop()
        for byte in range(1, 256):
            child = node ^ byte
            if child >= len(units) or units[child] & ((1 << 31) | 0xFF) != byte:
                continue
            unit = units[child]
            below = child ^ offset(unit)
            spelled = key + bytes([byte])
            if (unit >> 8) & 1:
                start = units[below] & ((1 << 31) - 1)
                rules[spelled.decode("utf-8")] = outputs[start : outputs.index(b"\0", start)].decode("utf-8")
            stack.append((below, spelled))
    return rules


@dataclass(frozen=True)
class Charsmap:
    """Rules as a trie (key → output index) and an output pool of code points."""

    trie: CodepointTrie
    pool: np.ndarray  # int64 code points of all outputs, one spare 0 at the end
    begin: np.ndarray  # int64 per output
    length: np.ndarray  # int64 per output

    @classmethod
    def from_rules(cls, rules: dict[str, str]) -> Charsmap:
        outputs: dict[str, int] = {}
        trie = CodepointTrie()
        for key, value in sorted(rules.items()):
            index = outputs.setdefault(value, len(outputs))
            trie.add([ord(c) for c in key], index)
        texts = list(outputs)
        lengths = np.array([len(t) for t in texts], dtype=np.int64)
        begin = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if texts else np.zeros(0, np.int64)
        pool = np.array([ord(c) for t in texts for c in t] + [0], dtype=np.int64)
        return cls(trie, pool, begin, lengths)


def _flag(b: GraphBuilder, klass: str, *values: int) -> str:
    out = None
    for value in values:
        hit = b.op("Equal", [klass, b.const(np.int64(value))])
        out = hit if out is None else b.op("Or", [out, hit])
    assert out is not None
    return out


def grapheme_breaks(b: GraphBuilder, codes: str, segments: Segments) -> str:
    """bool ``[T]``: whether an extended grapheme cluster (UAX #29, as the installed ``tokenizers``
    sees it) starts at each code point; every segment start is one."""
    index, blocks = to_blocks(grapheme_classes())
    block = b.op("Gather", [b.derived("grapheme_block_index", index.astype(np.int64)), b.op("Div", [codes, b.const(np.int64(256))])])
    entry = b.add(b.mul(block, b.const(np.int64(256))), b.op("Mod", [codes, b.const(np.int64(256))]))
    props = b.op("Cast", [b.op("Gather", [b.derived("grapheme_blocks", blocks.reshape(-1)), entry])], to=INT64)
    klass = b.op("Mod", [props, b.const(np.int64(CLASS_MASK + 1))])
    incb = b.op("Div", [props, b.const(np.int64(1 << INCB_SHIFT))])
    pict_bit = b.op("Mod", [b.op("Div", [props, b.const(np.int64(EXTENDED_PICTOGRAPHIC))]), b.const(np.int64(2))])
    pict = b.op("Equal", [pict_bit, b.const(np.int64(1))])
    prev = neighbour(b, klass, segments, -1, np.int64(-1))
    joined = same_segment(b, segments, -1)  # breaks only happen inside a segment from here on

    def cls(value: str, *names: int) -> str:
        return _flag(b, value, *names)

    # The rules in UAX #29's order: the first that applies decides.
    decided_join = b.op("And", [cls(prev, CR), cls(klass, LF)])  # GB3
    decided = decided_join
    control = b.op("Or", [cls(prev, CONTROL, CR, LF), cls(klass, CONTROL, CR, LF)])  # GB4, GB5
    decided = b.op("Or", [decided, control])
    join = decided_join

    def rule(condition: str) -> None:
        nonlocal decided, join
        fresh = b.op("And", [condition, b.op("Not", [decided])])
        join = b.op("Or", [join, fresh])
        decided = b.op("Or", [decided, condition])

    rule(b.op("And", [cls(prev, L), cls(klass, L, V, LV, LVT)]))  # GB6
    rule(b.op("And", [cls(prev, LV, V), cls(klass, V, T)]))  # GB7
    rule(b.op("And", [cls(prev, LVT, T), cls(klass, T)]))  # GB8
    rule(cls(klass, EXTEND, ZWJ, SPACING_MARK))  # GB9, GB9a
    rule(cls(prev, PREPEND))  # GB9b
    # GB9c: Consonant [Extend Linker]* Linker [Extend Linker]* × Consonant
    where = positions(b, codes)
    segment_start = last_where(b, starts(b, segments))
    glue = _flag(b, incb, INCB_EXTEND, INCB_LINKER)
    before_glue = last_where(b, b.op("Not", [glue]))  # last position ≤ t that is not Extend/Linker
    anchor = shift(b, before_glue, -1, np.int64(-1))  # … strictly before t
    linkers = b.op("CumSum", [b.op("Cast", [_flag(b, incb, INCB_LINKER)], to=INT64), b.const(np.int64(0))])
    linkers_before = shift(b, linkers, -1, np.int64(0))
    safe_anchor = b.op("Max", [anchor, b.const(np.int64(0))])
    linker_between = b.op("Greater", [linkers_before, b.op("Gather", [linkers, safe_anchor])])
    conjunct = b.op(
        "And",
        [
            b.op("And", [cls(incb, INCB_CONSONANT), b.op("GreaterOrEqual", [anchor, segment_start])]),
            b.op("And", [cls(b.op("Gather", [incb, safe_anchor]), INCB_CONSONANT), linker_between]),
        ],
    )
    rule(conjunct)
    # GB11: ExtPict Extend* ZWJ × ExtPict
    not_extend = b.op("Not", [cls(klass, EXTEND)])
    before_extend = shift(b, last_where(b, not_extend), -2, np.int64(-1))  # last non-Extend ≤ t - 2
    safe = b.op("Max", [before_extend, b.const(np.int64(0))])
    emoji = b.op(
        "And",
        [
            b.op("And", [cls(prev, ZWJ), pict]),
            b.op("And", [b.op("GreaterOrEqual", [before_extend, segment_start]), b.op("Gather", [pict, safe])]),
        ],
    )
    rule(emoji)
    # GB12, GB13: regional indicators pair up from the start of their run
    ri = cls(klass, REGIONAL_INDICATOR)
    run_start = last_where(b, b.op("Not", [ri]))  # last non-RI ≤ t (≥ segment start - 1 is enough)
    run_start = b.op("Max", [run_start, b.op("Sub", [segment_start, b.const(np.int64(1))])])
    odd = b.op("Equal", [b.op("Mod", [b.op("Sub", [where, run_start]), b.const(np.int64(2))]), b.const(np.int64(0))])
    rule(b.op("And", [b.op("And", [cls(prev, REGIONAL_INDICATOR), ri]), odd]))
    del where
    return b.op("Not", [b.op("And", [joined, join])])


def _utf8_length(b: GraphBuilder, codes: str) -> str:
    out = b.const(np.int64(1))
    for limit in (0x80, 0x800, 0x10000):
        out = b.add(out, b.op("Cast", [b.op("GreaterOrEqual", [codes, b.const(np.int64(limit))])], to=INT64))
    return out


def _remaining(b: GraphBuilder, segments: Segments, values: str) -> str:
    """int64 ``[T]``: elements from each one to the end of its segment."""
    end = b.op("Gather", [b.op("Slice", [segments.splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))]), segments.seg])
    return b.op("Sub", [end, positions(b, values)])


def longest_units(b: GraphBuilder, charsmap: Charsmap, codes: str, segments: Segments) -> tuple[str, str]:
    """SentencePiece's greedy longest match: (bool ``[T]`` unit starts, int64 ``[T]`` output index or -1)."""
    if charsmap.trie.depth == 0:
        ones = b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])])
        return ones, b.op("Expand", [b.const(np.int64(-1)), b.op("Shape", [codes])])
    depth = charsmap.trie.depth
    found = walk(b, charsmap.trie, codes, positions(b, codes), _remaining(b, segments, codes), "charsmap")
    matched = b.op("GreaterOrEqual", [found, b.const(np.int64(0))])
    lengths = b.op("Mul", [b.op("Cast", [matched], to=INT64), b.const(np.arange(1, depth + 1, dtype=np.int64))])
    longest = b.op("ReduceMax", [lengths, b.const(i64(1))], keepdims=0)
    value = b.op("GatherElements", [found, b.op("Unsqueeze", [b.op("Max", [b.op("Sub", [longest, b.const(np.int64(1))]), b.const(np.int64(0))]), b.const(i64(1))])], axis=1)
    value = b.op("Where", [b.op("Greater", [longest, b.const(np.int64(0))]), b.op("Squeeze", [value, b.const(i64(1))]), b.const(np.int64(-1))])
    span = b.op("Max", [longest, b.const(np.int64(1))])
    if depth == 1:
        return b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])]), value
    # Which positions the left-to-right scan stops at: a fixpoint, reached in as many rounds as the
    # longest chain of overlapping matches (one or two in practice).
    reach = [b.op("And", [same_segment(b, segments, -d), b.const(np.array(True))]) for d in range(1, depth)]

    def body(g: GraphBuilder, _: str, state: list[str]) -> tuple[str, list[str], list]:
        (scan,) = state
        covered = g.const(np.array(False))
        for d in range(1, depth):
            reaches = g.op("And", [scan, g.op("Greater", [span, g.const(np.int64(d))])])
            covered = g.op("Or", [covered, g.op("And", [shift(g, reaches, -d, np.bool_(False)), reach[d - 1]])])
        fresh = g.op("Not", [covered])
        changed = g.op("Not", [g.op("Equal", [fresh, scan])])
        go_on = g.op("Greater", [g.op("ReduceSum", [g.op("Cast", [changed], to=INT64)], keepdims=0), g.const(np.int64(0))])
        return go_on, [fresh], []

    everything = b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])])
    (unit_starts,) = b.loop(b.op("Squeeze", [b.add(size(b, codes), b.const(i64(1)))]), [(everything, BOOL)], body, hint="longest_match")
    return unit_starts, value


def grapheme_units(b: GraphBuilder, charsmap: Charsmap, codes: str, segments: Segments) -> tuple[str, str]:
    """HF ``Precompiled``: (bool ``[T]`` unit starts, int64 ``[T]`` output index or -1)."""
    breaks = grapheme_breaks(b, codes, segments)
    clusters = from_flags(b, b.op("Or", [breaks, starts(b, segments)]))
    first = b.op("Slice", [clusters.splits, b.const(i64(0)), b.const(i64(-1))])
    chars = b.op("Sub", [b.op("Slice", [clusters.splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))]), first])
    nbytes = b.op("ScatterElements", [b.op("Mul", [chars, b.const(np.int64(0))]), clusters.seg, _utf8_length(b, codes)], reduction="add")
    # One walk for both questions: each code point's own rule, and each cluster's shortest rule.
    where = positions(b, codes)
    both = walk(
        b,
        charsmap.trie,
        codes,
        b.op("Concat", [where, first], axis=0),
        b.op("Concat", [b.op("Min", [_remaining(b, segments, codes), b.const(np.int64(1))]), chars], axis=0),
        "charsmap",
    )
    code_count = size(b, codes)
    own = b.op("Slice", [both, b.const(i64(0)), code_count, b.const(i64(0))])
    single = b.op("Squeeze", [b.op("Slice", [own, b.const(i64(0)), b.const(i64(1)), b.const(i64(1))]), b.const(i64(1))])
    found = b.op("Slice", [both, code_count, b.const(i64(np.iinfo(np.int64).max)), b.const(i64(0))])
    matched = b.op("GreaterOrEqual", [found, b.const(np.int64(0))])
    any_match = b.op("Greater", [b.op("ReduceSum", [b.op("Cast", [matched], to=INT64), b.const(i64(1))], keepdims=0), b.const(np.int64(0))])
    shortest = b.op("ArgMax", [b.op("Cast", [matched], to=INT64)], axis=1, keepdims=1)
    value = b.op("Squeeze", [b.op("GatherElements", [found, shortest], axis=1), b.const(i64(1))])
    whole = b.op("And", [any_match, b.op("Less", [nbytes, b.const(np.int64(6))])])  # per cluster
    whole_at = b.op("Gather", [whole, clusters.seg])  # per code point
    is_first = b.op("Equal", [where, b.op("Gather", [first, clusters.seg])])
    unit_starts = b.op("Or", [b.op("Not", [whole_at]), is_first])
    out = b.op("Where", [whole_at, b.op("Gather", [value, clusters.seg]), single])
    return unit_starts, out


def apply_units(
    b: GraphBuilder, charsmap: Charsmap, codes: str, segments: Segments, unit_starts: str, value: str
) -> tuple[str, Segments, str]:
    """The normalized text: (code points ``[T2]``, their segments, the position in ``codes`` of the
    unit each comes from)."""
    pool = b.derived("charsmap_outputs", charsmap.pool)
    begin = b.derived("charsmap_begin", np.append(charsmap.begin, 0))
    length = b.derived("charsmap_length", np.append(charsmap.length, 1))
    rule = b.op("GreaterOrEqual", [value, b.const(np.int64(0))])
    out_length = b.op("Where", [rule, b.op("Gather", [length, value]), b.const(np.int64(1))])
    out_length = b.op("Where", [unit_starts, out_length, b.const(np.int64(0))])
    source, k = expand(b, out_length)
    rule_at = b.op("Gather", [rule, source])
    from_rule = b.op("Gather", [pool, b.add(b.op("Gather", [begin, b.op("Gather", [value, source])]), k)])
    out = b.op("Where", [rule_at, from_rule, b.op("Gather", [codes, source])])
    per_segment = sum_per_segment(b, segments, out_length)
    return out, from_splits(b, splits_from_counts(b, per_segment), size(b, out)), source


__all__ = [
    "Charsmap",
    "apply_units",
    "grapheme_breaks",
    "grapheme_units",
    "longest_units",
    "read_charsmap",
]
