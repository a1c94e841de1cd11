"""float16 for ``graphgen export --fp16``: the weights of a spec, and a pass for the op search.

Meant for GPU execution providers, where float16 halves the weight traffic. graphgen's own
search builds its layers in float16 from ``float16_spec`` (``model.transformer.Transformer`` with
``float16=True``) and keeps the search itself in float32. For ORT's BeamSearch op,
``to_float16`` converts a finished float32 model instead: every float tensor of the encoder and
decoder subgraphs (weights, constants, inputs and outputs, casts) becomes float16; the export
converts the weights themselves as they are written (``half_weight``), so the pass finds them
float16 already.
``length_penalty``, ``repetition_penalty`` and the op's ``sequence_scores`` output stay float32:
the op's schema gives them one type parameter, and ORT's CUDA search keeps its scores in float32
for float16 subgraphs too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, numpy_helper

from graphgen._errors import GraphgenError
from graphgen.checkpoint.safetensors import release_pages
from graphgen.contract import FLOAT_PARAMETERS, Key
from graphgen.model.spec import ModelSpec

FLOAT, FLOAT16 = TensorProto.FLOAT, TensorProto.FLOAT16
KEEP_FLOAT32 = set(FLOAT_PARAMETERS)


class Float16Error(GraphgenError):
    """The model cannot be converted (int8 weights, or a value too large for float16)."""


def _graphs(graph: GraphProto, in_search: bool = False) -> Iterator[tuple[GraphProto, bool]]:
    """Every graph of the model, each with whether it is (inside) a BeamSearch subgraph."""
    yield graph, in_search
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                yield from _graphs(attribute.g, in_search or node.op_type == "BeamSearch")


_ROWS_ELEMENTS = 1 << 22  # elements converted at a time: the range check's temporaries stay small


def _half_array(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` as float16, refused when a finite value is beyond float16's range.

    Block by block along the first axis: over a whole table the check's temporaries (magnitudes,
    masks) were several times its size (NLLB-600M's 1 GB table: about 3 GB at the export's peak)."""
    if array.ndim == 0:
        return _half_array(array.reshape(1), name).reshape(())
    half = np.empty_like(array, dtype=np.float16)
    rows = max(1, _ROWS_ELEMENTS // max(1, array[0].size))
    for start in range(0, array.shape[0], rows):
        block = array[start : start + rows]
        magnitude = np.abs(block)
        # float32's extreme values serve as "masked" and become ±inf, which masks the same way.
        if np.any((magnitude > np.finfo(np.float16).max) & (magnitude < np.finfo(np.float32).max)):
            raise Float16Error(f"{name} holds values beyond float16's range")
        with np.errstate(over="ignore"):
            half[start : start + rows] = block
        release_pages(block)  # the checkpoint's pages go as they are read
    release_pages(array)  # those of a transposed view, whose blocks of rows are not one run
    return half


def _half(tensor: TensorProto) -> TensorProto:
    array = numpy_helper.to_array(tensor)
    return numpy_helper.from_array(_half_array(array, tensor.name or "a constant"), tensor.name)


class _HalfWeights(Mapping[str, np.ndarray]):
    """A spec's weights in float16, each converted as it is read.

    Converted all at once, the float16 weights were all in memory together until the last was
    written out (NLLB-600M: 1.2 GB beside the rest of the export); read as the model is saved, each
    lives only until it is in the file (``model.placement``)."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        self._weights = weights

    def __getitem__(self, name: str) -> np.ndarray:
        return _half_array(self._weights[name], name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)


def half_weight(array: np.ndarray, name: str) -> np.ndarray:
    """A float32 weight of the op search as float16 (what :func:`to_float16` makes of it), as it is
    written out, so that the op's float16 file streams its weights as the other files do; any other
    array unchanged."""
    return _half_array(array, name) if array.dtype == np.float32 else array


def float16_spec(spec: ModelSpec) -> ModelSpec:
    """``spec`` with float16 weights (HF's ``model.half()``), for layers built in float16.

    A weight beyond float16's range stops the export when it is read (``Float16Error``)."""
    return dataclasses.replace(spec, weights=_HalfWeights(spec.weights))


def convert_to_float16(model: ModelProto) -> None:
    """The export pass for the op search's float16 file: :func:`to_float16`, and the metadata says so."""
    to_float16(model)
    for prop in model.metadata_props:
        if prop.key == Key.PRECISION:
            prop.value = "float16"


def to_float16(model: ModelProto, *, whole: bool = False) -> ModelProto:
    """Convert ``model`` (as built by ``_assemble``) in place and return it.

    ``whole`` converts the main graph's own inputs and outputs too: for a subgraph saved as a
    model of its own (``_assemble.standalone_subgraph``), which is how the tests check numerics.
    """
    graphs = list(_graphs(model.graph, whole))
    # Outside the subgraphs only the weights they read change (the tokenizer has floats too).
    read_by_search = {name for graph, inside in graphs if inside for node in graph.node for name in node.input}
    for graph, in_search in graphs:
        for i, tensor in enumerate(graph.initializer):
            if tensor.data_type == TensorProto.INT8:
                raise Float16Error("--fp16 and --int8 cannot be combined")
            wanted = in_search or tensor.name in read_by_search
            if tensor.data_type == FLOAT and wanted and tensor.name not in KEEP_FLOAT32:
                graph.initializer[i].CopyFrom(_half(tensor))
        if not in_search:
            continue
        for info in [*graph.input, *graph.output, *graph.value_info]:
            if info.type.tensor_type.elem_type == FLOAT:
                info.type.tensor_type.elem_type = FLOAT16
        for node in graph.node:
            for attribute in node.attribute:
                if node.op_type == "Cast" and attribute.name == "to" and attribute.i == FLOAT:
                    attribute.i = FLOAT16
                elif attribute.type == AttributeProto.TENSOR and attribute.t.data_type == FLOAT:
                    attribute.t.CopyFrom(_half(attribute.t))
    return model
