"""Per-code-point Unicode data the tokenizer graphs need, as compact lookup tables.

``grapheme_classes()``: each code point's Grapheme_Cluster_Break class, Extended_Pictographic flag
and Indic_Conjunct_Break value (UAX #29), as HF ``tokenizers`` sees them. Its ``Precompiled``
normalizer walks extended grapheme clusters (the Rust ``unicode-segmentation`` crate), whose Unicode
version lags Python's ``regex``; the table is therefore read from ``regex`` and then corrected by
*asking* the installed ``tokenizers``: a normalizer with one rule per code point shows which code
points join the grapheme before them, which end it, and which join the next one
(``derive_grapheme_classes``). The result is stored in ``grapheme_classes.npz`` beside this module
(``python -m graphgen.custom_ops.unicode_data`` writes it again; ``tests/test_portable_tokenizer.py`` checks
that it still matches the installed ``tokenizers``).

``WHITE_SPACE``: the code points Rust's ``char::is_whitespace`` accepts (Unicode White_Space), which
the ``WhitespaceSplit`` pre-tokenizer and the ``Strip`` normalizer use.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

# Grapheme_Cluster_Break classes (the low four bits of a table entry).
OTHER, CR, LF, CONTROL, EXTEND, ZWJ, REGIONAL_INDICATOR, PREPEND, SPACING_MARK, L, V, T, LV, LVT = range(14)
CLASS_MASK = 0x0F
EXTENDED_PICTOGRAPHIC = 0x10
# Indic_Conjunct_Break (bits 5-6).
INCB_SHIFT = 5
INCB_NONE, INCB_CONSONANT, INCB_EXTEND, INCB_LINKER = range(4)

CODE_POINTS = 0x110000
BLOCK = 256

WHITE_SPACE = (
    *range(0x09, 0x0E),
    0x20,
    0x85,
    0xA0,
    0x1680,
    *range(0x2000, 0x200B),
    0x2028,
    0x2029,
    0x202F,
    0x205F,
    0x3000,
)

_DATA = Path(__file__).with_name("grapheme_classes.npz")
_CLASS_NAMES = {
    "CR": CR,
    "LF": LF,
    "Control": CONTROL,
    "Extend": EXTEND,
    "ZWJ": ZWJ,
    "Regional_Indicator": REGIONAL_INDICATOR,
    "Prepend": PREPEND,
    "SpacingMark": SPACING_MARK,
    "L": L,
    "V": V,
    "T": T,
    "LV": LV,
    "LVT": LVT,
}


def _is_scalar(code: int) -> bool:
    return not 0xD800 <= code < 0xE000


def _classes_from_regex() -> np.ndarray:
    import regex

    table = np.zeros(CODE_POINTS, dtype=np.uint8)
    characters = [chr(c) if _is_scalar(c) else "" for c in range(CODE_POINTS)]
    text = "\n".join(characters)  # one pass of findall per property over every code point

    def members(prop: str) -> np.ndarray:
        pattern = regex.compile(r"(?m)^\p{" + prop + r"}$")
        found = {ord(m) for m in pattern.findall(text)}
        if prop in ("GCB=LF", "GCB=CR"):  # "\n" separates the lines: test it directly
            found = {c for c in (0x0A, 0x0D) if regex.fullmatch(r"\p{" + prop + r"}", chr(c))}
        return np.array(sorted(found), dtype=np.int64)

    for name, value in _CLASS_NAMES.items():
        table[members(f"GCB={name}")] = value
    table[members("Extended_Pictographic")] |= EXTENDED_PICTOGRAPHIC
    for name, value in (("Consonant", INCB_CONSONANT), ("Extend", INCB_EXTEND), ("Linker", INCB_LINKER)):
        table[members(f"InCB={name}")] |= value << INCB_SHIFT
    return table


def _probe_normalizer() -> object:
    """A ``tokenizers`` Precompiled normalizer with a rule per code point (each → "b", "b" → "c"), built
    by SentencePiece's rule compiler."""
    import io
    import tempfile

    import sentencepiece as spm
    from tokenizers import normalizers

    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "rules.tsv"
        lines = (f"{c:X}\t{0x63 if c == 0x62 else 0x62:X}" for c in range(1, CODE_POINTS) if _is_scalar(c))
        rules.write_text("\n".join(lines) + "\n", encoding="ascii")
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b c"] * 4),
            model_writer=model,
            vocab_size=8,
            hard_vocab_limit=False,
            normalization_rule_tsv=str(rules),
            minloglevel=2,
        )
    messages: Any = importlib.import_module("sentencepiece.sentencepiece_model_pb2")  # no type stubs
    proto = messages.ModelProto()
    proto.ParseFromString(model.getvalue())
    return normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap)


def observed_joins() -> dict[str, np.ndarray]:
    """What the installed ``tokenizers`` shows, per code point c (bool ``[CODE_POINTS]`` each):

    - ``after``: "a" + c is one grapheme (c is Extend, ZWJ or SpacingMark);
    - ``before``: c + "a" is one grapheme (c is Prepend);
    - ``ends``: c + U+0301 is two graphemes (c is a control, CR or LF); known for c below U+10000 only.

    With every code point a rule, a grapheme shorter than six bytes normalizes to one "b" (HF keeps
    only its shortest matching prefix), and to one "b" per grapheme otherwise.
    """
    normalizer = _probe_normalizer()
    found = {key: np.zeros(CODE_POINTS, dtype=bool) for key in ("after", "before", "ends")}
    for code in range(1, CODE_POINTS):
        if not _is_scalar(code):
            continue
        char = chr(code)
        alone = "c" if char == "b" else "b"  # what the character's own rule gives
        found["after"][code] = normalizer.normalize_str("a" + char) == "b"  # type: ignore[attr-defined]
        found["before"][code] = normalizer.normalize_str(char + "a") == alone  # type: ignore[attr-defined]
        if code < 0x10000:
            found["ends"][code] = normalizer.normalize_str(char + "\u0301") != alone  # type: ignore[attr-defined]
    return found


def derive_grapheme_classes() -> np.ndarray:
    """The table from ``regex``, corrected to what the installed ``tokenizers`` does (see module doc)."""
    table = _classes_from_regex()
    classes = table & CLASS_MASK
    seen = observed_joins()
    joins_after = np.isin(classes, (EXTEND, ZWJ, SPACING_MARK))
    # Assigned in regex's Unicode version, not yet in the crate's: plain characters there.
    table[joins_after & ~seen["after"]] &= ~np.uint8(CLASS_MASK)
    table[~joins_after & seen["after"]] = (table[~joins_after & seen["after"]] & ~np.uint8(CLASS_MASK)) | EXTEND
    classes = table & CLASS_MASK
    prepend = classes == PREPEND
    table[prepend & ~seen["before"]] &= ~np.uint8(CLASS_MASK)
    table[~prepend & seen["before"]] = (table[~prepend & seen["before"]] & ~np.uint8(CLASS_MASK)) | PREPEND
    classes = table & CLASS_MASK
    bmp = np.arange(CODE_POINTS) < 0x10000
    bmp[0] = False
    ends = np.isin(classes, (CONTROL, CR, LF))
    table[bmp & ends & ~seen["ends"]] &= ~np.uint8(CLASS_MASK)
    table[bmp & ~ends & seen["ends"]] = (table[bmp & ~ends & seen["ends"]] & ~np.uint8(CLASS_MASK)) | CONTROL
    return table


def to_blocks(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``table`` as ``(index [CODE_POINTS / BLOCK] int32, blocks [K, BLOCK] uint8)``: entry c is
    ``blocks[index[c // BLOCK], c % BLOCK]``."""
    rows = table.reshape(-1, BLOCK)
    blocks, index = np.unique(rows, axis=0, return_inverse=True)
    return index.astype(np.int32).reshape(-1), blocks


@cache
def grapheme_classes() -> np.ndarray:
    """uint8 ``[CODE_POINTS]``: class | EXTENDED_PICTOGRAPHIC | InCB << INCB_SHIFT, per code point."""
    with np.load(_DATA) as data:
        return data["blocks"][data["index"]].reshape(-1)


def write_grapheme_classes() -> None:
    index, blocks = to_blocks(derive_grapheme_classes())
    np.savez_compressed(_DATA, index=index, blocks=blocks)


if __name__ == "__main__":
    write_grapheme_classes()
    print(f"wrote {_DATA} ({_DATA.stat().st_size} bytes)")
