"""UTF-8 in and out in standard ONNX ops: texts as ``uint8`` tensors, no string type needed.

``decode_utf8`` turns zero-padded rows of bytes into code points exactly as Python's
``bytes.decode("utf-8", errors="replace")`` does (each maximal ill-formed subsequence becomes one
U+FFFD, as the Unicode standard recommends), then drops the zero bytes that end a row: they are
padding, and a zero byte before other bytes of its row is the character U+0000 (HF's tokenizers
keep it; so only a text that ends with U+0000 cannot be passed). ``join_bytes`` is the way back
for a detokenizer: per position a table entry, the entries' bytes concatenated per row.
"""

from __future__ import annotations

import numpy as np

from .builder import INT64, GraphBuilder, i64
from .flat import Segments, expand, from_splits, positions, shift, size, splits_from_counts

REPLACEMENT = 0xFFFD


def _between(b: GraphBuilder, x: str, low: int, high: int) -> str:
    return b.op(
        "And", [b.op("GreaterOrEqual", [x, b.const(np.int64(low))]), b.op("LessOrEqual", [x, b.const(np.int64(high))])]
    )


def _pick(b: GraphBuilder, cases: list[tuple[str, int]], default: int) -> str:
    """``Where`` chain: the value of the first true condition, else ``default`` (int64)."""
    out = b.const(np.int64(default))
    for condition, value in reversed(cases):
        out = b.op("Where", [condition, b.const(np.int64(value)), out])
    return out


def decode_utf8(b: GraphBuilder, data: str) -> tuple[str, Segments]:
    """uint8 ``[B, N]`` → code points (int64 ``[T]``) with one segment per row."""
    shape = b.op("Shape", [data])
    width = b.op("Slice", [shape, b.const(i64(1)), b.const(i64(2))])
    rows = b.op("Slice", [shape, b.const(i64(0)), b.const(i64(1))])
    x = b.op("Cast", [b.op("Reshape", [data, b.const(i64(-1))])], to=INT64)
    where = positions(b, x)
    row_end = b.mul(b.add(b.op("Div", [where, b.op("Max", [width, b.const(i64(1))])]), b.const(np.int64(1))), width)

    def following(k: int) -> str:  # byte i + k of the same row, else 0 (never a continuation byte)
        inside = b.op("Less", [b.add(where, b.const(np.int64(k))), row_end])
        return b.op("Where", [inside, shift(b, x, k, np.int64(0)), b.const(np.int64(0))])

    b1, b2, b3 = following(1), following(2), following(3)
    ascii_ = b.op("Less", [x, b.const(np.int64(0x80))])
    need = _pick(
        b, [(_between(b, x, 0xC2, 0xDF), 2), (_between(b, x, 0xE0, 0xEF), 3), (_between(b, x, 0xF0, 0xF4), 4)], 1
    )
    lead = b.op("Greater", [need, b.const(np.int64(1))])
    low = _pick(
        b,
        [(b.op("Equal", [x, b.const(np.int64(0xE0))]), 0xA0), (b.op("Equal", [x, b.const(np.int64(0xF0))]), 0x90)],
        0x80,
    )
    high = _pick(
        b,
        [(b.op("Equal", [x, b.const(np.int64(0xED))]), 0x9F), (b.op("Equal", [x, b.const(np.int64(0xF4))]), 0x8F)],
        0xBF,
    )
    ok1 = b.op("And", [lead, b.op("And", [b.op("GreaterOrEqual", [b1, low]), b.op("LessOrEqual", [b1, high])])])
    ok2 = b.op(
        "And", [b.op("And", [ok1, b.op("GreaterOrEqual", [need, b.const(np.int64(3))])]), _between(b, b2, 0x80, 0xBF)]
    )
    ok3 = b.op("And", [b.op("And", [ok2, b.op("Equal", [need, b.const(np.int64(4))])]), _between(b, b3, 0x80, 0xBF)])
    valid = b.op(
        "Add",
        [b.op("Cast", [ok1], to=INT64), b.op("Add", [b.op("Cast", [ok2], to=INT64), b.op("Cast", [ok3], to=INT64)])],
    )
    length = b.add(valid, b.const(np.int64(1)))  # bytes this unit takes: a whole character or a maximal subpart
    complete = b.op("Equal", [length, need])

    def cont(value: str) -> str:
        return b.op("Sub", [value, b.const(np.int64(0x80))])

    two = b.add(b.mul(b.op("Sub", [x, b.const(np.int64(0xC0))]), b.const(np.int64(64))), cont(b1))
    three = b.add(
        b.add(
            b.mul(b.op("Sub", [x, b.const(np.int64(0xE0))]), b.const(np.int64(4096))),
            b.mul(cont(b1), b.const(np.int64(64))),
        ),
        cont(b2),
    )
    four = b.add(
        b.add(
            b.mul(b.op("Sub", [x, b.const(np.int64(0xF0))]), b.const(np.int64(262144))),
            b.mul(cont(b1), b.const(np.int64(4096))),
        ),
        b.add(b.mul(cont(b2), b.const(np.int64(64))), cont(b3)),
    )
    code = b.op(
        "Where",
        [
            b.op("Equal", [need, b.const(np.int64(2))]),
            two,
            b.op("Where", [b.op("Equal", [need, b.const(np.int64(3))]), three, four]),
        ],
    )
    code = b.op("Where", [b.op("And", [lead, complete]), code, b.const(np.int64(REPLACEMENT))])
    code = b.op("Where", [ascii_, x, code])
    # A byte starts a unit unless a lead byte 1-3 places before it (in its row) took it.
    taken = b.const(np.array(False))
    for d in (1, 2, 3):
        earlier = shift(b, length, -d, np.int64(0))
        same_row = b.op("GreaterOrEqual", [b.op("Sub", [where, b.const(np.int64(d))]), b.op("Sub", [row_end, width])])
        taken = b.op("Or", [taken, b.op("And", [same_row, b.op("Greater", [earlier, b.const(np.int64(d))])])])
    # A zero byte is padding where no other byte follows it in its row; before one, it is U+0000.
    nonzero = b.op("Cast", [b.op("Greater", [x, b.const(np.int64(0))])], to=INT64)
    grid = b.op("Concat", [rows, width], axis=0)
    after = b.op("CumSum", [b.op("Reshape", [nonzero, grid], allowzero=1), b.const(np.int64(1))], reverse=1)
    text = b.op("Greater", [b.op("Reshape", [after, b.const(i64(-1))]), b.const(np.int64(0))])
    keep = b.op("And", [b.op("Not", [taken]), text])
    codes = b.op("Compress", [code, keep], axis=0)
    per_row = b.op(
        "ReduceSum",
        [
            b.op("Cast", [b.op("Reshape", [keep, b.op("Concat", [rows, width], axis=0)], allowzero=1)], to=INT64),
            b.const(i64(1)),
        ],
        keepdims=0,
    )
    return codes, from_splits(b, splits_from_counts(b, per_row), size(b, codes))


def utf8_table(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Texts as one byte pool, each distinct text once: ``(pool uint8, start int32, length int32)``
    per text."""
    distinct = list(dict.fromkeys(texts))
    encoded = [text.encode("utf-8") for text in distinct]
    sizes = np.array([len(e) for e in encoded], dtype=np.int64)
    starts_at = dict(zip(distinct, (np.cumsum(sizes) - sizes).tolist(), strict=True))
    begin = np.array([starts_at[text] for text in texts], dtype=np.int32)
    lengths = np.array([len(text.encode("utf-8")) for text in texts], dtype=np.int32)
    pool = np.frombuffer(b"".join(encoded) + b"\0", dtype=np.uint8).copy()
    return pool, begin, lengths


def join_bytes(b: GraphBuilder, index: str, texts: list[str], name: str) -> tuple[str, str]:
    """int64 ``[B, R, L]`` indices into ``texts`` → (uint8 ``[B, R, P]``: the texts of each row
    concatenated, zero-padded to the longest row; int64 ``[B, R]``: each row's byte length)."""
    pool, begin, lengths = utf8_table(texts)
    shape = b.op("Shape", [index])
    lead = b.op("Slice", [shape, b.const(i64(0)), b.const(i64(2))])
    rows = b.op("ReduceProd", [lead], keepdims=1)
    flat = b.op("Reshape", [index, b.const(i64(-1))])
    per_token = b.op("Cast", [b.op("Gather", [b.derived(f"{name}_length", lengths), flat])], to=INT64)
    tokens = b.op(
        "Reshape",
        [per_token, b.op("Concat", [rows, b.op("Slice", [shape, b.const(i64(2)), b.const(i64(3))])], axis=0)],
        allowzero=1,
    )
    per_row = b.op("ReduceSum", [tokens, b.const(i64(1))], keepdims=0)  # [rows]
    width = b.op("ReduceMax", [b.op("Concat", [per_row, b.const(i64(0))], axis=0)], keepdims=1)
    # Every output byte: the token it comes from and its place in the token (the rows' bytes follow
    # each other, row-major), then its place in its row of the [rows, width] result.
    token, k = expand(b, per_token)
    first = b.op("Gather", [b.derived(f"{name}_begin", begin), b.op("Gather", [flat, token])])
    source = b.add(b.op("Cast", [first], to=INT64), k)
    data = b.op("Gather", [b.derived(f"{name}_bytes", pool), source])
    row_begin = b.op("Sub", [b.op("CumSum", [per_row, b.const(np.int64(0))]), per_row])
    tokens_per_row = b.op("Slice", [shape, b.const(i64(2)), b.const(i64(3))])
    row = b.op("Div", [token, b.op("Max", [tokens_per_row, b.const(i64(1))])])
    at = b.add(b.mul(row, width), b.op("Sub", [positions(b, token), b.op("Gather", [row_begin, row])]))
    blank = b.op("Expand", [b.const(np.array(0, np.uint8)), b.mul(rows, width)])
    out = b.op("ScatterElements", [blank, at, data])
    out = b.op("Reshape", [out, b.op("Concat", [lead, width], axis=0)], allowzero=1)
    return out, b.op("Reshape", [per_row, lead], allowzero=1)
