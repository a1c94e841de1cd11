"""Tokenizers that write the source language after ``</s>``: mBART-25's MBartTokenizer
(facebook/mbart-large-cc25 and its fine-tunes, such as facebook/mbart-large-en-ro) and NLLB's with
``legacy_behaviour=True``.

MBartTokenizer encodes ``pieces + [</s>, en_XX]``, and its checkpoints start the decoder with the
target language's token (mbart-large-en-ro's config: ``decoder_start_token_id`` = ``ro_RO``; HF's
documented call is ``generate(decoder_start_token_id=...)``); a text file's ``target_language``
chooses that start per call or per text. NLLB's legacy layout moves only the source language; its
target is still the forced first token. Tiny random checkpoints in the hub's layout
(``graphgen.testing.mbart25_checkpoint``, ``nllb_legacy_checkpoint``); the tokenizers themselves
are also in ``tests/test_portable_tokenizer.py`` (12,000 strings each).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphgen import Translator, export
from graphgen._errors import GraphgenError
from graphgen.contract import read_file_info
from graphgen.passes.bake import write_baked
from graphgen.testing import demo_texts, mbart25_checkpoint, nllb_legacy_checkpoint
from graphgen.verify.against_hf import verify
from graphgen.verify.parity import generated_tokens, graph_generate, hf_generate

TEXTS = [*demo_texts()[:24], "", "a  b   c ", "Numbers 1 2 3 and 東京"]


def _quiet(_: str) -> None:
    """Export progress, not printed."""


def _hf(model: Any, tokenizer: Any, texts: list[str], source: str, beams: int, **languages: int) -> list[str]:
    import torch

    tokenizer.src_lang = source
    inputs = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(**inputs, num_beams=beams, max_length=16, **languages)
    return list(tokenizer.batch_decode(output, skip_special_tokens=True))


@pytest.fixture(scope="module")
def mbart25(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any, Path]:
    directory = tmp_path_factory.mktemp("mbart25") / "checkpoint"
    # (seed 0's weights put two beams of one zh_CN → de_DE text within float32 noise of each other:
    # HF in float32 keeps one, HF in float64 and the file the other)
    model, tokenizer = mbart25_checkpoint(directory, seed=1)
    onnx_file = directory.parent / "mbart25.onnx"
    export(str(directory), str(onnx_file), progress=_quiet)
    return directory, model, tokenizer, onnx_file


def test_the_checkpoint_is_mbart25_shaped(mbart25: tuple[Path, Any, Any, Path]) -> None:
    """What the other tests rely on: MBartTokenizer's layout and a language as the decoder start."""
    _, model, tokenizer, onnx_file = mbart25
    assert type(tokenizer).__name__.removesuffix("Fast") == "MBartTokenizer"
    tokenizer.src_lang = "en_XX"
    ids = tokenizer("a b").input_ids
    assert ids[-2:] == [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("en_XX")]
    assert model.generation_config.decoder_start_token_id == tokenizer.convert_tokens_to_ids("ro_RO")
    info = read_file_info(str(onnx_file))
    assert info.source_language == "en_XX" and info.target_language == "ro_RO"


@pytest.mark.parametrize("beams", [1, 4])
def test_the_target_language_starts_the_decoder(mbart25: tuple[Path, Any, Any, Path], beams: int) -> None:
    """Per call (the default ``ro_RO``, ``de_DE``, ``""`` for the checkpoint's start) and per text,
    from two source languages: the strings of HF ``generate(decoder_start_token_id=...)``."""
    _, model, tokenizer, onnx_file = mbart25
    translator = Translator(str(onnx_file))
    code = tokenizer.convert_tokens_to_ids
    seen = set()
    for source in ("en_XX", "zh_CN"):
        for target in ("ro_RO", "de_DE", ""):
            start = {"decoder_start_token_id": code(target)} if target else {}
            expected = _hf(model, tokenizer, TEXTS, source, beams, **start)
            got = translator.translate(
                TEXTS, source_language=source, target_language=target, num_beams=beams, max_length=16
            )
            assert got == expected, (source, target)
            seen.add(tuple(got))
    assert len(seen) >= 4  # the languages change the outputs: the comparison can fail
    targets = ["de_DE", "ro_RO", "fr_XX"] * 9
    expected = [
        _hf(model, tokenizer, [text], "en_XX", beams, decoder_start_token_id=code(target))[0]
        for text, target in zip(TEXTS, targets, strict=True)
    ]
    got = translator.translate(TEXTS, source_language="en_XX", target_language=targets, num_beams=beams, max_length=16)
    assert got == expected


def test_verify_and_the_extensions_file(mbart25: tuple[Path, Any, Any, Path], tmp_path: Path) -> None:
    """``graphgen verify`` passes HF the target as the decoder start; the ``--tokenizer extensions``
    file translates the demo sentences as HF does too."""
    directory, model, tokenizer, onnx_file = mbart25
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(t for t in TEXTS if t), encoding="utf-8")
    for target in ("ro_RO", "de_DE"):
        report = io.StringIO()
        ok = verify(str(directory), str(onnx_file), sentences_file=str(sentences), target_language=target, out=report)
        assert ok, report.getvalue()
        assert f"target {target}" in report.getvalue()
    extensions = tmp_path / "extensions.onnx"
    export(str(directory), str(extensions), tokenizer="extensions", progress=_quiet)
    texts = demo_texts()[:24]
    got = Translator(str(extensions)).translate(texts, source_language="en_XX", target_language="de_DE", max_length=16)
    assert got == _hf(
        model, tokenizer, texts, "en_XX", 1, decoder_start_token_id=tokenizer.convert_tokens_to_ids("de_DE")
    )


def test_a_long_source_is_cut_before_the_language(mbart25: tuple[Path, Any, Any, Path]) -> None:
    """``truncate=True`` cuts as HF's ``truncation=True``: the pieces, so that ``</s>`` and the
    language still fit (64 positions here); without it the file refuses the text."""
    import torch

    _, model, tokenizer, onnx_file = mbart25
    translator = Translator(str(onnx_file))
    long_text = " ".join(demo_texts()[:12])
    tokenizer.src_lang = "en_XX"
    inputs = tokenizer([long_text, "short"], return_tensors="pt", padding=True, truncation=True, max_length=64)
    assert inputs.input_ids.shape[1] == 64 and len(tokenizer(long_text).input_ids) > 64
    assert inputs.input_ids[0, -2:].tolist() == [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("en_XX")]
    with torch.no_grad():
        output = model.generate(**inputs, num_beams=2, max_length=12)
    expected = tokenizer.batch_decode(output, skip_special_tokens=True)
    got = translator.translate([long_text, "short"], source_language="en_XX", num_beams=2, max_length=12, truncate=True)
    assert got == expected
    with pytest.raises(Exception, match="longer than the model's limit of 64 tokens"):
        translator.translate([long_text], source_language="en_XX", max_length=12)


def test_the_file_without_strings_and_the_baked_copy(mbart25: tuple[Path, Any, Any, Path], tmp_path: Path) -> None:
    """The languages as UTF-8 bytes (``--no-strings``) and as required inputs of a ``graphgen bake
    --keep-languages`` copy (what Java feeds) choose the decoder start as the strings do."""
    directory, model, tokenizer, onnx_file = mbart25
    bytes_only = tmp_path / "bytes.onnx"
    export(str(directory), str(bytes_only), strings=False, progress=_quiet)
    kept = tmp_path / "kept.onnx"
    write_baked(bytes_only, kept, {"num_beams": 2}, keep_languages=True)
    plain = Translator(str(onnx_file))
    targets = ["de_DE", "ro_RO", "fr_XX"] * 9
    expected = plain.translate(TEXTS, source_language="zh_CN", target_language=targets, max_length=16)
    assert expected == [
        _hf(model, tokenizer, [text], "zh_CN", 1, decoder_start_token_id=tokenizer.convert_tokens_to_ids(target))[0]
        for text, target in zip(TEXTS, targets, strict=True)
    ]
    got = Translator(str(bytes_only)).translate(TEXTS, source_language="zh_CN", target_language=targets, max_length=16)
    assert got == expected
    assert Translator(str(kept)).translate(TEXTS, source_language="zh_CN", target_language=targets) == (
        plain.translate(TEXTS, source_language="zh_CN", target_language=targets, num_beams=2)
    )


def test_the_id_level_file_takes_the_decoder_start(mbart25: tuple[Path, Any, Any, Path], tmp_path: Path) -> None:
    """An id-level file has no language inputs: it starts the decoder as the checkpoint does (its
    tokens equal HF's default ``generate``), or with its optional ``decoder_start_token_id`` input
    (HF's ``generate`` argument of the same name; one id, or one per row), which a ``graphgen bake
    --keep`` copy requires; ``graphgen verify`` feeds it the target. A ``--search op`` file has no
    such input: verifying another target is refused."""
    import onnxruntime as ort

    directory, model, tokenizer, _ = mbart25
    ids_file = tmp_path / "ids.onnx"
    export(str(directory), str(ids_file), tokenizer=False, progress=_quiet)
    tokenizer.src_lang = "en_XX"
    session = ort.InferenceSession(str(ids_file))
    eos, pad = model.generation_config.eos_token_id, model.generation_config.pad_token_id
    texts = [t for t in TEXTS if t]
    de, zh = tokenizer.convert_tokens_to_ids(["de_DE", "zh_CN"])
    for beams in (1, 4):
        default = hf_generate(model, tokenizer, texts, 8, num_beams=beams)
        assert graph_generate(session, tokenizer, texts, 8, eos, pad, num_beams=beams) == default
        expected = hf_generate(model, tokenizer, texts, 8, num_beams=beams, decoder_start_token_id=de)
        assert expected != default  # the start is seen
        assert graph_generate(session, tokenizer, texts, 8, eos, pad, num_beams=beams, decoder_start_token_id=de) == (
            expected
        )
    # one start per row: rows alternate between de_DE and zh_CN, each as HF gives it for that start
    batch = tokenizer(texts[:6], return_tensors="np", padding=True)
    feeds = {name: batch[name].astype(np.int32) for name in ("input_ids", "attention_mask")}
    starts = np.array([de, zh] * 3, dtype=np.int32)
    wanted = [
        hf_generate(model, tokenizer, [text], 1, decoder_start_token_id=int(start))[0]
        for text, start in zip(texts[:6], starts, strict=True)
    ]
    got = session.run(["sequences"], feeds | {"decoder_start_token_id": starts})[0]
    assert [[generated_tokens(h, eos, pad) for h in row] for row in got] == wanted
    for wrong, message in (([de, zh], "must hold one id, or one per input row"), ([1 << 20], "outside the vocabulary")):
        with pytest.raises(Exception, match=f"decoder_start_token_id {message}"):
            session.run(["sequences"], feeds | {"decoder_start_token_id": np.array(wrong, dtype=np.int32)})
    # what Java and JavaScript feed: a baked copy that keeps it as a required input
    kept = tmp_path / "kept.onnx"
    write_baked(ids_file, kept, keep=["decoder_start_token_id"])
    kept_session = ort.InferenceSession(str(kept))
    assert "decoder_start_token_id" in [i.name for i in kept_session.get_inputs()]
    assert "decoder_start_token_id" not in [i.name for i in kept_session.get_overridable_initializers()]
    got = kept_session.run(["sequences"], feeds | {"decoder_start_token_id": starts})[0]
    assert [[generated_tokens(h, eos, pad) for h in row] for row in got] == wanted
    with pytest.raises(Exception, match="decoder_start_token_id"):
        kept_session.run(["sequences"], feeds)

    report = io.StringIO()
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(texts), encoding="utf-8")
    assert verify(str(directory), str(ids_file), sentences_file=str(sentences), target_language="de_DE", out=report)
    assert report.getvalue().count(f"{len(texts)}/{len(texts)} identical") == 2, report.getvalue()
    op_file = tmp_path / "op.onnx"
    export(str(directory), str(op_file), tokenizer=False, search="op", progress=_quiet)
    with pytest.raises(GraphgenError, match="has no decoder_start_token_id input"):
        verify(str(directory), str(op_file), target_language="de_DE", out=io.StringIO())


def test_nllb_legacy_behaviour(tmp_path: Path) -> None:
    """NLLB with ``legacy_behaviour``: the source language last, the target forced first; per call and
    per text, greedy and with beams. The file's encoding of a text equals HF's (its ``input_ids`` are
    read through the id-level file's input check: a source longer than the positions is refused)."""
    directory = tmp_path / "checkpoint"
    model, tokenizer = nllb_legacy_checkpoint(directory, seed=3)
    tokenizer.src_lang = "eng_Latn"
    assert tokenizer("a b").input_ids[-2:] == [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("eng_Latn")]
    onnx_file = tmp_path / "nllb-legacy.onnx"
    export(str(directory), str(onnx_file), progress=_quiet)
    translator = Translator(str(onnx_file))
    code = tokenizer.convert_tokens_to_ids
    for beams in (1, 4):
        for source, target in (("eng_Latn", "fra_Latn"), ("zho_Hans", "deu_Latn")):
            expected = _hf(model, tokenizer, TEXTS, source, beams, forced_bos_token_id=code(target))
            got = translator.translate(
                TEXTS, source_language=source, target_language=target, num_beams=beams, max_length=16
            )
            assert got == expected, (source, target, beams)
    targets = ["fra_Latn", "deu_Latn", "zho_Hans"] * 9
    expected = [
        _hf(model, tokenizer, [text], "eng_Latn", 1, forced_bos_token_id=code(target))[0]
        for text, target in zip(TEXTS, targets, strict=True)
    ]
    assert translator.translate(TEXTS, source_language="eng_Latn", target_language=targets, max_length=16) == expected
    assert np.unique(np.array(expected, dtype=object)).size > 3  # the outputs differ: the check can fail
