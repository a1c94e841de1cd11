"""String-side building blocks on onnxruntime-extensions ops (domain ``ai.onnx.contrib``)."""

from __future__ import annotations

import re

import numpy as np

from .builder import EXTENSIONS_DOMAIN, INT64, GraphBuilder, i64

# Python's str.strip() removes Unicode White_Space; RE2's \s is ASCII only, so list the rest.
_WHITESPACE = r"[\s\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{1c}-\x{1f}]"


def regex_replace(b: GraphBuilder, text: str, pattern: str, rewrite: str, replace_all: bool = True) -> str:
    """RE2 replace on every string of ``text``; ``rewrite`` may use ``\\1`` groups."""
    return b.op(
        "StringRegexReplace",
        [
            text,
            b.const(np.array([pattern], dtype=object), "pattern"),
            b.const(np.array([rewrite], dtype=object), "rewrite"),
        ],
        domain=EXTENSIONS_DOMAIN,
        global_replace=int(replace_all),
    )


def split_language_token(b: GraphBuilder, text: str, whole: tuple[str, ...] = ()) -> tuple[str, str]:
    """``">>cmn_Hans<< Hi"`` → (``">>cmn_Hans<<"``, ``" Hi"``); no token → (``""``, text).

    Mirrors MarianTokenizer.remove_language_code: the text must start with ``>>`` and the token
    ends at the first ``<<``. A string equal to one of ``whole`` is returned whole as the token
    (with ``""`` as the rest), which is how split-off special tokens pass through.
    """
    literals = "|".join(re.escape(token) for token in whole)
    special = rf"|({literals})$" if whole else ""
    code = regex_replace(b, text, rf"(?s)^(?:(>>.*?<<){special})?.*$", r"\1\2" if whole else r"\1", replace_all=False)
    rest = regex_replace(b, text, rf"(?s)^(?:>>.*?<<{special})", "", replace_all=False)
    return code, rest


def split_on_literals(b: GraphBuilder, text: str, literals: tuple[str, ...]) -> tuple[str, str]:
    """Cut every string at each occurrence of ``literals``, keeping them as pieces of their own.

    Returns the flat pieces (empty pieces dropped) and int64 row splits, as HF's added-token
    trie split does before tokenising each piece.
    """
    pattern = np.array(["|".join(re.escape(token) for token in literals)], dtype=object)
    pieces, _, _, splits = b.op_multi(
        "StringECMARegexSplitWithOffsets",
        [text, b.const(pattern, "split_pattern"), b.const(pattern, "keep_pattern")],
        4,
        domain=EXTENSIONS_DOMAIN,
    )
    return pieces, splits


def lookup_tokens(b: GraphBuilder, tokens: str, vocabulary: dict[str, int], unknown_id: int) -> str:
    """Whole strings → ids (int64, same shape); strings not in ``vocabulary`` → ``unknown_id``."""
    lines = "\n".join(f"{token}\t{index}" for token, index in vocabulary.items())
    ids = b.op("StringToVector", [tokens], domain=EXTENSIONS_DOMAIN, map=lines, unk=str(unknown_id))
    return b.op("Squeeze", [ids, b.const(i64(-1))])


def is_nonempty(b: GraphBuilder, text: str) -> str:
    """bool per string: length > 0."""
    length = b.op("StringLength", [text], domain=EXTENSIONS_DOMAIN)
    return b.op("Greater", [length, b.const(np.int64(0))])


def join_pieces(b: GraphBuilder, pieces: str, axis: int, rank: int) -> str:
    """Concatenate strings of a rank-``rank`` tensor along ``axis`` (the axis is removed).

    onnxruntime-extensions 0.15's StringJoin kills the process when a dimension other than the
    joined one is 0 (an empty batch, say), so every other dimension gets one extra slot of
    empty strings before the join, and the result is cut back to the original sizes.
    """
    shape = b.op("Shape", [pieces])
    padded = pieces
    for dim in range(rank):
        if dim == axis:
            continue
        grown_shape = b.op("Shape", [padded])
        one_slot = b.op(
            "ScatterElements",
            [grown_shape, b.const(np.array([dim], dtype=np.int64)), b.const(i64(1))],
        )
        spare = b.op("Expand", [b.const(np.array("", dtype=object), "empty"), one_slot])
        padded = b.op("Concat", [padded, spare], axis=dim)
    joined = b.op(
        "StringJoin",
        [padded, b.const(np.array("", dtype=object), "separator"), b.const(np.int64(axis), "axis")],
        domain=EXTENSIONS_DOMAIN,
    )
    kept_dims = [d for d in range(rank) if d != axis]
    sizes = b.op("Gather", [shape, b.const(np.array(kept_dims, dtype=np.int64))])
    starts = b.const(np.zeros(len(kept_dims), dtype=np.int64))
    return b.op("Slice", [joined, starts, sizes, b.const(np.arange(len(kept_dims), dtype=np.int64))])


def sentencepiece_to_text(b: GraphBuilder, joined_pieces: str) -> str:
    """What SentencePiece decoding + MarianTokenizer do to joined pieces: ``▁`` → space, then strip."""
    spaced = regex_replace(b, joined_pieces, "\u2581", " ")
    return regex_replace(b, spaced, rf"^{_WHITESPACE}+|{_WHITESPACE}+$", "")


__all__ = [
    "INT64",
    "is_nonempty",
    "join_pieces",
    "lookup_tokens",
    "regex_replace",
    "sentencepiece_to_text",
    "split_language_token",
]
