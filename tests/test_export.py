"""Export-time behaviour: the file's structure, clear errors, atomic writes, metadata."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.external_data_helper import load_external_data_for_model

from graphgen import CheckpointError, OutputPathError, UnsupportedModelError, export
from graphgen._assemble import build_id_model
from graphgen._graphs import all_initializers
from graphgen.checkpoint.load import load_checkpoint
from graphgen.deploy.save import save_model, streamed_weights
from graphgen.deploy.shared_data import UNPACKED, merge_shared_data, node_inputs
from graphgen.testing import open_session, random_marian


def test_weights_are_stored_once(demo_dir: Path) -> None:
    spec = load_checkpoint(demo_dir).spec
    model = build_id_model(spec)
    tensors = list(all_initializers(model.graph))
    names = Counter(t.name for t in tensors)
    # The subgraphs appear in two BeamSearch nodes; only their tiny shape constants repeat.
    repeated = [t for t in tensors if names[t.name] > 1]
    assert all(len(t.raw_data) <= 64 for t in repeated), [t.name for t in repeated if len(t.raw_data) > 64]
    big = [t for t in tensors if len(t.raw_data) > 4096]
    contents = {t.raw_data for t in big}
    assert len(contents) == len(big), "two large initializers hold the same bytes"
    weight_bytes = sum(len(t.raw_data) for t in tensors)
    spec_bytes = sum(a.nbytes for a in spec.weights.values())
    assert weight_bytes < spec_bytes * 1.05, (weight_bytes, spec_bytes)


def _search_loop_body(model: onnx.ModelProto) -> onnx.GraphProto:
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    return loop.attribute[0].g


def test_weights_sit_where_ort_prepacks_them(demo_dir: Path) -> None:
    """ORT prepacks a weight only if it is an initializer at most one graph level above its MatMul."""
    spec = load_checkpoint(demo_dir).spec
    model = build_id_model(spec)
    body = _search_loop_body(model)
    held = {t.name for t in body.initializer}
    weights_anywhere = {t.name for t in all_initializers(model.graph) if t.name in spec.weights}
    assert weights_anywhere and weights_anywhere <= held, weights_anywhere - held
    assert "encoder.embed_tokens" in held, "the tied table belongs in the graph around the BeamSearch nodes"
    searches = [n for n in body.node if n.op_type == "BeamSearch"]
    assert len(searches) == 2
    for node in searches:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                assert not any(t.name in spec.weights for t in attribute.g.initializer)


def _nodes_of_type(graph: onnx.GraphProto, op_type: str) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        if node.op_type == op_type:
            yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH and node.op_type != "BeamSearch":
                yield from _nodes_of_type(attribute.g, op_type)


def test_batch_safe_search_structure(demo_dir: Path) -> None:
    """Greedy runs batched with early stopping (exact for one beam); beams run one item at a time."""
    body = _search_loop_body(build_id_model(load_checkpoint(demo_dir).spec))
    stopping = {
        n.name: {a.name: a.i for a in n.attribute if a.type == onnx.AttributeProto.INT}["early_stopping"]
        for n in body.node
        if n.op_type == "BeamSearch"
    }
    assert stopping == {"greedy_search": 1, "beam_search": 0}


def test_encoder_uses_the_three_input_form(demo_dir: Path) -> None:
    """Pinned: ORT 1.32 accepts the 3-input encoder; its Python helpers call it deprecated."""
    model = build_id_model(load_checkpoint(demo_dir).spec)
    searches = list(_nodes_of_type(model.graph, "BeamSearch"))
    assert len(searches) == 2  # batched greedy + per-item beam search (see _search.batch_safe_search)
    encoder = next(a.g for a in searches[0].attribute if a.name == "encoder")
    assert [i.name for i in encoder.input] == ["encoder_input_ids", "encoder_attention_mask", "decoder_input_ids"]
    assert [o.name for o in encoder.output][:2] == ["logits", "encoder_hidden_states"]


def test_id_level_io_and_defaults(demo_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "ids.onnx"
    export(demo_dir, path, tokenizer=False)
    session = open_session(path)
    inputs = {i.name: i for i in session.get_inputs()}
    assert list(inputs) == ["input_ids", "attention_mask"]
    assert inputs["input_ids"].type == "tensor(int32)"
    # Inputs with a default are what ORT calls overridable initializers.
    optional = {i.name for i in session.get_overridable_initializers()}
    assert {
        "max_length",
        "min_length",
        "num_beams",
        "num_return_sequences",
        "length_penalty",
        "repetition_penalty",
    } <= optional
    model = onnx.load(str(path))
    defaults = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    generation = json.loads((demo_dir / "generation_config.json").read_text())
    assert defaults["num_beams"].tolist() == [generation["num_beams"]]
    assert defaults["max_length"].tolist() == [generation["max_length"]]
    assert defaults["num_beams"].dtype == np.int32 and defaults["length_penalty"].dtype == np.float32
    ids = np.array([[2, 5, 6, 0]], dtype=np.int32)
    sequences, scores = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert sequences.dtype == np.int32 and sequences.shape[:2] == (1, 1) and scores.shape == (1, 1)
    (three,) = session.run(
        ["sequences"],
        {"input_ids": ids, "attention_mask": np.ones_like(ids), "num_return_sequences": np.array([3], np.int32)},
    )
    assert three.shape[:2] == (1, 3)


def test_metadata(demo_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    export(demo_dir, path)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert props["graphgen.architecture"] == "MarianMTModel"
    assert props["graphgen.source"] == str(demo_dir)
    assert props["graphgen.interface"] == "text"
    assert json.loads(props["graphgen.generation_defaults"])["num_beams"] == 4
    # the default tokenizer is standard ONNX ops: no custom-op library to register
    assert props["graphgen.tokenizer"] == "onnx"
    assert set(json.loads(props["graphgen.custom_op_domains"])) == {"com.microsoft"}
    assert "graphgen.min_extensions" not in props
    export(demo_dir, path, tokenizer="extensions")
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert props["graphgen.tokenizer"] == "extensions"
    assert set(json.loads(props["graphgen.custom_op_domains"])) == {"com.microsoft", "ai.onnx.contrib"}


def test_unsupported_architecture_names_supported_ones(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    with pytest.raises(UnsupportedModelError, match="MarianMTModel"):
        export(tmp_path, tmp_path / "out.onnx")


def test_not_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        export(tmp_path, tmp_path / "out.onnx")
    with pytest.raises(CheckpointError, match="does not exist"):
        export(tmp_path / "missing" / "dir", tmp_path / "out.onnx")


def test_missing_tokenizer_files(tmp_path: Path) -> None:
    checkpoint = random_marian(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"source\.spm.*--no-tokenizer"):
        export(checkpoint, tmp_path / "out.onnx")
    export(checkpoint, tmp_path / "ids.onnx", tokenizer=False)  # the id-level graph needs none
    assert (tmp_path / "ids.onnx").is_file()


def test_unwritable_output(tmp_path: Path, demo_dir: Path) -> None:
    with pytest.raises(OutputPathError, match="does not exist"):
        export(demo_dir, tmp_path / "no" / "such" / "dir" / "m.onnx")
    with pytest.raises(OutputPathError, match="is a directory"):
        export(demo_dir, tmp_path)
    if os.geteuid() != 0:  # root can write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OutputPathError, match="not writable"):
            export(demo_dir, locked / "m.onnx")


def test_interrupted_save_leaves_nothing(tmp_path: Path, demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous model")
    model = build_id_model(load_checkpoint(demo_dir).spec)

    def fail(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("graphgen.deploy.save.os.replace", fail)
    with pytest.raises(KeyboardInterrupt):
        save_model(model, target)
    assert target.read_bytes() == b"previous model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_large_models_use_external_data(tmp_path: Path, demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("graphgen.deploy.save.EXTERNAL_DATA_THRESHOLD", 1024)
    model = build_id_model(load_checkpoint(demo_dir).spec)
    written = save_model(model, tmp_path / "model.onnx")
    assert [p.name for p in written] == ["model.onnx", "model.onnx.data"]
    assert (tmp_path / "model.onnx").stat().st_size < 1_000_000
    session = open_session(tmp_path / "model.onnx")
    ids = np.array([[2, 5, 6, 0]], dtype=np.int32)
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})


def test_cli_export_help_documents_every_option() -> None:
    from graphgen.cli import build_parser

    parser = build_parser()
    export_parser = parser._subparsers._group_actions[0].choices["export"]  # type: ignore[union-attr]
    for action in export_parser._actions:
        assert action.help, f"option {action.option_strings or action.dest} has no help text"


def test_cli_export_precision_and_search_flags(demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from graphgen.cli import main

    path = tmp_path / "early.onnx"
    assert main(["export", str(demo_dir), "-o", str(path), "--no-tokenizer", "--early-stopping", "-q"]) == 0
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert json.loads(props["graphgen.generation_defaults"])["early_stopping"] is True
    assert main(["export", str(demo_dir), "-o", str(tmp_path / "x.onnx"), "--fp16", "--int8", "-q"]) == 2
    assert "cannot be combined" in capsys.readouterr().err
    assert not (tmp_path / "x.onnx").exists()


def _unused_initializers(graph: onnx.GraphProto, outer_reads: set[str] = frozenset()) -> list[str]:
    """Initializers of ``graph`` (and its subgraphs) that no node reads, nor any graph's input or output
    names (an optional input's default is an initializer of the same name)."""

    def reads(g: onnx.GraphProto) -> set[str]:
        names = {o.name for o in g.output}
        for node in g.node:
            names |= set(node.input)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    names |= reads(attribute.g)
        return names

    used = reads(graph) | {i.name for i in graph.input} | set(outer_reads)
    unused = [t.name for t in graph.initializer if t.name not in used]
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                unused += _unused_initializers(attribute.g, used)
    return unused


@pytest.mark.parametrize(
    "options",
    [{}, {"tokenizer": False}, {"search": "op"}, {"fp16": True}, {"int8": True}, {"tokenizer": "extensions"}],
    ids=["text", "ids", "op", "fp16", "int8", "extensions"],
)
def test_exported_graphs_carry_nothing_unused(demo_dir: Path, tmp_path: Path, options: dict) -> None:
    """ONNX Runtime warns "Removing initializer ... It is not used by any node" on every load otherwise."""
    export(demo_dir, tmp_path / "model.onnx", progress=lambda _: None, **options)
    assert _unused_initializers(onnx.load(str(tmp_path / "model.onnx")).graph) == []


@pytest.mark.parametrize(
    "options", [{}, {"search": "op"}, {"fp16": True}, {"int8": True}], ids=["text", "op", "fp16", "int8"]
)
def test_large_exports_stream_their_weights_to_the_data_file(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict
) -> None:
    """Past the limit, each weight goes to ``.data`` as the model is assembled (the export's peak memory
    stays near the file size): the same tensors as the in-memory export, page-aligned, and a file that runs."""
    export(demo_dir, tmp_path / "memory.onnx", progress=lambda _: None, **options)
    monkeypatch.setattr("graphgen.deploy.save.EXTERNAL_DATA_THRESHOLD", 1024)
    result = export(demo_dir, tmp_path / "streamed.onnx", progress=lambda _: None, **options)
    assert [f.name for f in result.files] == ["streamed.onnx", "streamed.onnx.data"]
    assert not [p for p in tmp_path.iterdir() if "staging" in p.name]
    header = onnx.load(str(tmp_path / "streamed.onnx"), load_external_data=False)
    external = [t for t in all_initializers(header.graph) if t.data_location == onnx.TensorProto.EXTERNAL]
    assert len(external) > 20
    assert all(int({e.key: e.value for e in t.external_data}["offset"]) % 4096 == 0 for t in external)
    expected = {
        t.name: onnx.numpy_helper.to_array(t) for t in all_initializers(onnx.load(str(tmp_path / "memory.onnx")).graph)
    }
    # A weight that ONNX Runtime prepacks and the lookups also read has a twin over the same bytes
    # (graphgen.deploy.shared_data): merged, the tensors are the in-memory export's.
    assert all(name.endswith(UNPACKED) for name in merge_shared_data(header))
    load_external_data_for_model(header, str(tmp_path))
    got = {t.name: onnx.numpy_helper.to_array(t) for t in all_initializers(header.graph)}
    if options.get("int8"):
        # A mapped int8 file's lookups read token rows of a second array (graphgen.model.weights),
        # the projection's table transposed; its graph differs, so only the weights compare (the
        # builders' numbered constants do not).
        rows = [name for name in got if name.endswith(".int8_rows")]
        assert rows and all(np.array_equal(got.pop(r), expected[r.removesuffix("_rows")].T) for r in rows)
        got = {name: array for name, array in got.items() if "/" not in name}
        expected = {name: array for name, array in expected.items() if "/" not in name}
    assert got.keys() == expected.keys()
    assert all(np.array_equal(got[name], expected[name]) for name in expected)


@pytest.mark.parametrize(
    "options",
    [{"search": "loop"}, {"search": "op"}, {"float16": True}, {"int8": True}, {"int4": True}],
    ids=["loop", "op", "fp16", "int8", "int4"],
)
def test_one_file_takes_its_weights_from_where_they_were_streamed(
    demo_dir: Path, tmp_path: Path, options: dict
) -> None:
    """A file under 2 GB is written from the data file its weights went to as the model was assembled
    (``deploy.inline``), so they are never all in memory: the same model as protobuf serializes
    whole, subgraph weights (the op's) included, and no data file or staging left behind."""
    options = {"search": "loop", **options}
    whole = build_id_model(load_checkpoint(demo_dir).spec, **options)
    save_model(whole, tmp_path / "whole.onnx")
    with streamed_weights(tmp_path / "streamed.onnx", mapped=False) as streamed:
        model = build_id_model(load_checkpoint(demo_dir).spec, streamed=streamed, **options)
        external = [t for t in all_initializers(model.graph) if t.data_location == onnx.TensorProto.EXTERNAL]
        assert len(external) > 20
        written = save_model(model, tmp_path / "streamed.onnx", streamed)
    assert written == [tmp_path / "streamed.onnx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["streamed.onnx", "whole.onnx"]
    assert (tmp_path / "streamed.onnx").stat().st_size == (tmp_path / "whole.onnx").stat().st_size
    assert onnx.load(str(tmp_path / "streamed.onnx")) == onnx.load(str(tmp_path / "whole.onnx"))


def test_inline_pieces_parse_as_the_model_with_its_weights_inline(tmp_path: Path) -> None:
    """``deploy.inline`` on a hand-made model: weights in the data file read by the main graph, an
    ``If`` branch and a list-of-graphs attribute, beside one already inline, give the bytes of the
    same model with every weight inline (same size, equal once parsed)."""
    from onnx import helper, numpy_helper

    from graphgen.deploy.inline import inline_pieces, inline_size, write_inline

    arrays = {
        "table": np.arange(1000, dtype=np.float32).reshape(100, 10),
        "rows": np.arange(300, dtype=np.int64),
        "branch": np.linspace(0, 1, 700, dtype=np.float32),
    }
    data = tmp_path / "weights.data"
    offsets = {}
    with data.open("wb") as file:
        for name, array in arrays.items():
            file.write(b"\0" * (-file.tell() % 4096))
            offsets[name] = file.tell()
            file.write(array.tobytes())

    def external(name: str) -> onnx.TensorProto:
        tensor = numpy_helper.from_array(arrays[name], name)
        tensor.ClearField("raw_data")
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", data.name), ("offset", offsets[name]), ("length", arrays[name].nbytes)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        return tensor

    def model(tensor: Callable[[str], onnx.TensorProto]) -> onnx.ModelProto:
        value = helper.make_tensor_value_info
        branch = helper.make_graph(
            [helper.make_node("Identity", ["branch"], ["out"])],
            "branch",
            [],
            [value("out", onnx.TensorProto.FLOAT, [700])],
            [tensor("branch")],
        )
        other = helper.make_graph([], "other", [], [value("rows", onnx.TensorProto.INT64, [300])], [tensor("rows")])
        nodes = [
            helper.make_node("Shape", ["table"], ["shape"]),
            helper.make_node("If", ["flag"], ["chosen"], then_branch=branch, else_branch=branch),
            helper.make_node("Holder", ["small"], ["held"], domain="test", graphs=[other, branch]),
        ]
        small = numpy_helper.from_array(np.ones(3, np.float32), "small")
        graph = helper.make_graph(
            nodes,
            "main",
            [value("flag", onnx.TensorProto.BOOL, [])],
            [value("chosen", onnx.TensorProto.FLOAT, [700])],
            [tensor("table"), small],
        )
        return helper.make_model(graph)

    pieces = inline_pieces(model(external), data.name)
    write_inline(pieces, tmp_path / "model.onnx", data)
    whole = model(lambda name: numpy_helper.from_array(arrays[name], name)).SerializeToString()
    assert inline_size(pieces) == (tmp_path / "model.onnx").stat().st_size == len(whole)
    assert onnx.load(str(tmp_path / "model.onnx")) == onnx.load_model_from_string(whole)


def test_streamed_weights_past_the_limit_stay_external(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Protobuf cannot parse one file past 2 GB: weights streamed for one file that turns out larger
    than that are moved beside it as its external data instead, and the file runs."""
    with streamed_weights(tmp_path / "model.onnx", mapped=False) as streamed:
        model = build_id_model(load_checkpoint(demo_dir).spec, search="loop", streamed=streamed)
        monkeypatch.setattr("graphgen.deploy.save.EXTERNAL_DATA_THRESHOLD", 1024)
        written = save_model(model, tmp_path / "model.onnx", streamed)
    assert [p.name for p in written] == ["model.onnx", "model.onnx.data"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    ids = np.array([[2, 5, 6, 0]], dtype=np.int32)
    sequences = open_session(tmp_path / "model.onnx").run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert sequences[0].shape[0] == 1


@pytest.mark.parametrize("options", [{}, {"int8": True}, {"int4": True}, {"float16": True}], ids=str)
def test_each_matrix_has_one_reader_that_prepacks_it(demo_dir: Path, options: dict) -> None:
    """ONNX Runtime prepacks a weight once per node that multiplies with it, and keeps every copy:
    the loop search runs every decoder step (the first included) in its body, so each matrix has
    one such node (a first step outside the loop made the session hold the decoder twice)."""
    model = build_id_model(load_checkpoint(demo_dir).spec, search="loop", **options)
    weights = {t.name for t in all_initializers(model.graph)}
    readers = Counter(
        node.input[index]
        for node, index, prepacked in node_inputs(model.graph)
        if prepacked and node.input[index] in weights
    )
    assert readers and max(readers.values()) == 1, [name for name, count in readers.items() if count > 1]
