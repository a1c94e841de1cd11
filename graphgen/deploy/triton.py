"""A Triton Inference Server model repository for an exported file (onnxruntime backend).

Triton does not accept optional inputs on a model that batches, and graphgen's generation knobs
(``num_beams``, ``max_length``, ``truncate``, ...) are optional inputs. The repository therefore
gets a copy of the file with those inputs baked (``graphgen.passes.bake``). The ``config.pbtxt`` is
derived from the baked model's own inputs and outputs, so names, types and ranks cannot drift
from the graph. A text-level file with the portable tokenizer (the default) runs on the server's
own ONNX Runtime; one built with ``--tokenizer extensions`` needs the onnxruntime-extensions library
inside the server (``model_operations``), and the library that the Python wheel ships links against
Python and does not load there, so its path in the server is a parameter.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx import ModelProto, TensorProto, ValueInfoProto

from graphgen._errors import GraphgenError, OutputPathError
from graphgen.contract import FileInfo, Key
from graphgen.deploy.save import remove_stale_staging, save_model, staging_directory
from graphgen.passes.bake import load_baked, metadata

_TRITON_TYPES = {
    TensorProto.STRING: "TYPE_STRING",
    TensorProto.INT32: "TYPE_INT32",
    TensorProto.INT64: "TYPE_INT64",
    TensorProto.FLOAT: "TYPE_FP32",
    TensorProto.FLOAT16: "TYPE_FP16",
    TensorProto.BOOL: "TYPE_BOOL",
    TensorProto.UINT8: "TYPE_UINT8",
}


@dataclass(frozen=True)
class TritonOptions:
    name: str
    max_batch_size: int = 16
    max_queue_delay_microseconds: int = 5000
    instances: int = 1
    extensions_library: str = "libortextensions.so"  # its path inside the server


def _dims(value: ValueInfoProto) -> list[int]:
    """Triton's dims: the shape without the batch dimension, unknown sizes as -1."""
    shape = value.type.tensor_type.shape.dim[1:]
    return [dim.dim_value if dim.HasField("dim_value") else -1 for dim in shape]


def _tensor_entry(value: ValueInfoProto) -> str:
    elem = TensorProto.DataType.ValueType(value.type.tensor_type.elem_type)
    if elem not in _TRITON_TYPES:
        raise GraphgenError(f"{value.name}: element type {TensorProto.DataType.Name(elem)} has no Triton type")
    dims = _dims(value)
    lines = [f'    name: "{value.name}"', f"    data_type: {_TRITON_TYPES[elem]}"]
    if dims:
        lines.append(f"    dims: [ {', '.join(map(str, dims))} ]")
    else:  # a [batch] tensor: Triton wants one element per request, reshaped away
        lines += ["    dims: [ 1 ]", "    reshape: { shape: [ ] }"]
    return "  {\n" + "\n".join(lines) + "\n  }"


def model_config(model: ModelProto, options: TritonOptions, baked: dict[str, Any]) -> str:
    """``config.pbtxt`` text for ``model`` (already baked) in the protobuf text format."""
    meta = metadata(model)
    parts = [
        f"# Written by graphgen {meta.get(Key.VERSION, '')} from {meta.get(Key.SOURCE, '?')}.",
        f"# Generation settings baked into model.onnx: {json.dumps(baked, sort_keys=True)}",
        f'name: "{options.name}"',
        'backend: "onnxruntime"',
        f"max_batch_size: {options.max_batch_size}",
        "input [\n" + ",\n".join(_tensor_entry(value) for value in model.graph.input) + "\n]",
        "output [\n" + ",\n".join(_tensor_entry(value) for value in model.graph.output) + "\n]",
        f"dynamic_batching {{\n  max_queue_delay_microseconds: {options.max_queue_delay_microseconds}\n}}",
        f"instance_group [\n  {{\n    count: {options.instances}\n    kind: KIND_CPU\n  }}\n]",
        # As ``graphgen.runtime.translator.session_options``: without ORT's memory patterns a repeated
        # batch shape does not hold the search's working set twice (the backend reads this since 2022).
        'parameters { key: "enable_mem_pattern" value: { string_value: "0" } }',
    ]
    if FileInfo(meta).needs_extensions:
        parts.append(f'model_operations {{\n  op_library_filename: "{options.extensions_library}"\n}}')
    return "\n".join(parts) + "\n"


def write_repository(
    source: Path,
    repository: Path,
    options: TritonOptions,
    *,
    settings: dict[str, Any] | None = None,
    truncate: bool | None = None,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write ``repository/<name>/config.pbtxt`` and ``repository/<name>/1/model.onnx``.

    The model directory appears complete or not at all (staged, then renamed into place).
    """
    report = progress or (lambda message: None)
    if not source.is_file():
        raise GraphgenError(f"{source} does not exist")
    if options.max_batch_size < 1 or options.instances < 1 or options.max_queue_delay_microseconds < 0:
        raise GraphgenError("max batch size and instances must be at least 1, the queue delay at least 0")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", options.name):
        raise GraphgenError(f"model name {options.name!r}: use letters, digits, '_', '-' and '.' (not first)")
    if not repository.is_dir():
        raise OutputPathError(f"repository directory {repository} does not exist")
    target = repository / options.name
    if target.exists() and not overwrite:
        raise OutputPathError(f"{target} exists; pass --overwrite to replace it")
    report(f"reading {source}")
    model, baked, _ = load_baked(source, settings, truncate)  # one file: Triton's model.onnx
    remove_stale_staging(repository)
    with staging_directory(repository, options.name) as staging:
        built = staging / options.name
        (built / "1").mkdir(parents=True)
        report("writing the baked model")
        save_model(model, built / "1" / "model.onnx")
        (built / "config.pbtxt").write_text(model_config(model, options, baked), encoding="utf-8")
        if target.exists():
            os.rename(target, staging / "replaced")  # removed with the staging directory
        os.rename(built, target)
    return [target / "config.pbtxt", target / "1" / "model.onnx"]
