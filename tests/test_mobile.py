"""Mobile: only ops the stock Android/iOS packages have, the ``.ort`` file, and valid UTF-8 out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from graphgen.custom_ops import GraphBuilder
from graphgen.custom_ops.builder import INT32, STRING
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from graphgen import GraphgenError, Translator, export
from graphgen.deploy.mobile import ops_outside_mobile_packages, ops_used
from graphgen.testing import FAMILIES, builder_model, demo_sources, demo_texts, family_checkpoint, open_session
from graphgen.text.marian import add_detokenizer, id_to_text, load_vocabulary

SOURCES = demo_sources()

FILES = ["fp32", "int8", "fp32-extensions"]
# ONNX Runtime's own domains: what the stock onnxruntime-android / onnxruntime-objc packages (full
# builds, contrib ops included) run without any other library.
ORT_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft"}


@pytest.fixture(scope="module")
def exported(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("mobile")
    export(str(demo_dir), str(folder / "fp32.onnx"), ort="arm", progress=lambda _: None)
    export(str(demo_dir), str(folder / "int8.onnx"), int8=True, ort="amd64", progress=lambda _: None)
    export(
        str(demo_dir), str(folder / "fp32-extensions.onnx"), tokenizer="extensions", ort="arm", progress=lambda _: None
    )
    return {name: folder / f"{name}.onnx" for name in FILES}


@pytest.mark.parametrize("name", FILES)
def test_text_file_uses_only_ops_of_the_mobile_packages(exported: dict[str, Path], name: str) -> None:
    """The default file (portable tokenizer) uses ONNX Runtime's own domains only, subgraphs included:
    the stock packages run it with no extensions library. The extensions file uses only the op that
    the prebuilt extensions packages carry."""
    model = onnx.load(exported[name])
    assert ops_outside_mobile_packages(model) == set()
    domains = {domain for domain, _ in ops_used(model.graph)}
    extension_ops = {op for domain, op in ops_used(model.graph) if domain == "ai.onnx.contrib"}
    if name.endswith("extensions"):
        assert extension_ops == {"SentencepieceTokenizer"}
    else:
        assert domains <= ORT_DOMAINS and not extension_ops, domains


def test_op_check_catches_a_string_op_of_the_extensions() -> None:
    graph = helper.make_graph(
        [helper.make_node("StringJoin", ["a", "b", "c"], ["d"], domain="ai.onnx.contrib")], "g", [], []
    )
    assert ops_outside_mobile_packages(helper.make_model(graph)) == {("ai.onnx.contrib", "StringJoin")}


@pytest.mark.parametrize("name", FILES)
def test_ort_file_translates_like_the_onnx_file(exported: dict[str, Path], name: str) -> None:
    onnx_path = exported[name]
    ort_path = onnx_path.with_suffix(".ort")
    config = onnx_path.with_name(f"{onnx_path.stem}.required_operators.config").read_text()
    assert ("ai.onnx.contrib;1;SentencepieceTokenizer" in config) == name.endswith("extensions")
    domains = {line.split(";")[0] for line in config.splitlines() if line and not line.startswith("#")}
    assert domains <= ORT_DOMAINS | ({"ai.onnx.contrib"} if name.endswith("extensions") else set()), domains
    # The search is a standard Loop (subgraph ops are listed too); of the contrib ops only the kernels.
    assert "Loop" in config and "TopK" in config and "BeamSearch" not in config
    from_onnx, from_ort = Translator(onnx_path), Translator(ort_path)
    for start in range(0, len(SOURCES), 16):
        chunk = SOURCES[start : start + 16]
        assert from_ort.translate(chunk) == from_onnx.translate(chunk)
    assert from_ort.translate(SOURCES[:5], num_beams=1) == from_onnx.translate(SOURCES[:5], num_beams=1)


@pytest.mark.parametrize("family", ["nllb", "t5"])
def test_other_families_as_ort_files(family: str, tmp_path: Path) -> None:
    """An NLLB file (language codes, a target per text) and a T5 file (relative position bias) use
    only the mobile packages' ops, and their ``.ort`` files translate as the ``.onnx`` files do."""
    row = FAMILIES[family]
    family_checkpoint(tmp_path, family, num_beams=4)
    texts = row.texts(demo_texts()[:24])
    languages = {}
    if row.has_languages:
        languages = {"target_language": [row.target_languages[i % 3] for i in range(len(texts))]}
    export(str(tmp_path), str(tmp_path / "model.onnx"), ort="arm", progress=lambda _: None)
    model = onnx.load(tmp_path / "model.onnx")
    assert ops_outside_mobile_packages(model) == set()
    assert {domain for domain, _ in ops_used(model.graph)} <= ORT_DOMAINS
    from_onnx, from_ort = Translator(tmp_path / "model.onnx"), Translator(tmp_path / "model.ort")
    assert from_ort.translate(texts, **languages) == from_onnx.translate(texts, **languages)


def test_unknown_ort_platform_is_refused_before_any_work(demo_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(GraphgenError, match="platform"):
        export(str(demo_dir), str(tmp_path / "m.onnx"), ort="mips", progress=lambda _: None)
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.lists(st.integers(0, 458), max_size=30), min_size=1, max_size=8))
def test_detokenizer_output_is_valid_utf8_for_any_ids(demo_dir: Path, rows: list[list[int]]) -> None:
    """Any id sequence (specials, fragments, in any order) decodes to strict UTF-8 text equal to
    joining the pieces in Python; the iOS string API crashes on anything else (ORT issue 21026)."""
    vocabulary = load_vocabulary(demo_dir)
    texts = id_to_text(vocabulary)
    width = max(len(row) for row in rows)
    ids = np.array([[row + [0] * (width - len(row))] for row in rows], dtype=np.int32)  # [B, 1, L]
    b = GraphBuilder("detokenizer")
    b.op("Identity", [add_detokenizer(b, "sequences", vocabulary)], outputs=["text"])
    inputs = [helper.make_tensor_value_info("sequences", INT32, None)]
    session = open_session(builder_model(b, inputs, [helper.make_tensor_value_info("text", STRING, None)]))
    (got,) = session.run(None, {"sequences": ids})
    for row, text in zip(ids[:, 0].tolist(), got[:, 0].tolist(), strict=True):
        assert text.encode("utf-8", errors="strict").decode("utf-8") == "".join(texts[i] for i in row).strip()
