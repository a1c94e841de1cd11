"""Errors graphgen raises on purpose, so callers and the CLI can tell them from bugs."""

from __future__ import annotations


class GraphgenError(Exception):
    """Base class: a problem with the user's input, not a bug in graphgen."""


class CheckpointError(GraphgenError):
    """The model path or hub id does not lead to a usable checkpoint."""


class UnsupportedModelError(GraphgenError):
    """The checkpoint's architecture has no graphgen adapter."""


class OutputPathError(GraphgenError):
    """The output file cannot be written where the user asked."""


class SourceTooLongError(GraphgenError, ValueError):
    """A source text has more tokens than the model has positions (and truncation was not asked for)."""

    def __init__(self, message: str, limit: int | None, indices: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.limit = limit
        self.indices = indices  # positions in the batch, where known


class TextInputError(GraphgenError, ValueError):
    """A text holds a U+0000 that the file's text input cannot carry; nothing was translated."""

    def __init__(self, message: str, indices: tuple[int, ...]) -> None:
        super().__init__(message)
        self.indices = indices  # positions in the batch


# How an exported graph's source-length check starts its message (the failing node's name, which
# every ONNX Runtime binding prints); the runtime recognises the error by it.
SOURCE_TOO_LONG_PREFIX = "graphgen: source longer than the model's limit of"
