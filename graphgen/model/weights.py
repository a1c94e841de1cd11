"""Weight formats: how a layer reads its matrices, as float32/float16 (``FloatWeights``), or in
``export --int8`` and ``--int4``.

Each format is a strategy the transformer calls for its three kinds of matrix reads: a linear
layer (``matmul``; ``fused_matmul`` for several that share an input), the output projection and
the embedding lookup; the layers never ask which format they have. Every array is quantized once
per export, however many graphs read it.

int8 (``Int8Weights``): symmetric, one scale per output column, codes -63..63 (``INT8_CODE_MAX``:
no CPU's kernel saturates). A linear layer quantizes its activations per row, each token of each
input with its own scale, and multiplies in integers with com.microsoft ``MatMulIntegerToFloat``
(``row_quantized_matmul``): an input's translation does not depend on the other inputs of its
batch (nor, measured on 1.17-1.32, on the ONNX Runtime release). An embedding table is
quantized with one scale per token and stored transposed, ``[d_model, vocab]``: when tied, the
output projection reads it as it is (its output columns are the tokens), and the embedding lookup
gathers columns of the same array, so the table is stored once. In a file whose weights are
memory-mapped (external data) the lookup reads token rows ``[vocab, d_model]`` of a second array
with the same numbers instead (``row_lookups``): ONNX Runtime prepacks the projection's copy, and a
column lookup reads one byte in every row of the original, so every page of it stayed resident
beside the packed copy (NLLB-600M: 250 MB more at run time, for 262 MB more on disk). A file read
into memory whole gains nothing from the second array: its original table stays resident anyway.
(``DynamicQuantizeMatMul`` cannot read a transposed weight, and com.microsoft ``QGemm`` with
``transB`` keeps a transposed copy of its own.)

int4 (``Int4Weights``): symmetric, one scale per block of ``INT4_BLOCK`` (64) inputs or another power
of two (``export --int4-block-size``), in ONNX Runtime's ``MatMulNBits`` layout (``[out, blocks,
block / 2]`` bytes, two codes per byte, low nibble first, code 8 is zero). A table ``[vocab,
d_model]`` is already in that layout with the tokens as outputs: the output projection reads it as
it is, and the embedding lookup gathers token rows of the same bytes and unpacks them with standard
ops, so a tied table is stored once, at half a byte per value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from graphgen._errors import GraphgenError
from graphgen.checkpoint.safetensors import release_pages
from graphgen.custom_ops.builder import FLOAT, INT32, INT64, MS_DOMAIN, GraphBuilder, i64
from graphgen.model.spec import ModelSpec

Matrix = TypeVar("Matrix")

# Rows quantized at a time: bounds the float temporaries (NLLB's 256k-token table is 1 GB whole).
ROWS_PER_BLOCK = 64

# The largest int8 code: 7 bits of magnitude, not 8. ONNX Runtime multiplies the uint8 activations by
# the int8 weights with x86's u8×s8 instruction, which on CPUs without VNNI (AVX2, and AVX-512
# before VNNI: Intel before Cascade Lake, AMD before Zen 4) adds two products into 16 bits with
# saturation: 255·127·2 overflows, 255·63·2 does not. With codes up to 63 every x86 and ARM kernel
# sums exactly, so a file gives the same tokens on every CPU (measured under QEMU's Haswell:
# benchmarks/int8_cpus.py, which also exports with 127 to show the difference).
INT8_CODE_MAX = 63
# Activation codes: each row is divided by its largest magnitude and quantized to -127..127, stored as
# uint8 around ACTIVATION_ZERO_POINT (1..255: with the weights' 63, two products fit 16 bits).
ACTIVATION_CODE_MAX = 127
ACTIVATION_ZERO_POINT = 128
# What the file's metadata records of it (contract.Key.INT8_ACTIVATIONS).
INT8_ACTIVATIONS = "row"
# The smallest row range divided by: an all-zero row (padding) quantizes to zeros instead of 0/0.
SMALLEST_ROW_RANGE = float(np.finfo(np.float32).tiny)


def quantize_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``weight`` [in, out] → int8 [in, out] and float32 scales [out] with w ≈ q · scale.

    Block by block of rows (the same numbers as the whole array at once), so that no temporary of
    the weight's size exists, then the checkpoint's pages behind ``weight`` let go.
    """
    if weight.ndim == 2 and not weight.flags.c_contiguous and weight.T.flags.c_contiguous:
        quantized_rows, scale = _quantize_rows(weight.T)
        return quantized_rows.T, scale
    rows = range(0, weight.shape[0], ROWS_PER_BLOCK)
    peak = np.zeros(weight.shape[1], dtype=weight.dtype)
    for start in rows:
        np.maximum(peak, np.abs(weight[start : start + ROWS_PER_BLOCK]).max(axis=0), out=peak)
    scale = np.where(peak > 0, peak / INT8_CODE_MAX, 1.0).astype(np.float32)
    quantized = np.empty(weight.shape, dtype=np.int8)
    for start in rows:
        block = weight[start : start + ROWS_PER_BLOCK]
        codes = np.clip(np.rint(block / scale), -INT8_CODE_MAX, INT8_CODE_MAX)
        quantized[start : start + ROWS_PER_BLOCK] = codes.astype(np.int8)
    release_pages(weight)
    return quantized, scale


def _quantize_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_columns(table.T)`` transposed, for a C-order ``[out, in]`` array (a token table, a
    transposed view's source): each row is one scale's numbers, so blocks of rows are read once, and
    their pages let go, in order (blocks of the view's rows would each read the whole table: NLLB's
    1 GB stayed resident while it was quantized)."""
    scale = np.empty(table.shape[0], dtype=np.float32)
    quantized = np.empty(table.shape, dtype=np.int8)
    for start in range(0, table.shape[0], ROWS_PER_BLOCK):
        block = table[start : start + ROWS_PER_BLOCK]
        peak = np.abs(block).max(axis=1)
        block_scale = np.where(peak > 0, peak / INT8_CODE_MAX, 1.0).astype(np.float32)
        codes = np.clip(np.rint(block / block_scale[:, None]), -INT8_CODE_MAX, INT8_CODE_MAX)
        quantized[start : start + ROWS_PER_BLOCK] = codes.astype(np.int8)
        scale[start : start + ROWS_PER_BLOCK] = block_scale
        release_pages(block)
    return quantized, scale


class DeferredMatrices(Generic[Matrix]):
    """Quantized matrices handed to the builders as deferred arrays (``GraphBuilder.derived``): each
    is computed when the first of its arrays is written out and kept only until another matrix is
    computed (the export writes a matrix's arrays one after the other), so the quantized model is
    never all in memory (NLLB-600M int8: 600 MB at the export's peak when quantized while building).
    Every builder gets the same deferred array for the same part of a matrix (``model.placement``
    takes that as the same weight)."""

    def __init__(self, compute: Callable[[str], Matrix]) -> None:
        self._compute = compute
        self._arrays: dict[tuple[str, str], Callable[[], np.ndarray]] = {}
        self._last: tuple[str, Matrix] | None = None

    def array(self, key: str, part: str, pick: Callable[[Matrix], np.ndarray]) -> Callable[[], np.ndarray]:
        """The deferred array ``pick(matrix)`` of the matrix ``key``, named ``part``."""
        if (key, part) not in self._arrays:
            self._arrays[key, part] = lambda: pick(self._matrix(key))
        return self._arrays[key, part]

    def _matrix(self, key: str) -> Matrix:
        if self._last is None or self._last[0] != key:
            self._last = None  # the previous matrix goes before the next is made
            self._last = (key, self._compute(key))
        return self._last[1]


class Int8Weights:
    """int8 matrices with a float scale per output column, multiplied by activations quantized per row
    (``row_quantized_matmul``), each quantized once as it is written out (``DeferredMatrices``),
    however many subgraphs read it."""

    def __init__(self, spec: ModelSpec, *, row_lookups: bool = False) -> None:
        self.spec = spec
        self.row_lookups = row_lookups  # lookups gather rows of a second array (see the module's docstring)
        self._matrices = DeferredMatrices(self._quantized)

    def _quantized(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """int8 ``[in, out]`` and scales ``[out]`` of a linear weight, a fused one (``a+b+c``) or, for
        ``key`` ``table:NAME``, a ``[vocab, d_model]`` table as the output projection reads it."""
        if key.startswith("table:"):
            return quantize_columns(self.spec.weights[key.removeprefix("table:")].T)
        parts = [quantize_columns(self.spec.weights[name]) for name in key.split("+")]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([w for w, _ in parts], axis=1), np.concatenate([s for _, s in parts])

    def _codes(self, key: str) -> Callable[[], np.ndarray]:
        return self._matrices.array(key, "codes", lambda quantized: quantized[0])

    def _scales(self, key: str) -> Callable[[], np.ndarray]:
        return self._matrices.array(key, "scales", lambda quantized: quantized[1])

    # -- what the transformer's layers call ------------------------------------------------------

    def matmul(self, b: GraphBuilder, x: str, name: str, bias: str) -> str:
        return self._matmul(b, x, name, name, bias)

    def fused_matmul(self, b: GraphBuilder, x: str, fused: str, names: list[str], bias: str) -> str:
        return self._matmul(b, x, fused, "+".join(names), bias)

    def output_projection(self, b: GraphBuilder, x: str, name: str, bias: str) -> str:
        return self._matmul(b, x, name, f"table:{name}", bias)

    def lookup(self, b: GraphBuilder, name: str, ids: str) -> str:
        """Rows of a table for ``ids``, dequantized with each token's scale: columns of the int8 table,
        or with ``row_lookups`` rows of its transposed copy."""
        key = f"table:{name}"
        if self.row_lookups:
            rows = self._matrices.array(key, "rows", lambda quantized: np.ascontiguousarray(quantized[0].T))
            values = b.op("Cast", [b.op("Gather", [b.derived(f"{name}.int8_rows", rows), ids])], to=FLOAT)
        else:
            columns = b.op("Gather", [b.derived(f"{name}.int8", self._codes(key)), ids], axis=1)  # [d, B, S]
            values = b.op("Cast", [b.transpose(columns, [1, 2, 0])], to=FLOAT)
        scales = b.derived(f"{name}.scale", self._scales(key))
        token_scale = b.op("Unsqueeze", [b.op("Gather", [scales, ids]), b.const(i64(-1))])
        return b.mul(values, token_scale)

    def _matmul(self, b: GraphBuilder, x: str, name: str, key: str, bias: str) -> str:
        codes = b.derived(f"{name}.int8", self._codes(key))
        scales = b.derived(f"{name}.scale", self._scales(key))
        return row_quantized_matmul(b, x, codes, scales, bias)


def row_quantized_matmul(b: GraphBuilder, x: str, codes: str, scales: str, bias: str = "") -> str:
    """``x`` ``[..., in]`` float times int8 ``codes`` ``[in, out]`` with ``scales`` ``[out]``, plus ``bias``.

    Each row of ``x`` is quantized with its own scale (its largest magnitude over 127), so a row's
    result depends on that row alone: exactly, since the products are summed in integers. ONNX
    Runtime's ``DynamicQuantizeMatMul`` (one node) quantizes the whole tensor with one scale instead,
    which couples every row of a batch, beams included, to the largest activation in it: 1 of 16 demo
    inputs changed tokens with its batch, and runtimes 1.17-1.24 and 1.32 then translated 3 of 48 rows
    of an NLLB file differently. The price is seven more nodes per matrix: 8-15% more time on the
    opus-mt shape and 3-13% on NLLB-600M's (benchmarks/int8_rows_report.md). ``MatMulIntegerToFloat`` takes
    only one activation scale, so the row's scale multiplies its results afterwards, and the bias
    is added after that.
    """
    largest = b.op("ReduceMax", [b.op("Abs", [x]), b.derived("int8_row_axis", i64(-1))], keepdims=1)
    largest = b.op("Max", [largest, b.derived("int8_smallest_row_range", np.array(SMALLEST_ROW_RANGE, np.float32))])
    step = b.derived("int8_activation_step", np.array(1 / ACTIVATION_CODE_MAX, np.float32))
    zero = b.derived("int8_activation_zero_point", np.array(ACTIVATION_ZERO_POINT, np.uint8))
    activations = b.op("QuantizeLinear", [b.op("Div", [x, largest]), step, zero])
    products = b.op("MatMulIntegerToFloat", [activations, codes, step, scales, zero], domain=MS_DOMAIN)
    scaled = b.mul(products, largest)
    return b.add(scaled, bias) if bias else scaled


# MatMulNBits' accuracy_level: 0 dequantizes the weights and multiplies in float32; 4 also
# quantizes the activations per block to int8 and multiplies in integers.
INT4_ACCURACY_LEVEL = 4

# Inputs per int4 scale. ONNX Runtime keeps each block's scale three times once loaded (the mapped
# original, its packed copy and a per-block sum for the int8 products), so at 32 the scales cost as
# much memory as the codes. 64 against 32, NLLB-600M: a fifth less memory after loading and 6-15%
# faster, for 10% more KL divergence from fp32 on the demo model (benchmarks/int4_blocks.py).
INT4_BLOCK = 64
# Rows of an int4 matrix quantized at a time (a 256k-token table would need GBs of temporaries whole).
INT4_ROWS_PER_CHUNK = 4096


@dataclass(frozen=True)
class Int4Matrix:
    """A matrix ``[out, in]`` in ``MatMulNBits``' layout: codes ``[out, blocks, block / 2]``
    uint8, scales ``[out * blocks]`` float32, and ``inputs`` (K before padding to whole blocks)."""

    codes: np.ndarray
    scales: np.ndarray
    inputs: int

    @property
    def outputs(self) -> int:
        return self.codes.shape[0]

    @property
    def blocks(self) -> int:
        return self.codes.shape[1]


def checked_int4_block(block: int) -> int:
    """``block`` checked as a block size ``MatMulNBits`` takes: a power of two from 16 (ONNX Runtime)."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 16 or block & (block - 1):
        raise GraphgenError(f"the int4 block size must be a power of two from 16 (16, 32, 64, 128, ...); got {block!r}")
    return block


def quantize_blocks(rows: np.ndarray, block: int = INT4_BLOCK) -> Int4Matrix:
    """``rows`` [out, in] → 4-bit codes with one scale per ``block`` inputs of a row.

    Symmetric: ``w ≈ (code - 8) · scale`` with codes 1..15 (scale = the block's largest magnitude
    / 7); a row whose length is not a whole number of blocks is padded with zeros (code 8).
    """
    out, inputs = rows.shape
    blocks = -(-inputs // block)
    codes = np.empty((out, blocks, block // 2), dtype=np.uint8)
    scales = np.empty((out, blocks), dtype=np.float32)
    for start in range(0, out, INT4_ROWS_PER_CHUNK):
        chunk = np.zeros((min(INT4_ROWS_PER_CHUNK, out - start), blocks * block), dtype=np.float32)
        source = rows[start : start + INT4_ROWS_PER_CHUNK]
        chunk[:, :inputs] = source
        release_pages(source)  # a table's pages go as it is read (NLLB's is 1 GB)
        chunk = chunk.reshape(len(chunk), blocks, block)
        peak = np.abs(chunk).max(axis=2)
        scale = np.where(peak > 0, peak / 7.0, 1.0).astype(np.float32)
        code = (np.clip(np.rint(chunk / scale[:, :, None]), -7, 7) + 8).astype(np.uint8)
        codes[start : start + len(chunk)] = code[:, :, 0::2] | (code[:, :, 1::2] << 4)
        scales[start : start + len(chunk)] = scale
    release_pages(rows)
    return Int4Matrix(codes, scales.reshape(-1), inputs)


class Int4Weights:
    """4-bit weights (``export --int4``): linear layers and the output projection as com.microsoft
    ``MatMulNBits``, embedding lookups unpacked from the same bytes with standard ops."""

    # The bias is an Add after the matmul (MatMulNBits' bias input is newer than ONNX Runtime 1.17),
    # which newer releases fold into the kernel (1.32 does, rounding differently from MatMul + Add).

    def __init__(self, spec: ModelSpec, block: int = INT4_BLOCK) -> None:
        self.spec = spec
        self.block = checked_int4_block(block)  # inputs per scale
        self._matrices = DeferredMatrices(self._quantized)

    def _quantized(self, key: str) -> Int4Matrix:
        """A linear weight ``[in, out]`` (stored ``[out, in]``), a fused one (``a+b+c``) or, for ``key``
        ``table:NAME``, a ``[vocab, d_model]`` table (the tokens are the output projection's outputs)."""
        if key.startswith("table:"):
            return quantize_blocks(self.spec.weights[key.removeprefix("table:")], self.block)
        parts = [quantize_blocks(self.spec.weights[name].T, self.block) for name in key.split("+")]
        if len(parts) == 1:
            return parts[0]
        return Int4Matrix(
            np.concatenate([p.codes for p in parts]), np.concatenate([p.scales for p in parts]), parts[0].inputs
        )

    def _shape(self, key: str) -> tuple[int, int]:
        """(inputs, outputs) of the matrix ``key``, without quantizing it."""
        if key.startswith("table:"):
            vocab, inputs = self.spec.weights[key.removeprefix("table:")].shape
            return int(inputs), int(vocab)
        shapes = [self.spec.weights[name].shape for name in key.split("+")]
        return int(shapes[0][0]), sum(int(shape[1]) for shape in shapes)

    def _codes(self, key: str) -> Callable[[], np.ndarray]:
        return self._matrices.array(key, "codes", lambda matrix: matrix.codes)

    def _scales(self, key: str) -> Callable[[], np.ndarray]:
        return self._matrices.array(key, "scales", lambda matrix: matrix.scales)

    def matmul(self, b: GraphBuilder, x: str, name: str, bias: str) -> str:
        return self._matmul(b, x, name, name, bias)

    def fused_matmul(self, b: GraphBuilder, x: str, fused: str, names: list[str], bias: str) -> str:
        return self._matmul(b, x, fused, "+".join(names), bias)

    def output_projection(self, b: GraphBuilder, x: str, name: str, bias: str) -> str:
        return self._matmul(b, x, name, f"table:{name}", bias)

    def lookup(self, b: GraphBuilder, name: str, ids: str) -> str:
        """Rows of a table for ``ids`` ``[B, S]`` → float ``[B, S, d_model]``: gather the tokens'
        code rows, split each byte into its two codes, scale each block."""
        key = f"table:{name}"
        inputs, _ = self._shape(key)
        blocks = -(-inputs // self.block)
        rows = b.op("Gather", [b.derived(f"{name}.int4", self._codes(key)), ids])  # [B, S, blocks, block / 2]
        byte = b.op("Cast", [rows], to=INT32)
        high = b.op("Div", [byte, b.const(np.int32(16))])
        low = b.op("Sub", [byte, b.mul(high, b.const(np.int32(16)))])
        pairs = b.op(
            "Concat", [b.op("Unsqueeze", [low, b.const(i64(-1))]), b.op("Unsqueeze", [high, b.const(i64(-1))])], axis=-1
        )
        blocks_shape = b.op("Concat", [b.op("Shape", [ids]), b.const(i64(blocks, self.block))], axis=0)
        codes = b.op("Reshape", [pairs, blocks_shape])  # [B, S, blocks, block]
        values = b.op("Sub", [b.op("Cast", [codes], to=FLOAT), b.const(np.float32(8.0))])
        first_scale = b.mul(b.op("Cast", [ids], to=INT64), b.const(np.int64(blocks)))
        scale_index = b.add(
            b.op("Unsqueeze", [first_scale, b.const(i64(-1))]), b.const(np.arange(blocks, dtype=np.int64))
        )
        scale = b.op("Gather", [b.derived(f"{name}.int4_scale", self._scales(key)), scale_index])  # [B, S, blocks]
        scaled = b.mul(values, b.op("Unsqueeze", [scale, b.const(i64(-1))]))
        width = b.op("Concat", [b.op("Shape", [ids]), b.const(i64(blocks * self.block))], axis=0)
        flat = b.op("Reshape", [scaled, width])
        if blocks * self.block == inputs:
            return flat
        return b.op("Slice", [flat, b.const(i64(0)), b.const(i64(inputs)), b.const(i64(-1))])

    def _matmul(self, b: GraphBuilder, x: str, name: str, key: str, bias: str) -> str:
        inputs, outputs = self._shape(key)
        codes = b.derived(f"{name}.int4", self._codes(key))
        scales = b.derived(f"{name}.int4_scale", self._scales(key))
        y = b.op(
            "MatMulNBits",
            [x, codes, scales],
            domain=MS_DOMAIN,
            K=inputs,
            N=outputs,
            bits=4,
            block_size=self.block,
            accuracy_level=INT4_ACCURACY_LEVEL,
        )
        return b.add(y, bias) if bias else y


class FloatWeights:
    """The checkpoint's own arrays (float32, or float16 for ``--fp16`` layers), read by standard ops."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def matmul(self, b: GraphBuilder, x: str, name: str, bias: str) -> str:
        y = b.matmul(x, b.weight(name))
        return b.add(y, bias) if bias else y

    def fused_matmul(self, b: GraphBuilder, x: str, fused: str, names: list[str], bias: str) -> str:
        parts = [self.spec.weights[n] for n in names]
        weight = b.derived(fused, np.concatenate(parts, axis=1))
        for part in parts:  # only the concatenation is written out: the checkpoint's pages can go
            release_pages(part)
        y = b.matmul(x, weight)
        return b.add(y, bias) if bias else y

    def output_projection(self, b: GraphBuilder, x: str, name: str, bias: str) -> str:
        return b.op("Gemm", [x, b.weight(name), bias], transB=1)

    def lookup(self, b: GraphBuilder, name: str, ids: str) -> str:
        return b.op("Gather", [b.weight(name), ids])


QuantizedWeights = Int8Weights | Int4Weights
WeightFormat = FloatWeights | Int8Weights | Int4Weights
FORMATS = ("int8", "int4")


def quantized_weights(
    spec: ModelSpec, precision: str, *, mapped: bool = False, int4_block: int = INT4_BLOCK
) -> QuantizedWeights | None:
    """The strategy for ``precision`` (``"int8"``, ``"int4"``), or None for float weights (``""``).
    ``mapped``: the file's weights are external data, which ONNX Runtime memory-maps; ``int4_block``:
    inputs per int4 scale."""
    if precision == "int8":
        return Int8Weights(spec, row_lookups=mapped)
    if precision == "int4":
        return Int4Weights(spec, int4_block)
    if precision:
        raise ValueError(f"unknown weight precision {precision!r}; choose one of {', '.join(FORMATS)}")
    return None
