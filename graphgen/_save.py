"""The last stage: write the model atomically, with external data when protobuf cannot hold it.

The file appears at its final path only once it is complete (write to a temporary file in the
same directory, then ``os.replace``), so an interrupted export never leaves a half-written model
that a later ``InferenceSession`` would choke on.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import ModelProto

from ._errors import OutputPathError

EXTERNAL_DATA_THRESHOLD = int(1.8 * 2**30)  # leave room for the graph itself


def check_output_path(path: Path) -> Path:
    """Fail before any slow work if the output cannot be written."""
    path = path.expanduser().resolve()
    if path.is_dir():
        raise OutputPathError(f"{path} is a directory; give a file name such as {path / 'model.onnx'}")
    parent = path.parent
    if not parent.is_dir():
        raise OutputPathError(f"directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise OutputPathError(f"directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"{path} exists and is not writable")
    return path


def all_initializers(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers of ``graph`` and of every subgraph nested in its nodes' attributes."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from all_initializers(attribute.g)


def _weights_bytes(model: ModelProto) -> int:
    return sum(len(tensor.raw_data) for tensor in all_initializers(model.graph))


def save_model(model: ModelProto, path: Path) -> list[Path]:
    """Write ``model`` to ``path`` (plus ``path.data`` for large models); returns the files written."""
    path = check_output_path(path)
    external = _weights_bytes(model) > EXTERNAL_DATA_THRESHOLD
    data_name = path.name + ".data"
    written: list[Path] = []
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.") as staging:
        staged = Path(staging) / path.name
        if external:
            onnx.save_model(
                model,
                staged,
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=data_name,
                size_threshold=1024,
            )
            os.replace(Path(staging) / data_name, path.parent / data_name)
            written.append(path.parent / data_name)
        else:
            staged.write_bytes(model.SerializeToString())
        os.replace(staged, path)
        written.insert(0, path)
    return written
