"""The full opus-mt-en-zh shape (vocab 65001, 6+6 layers, d_model 512) exports to one loadable graph.

Random weights built from the config (``graphgen.testing.opus_mt_shaped_checkpoint``), since no hub
is reachable. Marked slow: about a minute.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pytest

from graphgen import export
from graphgen.testing import open_session, opus_mt_shaped_checkpoint


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
    session = open_session(tmp_path / "full.onnx")
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
    session = open_session(tmp_path / "int8.onnx")
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "max_length": np.array([6], np.int32)})
