"""T5 (original and v1.1) and mT5 checkpoints: the id-level file equals HF ``generate``, and the
text-level file (T5's tokenizer) equals ``generate`` + ``batch_decode``.

Tiny random-weight models (``conftest.random_t5_model``) cover what T5 does its own way: relative
position buckets (exact, log-spaced and saturated distances), RMS norms, no biases, unscaled
attention, d_kv × heads ≠ d_model, the gated feed-forward, the scaled tied head of the original
and the untied head of v1.1 / mT5.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from conftest import (
    T5_VARIANTS,
    demo_test_pairs,
    hf_tokens,
    no_torch_python,
    random_sources,
    random_t5_model,
    run_id_file,
    t5_checkpoint,
)

from graphgen import Translator
from graphgen._export import export
from graphgen.checkpoint.load import load_checkpoint
from graphgen.model.spec import RelativeAttention
from graphgen.model.transformer import relative_buckets
from graphgen.verify.against_hf import verify

VOCAB = 120
PAD, EOS = 0, 1
SENTENCES = [f"translate English to German: {source.split(' ', 1)[1]}" for source, _ in demo_test_pairs()][:104]


@pytest.fixture(scope="module", params=list(T5_VARIANTS))
def variant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp(request.param) / "checkpoint"
    model = random_t5_model(directory, request.param, VOCAB, num_beams=4)
    export(directory, directory / "ids.onnx", tokenizer=False, progress=lambda _: None)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(directory / "ids.onnx"), options, providers=["CPUExecutionProvider"])
    return session, model, directory, request.param


def _run(session, ids, mask, **settings) -> list[tuple[int, ...]]:
    return run_id_file(session, ids, mask, EOS, PAD, **settings)


def _hf(model, ids, mask, **settings) -> list[tuple[int, ...]]:
    return hf_tokens(model, ids, mask, EOS, PAD, **settings)


def test_the_variants_differ_where_they_should(variant) -> None:
    _, _, directory, name = variant
    spec = load_checkpoint(directory).spec
    assert spec.gated_feed_forward == (name != "t5")
    assert (spec.output_scale != 1.0) == (name == "t5")
    assert (spec.weight_name("lm_head.weight") == "lm_head.weight") == (name != "t5")
    assert spec.head_dim(spec.encoder_heads) == 6 and spec.relative_attention == RelativeAttention(10, 14)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (10, 14), (16, 40)])
def test_relative_buckets_equal_hf(bidirectional: bool, buckets: int, distance: int) -> None:
    from transformers.models.t5.modeling_t5 import T5Attention

    table = relative_buckets(RelativeAttention(buckets, distance), bidirectional=bidirectional)
    offsets = torch.arange(-3 * distance, 3 * distance + 1)
    expected = T5Attention._relative_position_bucket(offsets, bidirectional, buckets, distance).numpy()
    assert table[np.clip(offsets.numpy(), -distance, distance) + distance].tolist() == expected.tolist()


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_equals_hf(variant, batch_size: int, num_beams: int) -> None:
    """104 sources of up to 30 tokens (past the bucket range), outputs up to 40 tokens."""
    session, model, _, _ = variant
    expected, actual = [], []
    for ids, mask in random_sources(104 // batch_size, batch_size, vocab=VOCAB, pad=PAD, eos=EOS, longest=30):
        expected += _hf(model, ids, mask, num_beams=num_beams)
        actual += _run(session, ids, mask, num_beams=num_beams)
    assert len({row[:4] for row in expected}) > 10  # outputs depend on the input
    assert max(map(len, expected)) > 20  # and reach distances past max_distance
    differ = [(a, e) for a, e in zip(actual, expected, strict=True) if a != e]
    assert not differ, f"{len(differ)} of {len(expected)} differ, e.g. {differ[:2]}"


def test_op_search_equals_hf(variant, tmp_path: Path) -> None:
    """ORT's BeamSearch op runs the same subgraphs (relative bias per step from the cache length)."""
    _, model, directory, _ = variant
    export(directory, tmp_path / "op.onnx", tokenizer=False, search="op", progress=lambda _: None)
    session = ort.InferenceSession(str(tmp_path / "op.onnx"), providers=["CPUExecutionProvider"])
    for ids, mask in random_sources(4, 4, vocab=VOCAB, pad=PAD, eos=EOS, longest=30, seed=2):
        assert _run(session, ids, mask, num_beams=1) == _hf(model, ids, mask, num_beams=1)


def test_int8_export_runs(variant, tmp_path: Path) -> None:
    _, _, directory, _ = variant
    export(directory, tmp_path / "int8.onnx", tokenizer=False, int8=True, progress=lambda _: None)
    session = ort.InferenceSession(str(tmp_path / "int8.onnx"), providers=["CPUExecutionProvider"])
    ids, mask = random_sources(1, 4, vocab=VOCAB, pad=PAD, eos=EOS)[0]
    assert len(_run(session, ids, mask)) == 4


@pytest.fixture(scope="module", params=["t5-v1.1", "mt5"])
def text_checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A T5 checkpoint with T5's tokenizer files (a unigram SentencePiece model trained here)."""
    directory = tmp_path_factory.mktemp(f"{request.param}-text") / "checkpoint"
    model, tokenizer = t5_checkpoint(directory, request.param, num_beams=4)
    export(directory, directory / "model.onnx", progress=lambda _: None)
    return model, tokenizer, directory


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_text_file_equals_hf(text_checkpoint, batch_size: int, num_beams: int) -> None:
    """104 sentences with T5's task prefix: translations equal ``generate`` + ``batch_decode``."""
    model, tokenizer, directory = text_checkpoint
    translator = Translator(directory / "model.onnx")
    assert translator.languages == [] and "source_language" not in translator._inputs
    expected, actual = [], []
    for start in range(0, len(SENTENCES), batch_size):
        chunk = SENTENCES[start : start + batch_size]
        inputs = tokenizer(chunk, return_tensors="pt", padding=True)
        with torch.no_grad():
            output = model.generate(**inputs, num_beams=num_beams)
        expected += tokenizer.batch_decode(output, skip_special_tokens=True)
        actual += translator.translate(chunk, num_beams=num_beams)
    assert len(set(expected)) > 10
    differ = [(s, e, a) for s, e, a in zip(SENTENCES, expected, actual, strict=True) if e != a]
    assert not differ, f"{len(differ)} of {len(SENTENCES)} differ, e.g. {differ[:2]}"


def test_verify(text_checkpoint, tmp_path: Path) -> None:
    _, _, directory = text_checkpoint
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES[:16]), encoding="utf-8")
    out = io.StringIO()
    assert verify(str(directory), str(directory / "model.onnx"), sentences_file=str(sentences), out=out), out.getvalue()
    assert out.getvalue().count("16/16 identical") == 2


def test_export_without_torch_gives_the_same_file(text_checkpoint, tmp_path: Path) -> None:
    _, _, directory = text_checkpoint
    theirs = tmp_path / "no-torch.onnx"
    done = subprocess.run(
        [no_torch_python(), "-m", "graphgen", "export", str(directory), "-o", str(theirs), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert theirs.read_bytes() == (directory / "model.onnx").read_bytes()
