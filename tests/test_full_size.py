"""The full opus-mt-en-zh shape (vocab 65001, 6+6 layers, d_model 512) exports to one loadable graph.

Random weights built from the config, since no hub is reachable. Marked slow: about a minute.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel

from graphgen._export import export

OPUS_MT_EN_ZH = {
    "vocab_size": 65001,
    "decoder_vocab_size": 65001,
    "d_model": 512,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "encoder_attention_heads": 8,
    "decoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048,
    "max_position_embeddings": 512,
    "activation_function": "swish",
    "scale_embedding": True,
    "pad_token_id": 65000,
    "decoder_start_token_id": 65000,
    "eos_token_id": 0,
    "forced_eos_token_id": 0,
    "share_encoder_decoder_embeddings": True,
}


def opus_mt_shaped_checkpoint(directory: Path) -> Path:
    torch.manual_seed(0)
    model = MarianMTModel(MarianConfig(**OPUS_MT_EN_ZH)).eval()
    model.generation_config = GenerationConfig(
        bad_words_ids=[[65000]],
        decoder_start_token_id=65000,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=65000,
        renormalize_logits=True,
    )
    model.save_pretrained(directory)
    return directory


@pytest.mark.slow
def test_full_size_export(tmp_path: Path) -> None:
    checkpoint = opus_mt_shaped_checkpoint(tmp_path / "opus-mt-en-zh-shape")
    started = time.perf_counter()
    result = export(checkpoint, tmp_path / "full.onnx", tokenizer=False)
    seconds = time.perf_counter() - started
    size = (tmp_path / "full.onnx").stat().st_size
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\nfull-size export: {seconds:.1f} s, {size / 2**20:.0f} MiB, peak RSS {peak_gib:.2f} GiB")
    assert result.files == [tmp_path / "full.onnx"]
    # 74.7M parameters (tied 65001×512 table once) ≈ 299 MB in fp32; nothing stored twice.
    assert size < 320 * 10**6
    session = ort.InferenceSession(str(tmp_path / "full.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array([[5, 6, 7, 8, 0]], dtype=np.int32)
    sequences, _ = session.run(
        None,
        {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "max_length": np.array([6], np.int32),
            "num_beams": np.array([2], np.int32),
        },
    )
    assert sequences.shape[0] == 1 and sequences.shape[2] <= 6

    started = time.perf_counter()
    export(checkpoint, tmp_path / "int8.onnx", tokenizer=False, int8=True)
    int8_size = (tmp_path / "int8.onnx").stat().st_size
    print(f"full-size int8 export: {time.perf_counter() - started:.1f} s, {int8_size / 2**20:.0f} MiB")
    assert int8_size <= 90 * 10**6
    session = ort.InferenceSession(str(tmp_path / "int8.onnx"), providers=["CPUExecutionProvider"])
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "max_length": np.array([6], np.int32)})
