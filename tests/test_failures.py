"""What a user hits when things go wrong: bad output paths, killed exports, long sources, many threads."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from transformers import MarianMTModel, MarianTokenizer

from graphgen import SourceTooLongError, Translator, export
from graphgen.testing import DEMO_DIR, REPO, demo_sources, hf_translate, open_session, random_marian

SOURCES = demo_sources()
LONG = ">>cmn_Hans<< " + "My sister bought 12 books yesterday. " * 150  # ~1,500 tokens


def graphgen(*args: str | Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphgen", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_unwritable_output_fails_before_the_export() -> None:
    """Root passes every permission check on /proc, yet nothing can be created there."""
    started = time.perf_counter()
    done = graphgen("export", DEMO_DIR, "-o", "/proc/bad.onnx")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "graphgen: error: cannot create files in /proc: No such file or directory"
    assert "loading" not in done.stderr and time.perf_counter() - started < 60


def test_killed_export_leaves_no_file(tmp_path: Path) -> None:
    """``kill -9`` at several moments of an export: never a file at the output path; the next export tidies up."""
    output = tmp_path / "model.onnx"
    command = [sys.executable, "-m", "graphgen", "export", str(DEMO_DIR), "-o", str(output)]
    full = subprocess.run([*command, "-q"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert full.returncode == 0, full.stderr
    output.unlink()

    def staging() -> list[Path]:
        return [p for p in tmp_path.iterdir() if ".graphgen-staging-" in p.name]

    def writing() -> bool:
        """A staging directory holds a file: the model is being written (the path check's probe is empty)."""
        for folder in staging():
            try:
                if any(folder.iterdir()):
                    return True
            except FileNotFoundError:  # removed between listing and reading
                continue
        return False

    for moment in ["0.5s", "2s", "saving"]:
        for _ in range(5):  # the write takes milliseconds: try again if the export finished first
            process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if moment == "saving":  # the most dangerous moment: the model is being written
                while process.poll() is None and not writing():
                    time.sleep(0.001)
            else:
                time.sleep(float(moment[:-1]))
            finished_first = process.poll() is not None
            if not finished_first:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                break
            output.unlink(missing_ok=True)
        assert not finished_first, f"never caught the export at {moment}"
        assert not output.exists(), moment
    assert staging(), "the saving-moment kill should have left a staging directory behind"
    done = subprocess.run([*command, "-q"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # stale staging removed


@pytest.fixture(scope="module")
def short_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo model with 128 positions (Marian's positions are computed, so the weights still fit)."""
    directory = tmp_path_factory.mktemp("short") / "checkpoint"
    shutil.copytree(DEMO_DIR, directory)
    for name, key in (("config.json", "max_position_embeddings"), ("generation_config.json", "max_length")):
        settings = json.loads((directory / name).read_text(encoding="utf-8"))
        settings[key] = 128
        (directory / name).write_text(json.dumps(settings), encoding="utf-8")
    path = directory.parent / "short.onnx"
    export(str(directory), str(path))
    return directory, path


def test_source_longer_than_the_positions(short_model: tuple[Path, Path]) -> None:
    directory, path = short_model
    translator = Translator(path)
    with pytest.raises(SourceTooLongError, match="the text is longer than the model's limit of 128 tokens") as error:
        translator.translate([LONG])
    assert error.value.limit == 128 and error.value.indices == (0,)
    with pytest.raises(SourceTooLongError, match=r"text\(s\) 1, 3 of the batch are longer") as error:
        translator.translate([SOURCES[0], LONG, SOURCES[1], LONG[:900]])
    assert error.value.indices == (1, 3)

    # With truncate=True: HF's truncation=True cut to the 128 positions, then the same translation.
    texts = [LONG, SOURCES[0], LONG[:700]]
    model = MarianMTModel.from_pretrained(directory).eval()
    tokenizer = MarianTokenizer.from_pretrained(directory)
    inputs = tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=128)
    assert inputs["input_ids"].shape[1] == 128
    expected = hf_translate(model, tokenizer, texts, source_limit=128)
    assert translator.translate(texts, truncate=True) == expected
    assert translator.translate(texts[1:2]) == expected[1:2]  # a short text needs no truncation

    done = graphgen("translate", path, LONG)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "longer than the model's limit of 128 tokens" in done.stderr and "truncate" in done.stderr
    done = graphgen("translate", path, "--truncate", LONG)
    assert done.returncode == 0 and done.stdout.splitlines() == expected[:1]


def test_raw_session_names_the_limit(short_model: tuple[Path, Path], tmp_path: Path) -> None:
    """Callers in other languages see the limit in ORT's own error message, for both interfaces."""
    directory, text_path = short_model
    ids_path = tmp_path / "ids.onnx"
    export(str(directory), str(ids_path), tokenizer=False)
    script = textwrap.dedent(f"""
        import numpy as np, onnxruntime as ort
        options = ort.SessionOptions()  # the default file needs no custom-op library
        options.log_severity_level = 4
        text = np.frombuffer({LONG.encode()!r}, np.uint8).reshape(1, -1)
        for path, feeds in (({str(text_path)!r}, {{"text_utf8": text}}),
                            ({str(ids_path)!r}, {{"input_ids": np.full((1, 129), 5, np.int32),
                                                  "attention_mask": np.ones((1, 129), np.int32)}})):
            try:
                ort.InferenceSession(path, options).run(None, feeds)
                print("no error")
            except Exception as error:
                print(str(error).split("Status Message")[0])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text_error, ids_error = done.stdout.strip().splitlines()
    assert "graphgen: source longer than the model's limit of 128 tokens" in text_error
    assert "set the optional input truncate to true" in text_error
    assert "graphgen: source longer than the model's limit of 128 tokens; pass at most" in ids_error


def test_raw_session_names_the_wrong_setting(demo_onnx: Path) -> None:
    """What a binding without graphgen's own checks passes is refused by the file, naming the setting."""
    session = open_session(demo_onnx)
    text = np.frombuffer(b">>cmn_Hans<< Hello.", np.uint8).reshape(1, -1)
    cases = [
        ({"num_beams": 0}, "graphgen: num_beams must be at least 1"),
        ({"num_beams": 0, "num_return_sequences": 0}, "graphgen: num_beams must be at least 1"),
        ({"num_beams": 2, "num_return_sequences": 3}, "graphgen: num_return_sequences must be between 1 and num_beams"),
        ({"num_return_sequences": 0}, "graphgen: num_return_sequences must be between 1 and num_beams"),
    ]
    for settings, message in cases:
        feeds = {name: np.array([value], np.int32) for name, value in settings.items()}
        with pytest.raises(Exception, match=message):
            session.run(None, {"text_utf8": text, **feeds})
    feeds = {"num_beams": np.array([2], np.int32), "num_return_sequences": np.array([2], np.int32)}
    assert session.run(["translation"], {"text_utf8": text, **feeds})[0].shape == (1, 2)


def test_id_level_graph_at_exactly_the_positions(tmp_path: Path) -> None:
    """The check stops what the encoder cannot run, not less: a source of exactly max_positions runs."""
    checkpoint = random_marian(tmp_path / "ckpt")  # 64 positions
    export(checkpoint, tmp_path / "ids.onnx", tokenizer=False)
    session = open_session(tmp_path / "ids.onnx")
    ids = np.full((2, 64), 5, np.int32)
    ids[:, -1] = 0
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "max_length": np.array([8], np.int32)})
    wide = np.concatenate([ids, ids[:, :1]], axis=1)
    with pytest.raises(Exception, match="limit of 64 tokens"):
        session.run(None, {"input_ids": wide, "attention_mask": np.ones_like(wide)})


def test_many_threads_give_serial_results(short_model: tuple[Path, Path]) -> None:
    """16 calls with different texts and settings from 8 threads at once, on one Translator and on eight."""
    _, path = short_model
    translator = Translator(path)
    calls = [
        (SOURCES[i * 12 : i * 12 + 1 + i % 5], {"num_beams": 1 + i % 3, "num_return_sequences": 1}) for i in range(16)
    ]
    serial = [translator.translate(texts, **settings) for texts, settings in calls]
    with ThreadPoolExecutor(max_workers=8) as pool:
        shared = list(pool.map(lambda call: translator.translate(call[0], **call[1]), calls))
    assert shared == serial

    barrier = threading.Barrier(8)

    def own_translator(index: int) -> list:
        barrier.wait()  # eight sessions created at the same moment
        own = Translator(path, threads=1)
        return [own.translate(texts, **settings) for texts, settings in calls[index::8]]

    with ThreadPoolExecutor(max_workers=8) as pool:
        separate = list(pool.map(own_translator, range(8)))
    assert [result for index in range(8) for result in separate[index]] == [
        serial[i] for index in range(8) for i in range(index, 16, 8)
    ]


def test_a_provider_that_cannot_run_is_refused(demo_onnx: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--providers cuda`` without the onnxruntime-gpu package stops with the package named, not a CPU
    run in its place; an unknown name is refused with the available ones listed; and a provider
    ONNX Runtime lists but cannot start (its CUDA libraries missing: ONNX Runtime then falls back to
    the CPU with a warning the session's options silence) stops Translator with a message."""
    done = graphgen("translate", demo_onnx, "--providers", "cuda", "Hello.")
    assert done.returncode == 2, done.stderr
    assert "no CUDAExecutionProvider" in done.stderr and "onnxruntime-gpu" in done.stderr
    assert "cpu (CPUExecutionProvider)" in done.stderr
    done = graphgen("translate", demo_onnx, "--providers", "npu9", "Hello.")
    assert done.returncode == 2 and "no npu9" in done.stderr, done.stderr
    done = graphgen("translate", demo_onnx, "--providers", "cpu", "I have three cats.")
    assert done.returncode == 0 and done.stdout.strip() == Translator(demo_onnx).translate(["I have three cats."])[0]

    import onnxruntime as ort

    from graphgen import GraphgenError
    from graphgen.runtime.translator import resolve_providers

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    providers = resolve_providers(["cuda", "cpu"])
    assert providers == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.raises(GraphgenError, match="could not start CUDAExecutionProvider"):
        Translator(demo_onnx, providers=providers)
