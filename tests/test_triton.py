"""`graphgen triton`: the repository entry, checked against Triton's own config schema and run as Triton would.

Triton itself cannot run here. What can be checked is: ``config.pbtxt`` parses with Triton's
protobuf definitions (``tritonclient``'s ``model_config_pb2``, in its own venv because it pins
protobuf 6 while this venv's sentencepiece needs 7) and names exactly the baked model's inputs and
outputs with matching types and ranks; and the baked model, fed a batch assembled from single
requests as the dynamic batcher does, answers each request as graphgen's Translator does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from graphgen import Translator, export
from graphgen.testing import DEMO_DIR, REPO, cached_venv, demo_sources, open_session

TRITON_VENV = REPO / ".venv-triton"
TRITONCLIENT = "tritonclient[grpc]==2.73.0"
SOURCES = demo_sources()
ORT_TYPES = {
    "tensor(string)": "TYPE_STRING",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(float)": "TYPE_FP32",
    "tensor(uint8)": "TYPE_UINT8",
}


def triton_python() -> Path:
    return cached_venv(TRITON_VENV, TRITONCLIENT)


PARSE = textwrap.dedent("""
    import json, sys
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2
    config = text_format.Parse(open(sys.argv[1]).read(), model_config_pb2.ModelConfig())
    print(json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True)))
""")


def parsed_config(path: Path) -> dict:
    done = subprocess.run([triton_python(), "-c", PARSE, path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("triton")
    export(str(DEMO_DIR), str(folder / "text.onnx"))
    export(str(DEMO_DIR), str(folder / "text-extensions.onnx"), tokenizer="extensions")
    export(str(DEMO_DIR), str(folder / "ids.onnx"), tokenizer=False)
    (folder / "repo").mkdir()
    names = ("text", "text-extensions", "ids")
    return {**{name: folder / f"{name}.onnx" for name in names}, "repo": folder / "repo"}


def graphgen_triton(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphgen", "triton", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.mark.parametrize("interface", ["text", "text-extensions", "ids"])
def test_config_parses_and_matches_the_model(files: dict[str, Path], interface: str) -> None:
    name = f"graphgen_{interface.replace('-', '_')}"
    done = graphgen_triton(
        files[interface], "-o", files["repo"], "--name", name, "--num-return-sequences", "2", "--max-batch-size", "8"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    entry = files["repo"] / name
    assert sorted(p.name for p in entry.iterdir()) == ["1", "config.pbtxt"]
    config = parsed_config(entry / "config.pbtxt")
    assert config["name"] == name and config["backend"] == "onnxruntime" and config["max_batch_size"] == 8
    assert "max_queue_delay_microseconds" in config["dynamic_batching"]
    assert config["instance_group"] == [{"count": 1, "kind": "KIND_CPU"}]
    assert config["parameters"] == {"enable_mem_pattern": {"string_value": "0"}}  # as Translator's sessions
    if interface == "text-extensions":
        library = "/opt/tritonserver/ortextensions/libortextensions.so"  # the default
        assert config["model_operations"] == {"op_library_filename": [library]}
    else:
        assert "model_operations" not in config  # the default text file and the id-level file need no library

    session = open_session(entry / "1" / "model.onnx")
    assert session.get_overridable_initializers() == []  # no optional inputs left
    for declared, actual in ((config["input"], session.get_inputs()), (config["output"], session.get_outputs())):
        assert [d["name"] for d in declared] == [a.name for a in actual]
        for d, a in zip(declared, actual, strict=True):
            assert d["data_type"] == ORT_TYPES[a.type], d
            rank = 1 if "reshape" in d else len(d["dims"]) + 1
            assert rank == len(a.shape), (d, a.shape)
            if "reshape" in d:
                assert d["dims"] == ["1"] and d["reshape"] == {}  # [batch] tensors: one element per request
    if interface.startswith("text"):
        translation = next(d for d in config["output"] if d["name"] == "translation")
        assert translation["dims"] == ["2"]  # the baked num_return_sequences


@pytest.mark.parametrize("interface", ["text", "text-extensions"])
def test_baked_model_answers_batched_requests_as_the_translator(files: dict[str, Path], interface: str) -> None:
    """Five clients' single texts, concatenated by the dynamic batcher. Triton batches requests of one
    shape: clients of the default file pad their UTF-8 bytes to one width (zero bytes are ignored)."""
    name = f"baked_{interface.replace('-', '_')}"
    done = graphgen_triton(files[interface], "-o", files["repo"], "--name", name, "--num-beams", "2", "--truncate")
    assert done.returncode == 0, done.stderr[-2000:]
    session = open_session(files["repo"] / name / "1" / "model.onnx")
    requests = SOURCES[:5]
    if interface == "text":
        width = 256
        padded = [np.pad(np.frombuffer(text.encode(), np.uint8), (0, width - len(text.encode()))) for text in requests]
        feeds = {"text_utf8": np.stack(padded)}
    else:
        feeds = {"text": np.array(requests, dtype=object)}
    (translation,) = session.run(["translation"], feeds)
    expected = Translator(files[interface]).translate(requests, num_beams=2, truncate=True)
    assert [row[0] for row in translation] == expected
    config = (files["repo"] / name / "config.pbtxt").read_text(encoding="utf-8")
    assert '"num_beams": 2' in config and '"truncate": true' in config


def test_refusals(files: dict[str, Path]) -> None:
    repo = files["repo"]
    first = graphgen_triton(files["text"], "-o", repo, "--name", "twice")
    assert first.returncode == 0, first.stderr[-2000:]
    cases = [
        ((files["text"], "-o", repo, "--name", "twice"), "exists; pass --overwrite"),
        ((files["text"], "-o", repo / "missing"), "does not exist"),
        ((files["text"], "-o", repo, "--name", "../escape"), "model name"),
        ((files["text"], "-o", repo, "--name", "n", "--num-beams", "0"), "num_beams must be at least 1"),
        ((files["ids"], "-o", repo, "--name", "n", "--truncate"), "text-level files only"),
        ((REPO / "README.md", "-o", repo, "--name", "n"), "cannot read"),
    ]
    for arguments, message in cases:
        done = graphgen_triton(*arguments)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (arguments, done)
    assert not (repo / "n").exists()
    again = graphgen_triton(files["text"], "-o", repo, "--name", "twice", "--overwrite", "--num-beams", "1")
    assert again.returncode == 0, again.stderr[-2000:]
    assert '"num_beams": 1' in (repo / "twice" / "config.pbtxt").read_text(encoding="utf-8")
    assert not [p for p in repo.iterdir() if p.name.startswith(".")]  # no staging left behind
