"""graphgen: a HuggingFace translation model as one ONNX file, search loop included."""

from __future__ import annotations

__version__ = "0.1.0"

from ._errors import CheckpointError, GraphgenError, OutputPathError, UnsupportedModelError

__all__ = ["CheckpointError", "GraphgenError", "OutputPathError", "UnsupportedModelError", "__version__"]
