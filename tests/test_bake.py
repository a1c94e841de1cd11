"""`graphgen bake`: a copy with the optional inputs fixed, for hosts that cannot set them (Java, Triton)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from graphgen import GraphgenError, Translator
from graphgen.contract import TEXT_UTF8
from graphgen.passes.bake import write_baked
from graphgen.testing import FAMILIES, LONG_SOURCE, REPO, TextFiles, demo_sources, open_session, text_feeds

SOURCES = demo_sources()[:24]


def graphgen_bake(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphgen", "bake", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)


def test_baked_copy_translates_with_its_fixed_settings(demo_onnx: Path, tmp_path: Path) -> None:
    baked = tmp_path / "greedy-truncating.onnx"
    done = graphgen_bake(demo_onnx, "-o", baked, "--num-beams", "1", "--truncate")
    assert done.returncode == 0, done.stderr[-2000:]
    session = open_session(baked)
    assert [i.name for i in session.get_inputs()] == [TEXT_UTF8] and session.get_overridable_initializers() == []

    original, copy = Translator(demo_onnx), Translator(baked)
    assert copy.defaults["num_beams"] == 1
    texts = [*SOURCES, LONG_SOURCE]
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
        ((demo_onnx, "-o", tmp_path / "m.onnx", "--keep", "num_beams,beams"), "has no optional input beams to keep"),
        ((demo_onnx, "-o", tmp_path / "m.onnx", "--keep", "num_beams", "--num-beams", "2"), "num_beams is both kept"),
        ((demo_onnx, "-o", tmp_path / "m.onnx", "--keep", "truncate", "--truncate"), "truncate is both kept"),
    ]
    for arguments, message in cases:
        done = graphgen_bake(*arguments)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (arguments, done)
    assert not (tmp_path / "m.onnx").exists()


def test_baked_copy_can_keep_settings(demo_onnx: Path, tmp_path: Path) -> None:
    """`graphgen bake --keep`: the kept settings become required inputs (what Java and JavaScript can
    feed), the others are fixed."""
    baked = tmp_path / "settings.onnx"
    done = graphgen_bake(
        demo_onnx, "-o", baked, "--keep", "num_beams, max_length", "--keep", "truncate", "--min-length", "3"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    session = open_session(baked)
    assert sorted(i.name for i in session.get_inputs()) == ["max_length", "num_beams", TEXT_UTF8, "truncate"]
    assert session.get_overridable_initializers() == []
    original, copy = Translator(demo_onnx), Translator(baked)
    assert copy.defaults == original.defaults | {"min_length": 3}  # the kept ones keep the file's defaults
    assert "num_beams" not in json.loads(session.get_modelmeta().custom_metadata_map["graphgen.baked"])
    texts = [*SOURCES[:8], LONG_SOURCE]
    for beams, longest in ((1, 6), (4, 12)):
        feeds = text_feeds(session, texts) | {
            "num_beams": np.array([beams], np.int32),
            "max_length": np.array([longest], np.int32),
            "truncate": np.array([True]),
        }
        (raw,) = session.run(["translation"], feeds)
        expected = original.translate(texts, num_beams=beams, max_length=longest, min_length=3, truncate=True)
        assert raw[:, 0].tolist() == expected
        assert copy.translate(texts, num_beams=beams, max_length=longest, truncate=True) == expected
    assert copy.translate(SOURCES[:4]) == original.translate(SOURCES[:4], min_length=3)  # defaults fed
    with pytest.raises(GraphgenError, match="min_length is fixed to 3"):
        copy.translate(SOURCES[:1], min_length=1)


@pytest.mark.parametrize("family", [name for name, family in FAMILIES.items() if family.has_languages])
def test_baked_copy_can_keep_the_languages(
    family_text: Callable[[str], TextFiles], family: str, demo_onnx: Path, tmp_path: Path
) -> None:
    """`graphgen bake --keep-languages`: settings fixed, the languages required inputs (for Java)."""
    files = family_text(family)
    baked = tmp_path / "java.onnx"
    write_baked(files.onnx, baked, {"num_beams": 1}, keep_languages=True)
    session = open_session(baked)
    assert sorted(i.name for i in session.get_inputs()) == ["source_language", "target_language", "text_utf8"]
    assert session.get_overridable_initializers() == []
    target, texts = files.family.target_languages[0], files.sentences()[:4]
    feeds = {"source_language": [files.family.source_language], "target_language": [target]}
    feeds = {k: np.array(v, dtype=object) for k, v in feeds.items()} | text_feeds(session, texts)
    (raw,) = session.run(["translation"], feeds)
    assert raw[:, 0].tolist() == files.translator.translate(texts, target_language=target, num_beams=1)
    copy = Translator(baked)
    assert copy.translate(texts, target_language=target) == raw[:, 0].tolist()
    assert copy.translate(texts) == files.translator.translate(texts, num_beams=1)  # the file's defaults
    with pytest.raises(GraphgenError, match="has no language inputs to keep"):
        write_baked(demo_onnx, tmp_path / "demo.onnx", keep_languages=True)
