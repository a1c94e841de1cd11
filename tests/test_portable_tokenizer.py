"""The portable tokenizer (standard ONNX ops over UTF-8 bytes) against the HF tokenizers of every family.

Ids and masks must equal HF's on the corpus strings and on 10,000 generated strings per tokenizer
(every Unicode plane, combining marks, full-width forms, odd whitespace, control characters, emoji
ZWJ sequences, 2,000-character lines, empty strings); bytes that are not UTF-8 follow one rule
(``bytes.decode("utf-8", errors="replace")``, the zero bytes after a row's last other byte dropped
as padding, one before it a U+0000 as HF tokenizes it); the bytes detokenizer equals the
string one, which equals ``batch_decode``. The graphs use no custom domain.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from graphgen.custom_ops import GraphBuilder
from graphgen.custom_ops.builder import INT32, INT64, ML_DOMAIN, ML_OPSET, STRING
from graphgen.custom_ops.text import join_strings
from graphgen.custom_ops.unicode_data import (
    CLASS_MASK,
    CONTROL,
    CR,
    EXTEND,
    LF,
    PREPEND,
    SPACING_MARK,
    ZWJ,
    grapheme_classes,
)
from graphgen.custom_ops.utf8 import join_bytes
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from graphgen.deploy.mobile import ops_used
from graphgen.runtime.translator import utf8_batch
from graphgen.testing import (
    DEMO_DIR,
    FAMILIES,
    LANGUAGE_TOKENIZERS,
    MADE_UP_WORDS,
    added_token_strings,
    builder_model,
    generated_strings,
    language_tokenizer,
    madlad_tokenizer,
    nllb_legacy_tokenizer,
    open_session,
    tokenizer_strings,
)
from graphgen.text.languages import language_detokenizer_index, load_language_vocabulary
from graphgen.text.marian import detokenizer_index, load_vocabulary
from graphgen.text.portable import add_portable_tokenizer

STRINGS = tokenizer_strings() + generated_strings(10_000)
# Beside the families' tokenizers: MADLAD-400's (T5's with byte pieces and "<2de>" tags), mBART-25's
# MBartTokenizer and NLLB's with legacy_behaviour (both: the source language after </s>).
TOKENIZERS = (
    "marian",
    "marian-separate",
    *LANGUAGE_TOKENIZERS,
    "T5Tokenizer",
    "madlad",
    "MBartTokenizer",
    "nllb-legacy",
)
SOURCES = {f.tokenizer_class: f.source_language for f in FAMILIES.values() if f.has_languages}
SOURCES |= {"MBartTokenizer": "en_XX", "nllb-legacy": "eng_Latn"}


DOMAINS = [(ML_DOMAIN, ML_OPSET)]  # LabelEncoder; no custom domain


class Portable:
    """A tokenizer-only and a detokenizer-only graph for one HF tokenizer, and the HF tokenizer."""

    def __init__(self, name: str, directory: Path, *, trained: bool = False) -> None:
        """``trained``: ``directory`` already holds the tokenizer files (else they are made there)."""
        from transformers import AutoTokenizer, MarianTokenizer

        b = GraphBuilder("tok")
        self.source = SOURCES.get(name)
        if name.startswith("marian"):
            self.hf = MarianTokenizer.from_pretrained(directory)
            vocabulary = load_vocabulary(directory)
            spec = vocabulary.portable_spec(self.hf.eos_token_id, self.hf.pad_token_id)
            self.size = max(vocabulary.target_vocab.values()) + 1
        else:
            self.hf = AutoTokenizer.from_pretrained(directory) if trained else language_tokenizer(directory, name)
            language = load_language_vocabulary(directory)
            spec = language.portable_spec()
            self.size = max(language.piece_ids.values()) + 1 + MADE_UP_WORDS
        source_ids = None
        self.source_last = False
        if self.source:
            self.source_last = language.source_last
            self.hf.src_lang = self.source
            source_id = np.int64(language.languages[self.source])
            source_ids = b.op("Expand", [b.const(source_id), b.op("Shape", ["text_utf8"], start=0, end=1)])
        ids, mask, _ = add_portable_tokenizer(
            b, "text_utf8", spec, max_length=1 << 30, source_ids=source_ids, source_last=self.source_last
        )
        b.output(ids, "input_ids", INT32, ["batch", "length"])
        b.output(mask, "attention_mask", INT32, ["batch", "length"])
        text = helper.make_tensor_value_info("text_utf8", TensorProto.UINT8, ["batch", "bytes"])
        self.encoder_model = builder_model(b, [text], domains=DOMAINS)
        self.encoder = open_session(self.encoder_model)
        d = GraphBuilder("detok")
        if name.startswith("marian"):
            index, texts = detokenizer_index(d, "sequences", vocabulary)
        else:
            index, texts = language_detokenizer_index(d, "sequences", language, self.size)
        d.output(join_strings(d, index, texts, "id_to_text"), "translation", STRING, ["batch", "beams"])
        utf8, lengths = join_bytes(d, index, [str(t) for t in texts], "id_to_text")
        d.output(utf8, "translation_utf8", TensorProto.UINT8, ["batch", "beams", "bytes"])
        d.output(lengths, "translation_lengths", INT64, ["batch", "beams"])
        sequences = helper.make_tensor_value_info("sequences", INT32, ["b", "r", "n"])
        self.decoder = open_session(builder_model(d, [sequences], domains=DOMAINS))

    def encode(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids, mask = self.encoder.run(None, {"text_utf8": data})
        return ids, mask

    def expected(self, texts: list[str]) -> dict[str, np.ndarray]:
        return self.hf(texts, padding=True, return_tensors="np")


@pytest.fixture(scope="module", params=TOKENIZERS)
def portable(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Portable:
    if request.param == "marian":
        return Portable("marian", DEMO_DIR)
    if request.param == "marian-separate":
        return Portable("marian", request.getfixturevalue("separate_vocab_dir"))
    if request.param == "madlad":  # T5's, with byte pieces and "<2de>" tags in its vocabulary
        directory = tmp_path_factory.mktemp("madlad")
        madlad_tokenizer(directory)
        return Portable("T5Tokenizer", directory, trained=True)
    if request.param == "nllb-legacy":
        directory = tmp_path_factory.mktemp("nllb-legacy")
        nllb_legacy_tokenizer(directory)
        return Portable("nllb-legacy", directory, trained=True)
    return Portable(request.param, tmp_path_factory.mktemp(request.param))


def _mismatches(portable: Portable, texts: list[str], data: np.ndarray) -> list[str]:
    ids, mask = portable.encode(data)
    expected = portable.expected(texts)
    if ids.shape == expected["input_ids"].shape and (ids == expected["input_ids"]).all():
        assert (mask == expected["attention_mask"]).all()
        return []
    return [t for row, t in enumerate(texts) if ids[row][mask[row] == 1].tolist() != portable.hf(t).input_ids]


def test_ids_equal_hf(portable: Portable) -> None:
    """The corpus and 10,000 generated strings, in batches of 64; and every 13th string alone."""
    assert len(STRINGS) >= 12_000
    wrong: list[str] = []
    for start in range(0, len(STRINGS), 64):
        chunk = STRINGS[start : start + 64]
        wrong += _mismatches(portable, chunk, utf8_batch(chunk))
    for text in STRINGS[::13]:
        wrong += _mismatches(portable, [text], utf8_batch([text]))
    assert not wrong, f"{len(wrong)} strings differ from HF, e.g. {wrong[:3]!r}"


def test_random_texts(portable: Portable) -> None:
    """Hypothesis over an alphabet that finds where SentencePiece and ``tokenizers`` part (digit runs
    whose segmentations tie; combining marks after full-width letters), plus texts that did."""
    known = ["a111", "a1111", "\uff21\u0301", "e\u0302\u0301", "x \uff41\u0308\u0301 111"]
    assert not _mismatches(portable, known, utf8_batch(known))
    alphabet = st.sampled_from(
        [
            *"abcXYZ019 .,!?'\t\n",
            "1",
            "11",
            "猫",
            "世",
            "😀",
            "é",
            "\u0301",
            "\uff21",
            "\u3000",
            "  ",
            "</s>",
            "<pad>",
            "<unk>",
            "<s>",
            "<2de>",
            "<0x41>",
            "\u2581",
        ]
    )

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.lists(st.lists(alphabet, max_size=16).map("".join), min_size=1, max_size=5))
    def check(texts: list[str]) -> None:
        assert not _mismatches(portable, texts, utf8_batch(texts)), texts

    check()


OTHER_ADDED = [
    "eng_Latn",
    "nob_Latn",
    "en_XX",
    "ro_RO",
    "__fr__",
    "<mask>",
    "<extra_id_0>",
    "<extra_id_10>",
    "</s>",
    "<2de>",
]


def test_added_tokens_typed_in_the_text(portable: Portable) -> None:
    """HF splits every added token out of a text before tokenizing the rest (language codes,
    ``<mask>`` with the whitespace before it, T5's sentinels, the special tokens): leftmost-longest,
    and in ``tokenizers`` pipelines the ``normalized`` ones (NLLB's ``<mask>``) in the normalized
    text. The same ids on the cases and on 600 strings made of the tokenizer's own added tokens,
    other families' codes, words and whitespace; HF splits a token out of most of them."""
    own = {str(token.content): index for index, token in portable.hf.added_tokens_decoder.items()}
    texts = added_token_strings([*own, *OTHER_ADDED])
    wrong: list[str] = []
    for start in range(0, len(texts), 50):
        chunk = texts[start : start + 50]
        wrong += _mismatches(portable, chunk, utf8_batch(chunk))
    assert not wrong, f"{len(wrong)} strings differ from HF, e.g. {wrong[:3]!r}"
    layout = slice(0, -2) if portable.source_last else slice(1 if portable.source else 0, -1)
    inner = [portable.hf(text).input_ids[layout] for text in texts]
    split = sum(any(i in own.values() for i in ids) for ids in inner)
    assert split > len(texts) // 2


def test_split_special_tokens_leaves_them_text(tmp_path: Path) -> None:
    """A tokenizer saved with ``split_special_tokens=True`` tokenizes its special tokens (NLLB's codes
    among them) as text: so does the graph."""
    from transformers import AutoTokenizer

    language_tokenizer(tmp_path / "hub", "NllbTokenizer")
    shutil.copytree(tmp_path / "hub", tmp_path / "split")
    AutoTokenizer.from_pretrained(tmp_path / "split", split_special_tokens=True).save_pretrained(tmp_path / "split")
    vocabulary = load_language_vocabulary(tmp_path / "split")
    assert vocabulary.added_tokens == () and vocabulary.normalized_tokens == ()
    portable = Portable("NllbTokenizer", tmp_path / "split", trained=True)
    texts = ["say eng_Latn now", "x <mask> y", "a</s>b", "<s>fra_Latn</s>"]
    assert not _mismatches(portable, texts, utf8_batch(texts))


def test_bytes_that_are_not_utf8(portable: Portable) -> None:
    """Random bytes (biased towards UTF-8's lead and continuation bytes) tokenize as Python's
    ``decode("utf-8", errors="replace")`` of them, the zero bytes that end a row dropped as padding
    (those before other bytes are U+0000); nothing crashes."""
    rng = random.Random(5)
    pool = [*range(256), *range(0x80, 0xC0), *(0xC2, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xC0)] * 1
    blobs = [bytes(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(1500)]
    blobs += [b"\x00", b"a\x00b", b"\xff", b"\xe2\x82", b"caf\xc3", b"\xf0\x9f\x98\x80\xf0\x9f", b"\xed\xa0\x80x"]
    wrong = []
    for start in range(0, len(blobs), 50):
        chunk = blobs[start : start + 50]
        data = np.zeros((len(chunk), max(len(c) for c in chunk) + 3), dtype=np.uint8)  # zero padding too
        for row, blob in enumerate(chunk):
            data[row, : len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        texts = [blob.decode("utf-8", errors="replace").rstrip("\0") for blob in chunk]
        wrong += _mismatches(portable, texts, data)
    assert not wrong, f"{len(wrong)} byte strings differ, e.g. {wrong[:3]!r}"


def test_zero_characters_inside_a_text(portable: Portable) -> None:
    """A U+0000 before other text is a character the HF tokenizers keep (SentencePiece's ``<unk>``,
    never normalized away): the zero byte carries it; only those at a row's end are padding."""
    rng = random.Random(8)
    texts = ["a\0b", "\0a", " \0 b", "x \0\0 y", "\0\x01\0b", "e\0\u0301", "\0 say", "a\0</s>b", "\0\u3000x"]
    for text in STRINGS[:400:2]:
        at = rng.randint(0, len(text))
        texts.append(text[:at] + "\0" * rng.randint(1, 3) + (text[at:] or "z"))
    assert all(text.rstrip("\0") == text for text in texts)
    wrong: list[str] = []
    for start in range(0, len(texts), 64):
        chunk = texts[start : start + 64]
        wrong += _mismatches(portable, chunk, utf8_batch(chunk))
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {wrong[:3]!r}"


def test_edge_batches(portable: Portable) -> None:
    for texts in ([], [""], ["", "", ""], ["a", ""], ["\u3000\t\n"]):
        data = utf8_batch(texts)
        ids, mask = portable.encode(data)
        if not texts:
            assert ids.shape[0] == 0
            continue
        expected = portable.expected(texts)
        np.testing.assert_array_equal(ids, expected["input_ids"])
        np.testing.assert_array_equal(mask, expected["attention_mask"])


def test_bytes_detokenizer_equals_strings_and_batch_decode(portable: Portable) -> None:
    """Every id of the output layer once (in rows of 50), and random sequences."""
    rng = np.random.default_rng(4)
    whole = np.arange(portable.size, dtype=np.int32)
    whole = np.pad(whole, (0, -len(whole) % 50)).reshape(-1, 1, 50)
    cases = [whole, rng.integers(0, portable.size, size=(16, 3, 40)).astype(np.int32)]
    for start in range(0, 320, 64):
        ids = portable.expected(STRINGS[start : start + 64])["input_ids"].astype(np.int32)
        cases.append(ids[:, None, :])
    for sequences in cases:
        texts, utf8, lengths = portable.decoder.run(None, {"sequences": sequences})
        flat = sequences.reshape(-1, sequences.shape[-1]).tolist()
        expected = portable.hf.batch_decode(flat, skip_special_tokens=True)
        assert texts.reshape(-1).tolist() == expected
        as_bytes = [
            bytes(row[:n]).decode("utf-8")
            for row, n in zip(utf8.reshape(-1, utf8.shape[-1]), lengths.reshape(-1), strict=True)
        ]
        assert as_bytes == expected
        assert (
            utf8.reshape(-1, utf8.shape[-1])[np.arange(utf8.shape[-1])[None, :] >= lengths.reshape(-1, 1)] == 0
        ).all()


def test_only_standard_domains(portable: Portable) -> None:
    domains = {domain for domain, _ in ops_used(portable.encoder_model.graph)}
    assert domains <= {"", "ai.onnx.ml"}, domains


def test_grapheme_table_matches_installed_tokenizers() -> None:
    """The committed table (custom_ops/grapheme_classes.npz) says what the installed ``tokenizers``
    does where it can be observed (``python -m graphgen.custom_ops.unicode_data`` writes it again)."""
    from graphgen.custom_ops.unicode_data import observed_joins

    classes = grapheme_classes() & CLASS_MASK
    seen = observed_joins()
    np.testing.assert_array_equal(np.isin(classes, (EXTEND, ZWJ, SPACING_MARK)), seen["after"])
    np.testing.assert_array_equal(classes == PREPEND, seen["before"])
    bmp = np.arange(len(classes)) < 0x10000
    bmp[0] = False
    np.testing.assert_array_equal(np.isin(classes, (CONTROL, CR, LF))[bmp], seen["ends"][bmp])
