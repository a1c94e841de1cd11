"""Bake a file's optional inputs (generation settings, ``truncate``) into constants.

The optional inputs are graph inputs with a same-named initializer holding the default. Some hosts
cannot feed them: Triton refuses optional inputs on a batching model, and the Java binding refuses
more inputs than those without a default. A baked copy turns each into a plain initializer holding
the chosen value, so such hosts get the settings they need by picking the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper
from onnx.external_data_helper import load_external_data_for_model

from graphgen._errors import GraphgenError
from graphgen._graphs import all_initializers
from graphgen.contract import (
    FLOAT_PARAMETERS,
    INT_PARAMETERS,
    LANGUAGE_PARAMETERS,
    LANGUAGE_UTF8_INPUTS,
    TEXT_LEVEL,
    TRUNCATE,
    FileInfo,
    Key,
    generation_settings,
)
from graphgen.deploy.save import check_output_path, save_model
from graphgen.deploy.shared_data import merge_shared_data


def metadata(model: ModelProto) -> dict[str, str]:
    return {prop.key: prop.value for prop in model.metadata_props}


@dataclass
class BakeOptionalInputs:
    """A model pass (``passes.ModelPass``): every optional input (an input with a same-named
    initializer) becomes a constant, except those named in ``required``, which become inputs
    without a default.

    ``values`` gives the constant for some of them; the others keep their default. ``baked`` holds
    what the last run fixed, name → value.
    """

    values: dict[str, Any]
    required: tuple[str, ...] = ()
    baked: dict[str, Any] = field(default_factory=dict)

    def __call__(self, model: ModelProto) -> None:
        self.baked = bake_optional_inputs(model, self.values, self.required)


def bake_optional_inputs(model: ModelProto, values: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """What :class:`BakeOptionalInputs` does; returns what was baked, name → value."""
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    for name in required:
        if name in initializers:
            model.graph.initializer.remove(initializers.pop(name))
    optional = [value for value in model.graph.input if value.name in initializers]
    unknown = set(values) - {value.name for value in optional}
    if unknown:
        raise GraphgenError(f"the model has no optional input(s) {', '.join(sorted(unknown))}")
    baked: dict[str, Any] = {}
    for value in optional:
        tensor = initializers[value.name]
        current = numpy_helper.to_array(tensor)
        if value.name in values:
            current = np.array([values[value.name]], dtype=current.dtype).reshape(current.shape)
            tensor.CopyFrom(numpy_helper.from_array(current, value.name))
        baked[value.name] = current.reshape(-1)[0].item()
        model.graph.input.remove(value)
    # Dimensions named after a baked input are now fixed (``translation`` is [batch, num_return_sequences]).
    for output in model.graph.output:
        for dim in output.type.tensor_type.shape.dim:
            if dim.dim_param in baked and isinstance(baked[dim.dim_param], int):
                dim.dim_value = baked[dim.dim_param]
    return baked


def load_baked(
    source: Path,
    settings: dict[str, Any] | None = None,
    truncate: bool | None = None,
    *,
    keep: Sequence[str] = (),
    keep_languages: bool = False,
) -> tuple[ModelProto, dict[str, Any], bool]:
    """``source`` read and baked with the file's defaults overridden by ``settings``; also what was
    baked, and whether ``source`` keeps its weights in a data file beside it.

    The optional inputs named in ``keep`` stay, now required (fed on every call): a host that cannot
    feed optional inputs (Java, JavaScript) still chooses those per call. ``keep_languages`` keeps
    ``source_language`` and ``target_language`` (their ``_utf8`` twins in a ``--no-strings`` file).
    """
    if not source.is_file():
        raise GraphgenError(f"{source} does not exist")
    try:
        model = onnx.load(str(source), load_external_data=False)
        external = any(t.data_location == TensorProto.EXTERNAL for t in all_initializers(model.graph))
        merge_shared_data(model)  # written again by save_model, which twins what it needs
        load_external_data_for_model(model, str(source.parent))
    except Exception as error:  # protobuf raises several types for files that are not models
        raise GraphgenError(f"cannot read {source} as an ONNX model: {error}") from error
    meta = metadata(model)
    if Key.GENERATION_DEFAULTS not in meta:
        raise GraphgenError(f"{source} was not written by graphgen export")
    info = FileInfo(meta)
    try:
        chosen = generation_settings(info.generation_defaults, info.max_positions, settings or {})
    except (TypeError, ValueError) as error:
        raise GraphgenError(str(error)) from error
    values: dict[str, Any] = {name: chosen[name] for name in (*INT_PARAMETERS, *FLOAT_PARAMETERS)}
    if truncate is not None:
        if info.interface != TEXT_LEVEL:
            raise GraphgenError("--truncate applies to text-level files only")
        values[TRUNCATE] = truncate
    if keep_languages and not info.languages:
        raise GraphgenError(f"{source} has no language inputs to keep (only NLLB, M2M100 and mBART-50 files do)")
    given = {*(settings or {}), *([TRUNCATE] if truncate is not None else [])}
    required = _kept_inputs(model, [*keep, *(LANGUAGE_PARAMETERS if keep_languages else ())], given, source)
    values = {name: value for name, value in values.items() if name not in required}
    bake = BakeOptionalInputs(values, required)
    bake(model)
    baked = bake.baked
    # The file's defaults are now its fixed settings; graphgen.baked lists the inputs gone, with their values.
    defaults = info.generation_defaults
    defaults.update({name: value for name, value in values.items() if name in defaults})  # as given, not float32
    onnx.helper.set_model_props(
        model,
        {
            **meta,
            Key.GENERATION_DEFAULTS: json.dumps(defaults, sort_keys=True),
            Key.BAKED: json.dumps(baked, sort_keys=True),
        },
    )
    return model, baked, external


def _kept_inputs(model: ModelProto, names: Sequence[str], given: set[str], source: Path) -> tuple[str, ...]:
    """The optional inputs of ``model`` that ``names`` keep (a language by either of its names)."""
    defaults = {tensor.name for tensor in model.graph.initializer}
    optional = [value.name for value in model.graph.input if value.name in defaults]
    kept: list[str] = []
    for name in dict.fromkeys(names):
        found = [input_ for input_ in (name, LANGUAGE_UTF8_INPUTS.get(name, "")) if input_ in optional]
        if not found:
            raise GraphgenError(f"{source} has no optional input {name} to keep (it has: {', '.join(optional)})")
        if name in given:
            raise GraphgenError(f"{name} is both kept (chosen per call) and given a value to fix")
        kept += found
    return tuple(kept)


def write_baked(
    source: Path,
    output: Path,
    settings: dict[str, Any] | None = None,
    truncate: bool | None = None,
    *,
    keep: Sequence[str] = (),
    keep_languages: bool = False,
) -> list[Path]:
    """Write a baked copy of ``source`` to ``output`` (atomically, checked before the work). A file
    with its weights beside it (``--external-data``) gives a copy with its weights beside it, which
    ONNX Runtime maps (and onnxruntime-web takes as ``externalData``); a single file, a single file."""
    output = check_output_path(output)
    if output == source.expanduser().resolve():
        raise GraphgenError("the output file is the input file")
    model, _, external = load_baked(source, settings, truncate, keep=keep, keep_languages=keep_languages)
    return save_model(model, output, external=external)
