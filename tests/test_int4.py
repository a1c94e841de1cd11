"""``export --int4``: 4-bit block-quantized matrices (ONNX Runtime's ``MatMulNBits``), one table for
the embedding lookups and the output projection, and translations that stay those of fp32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from graphgen.custom_ops.builder import INT32, GraphBuilder
from onnx import TensorProto

from graphgen import GraphgenError, Translator, export
from graphgen._graphs import all_graphs, all_initializers
from graphgen.contract import read_file_info
from graphgen.model.weights import INT4_BLOCK, Int4Weights, quantize_blocks
from graphgen.testing import FAMILIES, builder_model, demo_test_pairs, family_checkpoint, open_session

PAIRS = demo_test_pairs()


def _dequantized(rows: np.ndarray, block: int = INT4_BLOCK) -> np.ndarray:
    """What ``MatMulNBits`` reads from ``quantize_blocks(rows, block)``, unpacked in numpy (its
    documented layout: codes low nibble first along the inputs, zero point 8, one scale per block)."""
    matrix = quantize_blocks(rows, block)
    low, high = matrix.codes & 15, matrix.codes >> 4
    codes = np.stack([low, high], axis=-1).reshape(matrix.outputs, matrix.blocks * block).astype(np.float32)
    scales = np.repeat(matrix.scales.reshape(matrix.outputs, matrix.blocks), block, axis=1)
    return ((codes - 8) * scales)[:, : matrix.inputs]


@pytest.mark.parametrize("block", [INT4_BLOCK, 32])
@pytest.mark.parametrize("inputs", [64, 40, 7])  # whole blocks, a partial last block, less than one block
def test_blocks_round_to_the_nearest_step(inputs: int, block: int) -> None:
    rows = np.random.default_rng(inputs).standard_normal((5, inputs)).astype(np.float32)
    rows[2] = 0.0  # an all-zero row keeps a usable scale
    matrix = quantize_blocks(rows, block)
    assert matrix.codes.shape == (5, -(-inputs // block), block // 2)
    assert matrix.codes.dtype == np.uint8 and matrix.scales.dtype == np.float32
    step = np.repeat(matrix.scales.reshape(5, -1), block, axis=1)[:, :inputs]
    error = np.abs(_dequantized(rows, block) - rows)
    assert np.all(error <= step / 2 + 1e-6)
    assert np.all(_dequantized(rows, block)[2] == 0.0)


def _run(b: GraphBuilder, output: str, shape: list[int], feeds: dict[str, np.ndarray]) -> np.ndarray:
    b.output(output, "y", TensorProto.FLOAT, shape)
    return open_session(builder_model(b, b.inputs)).run(["y"], feeds)[0]


class _Table:
    """The one thing ``Int4Weights`` reads of a spec."""

    def __init__(self, table: np.ndarray) -> None:
        self.weights = {"table": table}


@pytest.mark.parametrize(("width", "block"), [(64, INT4_BLOCK), (40, INT4_BLOCK), (80, 32)])
def test_lookup_unpacks_the_rows_the_matmul_reads(width: int, block: int) -> None:
    """The embedding lookup (standard ops) gives the rows ``MatMulNBits`` multiplies with."""
    table = np.random.default_rng(width).standard_normal((11, width)).astype(np.float32)
    ids = np.array([[3, 0, 10], [7, 7, 1]], dtype=np.int32)
    b = GraphBuilder("lookup")
    b.input("ids", INT32, [2, 3])
    weights = Int4Weights(_Table(table), block)  # type: ignore[arg-type]
    rows = _run(b, weights.lookup(b, "table", "ids"), [2, 3, width], {"ids": ids})
    np.testing.assert_array_equal(rows, _dequantized(table, block)[ids])
    # The output projection over the same bytes: each token's logit is its row times the input.
    b = GraphBuilder("project")
    b.input("x", TensorProto.FLOAT, [4, width])
    x = np.random.default_rng(1).standard_normal((4, width)).astype(np.float32)
    logits = _run(b, weights.output_projection(b, "x", "table", ""), [4, 11], {"x": x})
    expected = x @ _dequantized(table, block).T
    # accuracy level 4 quantizes the activations to int8 per block: about 1% of the largest term
    np.testing.assert_allclose(logits, expected, atol=0.03 * np.abs(expected).max())


@pytest.fixture(scope="module")
def exported(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("int4")
    for name, options in {"fp32": {}, "int8": {"int8": True}, "int4": {"int4": True}}.items():
        export(str(demo_dir), str(folder / f"{name}.onnx"), progress=lambda _: None, **options)
    return folder / "fp32.onnx", folder / "int8.onnx", folder / "int4.onnx"


def test_int4_translations(exported: tuple[Path, Path, Path]) -> None:
    sources = [source for source, _ in PAIRS]
    fp32 = Translator(exported[0]).translate(sources)
    int4 = Translator(exported[2]).translate(sources)
    same = sum(a == b for a, b in zip(fp32, int4, strict=True))
    correct = sum(out == ref for out, (_, ref) in zip(int4, PAIRS, strict=True))
    # Measured: 299/300 identical to fp32, 300/300 equal to the reference (docs/performance.md).
    assert same / len(sources) >= 0.97, same
    assert correct / len(sources) >= 0.95, correct


def test_int4_stores_every_matrix_in_four_bits(exported: tuple[Path, Path, Path]) -> None:
    model = onnx.load(str(exported[2]))
    assert {p.key: p.value for p in model.metadata_props}["graphgen.precision"] == "int4"
    info = read_file_info(exported[2])
    assert (info.precision, info.int4_block_size) == ("int4", 64)
    assert read_file_info(exported[1]).int4_block_size is None  # int8
    tensors = {t.name: t for t in all_initializers(model.graph)}
    codes = [t for t in tensors.values() if t.name.endswith(".int4")]
    assert codes and all(t.data_type == TensorProto.UINT8 for t in codes)
    # the tied table once: read by the lookups (Gather) and the output projection (MatMulNBits)
    readers = {
        node.op_type
        for graph in all_graphs(model.graph)
        for node in graph.node
        if "encoder.embed_tokens.int4" in node.input
    }
    assert readers == {"Gather", "MatMulNBits"}
    floats = [t for t in tensors.values() if t.data_type == TensorProto.FLOAT and len(t.dims) == 2]
    matrices = [t for t in floats if min(t.dims) > 1 and t.name not in {"encoder.positions", "unigram_scores"}]
    assert not [t.name for t in matrices if "search" not in t.name and "bias" not in t.name]
    sizes = [path.stat().st_size for path in exported]
    assert sizes[2] < sizes[1] < sizes[0]


def test_int4_block_size(exported: tuple[Path, Path, Path], demo_dir: Path, tmp_path: Path) -> None:
    """``--int4-block-size 32`` (what onnxruntime-web's WebGPU provider computes right): every matrix
    in blocks of 32, translations as close to fp32 as the default's."""
    path = tmp_path / "int4-32.onnx"
    export(str(demo_dir), str(path), int4=True, int4_block_size=32, progress=lambda _: None)
    model = onnx.load(str(path))
    nodes = [node for graph in all_graphs(model.graph) for node in graph.node if node.op_type == "MatMulNBits"]
    assert nodes and {
        onnx.helper.get_attribute_value(a) for n in nodes for a in n.attribute if a.name == "block_size"
    } == {32}
    tensors = {t.name: t for t in all_initializers(model.graph)}
    assert all(tensors[n.input[1]].dims[2] == 16 for n in nodes)  # two codes per byte
    assert read_file_info(path).int4_block_size == 32  # what a host that takes only some sizes reads
    sources = [source for source, _ in PAIRS]
    fp32 = Translator(exported[0]).translate(sources)
    int4 = Translator(path).translate(sources)
    assert sum(a == b for a, b in zip(fp32, int4, strict=True)) / len(sources) >= 0.97
    assert path.stat().st_size > exported[2].stat().st_size  # twice the scales of blocks of 64


@pytest.mark.parametrize("family", ["nllb", "t5"])
def test_int4_exports_the_families(family: str, tmp_path: Path) -> None:
    """Language-coded and relative-position models run as int4 too (random weights: no quality claim)."""
    row = FAMILIES[family]
    family_checkpoint(tmp_path / "model", family, num_beams=2)
    options = {}
    if row.has_languages:
        options = {"source_language": row.source_language, "target_language": row.target_languages[1]}
    export(tmp_path / "model", tmp_path / "int4.onnx", int4=True, progress=lambda _: None)
    translations = Translator(tmp_path / "int4.onnx").translate(["a b c", "hello world"], **options)
    assert len(translations) == 2 and all(isinstance(t, str) for t in translations)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"int4": True, "int8": True}, "--int8 and --int4"),
        ({"int4": True, "fp16": True}, "--fp16 and --int4"),
        ({"int4": True, "search": "op"}, "search='loop'"),
        ({"int4": True, "int4_block_size": 48}, "power of two from 16"),
        ({"int4": True, "int4_block_size": 8}, "power of two from 16"),
        ({"int8": True, "int4_block_size": 32}, "--int4-block-size applies to --int4 files only"),
    ],
)
def test_int4_refusals(demo_dir: Path, tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(GraphgenError, match=message):
        export(str(demo_dir), str(tmp_path / "x.onnx"), progress=lambda _: None, **options)
    assert not list(tmp_path.iterdir())
