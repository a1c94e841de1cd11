"""One small adapter per architecture, registered by the name of its HF config class.

An adapter knows which HF model class loads the checkpoint and how to turn that model into a
:class:`graphgen._spec.ModelSpec`. Supporting a new architecture means adding one module here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._spec import ModelSpec


@dataclass(frozen=True)
class Adapter:
    config_class: str
    model_class: str  # name in the transformers namespace, imported lazily
    to_spec: Callable[[Any, str], ModelSpec]


ADAPTERS: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    ADAPTERS[adapter.config_class] = adapter
    return adapter


def supported_architectures() -> list[str]:
    return sorted(f"{a.model_class} ({a.config_class})" for a in ADAPTERS.values())


from . import marian  # noqa: E402,F401  (registers itself)
