"""`graphgen bake`: a copy with the optional inputs fixed, for hosts that cannot set them (Java, Triton)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, demo_test_pairs, file_session

from graphgen import GraphgenError, Translator
from graphgen.contract import TEXT_UTF8

SOURCES = [source for source, _ in demo_test_pairs()][:24]
LONG = ">>cmn_Hans<< " + "I have three cats. " * 200


def graphgen_bake(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphgen", "bake", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)


def test_baked_copy_translates_with_its_fixed_settings(demo_onnx: Path, tmp_path: Path) -> None:
    baked = tmp_path / "greedy-truncating.onnx"
    done = graphgen_bake(demo_onnx, "-o", baked, "--num-beams", "1", "--truncate")
    assert done.returncode == 0, done.stderr[-2000:]
    session = file_session(baked)
    assert [i.name for i in session.get_inputs()] == [TEXT_UTF8] and session.get_overridable_initializers() == []

    original, copy = Translator(demo_onnx), Translator(baked)
    assert copy.defaults["num_beams"] == 1
    texts = [*SOURCES, LONG]
    assert copy.translate(texts) == original.translate(texts, num_beams=1, truncate=True)
    assert copy.translate(texts, num_beams=1, truncate=True) == copy.translate(texts)  # the fixed values are fine
    with pytest.raises(GraphgenError, match="num_beams is fixed to 1"):
        copy.translate(SOURCES[:1], num_beams=4)
    with pytest.raises(GraphgenError, match="has no truncate input"):
        copy.translate(SOURCES[:1], truncate=False)


def test_bake_refusals(demo_onnx: Path, tmp_path: Path) -> None:
    cases = [
        ((demo_onnx, "-o", demo_onnx), "the output file is the input file"),
        ((demo_onnx, "-o", tmp_path / "no" / "m.onnx"), "does not exist"),
        ((tmp_path / "missing.onnx", "-o", tmp_path / "m.onnx"), "does not exist"),
        ((demo_onnx, "-o", tmp_path / "m.onnx", "--num-return-sequences", "9"), "num_return_sequences must be"),
        ((demo_onnx, "-o", tmp_path / "m.onnx", "--keep-languages"), "has no language inputs to keep"),
    ]
    for arguments, message in cases:
        done = graphgen_bake(*arguments)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (arguments, done)
    assert not (tmp_path / "m.onnx").exists()
