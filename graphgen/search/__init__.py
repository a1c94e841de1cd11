"""Stage 4, generation: the search around the decoder step, and the registry of searches.

A search is one module here with a ``build_core(spec, quantization, too_long_remedy, float16, mapped)``
returning a :class:`~graphgen.search.io.SearchCore` (ids in, ``sequences`` and ``sequence_scores``
out, weights placed), plus one entry in :data:`SEARCHES` saying what it can do. Export, the CLI and
the file's metadata read the registry; nothing else names a search. This module imports nothing
heavy, so the CLI can offer the names without loading onnx.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphgen._errors import GraphgenError, UnsupportedModelError

if TYPE_CHECKING:
    from graphgen.model.spec import ModelSpec
    from graphgen.search.io import SearchCore


@dataclass(frozen=True)
class Search:
    """One way of running the search inside the file, and what it supports."""

    name: str
    module: str  # holds build_core; imported only when a file is built
    weight_formats: tuple[str, ...]  # "" (float), "int8", "int4"
    forced_first_token: bool  # a forced first token (forced_bos_token_id, a target language)
    float16_layers: bool  # builds float16 layers itself; otherwise export converts the finished graph's types

    @property
    def build_core(self) -> Callable[[ModelSpec, str, str, bool, bool, int], SearchCore]:
        builder: Callable[[ModelSpec, str, str, bool, bool, int], SearchCore] = importlib.import_module(
            self.module
        ).build_core
        return builder

    def check(self, spec: ModelSpec, quantization: str) -> None:
        """Refuse, with the way out, what this search cannot build."""
        if quantization not in self.weight_formats:
            raise GraphgenError(
                f"{quantization} weights run in graphgen's own search: export with search='{DEFAULT}' (the default)"
            )
        if spec.generation.forced_bos_token_id is not None and not self.forced_first_token:
            raise UnsupportedModelError(
                "the checkpoint's generation config forces a first token (forced_bos_token_id), "
                f"which only graphgen's own search does: export with search='{DEFAULT}' (the default)"
            )


SEARCHES = {
    search.name: search
    for search in (
        # graphgen's beam search in standard ONNX ops: HF generate's algorithm, a whole batch at once.
        Search("loop", "graphgen.search.loop", ("", "int8", "int4"), forced_first_token=True, float16_layers=True),
        # ONNX Runtime's com.microsoft.BeamSearch op (exact for batches only one input at a time).
        Search("op", "graphgen.search.op", ("", "int8"), forced_first_token=False, float16_layers=False),
    )
}
DEFAULT = "loop"
AUTO = "auto"  # what export and the CLI accept for "the default"
CHOICES = (AUTO, *SEARCHES)


def choose_search(name: str) -> Search:
    """The search called ``name`` (``auto``: the default); an unknown name is an error."""
    if name not in CHOICES:
        raise GraphgenError(f"unknown search {name!r}; choose one of {', '.join(CHOICES)}")
    return SEARCHES[DEFAULT if name == AUTO else name]
