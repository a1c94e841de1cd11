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
