"""``graphgen export --fp16``: float16 subgraphs for GPU execution providers.

ORT's CPU BeamSearch refuses float16 subgraphs, so on CPU the tests check what they can: the
file's types and size, that ORT loads it and names the reason it will not search on CPU, and the
float16 subgraphs' numerics against float32 (run standalone, where ORT's CPU provider computes
float16 nodes through inserted casts).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import file_session, text_feeds

from graphgen._assemble import standalone_subgraph
from graphgen._export import export
from graphgen._fp16 import Float16Error, to_float16
from graphgen._load import load_checkpoint
from graphgen._save import all_initializers
from graphgen._spec import ModelSpec
from graphgen._subgraphs import build_decoder_graph, build_encoder_graph


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _both(spec: ModelSpec, build: Callable) -> tuple[ort.InferenceSession, ort.InferenceSession]:
    fp32 = _session(standalone_subgraph(spec, build(spec)))
    fp16 = _session(to_float16(standalone_subgraph(spec, build(spec)), whole=True))
    return fp32, fp16


def _close(name: str, expected: np.ndarray, got: np.ndarray) -> None:
    assert got.dtype == np.float16 or name in {"max_length", "min_length"}, (name, got.dtype)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(finite, np.isfinite(got), err_msg=f"{name}: -inf positions moved")
    scale = np.abs(expected[finite]).max()
    assert np.abs(expected[finite] - got[finite].astype(np.float32)).max() <= 2e-3 * max(scale, 1.0), name


def test_fp16_subgraphs_match_fp32(demo_dir: Path) -> None:
    spec = load_checkpoint(demo_dir).spec
    encoder32, encoder16 = _both(spec, build_encoder_graph)
    ids = np.array([[5, 6, 7, 8, 0], [9, 10, 0, 458, 458]], np.int32)
    mask = (ids != spec.pad_token_id).astype(np.int32)
    outer = {"min_length": np.array([0], np.int32), "max_length": np.array([512], np.int32)}
    start = np.full((2, 1), spec.decoder_start_token_id, np.int32)
    feeds = {"encoder_input_ids": ids, "encoder_attention_mask": mask, "decoder_input_ids": start, **outer}
    names = [o.name for o in encoder32.get_outputs()]
    first32 = dict(zip(names, encoder32.run(None, feeds), strict=True))
    first16 = dict(zip(names, encoder16.run(None, feeds), strict=True))
    for name in names:
        _close(name, first32[name], first16[name])

    decoder32, decoder16 = _both(spec, build_decoder_graph)
    step = {"input_ids": np.array([[17], [23]], np.int32), "encoder_attention_mask": mask, **outer}
    for past in [i.name for i in decoder32.get_inputs()]:
        if past.startswith("past_"):
            step[past] = first32[past.replace("past_", "present_")]
    wanted = {i.name for i in decoder32.get_inputs()}
    step = {k: v for k, v in step.items() if k in wanted}
    half = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in step.items()}
    names = [o.name for o in decoder32.get_outputs()]
    for name, expected, got in zip(names, decoder32.run(None, step), decoder16.run(None, half), strict=True):
        _close(name, expected, got)


def test_fp16_export_loads_and_states_why_not_on_cpu(demo_dir: Path, tmp_path: Path) -> None:
    export(demo_dir, tmp_path / "fp32.onnx")
    export(demo_dir, tmp_path / "fp16.onnx", fp16=True)
    model = onnx.load(str(tmp_path / "fp16.onnx"))
    assert {p.key: p.value for p in model.metadata_props}["graphgen.precision"] == "float16"
    floats = {t.name: t for t in all_initializers(model.graph) if t.data_type == onnx.TensorProto.FLOAT}
    # Left in float32: the two search parameters, the tokenizer's scalars and its unigram scores (the
    # Viterbi adds them in SentencePiece's own precision).
    assert {"length_penalty", "repetition_penalty"} <= set(floats)
    large = [n for n, t in floats.items() if np.prod(t.dims) > 1]
    assert all(n == "unigram_scores" or n.startswith("tokenizer/") for n in large), large
    assert (tmp_path / "fp16.onnx").stat().st_size < 0.6 * (tmp_path / "fp32.onnx").stat().st_size
    session = file_session(tmp_path / "fp16.onnx", 1)
    with pytest.raises(Exception, match="does not support float16 model on CPU"):
        session.run(None, text_feeds(session, [">>cmn_Hans<< I have 3 apples."]))


def test_fp16_and_int8_together_are_refused(demo_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(Float16Error, match="cannot be combined"):
        export(demo_dir, tmp_path / "both.onnx", fp16=True, int8=True)
    assert not (tmp_path / "both.onnx").exists()
