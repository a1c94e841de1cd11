"""Every family beside Marian (``graphgen.testing.FAMILIES``) against HF ``generate``, token for token.

Tiny random-weight models of each family (``graphgen.testing.checkpoints``) cover what differs from
Marian. NLLB / M2M100 and mBART: pre-norm layers, final and embedding norms, fairseq's padding-aware
sinusoidal positions, learned positions with an offset, EOS as decoder start, and the target
language forced as the first token (``forced_bos_token_id``), one per call or one per input row.
T5 (original and v1.1) and mT5: relative position buckets (exact, log-spaced and saturated
distances), RMS norms, no biases, unscaled attention, d_kv × heads ≠ d_model, the gated
feed-forward, the scaled tied head of the original and the untied head of v1.1 / mT5.

The id-level file (random sources, no tokenizer) is checked once per architecture, the text-level
file (``generate`` + ``batch_decode``, languages chosen at run time) once per tokenizer kind, on
checkpoints laid out as the hub's: random weights, a SentencePiece model trained on the demo
corpus, the family's tokenizer files. The families' files are built once per session
(``conftest.family_ids`` / ``family_text``) and shared with the other modules' family tests.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from graphgen import export
from graphgen.testing import FAMILIES, IdFiles, TextFiles, demo_texts, open_session
from graphgen.testing.family_files import ID_VOCAB, SENTENCES
from graphgen.verify.against_hf import verify

ID_LEVEL = [name for name, family in FAMILIES.items() if family.id_parity]
TEXT_LEVEL = [name for name, family in FAMILIES.items() if family.text_parity]
CODED_ID_LEVEL = [name for name in ID_LEVEL if FAMILIES[name].has_languages]
CODED_TEXT_LEVEL = [name for name in TEXT_LEVEL if FAMILIES[name].has_languages]
RELATIVE_ID_LEVEL = [name for name in ID_LEVEL if FAMILIES[name].relative_positions]
FORCED_FIRST_TOKENS = (7, 50, 119)  # three targets' ids, up to the last of the id-level vocabulary

IdFamilies = Callable[[str], IdFiles]
TextFamilies = Callable[[str], TextFiles]


def _quiet(_: str) -> None:
    """Export progress, not printed."""


def test_sentences() -> None:
    assert len(demo_texts()[:SENTENCES]) >= 100


# --- the id-level file ---------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("family", ID_LEVEL)
def test_id_file_equals_hf(family_ids: IdFamilies, family: str, num_beams: int, batch_size: int) -> None:
    """104 random sources per setting (T5's up to 30 tokens, past the bucket range, and outputs up to
    40); with language codes, for three different forced first tokens (target languages) and none."""
    files = family_ids(family)
    forced_tokens = (None, *FORCED_FIRST_TOKENS) if files.family.has_languages else (None,)
    for forced in forced_tokens:
        settings = {"num_beams": num_beams} | ({} if forced is None else {"forced_bos_token_id": forced})
        expected: list[tuple[int, ...]] = []
        actual: list[tuple[int, ...]] = []
        for ids, mask in files.sources(104 // batch_size, batch_size):
            expected += files.hf(ids, mask, **settings)
            actual += files.run(ids, mask, **settings)
        assert len(expected) == 104
        if forced is not None:
            assert all(row[0] == forced for row in expected)
        assert len({row[:4] for row in expected}) > 10  # outputs depend on the input
        if files.family.relative_positions:
            assert max(map(len, expected)) > 20  # and reach distances past max_distance
        differ = [(a, e) for a, e in zip(actual, expected, strict=True) if a != e]
        assert not differ, f"{settings}: {len(differ)} of {len(expected)} differ, e.g. {differ[:2]}"


@pytest.mark.parametrize("family", CODED_ID_LEVEL)
def test_a_forced_first_token_per_row(family_ids: IdFamilies, family: str) -> None:
    """One target per input row: each row as HF gives it for that target alone (same padding)."""
    files = family_ids(family)
    targets = np.array([7, 50, 119, 7, 50, 119, 7, 50], dtype=np.int32)
    for ids, mask in files.sources(3, 8, seed=1):
        actual = files.run(ids, mask, forced_bos_token_id=targets)
        for target in set(targets.tolist()):
            rows = np.flatnonzero(targets == target)
            expected = files.hf(ids[rows], mask[rows], forced_bos_token_id=target)
            assert [actual[r] for r in rows] == expected


@pytest.mark.parametrize("family", CODED_ID_LEVEL)
def test_bad_forced_first_tokens_stop_the_run(family_ids: IdFamilies, family: str) -> None:
    files = family_ids(family)
    ids, mask = files.sources(1, 3)[0]
    with pytest.raises(Exception, match="forced_bos_token_id outside the vocabulary"):
        files.run(ids, mask, forced_bos_token_id=ID_VOCAB)
    with pytest.raises(Exception, match="forced_bos_token_id must hold one id, or one per input row"):
        files.run(ids, mask, forced_bos_token_id=[7, 8])


@pytest.mark.parametrize("family", RELATIVE_ID_LEVEL)
def test_op_search_equals_hf(family_ids: IdFamilies, family: str, tmp_path: Path) -> None:
    """ORT's BeamSearch op runs the same subgraphs (relative bias per step from the cache length)."""
    files = family_ids(family)
    export(str(files.directory), str(tmp_path / "op.onnx"), tokenizer=False, search="op", progress=_quiet)
    op = open_session(tmp_path / "op.onnx")
    for ids, mask in files.sources(4, 4, seed=2):
        assert files.run(ids, mask, op, num_beams=1) == files.hf(ids, mask, num_beams=1)


@pytest.mark.parametrize("family", ID_LEVEL)
def test_int8_export_runs(family_ids: IdFamilies, family: str, tmp_path: Path) -> None:
    """int8 cannot equal HF token for token; it must build and run, and keep a forced first token."""
    files = family_ids(family)
    export(str(files.directory), str(tmp_path / "int8.onnx"), tokenizer=False, int8=True, progress=_quiet)
    ids, mask = files.sources(1, 4)[0]
    forced = {"forced_bos_token_id": 50} if files.family.has_languages else {}
    rows = files.run(ids, mask, open_session(tmp_path / "int8.onnx"), **forced)
    assert len(rows) == 4
    if forced:
        assert all(row[0] == 50 for row in rows)


# --- the text-level file -------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("family", TEXT_LEVEL)
def test_text_file_equals_hf(family_text: TextFamilies, family: str, num_beams: int, batch_size: int) -> None:
    """Texts and tokens identical to HF on 104 sentences per setting, greedy and 4 beams; for each of
    three target languages where the family has them (T5: the task prefix in the text instead)."""
    files = family_text(family)
    row = files.family
    sentences = files.sentences()
    if not row.has_languages:
        assert files.translator.languages == [] and "source_language" not in files.translator._inputs
    for target in row.target_languages or (None,):
        languages = {} if target is None else {"source_language": row.source_language, "target_language": target}
        expected: tuple[list[str], list[tuple[int, ...]]] = ([], [])
        actual: tuple[list[str], list[tuple[int, ...]]] = ([], [])
        for start in range(0, len(sentences), batch_size):
            chunk = sentences[start : start + batch_size]
            for into, (texts, tokens) in (
                (expected, files.hf(chunk, row.source_language or None, target, num_beams=num_beams)),
                (actual, files.graph(chunk, **languages, num_beams=num_beams)),
            ):
                into[0].extend(texts)
                into[1].extend(tokens)
        if target is not None:
            assert all(tokens[0] == files.code_id(target) for tokens in actual[1])
        assert len(set(expected[0])) > 10  # outputs depend on the input
        differ = [i for i in range(len(sentences)) if (expected[0][i], expected[1][i]) != (actual[0][i], actual[1][i])]
        assert not differ, f"{target}: {len(differ)} of {len(sentences)} differ, e.g. {sentences[differ[0]]!r}"


@pytest.mark.parametrize("family", CODED_TEXT_LEVEL)
def test_one_target_and_source_per_row(family_text: TextFamilies, family: str) -> None:
    files = family_text(family)
    row = files.family
    targets = [row.target_languages[i % 3] for i in range(8)]
    sources = [row.source_language if i % 2 else row.target_languages[1] for i in range(8)]
    texts = files.sentences()[:8]
    actual = files.graph(texts, source_language=sources, target_language=targets)
    for index, (text, source, target) in enumerate(zip(texts, sources, targets, strict=True)):
        (want_text,), (want_tokens,) = files.hf([text], source, target)
        assert (actual[0][index], actual[1][index]) == (want_text, want_tokens)


@pytest.mark.parametrize("family", CODED_TEXT_LEVEL)
def test_defaults_and_no_target(family_text: TextFamilies, family: str) -> None:
    """The checkpoint sets no forced token: the file's default target is none, as HF's."""
    files = family_text(family)
    row = files.family
    assert files.translator.source_language == row.source_language
    assert files.translator.target_language == ""
    assert {row.source_language, *row.target_languages} <= set(files.translator.languages)
    texts = files.sentences()[8:16]
    assert files.graph(texts) == files.hf(texts, row.source_language, None)
    assert files.graph(texts, target_language="") == files.hf(texts, row.source_language, None)


@pytest.mark.parametrize("family", TEXT_LEVEL)
def test_verify(family_text: TextFamilies, family: str, tmp_path: Path) -> None:
    """``graphgen verify`` (greedy and beam search against HF) reports every sentence identical."""
    files = family_text(family)
    row = files.family
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(files.sentences()[:16]), encoding="utf-8")
    languages = {"target_language": row.target_languages[1]} if row.has_languages else {}
    out = io.StringIO()
    ok = verify(str(files.directory), str(files.onnx), sentences_file=str(sentences), out=out, **languages)
    assert ok, out.getvalue()
    report = out.getvalue()
    if row.has_languages:
        assert f"languages: source {row.source_language}, target {row.target_languages[1]}" in report
    assert report.count("16/16 identical") == 2
