"""NLLB, M2M100 and mBART-50 files, text in and text out, against HF ``generate`` + ``batch_decode``,
with the source and target languages chosen at run time.

Each checkpoint is built here as the hub lays it out (``conftest.language_checkpoint``): random
weights, a SentencePiece model trained on the demo corpus, the family's tokenizer files.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import (
    LANGUAGE_TOKENIZERS,
    demo_test_pairs,
    file_session,
    language_checkpoint,
    no_torch_python,
    text_feeds,
)

from graphgen import GraphgenError, Translator
from graphgen._export import export
from graphgen.passes.bake import write_baked
from graphgen.verify.against_hf import verify
from graphgen.verify.parity import generated_tokens

SENTENCES = [source.split(" ", 1)[1] for source, _ in demo_test_pairs()][:104]
LANGUAGES = {  # source, then three targets
    "NllbTokenizer": ("eng_Latn", "zho_Hans", "fra_Latn", "deu_Latn"),
    "M2M100Tokenizer": ("en", "zh", "fr", "de"),
    "MBart50Tokenizer": ("en_XX", "zh_CN", "fr_XX", "de_DE"),
}
PAD, EOS = 1, 2


class Checkpoint:
    def __init__(self, directory: Path, tokenizer_class: str) -> None:
        self.directory = directory
        self.model, self.tokenizer = language_checkpoint(directory, tokenizer_class, num_beams=4)
        self.onnx = directory / "model.onnx"
        export(directory, self.onnx, progress=lambda _: None)
        self.translator = Translator(self.onnx)
        self.source, *self.targets = LANGUAGES[tokenizer_class]

    def code_id(self, code: str) -> int:
        if hasattr(self.tokenizer, "lang_code_to_id"):
            return int(self.tokenizer.lang_code_to_id[code])
        return int(self.tokenizer.convert_tokens_to_ids(code))

    def hf(self, texts: list[str], source: str, target: str | None, **settings) -> tuple[list[str], list[tuple]]:
        self.tokenizer.src_lang = source
        inputs = self.tokenizer(texts, return_tensors="pt", padding=True)
        forced = {} if target is None else {"forced_bos_token_id": self.code_id(target)}
        with torch.no_grad():
            output = self.model.generate(**inputs, **forced, **settings)
        texts = self.tokenizer.batch_decode(output, skip_special_tokens=True)
        return texts, [generated_tokens(row, EOS, PAD) for row in output.tolist()]

    def graph(self, texts: list[str], **arguments) -> tuple[list[str], list[tuple]]:
        result = self.translator.run(texts, **arguments)
        tokens = [generated_tokens(row[0], EOS, PAD) for row in result["sequences"].tolist()]
        return [str(row[0]) for row in result["translation"]], tokens


@pytest.fixture(scope="module", params=LANGUAGE_TOKENIZERS)
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    return Checkpoint(tmp_path_factory.mktemp(request.param) / "checkpoint", request.param)


def test_sentences() -> None:
    assert len(SENTENCES) >= 100


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_three_targets_equal_hf(checkpoint: Checkpoint, batch_size: int, num_beams: int) -> None:
    """Texts and tokens identical to HF on 104 sentences per target, greedy and default beams."""
    for target in checkpoint.targets:
        expected, actual = ([], []), ([], [])
        for start in range(0, len(SENTENCES), batch_size):
            chunk = SENTENCES[start : start + batch_size]
            for into, (texts, tokens) in (
                (expected, checkpoint.hf(chunk, checkpoint.source, target, num_beams=num_beams)),
                (
                    actual,
                    checkpoint.graph(
                        chunk, source_language=checkpoint.source, target_language=target, num_beams=num_beams
                    ),
                ),
            ):
                into[0].extend(texts)
                into[1].extend(tokens)
        assert all(tokens[0] == checkpoint.code_id(target) for tokens in actual[1])
        differ = [i for i in range(len(SENTENCES)) if (expected[0][i], expected[1][i]) != (actual[0][i], actual[1][i])]
        assert not differ, f"{target}: {len(differ)} of {len(SENTENCES)} differ, e.g. {SENTENCES[differ[0]]!r}"


def test_one_target_and_source_per_row(checkpoint: Checkpoint) -> None:
    targets = [checkpoint.targets[i % 3] for i in range(8)]
    sources = [checkpoint.source if i % 2 else LANGUAGES[type(checkpoint.tokenizer).__name__][2] for i in range(8)]
    texts = SENTENCES[:8]
    actual = checkpoint.graph(texts, source_language=sources, target_language=targets)
    for row, (text, source, target) in enumerate(zip(texts, sources, targets, strict=True)):
        (want_text,), (want_tokens,) = checkpoint.hf([text], source, target)
        assert (actual[0][row], actual[1][row]) == (want_text, want_tokens)


def test_defaults_and_no_target(checkpoint: Checkpoint) -> None:
    """The checkpoint sets no forced token: the file's default target is none, as HF's."""
    assert checkpoint.translator.source_language == checkpoint.source
    assert checkpoint.translator.target_language == ""
    assert {checkpoint.source, *checkpoint.targets} <= set(checkpoint.translator.languages)
    texts = SENTENCES[8:16]
    assert checkpoint.graph(texts) == checkpoint.hf(texts, checkpoint.source, None)
    assert checkpoint.graph(texts, target_language="") == checkpoint.hf(texts, checkpoint.source, None)


def test_generation_config_target_is_the_default(tmp_path: Path) -> None:
    """A checkpoint whose generation config forces a language exports it as the default target."""
    model, tokenizer = language_checkpoint(tmp_path, "MBart50Tokenizer", seed=3)
    model.generation_config.forced_bos_token_id = tokenizer.lang_code_to_id["ro_RO"]
    model.generation_config.save_pretrained(tmp_path)
    export(tmp_path, tmp_path / "m.onnx", progress=lambda _: None)
    translator = Translator(tmp_path / "m.onnx")
    assert translator.target_language == "ro_RO"
    tokenizer.src_lang = "en_XX"
    inputs = tokenizer(SENTENCES[:8], return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = tokenizer.batch_decode(model.generate(**inputs), skip_special_tokens=True)
    assert translator.translate(SENTENCES[:8]) == expected


def test_bad_languages_are_clear_errors(checkpoint: Checkpoint, demo_onnx: Path) -> None:
    with pytest.raises(ValueError, match="unknown target_language 'klingon'"):
        checkpoint.translator.translate(["a"], target_language="klingon")
    near = checkpoint.targets[0][:-1]
    with pytest.raises(ValueError, match=f"did you mean .*{checkpoint.targets[0]}"):
        checkpoint.translator.translate(["a"], target_language=near)
    with pytest.raises(ValueError, match="unknown source_language ''"):
        checkpoint.translator.translate(["a"], source_language="")
    with pytest.raises(ValueError, match=r"give one target_language, or one per text \(2\); got 3"):
        checkpoint.translator.translate(["a", "b"], target_language=checkpoint.targets)
    with pytest.raises(GraphgenError, match="takes no target_language"):
        Translator(demo_onnx).translate(["a"], target_language="fr")


def test_verify(checkpoint: Checkpoint, tmp_path: Path) -> None:
    out = io.StringIO()
    target = checkpoint.targets[1]
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES[:16]), encoding="utf-8")
    ok = verify(
        str(checkpoint.directory), str(checkpoint.onnx), sentences_file=str(sentences), target_language=target, out=out
    )
    assert ok, out.getvalue()
    report = out.getvalue()
    assert f"languages: source {checkpoint.source}, target {target}" in report
    assert report.count("16/16 identical") == 2


def test_cli_translate_with_languages(checkpoint: Checkpoint) -> None:
    target = checkpoint.targets[2]
    command = [sys.executable, "-m", "graphgen", "translate", str(checkpoint.onnx), "--target-language", target]
    done = subprocess.run([*command, *SENTENCES[:3]], capture_output=True, text=True, check=True)
    expected = checkpoint.hf(SENTENCES[:3], checkpoint.source, target)[0]
    assert done.stdout.splitlines() == [text.replace("\n", " ") for text in expected]
    failed = subprocess.run([*command[:-1], "xx", "hello"], capture_output=True, text=True)
    assert failed.returncode != 0
    assert "unknown target_language 'xx'" in failed.stderr


def test_export_without_torch_gives_the_same_file(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """The tokenizer files and safetensors weights need no torch: the same bytes from a torch-free venv."""
    theirs = tmp_path / "no-torch.onnx"
    done = subprocess.run(
        [no_torch_python(), "-m", "graphgen", "export", str(checkpoint.directory), "-o", str(theirs), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert theirs.read_bytes() == checkpoint.onnx.read_bytes()


def test_baked_copy_can_keep_the_languages(checkpoint: Checkpoint, demo_onnx: Path, tmp_path: Path) -> None:
    """`graphgen bake --keep-languages`: settings fixed, the languages required inputs (for Java)."""
    baked = tmp_path / "java.onnx"
    write_baked(checkpoint.onnx, baked, {"num_beams": 1}, keep_languages=True)
    session = file_session(baked)
    assert sorted(i.name for i in session.get_inputs()) == ["source_language", "target_language", "text_utf8"]
    assert session.get_overridable_initializers() == []
    target, texts = checkpoint.targets[0], SENTENCES[:4]
    feeds = {"source_language": [checkpoint.source], "target_language": [target]}
    feeds = {k: np.array(v, dtype=object) for k, v in feeds.items()} | text_feeds(session, texts)
    (raw,) = session.run(["translation"], feeds)
    assert raw[:, 0].tolist() == checkpoint.translator.translate(texts, target_language=target, num_beams=1)
    copy = Translator(baked)
    assert copy.translate(texts, target_language=target) == raw[:, 0].tolist()
    assert copy.translate(texts) == checkpoint.translator.translate(texts, num_beams=1)  # the file's defaults
    with pytest.raises(GraphgenError, match="has no language inputs to keep"):
        write_baked(demo_onnx, tmp_path / "demo.onnx", keep_languages=True)
