"""A single file loaded with its weights mapped from it (``graphgen.runtime.mapped_weights``): the model
ONNX Runtime is given is the file's own, each large weight pointing at its bytes in the file, and
the translations are those of the file read whole."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import graphgen
from graphgen.deploy.shared_data import UNPACKED, merge_shared_data, node_inputs
from graphgen.runtime import mapped_weights
from graphgen.runtime.mapped_weights import FOLDER_ENTRY, SMALLEST_MAPPED, session_source, supported
from graphgen.testing import demo_texts

TEXTS = [*demo_texts()[:24], ""]


@pytest.fixture(scope="module")
def int8_file(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mapped") / "demo int8.onnx"  # a space in the name, as users have
    graphgen.export(str(demo_dir), str(path), int8=True, progress=lambda _: None)
    return path


def _without_external_fields(model: onnx.ModelProto) -> onnx.ModelProto:
    for tensor in model.graph.initializer:  # onnx sets DEFAULT explicitly when it loads the bytes
        if tensor.data_location == onnx.TensorProto.DEFAULT:
            tensor.ClearField("data_location")
    return model


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_the_model_given_is_the_file_with_its_weights_pointing_into_it(
    kind: str, demo_onnx: Path, int8_file: Path
) -> None:
    path = demo_onnx if kind == "fp32" else int8_file
    source = session_source(path)
    assert isinstance(source.model, bytes) and source.config == {FOLDER_ENTRY: str(path.resolve().parent)}
    whole = onnx.load(str(path))
    large = {t.name: len(t.raw_data) for t in whole.graph.initializer if len(t.raw_data) >= SMALLEST_MAPPED}
    assert source.mapped_weights == len(large) > 0
    # the weights' bytes are not in it: only a reference of under 256 bytes each (two for a twin)
    assert len(source.model) < path.stat().st_size - sum(large.values()) + 2 * 256 * len(large)

    given = onnx.load_model_from_string(source.model)
    raw = {t.name: t.raw_data for t in whole.graph.initializer}
    file_bytes = path.read_bytes()
    pointing = {}
    for tensor in given.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entries = {entry.key: entry.value for entry in tensor.external_data}
            assert entries["location"] == path.name
            offset, length = int(entries["offset"]), int(entries["length"])
            assert file_bytes[offset : offset + length] == raw[tensor.name.removesuffix(UNPACKED)], tensor.name
            pointing[tensor.name] = (offset, length)
    assert {name for name in pointing if not name.endswith(UNPACKED)} == set(large)

    # the tied table: its product prepacks the original, its lookups read a twin over the same bytes
    twins = [name for name in pointing if name.endswith(UNPACKED)]
    assert twins, "the embedding lookups read the packed table's original"
    for twin in twins:
        assert pointing[twin] == pointing[twin.removesuffix(UNPACKED)]
        readers = [(prepacked, node.input[i]) for node, i, prepacked in node_inputs(given.graph)]
        assert (False, twin) in readers and (True, twin.removesuffix(UNPACKED)) in readers
        assert (False, twin.removesuffix(UNPACKED)) not in readers

    # with the twins merged back and the bytes read from where they point: the file's model, exactly
    assert merge_shared_data(given) == [*twins]
    onnx.load_external_data_for_model(given, str(path.parent))
    assert _without_external_fields(given) == whole


def test_translations_equal_the_file_read_whole(demo_onnx: Path, int8_file: Path) -> None:
    for path in (demo_onnx, int8_file):
        mapped, whole = graphgen.Translator(path), graphgen.Translator(path, map_weights=False)
        assert mapped.mapped_weights > 0 and whole.mapped_weights == 0
        for beams in (1, 4):
            assert mapped.translate(TEXTS, num_beams=beams) == whole.translate(TEXTS, num_beams=beams), path.name


def test_nothing_to_map(demo_dir: Path, demo_onnx: Path, tmp_path: Path) -> None:
    """Files whose weights are already beside them, a file's bytes, and what is not an ONNX protobuf."""
    external = tmp_path / "external.onnx"
    graphgen.export(str(demo_dir), str(external), external_data=True, progress=lambda _: None)
    assert session_source(external).model == str(external)
    assert graphgen.Translator(external).mapped_weights == 0
    assert graphgen.Translator(demo_onnx.read_bytes()).mapped_weights == 0
    assert session_source(demo_onnx, map_weights=False).model == str(demo_onnx)
    for name, content in {
        "empty.onnx": b"",
        "ort.onnx": b"\x10\x00\x00\x00ORTM" + bytes(64),
        "junk": b"\xff" * 9,
    }.items():
        (tmp_path / name).write_bytes(content)
        assert session_source(tmp_path / name).model == str(tmp_path / name)
    with pytest.raises(graphgen.GraphgenError, match="cannot load"):
        graphgen.Translator(tmp_path / "junk")


def test_older_runtimes_read_the_file_whole(demo_onnx: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime 1.20 looks for a bytes-loaded model's external data in the working directory."""
    assert [supported(v) for v in ("1.17.3", "1.20.1", "1.21.0", "1.32.0", "1.22.0+cu118", "2.0.0")] == [
        False,
        False,
        True,
        True,
        True,
        True,
    ]
    monkeypatch.setattr(mapped_weights.ort, "__version__", "1.20.1")
    assert session_source(demo_onnx).model == str(demo_onnx)
    assert graphgen.Translator(demo_onnx).mapped_weights == 0


def test_a_refused_mapping_reads_the_file_whole(demo_onnx: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = mapped_weights.session_source

    def elsewhere(path: str | Path, *, map_weights: bool = True) -> mapped_weights.SessionSource:
        source = real(path, map_weights=map_weights)
        return mapped_weights.SessionSource(source.model, {FOLDER_ENTRY: "/nonexistent"}, source.mapped_weights)

    monkeypatch.setattr("graphgen.runtime.translator.session_source", elsewhere)
    translator = graphgen.Translator(demo_onnx)
    assert translator.mapped_weights == 0
    assert translator.translate(TEXTS[:3]) == graphgen.Translator(demo_onnx).translate(TEXTS[:3])


def test_field_numbers_are_onnx_protos() -> None:
    numbers = {
        "_MODEL_GRAPH": (onnx.ModelProto, "graph"),
        "_GRAPH_NODE": (onnx.GraphProto, "node"),
        "_GRAPH_INITIALIZER": (onnx.GraphProto, "initializer"),
        "_NODE_INPUT": (onnx.NodeProto, "input"),
        "_NODE_OP_TYPE": (onnx.NodeProto, "op_type"),
        "_NODE_ATTRIBUTE": (onnx.NodeProto, "attribute"),
        "_NODE_DOMAIN": (onnx.NodeProto, "domain"),
        "_ATTRIBUTE_G": (onnx.AttributeProto, "g"),
        "_ATTRIBUTE_GRAPHS": (onnx.AttributeProto, "graphs"),
        "_TENSOR_DATA_TYPE": (onnx.TensorProto, "data_type"),
        "_TENSOR_NAME": (onnx.TensorProto, "name"),
        "_TENSOR_RAW_DATA": (onnx.TensorProto, "raw_data"),
        "_TENSOR_EXTERNAL_DATA": (onnx.TensorProto, "external_data"),
        "_TENSOR_DATA_LOCATION": (onnx.TensorProto, "data_location"),
        "_ENTRY_KEY": (onnx.StringStringEntryProto, "key"),
        "_ENTRY_VALUE": (onnx.StringStringEntryProto, "value"),
    }
    for constant, (message, field) in numbers.items():
        assert getattr(mapped_weights, constant) == message.DESCRIPTOR.fields_by_name[field].number, constant
    assert mapped_weights._STRING == onnx.TensorProto.STRING
    # the ops of ONNX's own domains that hold graphs: every op of the installed onnx with a graph attribute
    with_graphs = {
        schema.name
        for schema in onnx.defs.get_all_schemas()
        if schema.domain in mapped_weights._ONNX_DOMAINS
        and any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in schema.attributes.values())
    }
    assert {"Loop", "If"} <= with_graphs <= mapped_weights._CONTROL_FLOW
    assert mapped_weights._EXTERNAL == onnx.TensorProto.EXTERNAL
