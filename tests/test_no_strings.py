"""`graphgen export --no-strings`: a text file with no string tensor anywhere (for ONNX Runtime builds
without the string type), translating as the default file does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, GraphProto, TensorProto

from graphgen import GraphgenError, Translator, export
from graphgen.passes.bake import write_baked
from graphgen.runtime.translator import utf8_batch
from graphgen.testing import FAMILIES, REPO, demo_sources, demo_texts, family_checkpoint, open_session

SOURCES = demo_sources()[:64]
TEXTS = demo_texts()[:24]
NLLB = FAMILIES["nllb"]
# Ops that take or make strings: none of them may be in such a file.
STRING_OPS = {"StringConcat", "StringSplit", "RegexFullMatch", "StringNormalizer", "TfIdfVectorizer"}


def string_parts(graph: GraphProto) -> list[str]:
    """Every place in ``graph`` (subgraphs included) that holds or makes a string tensor."""
    found = []
    declared = [*graph.input, *graph.output, *graph.value_info]
    found += [f"value {v.name}" for v in declared if v.type.tensor_type.elem_type == TensorProto.STRING]
    found += [f"initializer {t.name}" for t in graph.initializer if t.data_type == TensorProto.STRING]
    for node in graph.node:
        if node.op_type in STRING_OPS:
            found.append(f"{node.op_type} {node.name}")
        for attribute in node.attribute:
            if attribute.name in ("keys_strings", "values_strings", "default_string") and (
                attribute.strings or attribute.s
            ):
                found.append(f"{node.op_type} {node.name}.{attribute.name}")
            if node.op_type == "Cast" and attribute.name == "to" and attribute.i == TensorProto.STRING:
                found.append(f"Cast {node.name}")
            if attribute.type == AttributeProto.TENSOR and attribute.t.data_type == TensorProto.STRING:
                found.append(f"constant {node.name}")
            if attribute.type == AttributeProto.GRAPH:
                found += string_parts(attribute.g)
    return found


@pytest.fixture(scope="module")
def files(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("no-strings")
    export(str(demo_dir), str(folder / "demo.onnx"), progress=lambda _: None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphgen",
            "export",
            str(demo_dir),
            "-o",
            str(folder / "demo-bytes.onnx"),
            "--no-strings",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    family_checkpoint(folder / "nllb", "nllb", seed=1, num_beams=4)
    export(folder / "nllb", folder / "nllb.onnx", progress=lambda _: None)
    export(folder / "nllb", folder / "nllb-bytes.onnx", strings=False, progress=lambda _: None)
    return {name: folder / f"{name}.onnx" for name in ("demo", "demo-bytes", "nllb", "nllb-bytes")}


def test_the_file_has_no_string_tensor(files: dict[str, Path]) -> None:
    for name in ("demo", "nllb"):
        assert string_parts(onnx.load(files[name]).graph), "the check finds the default file's strings"
        model = onnx.load(files[f"{name}-bytes"])
        assert string_parts(model.graph) == [], name
        assert {p.key: p.value for p in model.metadata_props}["graphgen.strings"] == "none"


def test_translations_equal_the_default_file(files: dict[str, Path]) -> None:
    plain, bytes_only = Translator(files["demo"]), Translator(files["demo-bytes"])
    for start in range(0, len(SOURCES), 16):
        chunk = SOURCES[start : start + 16]
        assert bytes_only.translate(chunk) == plain.translate(chunk)
    assert bytes_only.translate(SOURCES[:3], num_beams=4, num_return_sequences=2) == plain.translate(
        SOURCES[:3], num_beams=4, num_return_sequences=2
    )


def test_languages_as_utf8(files: dict[str, Path], tmp_path: Path) -> None:
    plain, bytes_only = Translator(files["nllb"]), Translator(files["nllb-bytes"])
    per_row = [NLLB.target_languages[i % 3] for i in range(len(TEXTS))]
    assert bytes_only.translate(TEXTS, target_language=per_row) == plain.translate(TEXTS, target_language=per_row)
    assert bytes_only.translate(TEXTS[:4], target_language="") == plain.translate(TEXTS[:4], target_language="")
    assert bytes_only.translate(TEXTS[:4]) == plain.translate(TEXTS[:4])  # the file's defaults
    # A raw session: codes as zero-padded UTF-8 rows, an unknown one stops the run naming the input.
    session = open_session(files["nllb-bytes"])
    feeds = {"text_utf8": utf8_batch(TEXTS[:3]), "source_language_utf8": utf8_batch([NLLB.source_language])}
    target = utf8_batch([NLLB.target_languages[1]])
    (got,) = session.run(["translation_utf8"], feeds | {"target_language_utf8": target})
    assert got.shape[0] == 3
    with pytest.raises(Exception, match="unknown target_language"):
        session.run(None, feeds | {"target_language_utf8": utf8_batch(["xx_Klingon"])})
    with pytest.raises(Exception, match="unknown source_language"):
        session.run(None, feeds | {"source_language_utf8": utf8_batch(["eng_Lat"])})
    # bake --keep-languages: the byte inputs become required, Translator feeds them
    write_baked(files["nllb-bytes"], tmp_path / "kept.onnx", keep_languages=True)
    kept = Translator(tmp_path / "kept.onnx")
    assert {i.name for i in open_session(tmp_path / "kept.onnx").get_inputs()} == {
        "text_utf8",
        "source_language_utf8",
        "target_language_utf8",
    }
    assert kept.translate(TEXTS, target_language=per_row) == plain.translate(TEXTS, target_language=per_row)


def test_only_for_the_portable_tokenizer(demo_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(GraphgenError, match="portable tokenizer"):
        export(str(demo_dir), str(tmp_path / "x.onnx"), tokenizer="extensions", strings=False)
    with pytest.raises(GraphgenError, match="portable tokenizer"):
        export(str(demo_dir), str(tmp_path / "x.onnx"), tokenizer=False, strings=False)
    assert not (tmp_path / "x.onnx").exists()


def test_utf8_rows_are_what_the_examples_send() -> None:
    """Zero-padded rows; a lone surrogate becomes one U+FFFD, as JavaScript's TextEncoder does."""
    rows = utf8_batch(["ab", "\u00e9", "x\ud800"])
    assert rows.tolist() == [[97, 98, 0, 0], [195, 169, 0, 0], [120, 239, 191, 189]]
    assert utf8_batch([]).shape == (0, 0) and np.asarray(utf8_batch([""])).shape == (1, 0)
