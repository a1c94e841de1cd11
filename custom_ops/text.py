"""String-side building blocks in standard ONNX ops only (opset 20 and ``ai.onnx.ml``).

No onnxruntime-extensions op is used here: the prebuilt extensions packages for Android and iOS
carry only the tokenizer ops (SentencePiece among them), and extensions 0.13/0.14 get the
non-global ``StringRegexReplace`` wrong. ``StringSplit``, ``StringConcat``, ``RegexFullMatch``
(ONNX opset 20) and ``LabelEncoder`` run in every ONNX Runtime release from 1.17 on.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .builder import BOOL, INT32, INT64, ML_DOMAIN, GraphBuilder, i64
from .checks import fail_when


def _strings(*values: str) -> np.ndarray:
    return np.array(values, dtype=object)


def _is_empty(b: GraphBuilder, text: str) -> str:
    return b.op("Equal", [text, b.const(np.array("", dtype=object), "empty")])


def _split(b: GraphBuilder, text: str, delimiter: str, maxsplit: int | None = None) -> tuple[str, str]:
    """StringSplit ``[N]`` → parts ``[N, K]`` (padded with ``""``) and counts ``[N]``, with K ≥ 2.

    StringSplit's width is the largest count in the batch (1 when no string holds the delimiter, 0
    for an empty batch); two spare columns make column indexing safe in every case.
    """
    attributes: dict[str, object] = {"delimiter": delimiter}
    if maxsplit is not None:
        attributes["maxsplit"] = maxsplit
    parts, counts = b.op_multi("StringSplit", [text], 2, **attributes)
    rows = b.op("Shape", [text])
    spare = b.op(
        "Expand", [b.const(np.array("", dtype=object), "empty"), b.op("Concat", [rows, b.const(i64(2))], axis=0)]
    )
    return b.op("Concat", [parts, spare], axis=1), counts


def _column(b: GraphBuilder, table: str, index: int) -> str:
    return b.op("Gather", [table, b.const(np.int64(index))], axis=1)


def split_language_token(b: GraphBuilder, text: str, whole: tuple[str, ...] = ()) -> tuple[str, str, str]:
    """``">>cmn_Hans<< Hi"`` → (``">>cmn_Hans<<"``, ``" Hi"``, True); no token → (``""``, text, False).

    Mirrors MarianTokenizer.remove_language_code: the text must start with ``>>`` and the token
    ends at the first ``<<``. A string equal to one of ``whole`` is returned whole as the token
    (with ``""`` as the rest), which is how split-off special tokens pass through. The third value
    says, per string, whether a token was found.
    """
    has_code = b.op("RegexFullMatch", [text], pattern="(?s)>>.*<<.*")
    halves, _ = _split(b, text, "<<", maxsplit=1)  # the first "<<" after ">>" closes the token
    code = b.op("StringConcat", [_column(b, halves, 0), b.const(np.array("<<", dtype=object), "close")])
    empty = b.const(np.array("", dtype=object), "empty")
    lead = b.op("Where", [has_code, code, empty])
    rest = b.op("Where", [has_code, _column(b, halves, 1), text])
    if whole:
        whole_lead, whole_rest, is_whole = split_whole_tokens(b, text, whole)
        lead = b.op("Where", [is_whole, whole_lead, lead])
        rest = b.op("Where", [is_whole, whole_rest, rest])
        has_code = b.op("Or", [has_code, is_whole])
    return lead, rest, has_code


def split_whole_tokens(b: GraphBuilder, text: str, tokens: tuple[str, ...]) -> tuple[str, str, str]:
    """A string equal to one of ``tokens`` → (it, ``""``, True); any other → (``""``, it, False).

    After ``split_on_literals`` this separates the split-off special tokens (looked up whole)
    from the text pieces (tokenised).
    """
    marks = b.op(
        "LabelEncoder",
        [text],
        domain=ML_DOMAIN,
        keys_strings=list(tokens),
        values_int64s=[1] * len(tokens),
        default_int64=0,
    )
    is_token = b.op("Cast", [marks], to=BOOL)
    empty = b.const(np.array("", dtype=object), "empty")
    return b.op("Where", [is_token, text, empty]), b.op("Where", [is_token, empty, text]), is_token


def _split_on_literal(b: GraphBuilder, text: str, literal: str) -> tuple[str, str]:
    """Cut every string at each ``literal``, keeping it as a piece; empty pieces dropped."""
    parts, counts = _split(b, text, literal)
    shape = b.op("Shape", [parts])
    # Interleave: part 0, literal, part 1, literal, ... → [N, 2K]; the last literal is one too many.
    literals = b.op("Expand", [b.const(np.array(literal, dtype=object), "literal"), shape])
    pairs = b.op(
        "Concat",
        [b.op("Unsqueeze", [parts, b.const(i64(2))]), b.op("Unsqueeze", [literals, b.const(i64(2))])],
        axis=2,
    )
    width = b.op("Mul", [b.op("Slice", [shape, b.const(i64(1)), b.const(i64(2))]), b.const(i64(2))])
    rows = b.op("Slice", [shape, b.const(i64(0)), b.const(i64(1))])
    interleaved = b.op("Reshape", [pairs, b.op("Concat", [rows, width], axis=0)])
    column = b.op(
        "Unsqueeze",
        [b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [width]), b.const(np.int64(1))]), b.const(i64(0))],
    )
    used = b.op("Sub", [b.op("Mul", [counts, b.const(np.int64(2))]), b.const(np.int64(1))])
    keep = b.op(
        "And",
        [b.op("Less", [column, b.op("Unsqueeze", [used, b.const(i64(1))])]), b.op("Not", [_is_empty(b, interleaved)])],
    )
    pieces = b.op(
        "Compress",
        [b.op("Reshape", [interleaved, b.const(i64(-1))]), b.op("Reshape", [keep, b.const(i64(-1))])],
        axis=0,
    )
    per_row = b.op("ReduceSum", [b.op("Cast", [keep], to=INT64), b.const(i64(1))], keepdims=0)
    splits = b.op("Concat", [b.const(i64(0)), b.op("CumSum", [per_row, b.const(np.int64(0))])], axis=0)
    return pieces, splits


def split_on_literals(b: GraphBuilder, text: str, literals: tuple[str, ...]) -> tuple[str, str]:
    """Cut every string at each occurrence of ``literals``, keeping them as pieces of their own.

    Returns the flat pieces (empty pieces dropped) and int64 row splits, as HF's added-token
    trie split does before tokenising each piece. One literal at a time gives the same cuts as
    a leftmost-longest search as long as no literal can overlap another (a proper suffix of one
    is never a prefix of another), which the function checks.
    """
    for first in literals:
        for second in literals:
            contains = first != second and first in second
            if contains or any(second.startswith(first[i:]) for i in range(1, len(first))):
                raise ValueError(f"literals {first!r} and {second!r} can overlap")
    rows = b.op("Shape", [text])
    pieces = text
    splits = b.op(
        "Range",
        [b.const(np.int64(0)), b.op("Add", [b.op("Squeeze", [rows]), b.const(np.int64(1))]), b.const(np.int64(1))],
    )
    for literal in literals:
        pieces, inner = _split_on_literal(b, pieces, literal)
        splits = b.op("Gather", [inner, splits])
    return pieces, splits


def lookup_tokens(b: GraphBuilder, tokens: str, vocabulary: dict[str, int], unknown_id: int) -> str:
    """Whole strings → ids (int64, same shape); strings not in ``vocabulary`` → ``unknown_id``."""
    return b.op(
        "LabelEncoder",
        [tokens],
        domain=ML_DOMAIN,
        keys_strings=list(vocabulary),
        values_int64s=list(vocabulary.values()),
        default_int64=unknown_id,
    )


def strip_tables(pieces: list[str]) -> np.ndarray:
    """Per id: the piece as is, without leading, without trailing and without surrounding whitespace.

    Flattened to ``[4 * V + 1]`` (kind-major; the extra last entry is ``""``) for
    ``join_and_strip``. Whitespace is Python's ``str.isspace``, as ``str.strip`` uses.
    """
    kinds = [pieces, [p.lstrip() for p in pieces], [p.rstrip() for p in pieces], [p.strip() for p in pieces]]
    return np.array([*(p for kind in kinds for p in kind), ""], dtype=object)


def strip_index(b: GraphBuilder, ids: str, tables: np.ndarray, name: str) -> str:
    """int ``[B, R, L]`` ids → int64 ``[B, R, L + 1]`` indices into ``tables``: the texts of each row,
    joined, are the row ``str.strip``-ed.

    Stripping the joined text equals dropping the whitespace-only pieces at both ends and
    stripping the first and last remaining piece on their outer side; each position therefore
    picks its piece from one of the ``strip_tables`` kinds. Every piece is valid UTF-8, so is the
    joined result.
    """
    size = (len(tables) - 1) // 4
    blank = np.array([not p.strip() for p in tables[:size]] + [True])
    # One blank column more (id ``size``: "" in every kind) so that ArgMax never sees an empty axis.
    spare_shape = b.op(
        "Concat", [b.op("Slice", [b.op("Shape", [ids]), b.const(i64(0)), b.const(i64(2))]), b.const(i64(1))], axis=0
    )
    spare = b.op("Expand", [b.const(np.array(size, dtype=np.int64)), spare_shape])
    ids = b.op("Concat", [b.op("Cast", [ids], to=INT64), spare], axis=2)
    is_content = b.op("Not", [b.op("Gather", [b.derived(f"{name}_blank", blank), ids])])
    as_int = b.op("Cast", [is_content], to=TensorProto.INT32)
    first = b.op("ArgMax", [as_int], axis=2, keepdims=1)
    last = b.op("ArgMax", [as_int], axis=2, keepdims=1, select_last_index=1)
    any_content = b.op("Cast", [b.op("ReduceMax", [as_int, b.const(i64(2))], keepdims=1)], to=BOOL)
    length = b.op("Gather", [b.op("Shape", [ids]), b.const(i64(2))])
    position = b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [length]), b.const(np.int64(1))])
    inside = b.op(
        "And",
        [
            any_content,
            b.op("And", [b.op("GreaterOrEqual", [position, first]), b.op("LessOrEqual", [position, last])]),
        ],
    )
    kind = b.op(
        "Add",
        [
            b.op("Cast", [b.op("Equal", [position, first])], to=INT64),
            b.op("Mul", [b.op("Cast", [b.op("Equal", [position, last])], to=INT64), b.const(np.int64(2))]),
        ],
    )
    index = b.op("Add", [b.op("Mul", [kind, b.const(np.int64(size))]), ids])
    return b.op("Where", [inside, index, b.const(np.int64(4 * size), "blank_index")])


def join_strings(b: GraphBuilder, index: str, texts: np.ndarray, name: str) -> str:
    """int64 ``[B, R, L]`` indices into ``texts`` → string ``[B, R]``, each row's texts joined."""
    return _join_last_axis(b, b.op("Gather", [b.derived(name, texts), index]), b.op("Shape", [index]))


def join_and_strip(b: GraphBuilder, ids: str, tables: np.ndarray, name: str) -> str:
    """int ``[B, R, L]`` ids → string ``[B, R]``: the pieces of each row joined, then ``str.strip``-ed
    (see ``strip_index``)."""
    return join_strings(b, strip_index(b, ids, tables, name), tables, name)


def metaspace_tables(pieces: list[str], skipped: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """``join_metaspace``'s tables: per id its text (``▁`` → space) and, for the first kept token, the
    text without any ``▁``; then whether the id is skipped (special tokens)."""
    texts = [piece.replace("\u2581", " ") for piece in pieces] + [piece.replace("\u2581", "") for piece in pieces]
    texts = ["" if index % len(pieces) in skipped else text for index, text in enumerate(texts)]
    is_skipped = np.array([index in skipped for index in range(len(pieces))] + [True])
    return np.array([*texts, ""], dtype=object), is_skipped


def metaspace_index(b: GraphBuilder, ids: str, tables: tuple[np.ndarray, np.ndarray], name: str) -> str:
    """int ``[B, R, L]`` ids → int64 ``[B, R, L + 1]`` indices into the text table (``tables[0]``), as
    HF ``tokenizers``' Metaspace decoder with special tokens skipped: every ``▁`` becomes a space,
    except in the first kept token, where they are dropped; nothing is stripped (NLLB, mBART-50)."""
    _, is_skipped = tables
    size = len(is_skipped) - 1
    spare_shape = b.op(
        "Concat", [b.op("Slice", [b.op("Shape", [ids]), b.const(i64(0)), b.const(i64(2))]), b.const(i64(1))], axis=0
    )
    spare = b.op("Expand", [b.const(np.array(size, dtype=np.int64)), spare_shape])
    ids = b.op("Concat", [b.op("Cast", [ids], to=INT64), spare], axis=2)
    skipped = b.op("Gather", [b.derived(f"{name}_skipped", is_skipped), ids])
    kept = b.op("Cast", [b.op("Not", [skipped])], to=TensorProto.INT32)
    first = b.op("ArgMax", [kept], axis=2, keepdims=1)
    length = b.op("Gather", [b.op("Shape", [ids]), b.const(i64(2))])
    position = b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [length]), b.const(np.int64(1))])
    is_first = b.op("Cast", [b.op("Equal", [position, first])], to=INT64)
    # The spare id is skipped and "" in both halves; a skipped id is "" in both halves too.
    index = b.op("Where", [b.op("Equal", [ids, b.const(np.int64(size))]), b.const(np.int64(2 * size)), ids])
    index = b.op("Add", [index, b.op("Mul", [is_first, b.const(np.int64(size))])])
    return b.op("Min", [index, b.const(np.int64(2 * size))])


def join_metaspace(b: GraphBuilder, ids: str, tables: tuple[np.ndarray, np.ndarray], name: str) -> str:
    """int ``[B, R, L]`` ids → string ``[B, R]`` (see ``metaspace_index``)."""
    return join_strings(b, metaspace_index(b, ids, tables, name), tables[0], name)


# Pieces a detokenized row may hold: the join is a tree of this many pairwise levels (2 ** 16).
JOIN_LEVELS = 16


def _join_last_axis(b: GraphBuilder, pieces: str, shape: str) -> str:
    """``[B, R, L]`` strings of shape ``shape`` → ``[B, R]``: neighbours joined pairwise by
    ``StringConcat``, level by level.

    A fixed tree of ``JOIN_LEVELS`` levels rather than a ``Loop`` over L: ONNX Runtime's CUDA
    provider has ``Loop``/``If``/``Scan`` kernels for every tensor type, so a loop carrying strings
    is placed on the GPU, and the string copy it needs fails the session (see
    ``tests/test_cuda_placement.py``). Each level pads an odd width with ``""`` and halves it;
    a row of more than ``2 ** JOIN_LEVELS`` pieces stops the run with a message.

    The widths are worked out from ``shape``, the ``Shape`` of a number tensor, not of the strings:
    the CUDA provider has a ``Shape`` kernel for numbers only, and its output is on the host, so
    all this arithmetic stays there (``graphgen.testing.cuda_copies``); from the strings' ``Shape``
    (a CPU node) it would run on the GPU and be copied back for every ``Reshape`` and ``Expand``.
    """
    rows = b.op("Slice", [shape, b.const(i64(0)), b.const(i64(2))])  # [B, R]
    empty = b.const(np.array("", dtype=object), "empty")
    one, two = b.const(i64(1)), b.const(i64(2))
    # One "" column first, so that a row of no pieces still leaves one column to read.
    text = b.op("Concat", [pieces, b.op("Expand", [empty, b.op("Concat", [rows, one], axis=0)])], axis=2)
    width = b.op("Add", [b.op("Slice", [shape, two, b.const(i64(3))]), one])
    for _ in range(JOIN_LEVELS):
        odd = b.op("Mod", [width, two])
        text = b.op("Concat", [text, b.op("Expand", [empty, b.op("Concat", [rows, odd], axis=0)])], axis=2)
        width = b.op("Div", [b.op("Add", [width, odd]), two])
        pairs = b.op("Reshape", [text, b.op("Concat", [rows, width, two], axis=0)])
        left = b.op("Gather", [pairs, b.const(np.int64(0))], axis=3)
        right = b.op("Gather", [pairs, b.const(np.int64(1))], axis=3)
        text = b.op("StringConcat", [left, right])
    too_long = b.op("Greater", [width, one])
    message = f"graphgen: a translation has more than {2**JOIN_LEVELS} tokens"
    rows = fail_when(b, too_long, message, b.op("Cast", [rows], to=INT32), host=True)
    return b.op("Reshape", [text, b.op("Cast", [rows], to=INT64)])


__all__ = [
    "join_and_strip",
    "join_metaspace",
    "join_strings",
    "lookup_tokens",
    "metaspace_index",
    "metaspace_tables",
    "split_language_token",
    "split_on_literals",
    "split_whole_tokens",
    "strip_index",
    "strip_tables",
]
