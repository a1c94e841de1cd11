"""Run an exported graph: the torch-free path (onnxruntime, onnxruntime-extensions, numpy only)."""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from ._errors import GraphgenError

INT_PARAMETERS = ("max_length", "min_length", "num_beams", "num_return_sequences")
FLOAT_PARAMETERS = ("length_penalty", "repetition_penalty")


def extensions_library() -> str:
    """Path of the onnxruntime-extensions custom-op library.

    Found without importing the package: ``import onnxruntime_extensions`` pulls in torch and
    transformers when they are installed (its converters), which the runtime path must not.
    """
    spec = importlib.util.find_spec("onnxruntime_extensions")
    if spec is None or not spec.submodule_search_locations:
        raise GraphgenError("onnxruntime-extensions is not installed (pip install onnxruntime-extensions)")
    for folder in spec.submodule_search_locations:
        libraries = sorted(Path(folder).glob("_extensions_pydll*"))
        libraries = [p for p in libraries if p.suffix in (".so", ".pyd", ".dylib")]
        if libraries:
            return str(libraries[0])
    raise GraphgenError("onnxruntime-extensions is installed but its custom-op library was not found")


def session_options(threads: int | None = None) -> ort.SessionOptions:
    """Options with the extensions library registered and ORT's load-time notices silenced."""
    options = ort.SessionOptions()
    options.register_custom_ops_library(extensions_library())
    # Optional graph inputs carry their defaults as initializers; ORT warns about each one.
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    return options


class Translator:
    """A loaded text-level graph. ``translate`` is safe to call from several threads at once."""

    def __init__(self, path: str | Path, *, threads: int | None = None, providers: Sequence[str] | None = None):
        path = Path(path)
        if not path.is_file():
            raise GraphgenError(f"{path} does not exist")
        try:
            self._session = ort.InferenceSession(
                str(path), session_options(threads), providers=list(providers or ["CPUExecutionProvider"])
            )
        except Exception as error:  # ORT raises several types for unreadable models
            raise GraphgenError(f"cannot load {path}: {error}") from error
        meta = self._session.get_modelmeta().custom_metadata_map
        if meta.get("graphgen.interface") != "text":
            raise GraphgenError(f"{path} is not a text-level graphgen model (export it without --no-tokenizer)")
        self.defaults: dict[str, Any] = json.loads(meta["graphgen.generation_defaults"])
        self.max_positions = int(meta.get("graphgen.max_positions", 0)) or None
        self.path = path

    def settings(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint defaults with ``overrides`` applied, validated."""
        unknown = set(overrides) - set(INT_PARAMETERS) - set(FLOAT_PARAMETERS)
        if unknown:
            raise TypeError(f"unknown generation setting(s): {', '.join(sorted(unknown))}")
        values = {name: self.defaults[name] for name in (*INT_PARAMETERS, *FLOAT_PARAMETERS)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        for name in INT_PARAMETERS:
            if isinstance(values[name], bool) or int(values[name]) != values[name]:
                raise ValueError(f"{name} must be an integer, got {values[name]!r}")
        for name in FLOAT_PARAMETERS:
            if not math.isfinite(float(values[name])):
                raise ValueError(f"{name} must be finite, got {values[name]!r}")
        if values["num_beams"] < 1:
            raise ValueError(f"num_beams must be at least 1, got {values['num_beams']}")
        if not 1 <= values["num_return_sequences"] <= values["num_beams"]:
            raise ValueError(
                f"num_return_sequences must be between 1 and num_beams ({values['num_beams']}), "
                f"got {values['num_return_sequences']}"
            )
        if values["max_length"] < 2:
            raise ValueError(f"max_length must be at least 2, got {values['max_length']}")
        if self.max_positions and values["max_length"] > self.max_positions:
            raise ValueError(f"max_length {values['max_length']} exceeds the model's {self.max_positions} positions")
        if not 0 <= values["min_length"] <= values["max_length"]:
            raise ValueError(f"min_length must be between 0 and max_length, got {values['min_length']}")
        if values["repetition_penalty"] <= 0:
            raise ValueError(f"repetition_penalty must be positive, got {values['repetition_penalty']}")
        return values

    def run(self, texts: Sequence[str], **overrides: Any) -> dict[str, np.ndarray]:
        """All outputs of the graph (``translation``, ``sequences``, ``sequence_scores``)."""
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise TypeError("texts must be a sequence of str")
        values = self.settings(overrides)
        feeds: dict[str, np.ndarray] = {"text": np.array(list(texts), dtype=object)}
        for name in INT_PARAMETERS:
            feeds[name] = np.array([values[name]], dtype=np.int32)
        for name in FLOAT_PARAMETERS:
            feeds[name] = np.array([values[name]], dtype=np.float32)
        if not texts:
            returns = values["num_return_sequences"]
            return {
                "translation": np.empty((0, returns), dtype=object),
                "sequences": np.empty((0, returns, 0), dtype=np.int32),
                "sequence_scores": np.empty((0, returns), dtype=np.float32),
            }
        names = [output.name for output in self._session.get_outputs()]
        return dict(zip(names, self._session.run(names, feeds), strict=True))

    def translate(self, texts: Sequence[str], **overrides: Any) -> list[str] | list[list[str]]:
        """One translation per text, or a list of ``num_return_sequences`` per text when > 1."""
        result = self.run(texts, **overrides)["translation"]
        if result.shape[1] == 1:
            return [str(row[0]) for row in result]
        return [[str(text) for text in row] for row in result]
