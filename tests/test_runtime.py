"""Text in, text out: the Translator and CLI against HF generate + batch_decode, the languages of the
language-coded families, and bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import onnxruntime as ort
import pytest
from transformers import MarianMTModel, MarianTokenizer

from graphgen import GraphgenError, SourceTooLongError, TextInputError, Translator, export
from graphgen.contract import LAYER_ASSIGNMENT, TEXT_ON_CPU, TEXT_UTF8, TRANSLATION
from graphgen.runtime.translator import utf8_batch
from graphgen.testing import FAMILIES, LONG_SOURCE, REPO, TextFiles, demo_sources, demo_test_pairs, hf_translate

SOURCES = demo_sources()
CODED = [name for name, family in FAMILIES.items() if family.has_languages]  # NLLB, M2M100, mBART-50
Models = tuple[Translator, MarianMTModel, MarianTokenizer]


@pytest.fixture(scope="module", params=["shared", "separate"])
def models(request: pytest.FixtureRequest, demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Models:
    directory = demo_dir if request.param == "shared" else request.getfixturevalue("separate_vocab_dir")
    path = tmp_path_factory.mktemp("text") / "model.onnx"
    export(str(directory), str(path))
    return (
        Translator(path),
        MarianMTModel.from_pretrained(directory).eval(),
        MarianTokenizer.from_pretrained(directory),
    )


@pytest.mark.parametrize("batch_size", [1, 16], ids=["batch1", "batch16"])
@pytest.mark.parametrize("num_beams", [1, None], ids=["greedy", "default-beams"])
def test_translation_equals_hf(models: Models, batch_size: int, num_beams: int | None) -> None:
    translator, model, tokenizer = models
    settings = {} if num_beams is None else {"num_beams": num_beams}
    differences = []
    for start in range(0, len(SOURCES), batch_size):
        chunk = SOURCES[start : start + batch_size]
        expected = hf_translate(model, tokenizer, chunk, truncation=True, **settings)
        actual = translator.translate(chunk, **settings)
        differences += [(s, e, a) for s, e, a in zip(chunk, expected, actual, strict=True) if e != a]
    assert not differences, f"{len(differences)}/{len(SOURCES)} differ: {differences[:3]}"


def test_demo_accuracy_matches_the_readme(demo_onnx: Path) -> None:
    """The graph reaches the demo model's reported accuracy on its own test set."""
    translator = Translator(demo_onnx)
    pairs = demo_test_pairs()
    outputs = translator.translate([s for s, _ in pairs])
    correct = sum(out == ref for out, (_, ref) in zip(outputs, pairs, strict=True))
    assert correct / len(pairs) >= 0.95


def test_several_returned_sequences(demo_onnx: Path) -> None:
    translator = Translator(demo_onnx)
    result = translator.translate(SOURCES[:3], num_return_sequences=3)
    assert len(result) == 3 and all(isinstance(row, list) and len(row) == 3 for row in result)
    assert [row[0] for row in result] == translator.translate(SOURCES[:3])


def test_memory_patterns_are_off(demo_onnx: Path) -> None:
    """ONNX Runtime's memory patterns would hold a repeated batch shape's working set twice (README)."""
    translator = Translator(demo_onnx)
    assert translator._session.get_session_options().enable_mem_pattern is False
    assert translator.translate(SOURCES[:4]) == translator.translate(SOURCES[:4])


def test_the_session_gets_the_settings_the_file_asks_for(demo_onnx: Path) -> None:
    """The file's metadata asks for the layer assignment that keeps the tokenizer and detokenizer on
    the CPU next to a GPU provider (contract.TEXT_ON_CPU); Translator sets it, and the translations
    on the CPU are those of a session without it."""
    translator = Translator(demo_onnx)
    options = translator._session.get_session_options()
    assert options.get_session_config_entry(LAYER_ASSIGNMENT) == TEXT_ON_CPU[LAYER_ASSIGNMENT]
    plain = ort.InferenceSession(str(demo_onnx), providers=["CPUExecutionProvider"])
    (expected,) = plain.run([TRANSLATION], {TEXT_UTF8: utf8_batch(SOURCES[:8])})
    assert translator.translate(SOURCES[:8]) == expected[:, 0].tolist()


def test_threads_give_serial_results(demo_onnx: Path) -> None:
    translator = Translator(demo_onnx)
    chunks = [SOURCES[i : i + 10] for i in range(0, 80, 10)]
    serial = [translator.translate(chunk) for chunk in chunks]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(translator.translate, chunks))
    assert parallel == serial


def test_bad_input(demo_onnx: Path) -> None:
    translator = Translator(demo_onnx)
    assert translator.translate([]) == []
    assert translator.translate(["", " "]) == translator.translate([""]) * 2
    with pytest.raises(TypeError):
        translator.translate("a string, not a list")
    with pytest.raises(TypeError):
        translator.translate([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="unknown generation setting"):
        translator.translate(["x"], beams=2)
    for bad in (
        {"num_beams": 0},
        {"num_beams": 2, "num_return_sequences": 3},
        {"max_length": 513},
        {"max_length": 1},
        {"min_length": -1},
        {"repetition_penalty": 0.0},
        {"length_penalty": float("nan")},
        {"num_beams": 1.5},
    ):
        with pytest.raises(ValueError):
            translator.translate(["x"], **bad)


def test_zero_characters(models: Models, demo_dir: Path, tmp_path: Path) -> None:
    """A U+0000 inside a text is translated as HF translates it; one the file cannot carry (at the end
    of a text in the bytes input, anywhere in an extensions file's strings) is refused, naming the
    texts, where it used to be dropped (or, with extensions, the rest of the text with it)."""
    translator, model, tokenizer = models
    texts = ["I have\0 three cats.", "\0Tom is 7.", "a\0b", "x\0\0\x01 y"]
    assert translator.translate(texts) == hf_translate(model, tokenizer, texts)
    assert translator.translate(["a\0b"]) != translator.translate(["ab"])  # the character is there
    with pytest.raises(TextInputError, match=r"^the text ends with U\+0000") as refused:
        translator.translate(["cats\0"])
    assert refused.value.indices == (0,)
    with pytest.raises(TextInputError, match=r"^texts 1, 3 of the batch: each ends with U\+0000") as refused:
        translator.translate(["a", "b\0", "c\0d", "\0"])
    assert refused.value.indices == (1, 3)
    path = tmp_path / "extensions.onnx"
    export(str(demo_dir), str(path), tokenizer="extensions", progress=lambda _: None)
    extensions = Translator(path)
    assert extensions.translate(["I have three cats."]) == translator.translate(["I have three cats."])
    with pytest.raises(TextInputError, match=r"^text 1 of the batch holds U\+0000, up to which") as refused:
        extensions.translate(["ok", "a\0b c d"])
    assert refused.value.indices == (1,)


def test_batch_size(demo_onnx: Path, family_text: Callable[[str], TextFiles]) -> None:
    """``translate(batch_size=N)``: N texts per run, longest first, the translations in the texts'
    order; per-text languages follow their texts; errors name the texts among all of them."""
    translator = Translator(demo_onnx)
    texts = SOURCES[:23]
    alone = [translator.translate([text], num_beams=2, num_return_sequences=2)[0] for text in texts]
    assert translator.translate(texts, batch_size=5, num_beams=2, num_return_sequences=2) == alone
    assert translator.translate([], batch_size=4) == []
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="batch_size must be a whole number"):
            translator.translate(texts, batch_size=bad)  # type: ignore[arg-type]
    with pytest.raises(SourceTooLongError, match=r"^text\(s\) 1, 3 of the batch are longer") as too_long:
        translator.translate(["a", LONG_SOURCE, "b", LONG_SOURCE + " x"], batch_size=2)
    assert too_long.value.indices == (1, 3)
    with pytest.raises(TextInputError, match=r"^text 2 of the batch ends") as refused:
        translator.translate(["a", "b", "c\0"], batch_size=1)
    assert refused.value.indices == (2,)
    nllb = family_text("nllb")
    targets = list(nllb.family.target_languages[:3]) * 3
    sources = SOURCES[: len(targets)]
    expected = [nllb.translator.translate([s], target_language=t)[0] for s, t in zip(sources, targets, strict=True)]
    assert nllb.translator.translate(sources, target_language=targets, batch_size=2) == expected
    assert nllb.translator.translate(sources, target_language=targets[:1], batch_size=4) == [
        nllb.translator.translate([s], target_language=targets[0])[0] for s in sources
    ]
    with pytest.raises(ValueError, match="one per text"):
        nllb.translator.translate(sources, target_language=targets[:2], batch_size=2)


def test_raw_session_bad_parameters_raise_not_crash(demo_onnx: Path) -> None:
    """Called without graphgen, out-of-range settings must end in an ORT error, not a dead process."""
    script = textwrap.dedent(f"""
        import numpy as np, onnxruntime as ort
        options = ort.SessionOptions()  # the default file needs no custom-op library
        options.log_severity_level = 4
        session = ort.InferenceSession({str(demo_onnx)!r}, options)
        text = np.frombuffer(b"hello", np.uint8).reshape(1, -1)
        cases = [{{"num_beams": np.array([0], np.int32)}},
                 {{"num_return_sequences": np.array([9], np.int32)}},
                 {{"max_length": np.array([900], np.int32)}},
                 {{"text_utf8": np.array([[1.0]], np.float32)}},
                 {{"text_utf8": np.zeros((0, 0), np.uint8)}}]
        for case in cases:
            try:
                result = session.run(["translation"], {{"text_utf8": text, **case}})
                print("no error", list(case), result[0].shape)
            except Exception as error:
                print("error", type(error).__name__)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = done.stdout.splitlines()
    # max_length beyond the positions only fails once generation actually gets there; "hello" ends first.
    assert [outcomes[0], outcomes[1], outcomes[3]] == ["error Fail", "error Fail", "error InvalidArgument"], outcomes
    assert outcomes[4] == "no error ['text_utf8'] (0, 1)", outcomes  # an empty batch: an empty result


@pytest.mark.parametrize("family", CODED)
def test_bad_languages_are_clear_errors(family_text: Callable[[str], TextFiles], family: str, demo_onnx: Path) -> None:
    files = family_text(family)
    targets = files.family.target_languages
    with pytest.raises(ValueError, match="unknown target_language 'klingon'"):
        files.translator.translate(["a"], target_language="klingon")
    with pytest.raises(ValueError, match=f"did you mean .*{targets[0]}"):
        files.translator.translate(["a"], target_language=targets[0][:-1])
    with pytest.raises(ValueError, match="unknown source_language ''"):
        files.translator.translate(["a"], source_language="")
    with pytest.raises(ValueError, match=r"give one target_language, or one per text \(2\); got 3"):
        files.translator.translate(["a", "b"], target_language=list(targets))
    with pytest.raises(GraphgenError, match="takes no target_language"):
        Translator(demo_onnx).translate(["a"], target_language="fr")


def test_refuses_id_level_models(demo_dir: Path, tmp_path: Path) -> None:
    export(str(demo_dir), str(tmp_path / "ids.onnx"), tokenizer=False)
    with pytest.raises(GraphgenError, match="not a text-level"):
        Translator(tmp_path / "ids.onnx")
    with pytest.raises(GraphgenError, match="does not exist"):
        Translator(tmp_path / "nothing.onnx")


def test_runtime_imports_neither_torch_nor_transformers(demo_onnx: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        from graphgen import Translator
        print(Translator({str(demo_onnx)!r}).translate([">>cmn_Hans<< I have three cats."])[0])
        bad = [m for m in ("torch", "transformers") if m in sys.modules]
        assert not bad, bad
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "我有三只猫。"


def test_cli_translate_arguments_and_stdin(demo_onnx: Path) -> None:
    command = [sys.executable, "-X", "importtime", "-m", "graphgen", "translate", str(demo_onnx)]
    done = subprocess.run(
        [*command, ">>cmn_Hans<< I have three cats.", ">>cmn_Hant<< I have three cats."],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["我有三只猫。", "我有三隻貓。"]
    imported = done.stderr
    assert "| torch" not in imported and "| transformers" not in imported
    done = subprocess.run(
        [*command, "--num-beams", "1"],
        input="The number is 42.\n>>cmn_Hans<< Tom is 7 years old.\n",
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == 2 and done.stdout.splitlines()[1] == "汤姆七岁。"
    done = subprocess.run([*command, "--num-beams", "0", "x"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2 and "num_beams must be at least 1" in done.stderr
    # an argument that is not UTF-8 is refused as such a line of --input is (not translated as U+FFFD)
    arguments = [*map(os.fsencode, command), b"I have three cats.", b"caf\xe9 cats"]
    done = subprocess.run(arguments, capture_output=True, timeout=300, cwd=REPO)
    assert done.returncode == 2 and done.stdout == b""
    assert b"text argument 2 is not valid UTF-8 (byte 0xe9 at offset 3)" in done.stderr


@pytest.mark.parametrize("family", CODED)
def test_cli_translate_with_languages(family_text: Callable[[str], TextFiles], family: str) -> None:
    files = family_text(family)
    target = files.family.target_languages[2]
    texts = files.sentences()[:3]
    command = [sys.executable, "-m", "graphgen", "translate", str(files.onnx), "--target-language", target]
    done = subprocess.run([*command, *texts], capture_output=True, text=True, check=True)
    expected = files.hf(texts, files.family.source_language, target)[0]
    assert done.stdout.splitlines() == [text.replace("\n", " ") for text in expected]
    failed = subprocess.run([*command[:-1], "xx", "hello"], capture_output=True, text=True)
    assert failed.returncode != 0
    assert "unknown target_language 'xx'" in failed.stderr


def test_cli_verify(demo_dir: Path, demo_onnx: Path, tmp_path: Path) -> None:
    sentences = tmp_path / "s.txt"
    sentences.write_text("\n".join(SOURCES[:12]) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "graphgen", "verify", str(demo_dir), str(demo_onnx), "--sentences", str(sentences)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "greedy: 12/12 identical" in done.stdout and "beam search (4 beams): 12/12 identical" in done.stdout
