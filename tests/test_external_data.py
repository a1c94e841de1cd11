"""``export --external-data``: the weights beside the file, mapped by ONNX Runtime, the same translations."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import graphgen
from graphgen.checkpoint.load import load_checkpoint
from graphgen.cli import main
from graphgen.deploy.save import DATA_ALIGNMENT, INLINE_BYTES
from graphgen.deploy.shared_data import UNPACKED, node_inputs
from graphgen.passes.bake import write_baked

TEXTS = ["I have three cats.", "The meeting starts at 9:30 in the morning.", ""]


@pytest.fixture(scope="module")
def external_file(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("external") / "demo.onnx"
    result = graphgen.export(str(demo_dir), str(path), external_data=True, progress=lambda _: None)
    assert result.files == [path, path.with_name("demo.onnx.data")]
    return path


def test_weights_are_beside_the_file_at_mappable_offsets(external_file: Path, demo_dir: Path) -> None:
    model = onnx.load(str(external_file), load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    weights = load_checkpoint(demo_dir).spec.weights
    stored = [t.name for t in model.graph.initializer if t.name in weights and weights[t.name].nbytes >= INLINE_BYTES]
    assert stored and set(stored) <= {t.name for t in external}, "a weight stayed inside the .onnx"
    for tensor in external:
        entries = {entry.key: entry.value for entry in tensor.external_data}
        assert entries["location"] == "demo.onnx.data"
        assert int(entries["offset"]) % DATA_ALIGNMENT == 0, tensor.name


def test_translations_equal_the_single_file(external_file: Path, demo_onnx: Path) -> None:
    single = graphgen.Translator(demo_onnx).translate(TEXTS, num_beams=4)
    assert graphgen.Translator(external_file).translate(TEXTS, num_beams=4) == single
    assert demo_onnx.with_name(demo_onnx.name + ".data").exists() is False


def test_cli_flag(demo_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "ids.onnx"
    assert main(["export", str(demo_dir), "-o", str(path), "--no-tokenizer", "--int8", "--external-data", "-q"]) == 0
    assert path.with_name("ids.onnx.data").stat().st_size > path.stat().st_size


def _locations(model: onnx.ModelProto) -> dict[str, tuple[str, ...]]:
    return {
        t.name: tuple(e.value for e in t.external_data)
        for t in model.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
    }


def test_the_lookups_read_a_twin_of_the_packed_table(external_file: Path) -> None:
    """The tied table is read by the output projection (prepacked by ONNX Runtime) and by the
    embedding lookups: the lookups get their own initializer over the same bytes, so the original
    is not held beside its packed copy; the data file holds the bytes once."""
    model = onnx.load(str(external_file), load_external_data=False)
    locations = _locations(model)
    twins = [name for name in locations if name.endswith(UNPACKED)]
    assert twins, "no weight was twinned"
    for twin in twins:
        assert locations[twin] == locations[twin.removesuffix(UNPACKED)]
    readers = {}
    for node, index, prepacked in node_inputs(model.graph):
        readers.setdefault(node.input[index], set()).add(prepacked)
    for twin in twins:
        assert readers[twin] == {False} and readers[twin.removesuffix(UNPACKED)] == {True}, twin
    stored = {(loc[1], loc[2]) for loc in locations.values()}  # (offset, length)
    assert len(stored) == len(locations) - len(twins)
    data = external_file.with_name(external_file.name + ".data").stat().st_size
    assert data < sum(int(length) for _, length in stored) + DATA_ALIGNMENT * len(stored)


def test_a_baked_copy_keeps_its_weights_beside_it(external_file: Path, demo_onnx: Path, tmp_path: Path) -> None:
    """``bake`` of an ``--external-data`` file writes its copy the same way (what onnxruntime-web takes
    as ``externalData``, a page's memory saver; and every binding maps): the twin over the same bytes
    again, the table stored once, the same translations. A single file's copy is a single file."""
    baked = tmp_path / "baked.onnx"
    assert write_baked(external_file, baked, {"num_beams": 4}) == [baked, tmp_path / "baked.onnx.data"]
    # whoever may read the model may read its weights (onnx creates the data file for its owner alone)
    assert (tmp_path / "baked.onnx.data").stat().st_mode == baked.stat().st_mode
    model = onnx.load(str(baked), load_external_data=False)
    locations = _locations(model)
    twins = [name for name in locations if name.endswith(UNPACKED)]
    assert twins and all(locations[t][1:] == locations[t.removesuffix(UNPACKED)][1:] for t in twins)
    source_data = external_file.with_name(external_file.name + ".data").stat().st_size
    assert abs((tmp_path / "baked.onnx.data").stat().st_size - source_data) < 2**20
    assert graphgen.Translator(baked).translate(TEXTS) == graphgen.Translator(demo_onnx).translate(TEXTS, num_beams=4)
    single = tmp_path / "single.onnx"
    assert write_baked(demo_onnx, single, {"num_beams": 4}) == [single]
    assert not [t.name for t in onnx.load(str(single)).graph.initializer if t.name.endswith(UNPACKED)]
