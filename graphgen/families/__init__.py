"""One small adapter per architecture, registered by the name of its HF config class.

An adapter turns a checkpoint's config and weights (HF's parameter names → numpy arrays) into a
:class:`graphgen.model.spec.ModelSpec`; it also names the HF model class, which loads checkpoints that
are not in safetensors form (``pytorch_model.bin``, with torch). Supporting a new architecture
means adding one module here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphgen.model.spec import ModelSpec


@dataclass(frozen=True)
class CheckpointData:
    """What an adapter reads: HF's config objects and every weight by its HF name, as numpy arrays."""

    config: Any  # a transformers PretrainedConfig
    generation_config: Any  # a transformers GenerationConfig
    tensors: dict[str, np.ndarray]  # as saved: tied tables may be missing
    source: str  # what the user named (directory or hub id)


@dataclass(frozen=True)
class Adapter:
    config_class: str
    model_class: str  # name in the transformers namespace, imported lazily
    to_spec: Callable[[CheckpointData], ModelSpec]


ADAPTERS: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    ADAPTERS[adapter.config_class] = adapter
    return adapter


def supported_architectures() -> list[str]:
    return sorted(f"{a.model_class} ({a.config_class})" for a in ADAPTERS.values())


from graphgen.families import m2m100, marian, mbart, t5  # noqa: E402,F401  (each registers itself)
