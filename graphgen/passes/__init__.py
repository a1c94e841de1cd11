"""Stage 6, rewrites of a built model, each a :data:`ModelPass` (a finished ``ModelProto`` rewritten
in place): compatibility with older ONNX Runtime releases (``compat.py``), float16 conversion of the
BeamSearch op's subgraphs (``fp16.py``), settings baked in as constants (``bake.py``:
``BakeOptionalInputs``, run by ``graphgen bake`` and ``graphgen triton`` on an exported file).

Export runs :func:`export_passes`' list in order, after assembly and before saving.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnx import ModelProto

ModelPass = Callable[["ModelProto"], None]


@dataclass(frozen=True)
class Pass:
    """A model pass, with what export's progress says while it runs."""

    description: str
    run: ModelPass


def export_passes(*, float16_conversion: bool) -> list[Pass]:
    """What export runs on every built model; ``float16_conversion``: the op search's float16 file
    (graphgen's own search builds float16 layers itself)."""
    from graphgen.passes.compat import apply_compatibility_passes
    from graphgen.passes.fp16 import convert_to_float16

    passes = [Pass("making the graph load on ONNX Runtime 1.17 and later", apply_compatibility_passes)]
    if float16_conversion:
        passes.append(Pass("converting the BeamSearch op's subgraphs to float16", convert_to_float16))
    return passes
