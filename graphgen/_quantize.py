"""int8 weights for ``graphgen export --int8``: symmetric, one scale per output column.

Linear layers run as com.microsoft ``DynamicQuantizeMatMul`` (activations quantized per call,
weights int8). An embedding table is stored once, transposed to ``[d_model, vocab]`` with one
scale per token: the same int8 array serves the embedding lookup (a Gather along axis 1) and, when
tied, the output projection (whose output columns are the tokens), so the largest tensor of an
opus-mt model is both quantized and kept single.
"""

from __future__ import annotations

import numpy as np

from ._safetensors import release_pages
from ._spec import ModelSpec

# Rows quantized at a time: bounds the float temporaries (NLLB's 256k-token table is 1 GB whole).
ROWS_PER_BLOCK = 64


def quantize_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``weight`` [in, out] → int8 [in, out] and float32 scales [out] with w ≈ q · scale.

    Block by block of rows (the same numbers as the whole array at once), so that no temporary of
    the weight's size exists, then the checkpoint's pages behind ``weight`` let go.
    """
    rows = range(0, weight.shape[0], ROWS_PER_BLOCK)
    peak = np.zeros(weight.shape[1], dtype=weight.dtype)
    for start in rows:
        np.maximum(peak, np.abs(weight[start : start + ROWS_PER_BLOCK]).max(axis=0), out=peak)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    quantized = np.empty(weight.shape, dtype=np.int8)
    for start in rows:
        block = weight[start : start + ROWS_PER_BLOCK]
        quantized[start : start + ROWS_PER_BLOCK] = np.clip(np.rint(block / scale), -127, 127).astype(np.int8)
    release_pages(weight)
    return quantized, scale


class Int8Weights:
    """Quantizes each weight once per export, however many subgraphs read it."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def linear(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A ``[in, out]`` linear weight."""
        if name not in self._cache:
            self._cache[name] = quantize_columns(self.spec.weights[name])
        return self._cache[name]

    def table(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A ``[vocab, d_model]`` table, returned transposed: int8 ``[d_model, vocab]``, scales ``[vocab]``."""
        if name not in self._cache:
            self._cache[name] = quantize_columns(self.spec.weights[name].T)
        return self._cache[name]
