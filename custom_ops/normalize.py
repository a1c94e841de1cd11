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

from .builder import BOOL, INT32, INT64, GraphBuilder, i64
from .flat import (
    Segments,
    expand,
    from_flags,
    from_splits,
    last_where,
    neighbour,
    positions,
    remaining,
    same_segment,
    shift,
    size,
    splits_from_counts,
    starts,
    sum_per_segment,
)
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


def _offset(unit: np.ndarray) -> np.ndarray:
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


@dataclass(frozen=True)
class Charsmap:
    """A ``precompiled_charsmap`` as the graph reads it: its double array, walked byte by byte as
    SentencePiece walks it, and its outputs decoded to code points."""

    units: np.ndarray  # int64: the darts-clone double array (one unit: no rules)
    pool: np.ndarray  # int64: code points of the outputs blob, 0 where the blob has its NULs
    begin: np.ndarray  # int64 per byte offset of the outputs blob: where its output starts in pool
    length: np.ndarray  # int64 per byte offset: code points from there to the output's end
    longest_key: int  # code points of the longest rule (an upper bound)

    @classmethod
    def from_blob(cls, blob: bytes) -> Charsmap:
        if not blob:
            return cls(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), 0)
        (size_,) = struct.unpack_from("<I", blob, 0)
        units = np.frombuffer(blob, dtype="<u4", count=size_ // 4, offset=4).astype(np.int64)
        outputs = blob[4 + size_ :]
        pool: list[int] = []
        begin = np.full(len(outputs) + 1, -1, dtype=np.int64)
        length = np.zeros(len(outputs) + 1, dtype=np.int64)
        at = 0
        for part in outputs.split(b"\0"):
            text = part.decode("utf-8", errors="replace")
            offsets = np.cumsum([0] + [len(c.encode("utf-8")) for c in text])
            begin[at + offsets[:-1]] = len(pool) + np.arange(len(text))
            length[at + offsets[:-1]] = len(text) - np.arange(len(text))
            begin[at + offsets[-1]] = len(pool) + len(text)  # the empty output at the NUL
            pool.extend(ord(c) for c in text)
            pool.append(0)
            at += len(part) + 1
        return cls(units, np.array(pool, dtype=np.int64), begin, length, _longest_key(units))


def _longest_key(units: np.ndarray) -> int:
    """An upper bound of the longest key's code points: a breadth-first walk of the double array,
    one level per byte, counting the bytes that start a UTF-8 character."""
    labels = np.arange(1, 256, dtype=np.int64)
    starts_char = (labels & 0xC0) != 0x80
    nodes, chars = np.array([_offset(units[0])]), np.array([0])
    longest = 0
    while len(nodes):
        child = nodes[:, None] ^ labels[None, :]
        unit = units[np.minimum(child, len(units) - 1)]
        valid = (child < len(units)) & ((unit & ((1 << 31) | 0xFF)) == labels[None, :])
        parent, byte = np.nonzero(valid)
        counted = chars[parent] + starts_char[byte]
        longest = max(longest, int(counted.max(initial=0)))
        below = child[parent, byte] ^ _offset(unit[parent, byte])
        order = np.lexsort((-counted, below))  # per node, keep its largest count
        below, counted = below[order], counted[order]
        keep = np.ones(len(below), dtype=bool)
        keep[1:] = below[1:] != below[:-1]
        nodes, chars = below[keep], counted[keep]
    return longest


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
    block = b.op(
        "Cast",
        [
            b.op(
                "Gather",
                [
                    b.derived("grapheme_block_index", index.astype(np.int32)),
                    b.op("Div", [codes, b.const(np.int64(256))]),
                ],
            )
        ],
        to=INT64,
    )
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


@dataclass(frozen=True)
class _Utf8:
    data: str  # int64 [Nb]: the bytes
    first: str  # int64 [T]: each code point's first byte
    size: str  # int64 [T]: each code point's bytes
    owner: str  # int64 [Nb]: the code point each byte belongs to


def _encode(b: GraphBuilder, codes: str) -> _Utf8:
    """Code points → their UTF-8 bytes (all valid: U+FFFD replaced what was not)."""
    size_ = _utf8_length(b, codes)
    owner, k = expand(b, size_)
    code = b.op("Gather", [codes, owner])
    n = b.op("Gather", [size_, owner])
    shift_ = b.op("Sub", [b.op("Sub", [n, k]), b.const(np.int64(1))])  # 6-bit groups below this byte
    group = b.op("Div", [code, b.op("Gather", [b.const(np.array([1, 64, 4096, 262144], np.int64)), shift_])])
    lead = b.op("Gather", [b.const(np.array([0, 0, 0xC0, 0xE0, 0xF0], np.int64)), n])
    first_byte = b.add(lead, group)  # the lead byte holds all the bits above its continuations
    continuation = b.add(b.const(np.int64(0x80)), b.op("Mod", [group, b.const(np.int64(64))]))
    data = b.op("Where", [b.op("Equal", [k, b.const(np.int64(0))]), first_byte, continuation])
    first = b.op("Sub", [b.op("CumSum", [size_, b.const(np.int64(0))]), size_])
    return _Utf8(data, first, size_, owner)


def _walk(b: GraphBuilder, charsmap: Charsmap, utf8: _Utf8, begin: str, limit: str) -> str:
    """SentencePiece's trie walk from byte ``begin`` (int64 ``[R]``) reading at most ``limit`` bytes:
    int64 ``[R, D]``, column ``d`` the output offset of the rule spelled by the first ``d + 1`` bytes
    (-1: none). The steps are a ``Loop`` that ends when every walk has left the trie."""
    units = b.derived("charsmap_units", charsmap.units.astype(np.uint32))  # stored as the model has it
    count = len(charsmap.units)
    padded = b.op("Concat", [utf8.data, b.const(i64(0))], axis=0)
    end = b.op("Shape", [utf8.data])
    root = b.op("Expand", [b.const(np.int64(_offset(charsmap.units[0]))), b.op("Shape", [begin])])
    alive = b.op("Expand", [b.const(np.array(True)), b.op("Shape", [begin])])
    trips = b.op(
        "Max", [b.op("ReduceMax", [b.op("Concat", [limit, b.const(i64(0))], axis=0)], keepdims=0), b.const(np.int64(1))]
    )

    def body(g: GraphBuilder, d: str, state: list[str]) -> tuple[str, list[str], list[tuple[str, int]]]:
        node, going = state
        inside = g.op("And", [going, g.op("Less", [d, limit])])
        byte = g.op("Gather", [padded, g.op("Min", [g.add(begin, d), end])])
        at = g.op("BitwiseXor", [node, byte])
        unit = g.op("Cast", [g.op("Gather", [units, g.op("Min", [at, g.const(np.int64(count - 1))])])], to=INT64)
        label = g.op("BitwiseAnd", [unit, g.const(np.int64((1 << 31) | 0xFF))])
        ok = g.op(
            "And", [inside, g.op("And", [g.op("Less", [at, g.const(np.int64(count))]), g.op("Equal", [label, byte])])]
        )
        high = g.op("Div", [unit, g.const(np.int64(1024))])
        wide = g.op("Equal", [g.op("BitwiseAnd", [unit, g.const(np.int64(1 << 9))]), g.const(np.int64(1 << 9))])
        below = g.op("BitwiseXor", [at, g.op("Where", [wide, g.mul(high, g.const(np.int64(256))), high])])
        leaf = g.op(
            "And",
            [ok, g.op("Equal", [g.op("BitwiseAnd", [unit, g.const(np.int64(1 << 8))]), g.const(np.int64(1 << 8))])],
        )
        stored = g.op("Cast", [g.op("Gather", [units, g.op("Min", [below, g.const(np.int64(count - 1))])])], to=INT64)
        value = g.op("BitwiseAnd", [stored, g.const(np.int64((1 << 31) - 1))])
        found = g.op("Where", [leaf, value, g.const(np.int64(-1))])
        more = g.op("Greater", [g.op("ReduceSum", [g.op("Cast", [ok], to=INT64)], keepdims=0), g.const(np.int64(0))])
        return more, [below, ok], [(found, INT64)]

    _, _, steps = b.loop(trips, [(root, INT64), (alive, BOOL)], body, hint="charsmap")
    return b.op("Transpose", [steps], perm=[1, 0])


def _bytes_to(b: GraphBuilder, utf8: _Utf8, position: str) -> str:
    """int64 ``[T]``: bytes from each code point to the end of ``position``'s code point (int64 ``[T]``)."""
    last = b.op("Gather", [utf8.first, position])
    return b.op("Sub", [b.add(last, b.op("Gather", [utf8.size, position])), utf8.first])


def longest_units(b: GraphBuilder, charsmap: Charsmap, codes: str, segments: Segments) -> tuple[str, str]:
    """SentencePiece's greedy longest match: (bool ``[T]`` unit starts, int64 ``[T]`` output offset or -1)."""
    everything = b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])])
    if charsmap.longest_key == 0:
        return everything, b.op("Expand", [b.const(np.int64(-1)), b.op("Shape", [codes])])
    utf8 = _encode(b, codes)
    last_of_segment = b.op("Sub", [b.add(positions(b, codes), remaining(b, segments)), b.const(np.int64(1))])
    found = _walk(b, charsmap, utf8, utf8.first, _bytes_to(b, utf8, last_of_segment))
    matched = b.op("GreaterOrEqual", [found, b.const(np.int64(0))])
    steps = b.op("Shape", [found], start=1, end=2)
    key_bytes = b.op(
        "Mul",
        [
            b.op("Cast", [matched], to=INT64),
            b.op(
                "Range",
                [b.const(np.int64(1)), b.add(b.op("Squeeze", [steps]), b.const(np.int64(1))), b.const(np.int64(1))],
            ),
        ],
    )
    longest = b.op("ReduceMax", [key_bytes, b.const(i64(1))], keepdims=0)
    value = b.op(
        "GatherElements",
        [
            found,
            b.op(
                "Unsqueeze",
                [b.op("Max", [b.op("Sub", [longest, b.const(np.int64(1))]), b.const(np.int64(0))]), b.const(i64(1))],
            ),
        ],
        axis=1,
    )
    has = b.op("Greater", [longest, b.const(np.int64(0))])
    value = b.op("Where", [has, b.op("Squeeze", [value, b.const(i64(1))]), b.const(np.int64(-1))])
    # the rule's length in code points: from this one to the owner of its last byte
    last_byte = b.op("Sub", [b.add(utf8.first, b.op("Max", [longest, b.const(np.int64(1))])), b.const(np.int64(1))])
    span = b.add(b.op("Sub", [b.op("Gather", [utf8.owner, last_byte]), positions(b, codes)]), b.const(np.int64(1)))
    span = b.op("Where", [has, span, b.const(np.int64(1))])
    depth = charsmap.longest_key
    if depth == 1:
        return everything, value
    # Which positions the left-to-right scan stops at: a fixpoint, reached in as many rounds as the
    # longest chain of overlapping matches (one or two in practice).
    reach = [same_segment(b, segments, -d) for d in range(1, depth)]

    def body(g: GraphBuilder, _: str, state: list[str]) -> tuple[str, list[str], list]:
        (scan,) = state
        covered = g.const(np.array(False))
        for d in range(1, depth):
            reaches = g.op("And", [scan, g.op("Greater", [span, g.const(np.int64(d))])])
            covered = g.op("Or", [covered, g.op("And", [shift(g, reaches, -d, np.bool_(False)), reach[d - 1]])])
        fresh = g.op("Not", [covered])
        changed = g.op("Not", [g.op("Equal", [fresh, scan])])
        go_on = g.op(
            "Greater", [g.op("ReduceSum", [g.op("Cast", [changed], to=INT64)], keepdims=0), g.const(np.int64(0))]
        )
        return go_on, [fresh], []

    (unit_starts,) = b.loop(
        b.op("Squeeze", [b.add(size(b, codes), b.const(i64(1)))]), [(everything, BOOL)], body, hint="longest_match"
    )
    return unit_starts, value


def grapheme_units(b: GraphBuilder, charsmap: Charsmap, codes: str, segments: Segments) -> tuple[str, str]:
    """HF ``Precompiled``: (bool ``[T]`` unit starts, int64 ``[T]`` output offset or -1)."""
    breaks = grapheme_breaks(b, codes, segments)
    clusters = from_flags(b, b.op("Or", [breaks, starts(b, segments)]))
    first = b.op("Slice", [clusters.splits, b.const(i64(0)), b.const(i64(-1))])
    utf8 = _encode(b, codes)
    nbytes = b.op(
        "ScatterElements", [b.op("Mul", [first, b.const(np.int64(0))]), clusters.seg, utf8.size], reduction="add"
    )
    where = positions(b, codes)
    if charsmap.longest_key == 0:
        return b.op("Expand", [b.const(np.array(True)), b.op("Shape", [codes])]), b.op(
            "Expand", [b.const(np.int64(-1)), b.op("Shape", [codes])]
        )
    # One walk for both questions: each code point's own rule, and each short cluster's shortest rule.
    short = b.op("Less", [nbytes, b.const(np.int64(6))])
    found_all = _walk(
        b,
        charsmap,
        utf8,
        b.op("Concat", [utf8.first, b.op("Gather", [utf8.first, first])], axis=0),
        b.op("Concat", [utf8.size, b.op("Where", [short, nbytes, b.const(np.int64(0))])], axis=0),
    )
    code_count = size(b, codes)
    own = b.op("Slice", [found_all, b.const(i64(0)), code_count, b.const(i64(0))])
    # each code point's own rule: the value after its last byte (the walk may have ended before)
    column = b.op("Sub", [utf8.size, b.const(np.int64(1))])
    steps = b.op("Shape", [own], start=1, end=2)
    within = b.op("Less", [column, steps])
    column = b.op("Min", [column, b.op("Sub", [steps, b.const(np.int64(1))])])
    single = b.op(
        "Squeeze",
        [b.op("GatherElements", [own, b.op("Unsqueeze", [column, b.const(i64(1))])], axis=1), b.const(i64(1))],
    )
    single = b.op("Where", [within, single, b.const(np.int64(-1))])
    found = b.op("Slice", [found_all, code_count, b.const(i64(np.iinfo(np.int64).max)), b.const(i64(0))])
    matched = b.op("GreaterOrEqual", [found, b.const(np.int64(0))])
    any_match = b.op(
        "Greater",
        [b.op("ReduceSum", [b.op("Cast", [matched], to=INT64), b.const(i64(1))], keepdims=0), b.const(np.int64(0))],
    )
    shortest = b.op(
        "ArgMax", [b.op("Cast", [matched], to=INT32)], axis=1, keepdims=1
    )  # int32: ORT 1.17 has no int64 ArgMax
    value = b.op("Squeeze", [b.op("GatherElements", [found, shortest], axis=1), b.const(i64(1))])
    whole = b.op("And", [any_match, short])  # per cluster
    whole_at = b.op("Gather", [whole, clusters.seg])  # per code point
    is_first = b.op("Equal", [where, b.op("Gather", [first, clusters.seg])])
    unit_starts = b.op("Or", [b.op("Not", [whole_at]), is_first])
    out = b.op("Where", [whole_at, b.op("Gather", [value, clusters.seg]), single])
    return unit_starts, out


def apply_units(
    b: GraphBuilder, charsmap: Charsmap, codes: str, segments: Segments, unit_starts: str, value: str
) -> tuple[str, Segments, str]:
    """The normalized text: (code points ``[T2]``, their segments, the position in ``codes`` of the
    unit each comes from). ``value`` is a unit's output offset, or -1 for the character itself."""
    pool = b.derived("charsmap_outputs", charsmap.pool.astype(np.int32))
    begin = b.derived("charsmap_begin", charsmap.begin.astype(np.int32))
    length = b.derived("charsmap_length", charsmap.length.astype(np.int32))
    rule = b.op("GreaterOrEqual", [value, b.const(np.int64(0))])
    safe = b.op("Max", [value, b.const(np.int64(0))])
    out_length = b.op("Where", [rule, b.op("Cast", [b.op("Gather", [length, safe])], to=INT64), b.const(np.int64(1))])
    out_length = b.op("Where", [unit_starts, out_length, b.const(np.int64(0))])
    source, k = expand(b, out_length)
    rule_at = b.op("Gather", [rule, source])
    start = b.op("Cast", [b.op("Gather", [begin, b.op("Gather", [safe, source])])], to=INT64)
    from_rule = b.op("Cast", [b.op("Gather", [pool, b.op("Max", [b.add(start, k), b.const(np.int64(0))])])], to=INT64)
    out = b.op("Where", [rule_at, from_rule, b.op("Gather", [codes, source])])
    per_segment = sum_per_segment(b, segments, out_length)
    return out, from_splits(b, splits_from_counts(b, per_segment), size(b, out)), source


__all__ = [
    "Charsmap",
    "apply_units",
    "grapheme_breaks",
    "grapheme_units",
    "longest_units",
]
