"""``export --int8``: every matrix stored as int8, and translations that stay those of fp32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from graphgen import Translator, export
from graphgen.deploy.save import all_initializers
from graphgen.testing import demo_test_pairs

PAIRS = demo_test_pairs()


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
