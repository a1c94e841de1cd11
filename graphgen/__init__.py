"""graphgen: a HuggingFace translation model as one ONNX file, search loop included."""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from graphgen._errors import (
    CheckpointError,
    GraphgenError,
    OutputPathError,
    SourceTooLongError,
    TextInputError,
    UnsupportedModelError,
)
from graphgen.runtime.translator import Translator

if TYPE_CHECKING:
    from graphgen._export import ExportResult


def export(model: str, output: str, *, tokenizer: bool | str = True, **kwargs: Any) -> ExportResult:
    """Export a checkpoint to one ONNX file (needs ``graphgen[export]``); see ``graphgen export --help``."""
    from graphgen._export import export as run_export  # imports torch/transformers only when exporting

    return run_export(model, output, tokenizer=tokenizer, **kwargs)


__all__ = [
    "CheckpointError",
    "GraphgenError",
    "OutputPathError",
    "SourceTooLongError",
    "TextInputError",
    "Translator",
    "UnsupportedModelError",
    "__version__",
    "export",
]
