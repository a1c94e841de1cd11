"""SentencePiece model files, read as their protobuf message."""

from __future__ import annotations

import importlib
from typing import Any


def parse_model(model: bytes) -> Any:
    """The ``ModelProto`` message of a ``.spm`` / ``sentencepiece.bpe.model`` file's bytes.

    Typed ``Any``: sentencepiece ships its generated protobuf module without type stubs.
    """
    messages: Any = importlib.import_module("sentencepiece.sentencepiece_model_pb2")
    proto = messages.ModelProto()
    proto.ParseFromString(model)
    return proto
