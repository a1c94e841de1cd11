"""``export --int8``: every matrix stored as int8, and translations that stay those of fp32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from graphgen.custom_ops.builder import GraphBuilder
from onnx import TensorProto

from graphgen import Translator, export
from graphgen._graphs import all_initializers, all_nodes
from graphgen.model.weights import quantize_columns, row_quantized_matmul
from graphgen.testing import builder_model, demo_test_pairs, open_session

PAIRS = demo_test_pairs()
INT8_MATMUL = "MatMulIntegerToFloat"


@pytest.fixture(scope="module")
def exported(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("int8")
    export(str(demo_dir), str(folder / "fp32.onnx"))
    export(str(demo_dir), str(folder / "int8.onnx"), int8=True)
    return folder / "fp32.onnx", folder / "int8.onnx"


def test_int8_translations(exported: tuple[Path, Path]) -> None:
    sources = [source for source, _ in PAIRS]
    fp32 = Translator(exported[0]).translate(sources)
    int8 = Translator(exported[1]).translate(sources)
    same = sum(a == b for a, b in zip(fp32, int8, strict=True))
    correct = sum(out == ref for out, (_, ref) in zip(int8, PAIRS, strict=True))
    # Measured: 300/300 identical to fp32, 299/300 correct (docs/performance.md).
    assert same / len(sources) >= 0.98, same
    assert correct / len(sources) >= 0.95, correct


def test_int8_input_translates_alike_in_any_batch(exported: tuple[Path, Path]) -> None:
    """An input's tokens and score are the same bits alone and in any batch: each row of every int8
    product is quantized with its own scale. With one scale per tensor (ONNX Runtime's
    ``DynamicQuantizeMatMul``, graphgen's int8 until 2026-12-07) none of these 48 scores was the
    same bits in a batch of 16 as alone (measured; the tokens stayed, here)."""
    sources = [source for source, _ in PAIRS[:48]]
    translator = Translator(exported[1])
    alone = [translator.run([source], num_beams=4) for source in sources]
    mixed = sources[::2] + sources[1::2]  # other neighbours and other paddings than in order
    for batch in (sources, mixed):
        for start in range(0, len(batch), 16):
            together = translator.run(batch[start : start + 16], num_beams=4)
            for row, source in enumerate(batch[start : start + 16]):
                single = alone[sources.index(source)]
                assert together["translation"][row, 0] == single["translation"][0, 0], source
                assert together["sequence_scores"][row, 0] == single["sequence_scores"][0, 0], source


def test_row_quantized_product() -> None:
    """One int8 product against numpy: the integer sums exactly, each row by its own scale; an
    all-zero row (padding) gives the bias, not 0/0; a row gives the same bits alone and in a batch."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((40, 24)).astype(np.float32)
    codes, scales = quantize_columns(weight)
    bias = rng.standard_normal(24).astype(np.float32)
    x = rng.standard_normal((5, 40)).astype(np.float32) * np.array([[1e-3], [1.0], [0.0], [300.0], [1.0]], np.float32)
    b = GraphBuilder("product")
    b.input("x", TensorProto.FLOAT, ["rows", 40])
    out = row_quantized_matmul(b, "x", b.derived("codes", codes), b.derived("scales", scales), b.derived("bias", bias))
    b.output(out, "y", TensorProto.FLOAT, ["rows", 24])
    session = open_session(builder_model(b, b.inputs))
    together = session.run(["y"], {"x": x})[0]
    for row in range(len(x)):
        np.testing.assert_array_equal(session.run(["y"], {"x": x[row : row + 1]})[0][0], together[row])
    np.testing.assert_array_equal(together[2], bias)
    largest = np.abs(x).max(axis=1, keepdims=True)
    step = np.float32(1 / 127)
    quantized = np.clip(np.rint(x / np.maximum(largest, np.finfo(np.float32).tiny) / step), -127, 127)
    sums = quantized.astype(np.int64) @ codes.astype(np.int64)
    expected = sums.astype(np.float32) * step * scales * largest + bias
    np.testing.assert_allclose(together, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    # and close to the float product: 7 bits of activation, 6 of weight
    float_product = x @ weight + bias
    for row in (0, 1, 3, 4):
        error = np.abs(together[row] - float_product[row]).max()
        assert error < 0.05 * np.abs(x[row]).max() * np.abs(weight).max() * np.sqrt(40), (row, error)


def test_int8_stores_matrices_as_int8(exported: tuple[Path, Path]) -> None:
    model = onnx.load(str(exported[1]))
    assert {p.key: p.value for p in model.metadata_props}["graphgen.precision"] == "int8"
    tensors = list(all_initializers(model.graph))
    # Position table and output-bias rows are additive constants, not matrices a matmul reads.
    not_matrices = {
        "encoder.positions",
        "logits_bias",
        "logits_bias_variants",
        "final_logits_bias_row",
        "search_processor_rows",
        "unigram_scores",  # the tokenizer's piece scores, added in SentencePiece's float32
    }
    floats = [t for t in tensors if t.data_type == onnx.TensorProto.FLOAT and t.name not in not_matrices]
    largest_float = max(int(np.prod(t.dims)) for t in floats)
    assert largest_float <= 512, f"a float matrix was left unquantized ({largest_float} values)"
    # Beyond the tables both files share unchanged (the tokenizer's, the detokenizer's), int8 is 2.5x smaller.
    fp32 = {t.name: t.SerializeToString() for t in all_initializers(onnx.load(str(exported[0])).graph)}
    int8 = {t.name: t.SerializeToString() for t in tensors}
    shared = sum(len(data) for name, data in fp32.items() if data == int8.get(name))
    assert exported[1].stat().st_size - shared < 0.4 * (exported[0].stat().st_size - shared)


def test_int8_codes_fit_every_cpus_products(exported: tuple[Path, Path]) -> None:
    """Every int8 weight within -63..63: x86 CPUs without VNNI add two u8×s8 products into 16 bits
    with saturation, which codes up to 127 overflow (255·127·2 > 32767), giving other tokens there
    than on a VNNI or ARM CPU (measured under QEMU's Haswell, benchmarks/int8_cpus.py)."""
    model = onnx.load(str(exported[1]))
    tensors = {t.name: t for t in all_initializers(model.graph)}
    weights = {n.input[1] for n in all_nodes(model.graph) if n.op_type == INT8_MATMUL}
    assert len(weights) >= 10, weights  # the demo's layers and the output projection
    codes = [t for t in tensors.values() if t.data_type == onnx.TensorProto.INT8]
    assert weights <= {t.name for t in codes}
    for tensor in codes:
        values = onnx.numpy_helper.to_array(tensor)
        assert np.abs(values.astype(np.int16)).max() <= 63, tensor.name
    # the scales use the whole range: each column's largest magnitude is 63
    projection = onnx.numpy_helper.to_array(tensors[sorted(weights)[0]])
    assert np.abs(projection.astype(np.int16)).max(axis=0).min() == 63


def _int8_lookups(path: Path) -> tuple[dict[str, onnx.TensorProto], list[onnx.NodeProto], list[onnx.NodeProto]]:
    """The file's initializers, its Gathers of int8 tables, and its int8 output projections."""
    model = onnx.load(str(path))
    tensors = {t.name: t for t in all_initializers(model.graph)}
    nodes = list(all_nodes(model.graph))
    gathers = [
        n
        for n in nodes
        if n.op_type == "Gather" and n.input[0] in tensors and tensors[n.input[0]].data_type == onnx.TensorProto.INT8
    ]
    assert gathers, "no lookup of an int8 table"
    vocab = max(max(tensors[n.input[0]].dims) for n in gathers)
    projections = [n for n in nodes if n.op_type == INT8_MATMUL and tensors[n.input[1]].dims[-1] == vocab]
    assert projections, "no int8 output projection over the vocabulary"
    return tensors, gathers, projections


def test_int8_table_stored_once_in_a_single_file(exported: tuple[Path, Path]) -> None:
    """Read into memory whole, a file gains nothing from a second layout: the lookups gather
    columns of the projection's own table."""
    _, gathers, projections = _int8_lookups(exported[1])
    tables = {n.input[1] for n in projections}
    assert {n.input[0] for n in gathers} <= tables
    assert all(next(a.i for a in n.attribute if a.name == "axis") == 1 for n in gathers)


def test_int8_mapped_lookups_read_whole_rows(demo_dir: Path, tmp_path: Path, exported: tuple[Path, Path]) -> None:
    """With external data (memory-mapped), lookups gather token rows of an int8 ``[vocab, d_model]``
    table, not one byte of every row (a column lookup kept every page of the table resident beside
    ONNX Runtime's packed copy of the output projection); the tied projection reads the same
    numbers, transposed; and the translations are those of the single file."""
    path = tmp_path / "int8.onnx"
    export(str(demo_dir), str(path), int8=True, external_data=True, progress=lambda _: None)
    tensors, gathers, projections = _int8_lookups(path)
    for node in gathers:
        assert next((a.i for a in node.attribute if a.name == "axis"), 0) == 0, f"{node.name} gathers columns"
    rows = [onnx.numpy_helper.to_array(tensors[n.input[0]]) for n in gathers]
    for projection in projections:
        columns = onnx.numpy_helper.to_array(tensors[projection.input[1]])
        assert any(r.shape == columns.T.shape and np.array_equal(r, columns.T) for r in rows)
    sources = [source for source, _ in PAIRS[:40]]
    assert Translator(path).translate(sources) == Translator(exported[1]).translate(sources)
