"""Translate a dataset on a Ray cluster: Ray Data's ``map_batches`` with one ONNX Runtime session per actor.

Needs ``pip install graphgen[ray]``. The same code runs on a laptop (``ray.init(num_cpus=2)``) and
on a cluster (``ray.init(address="auto")``, inputs and outputs on storage every node reads, such
as ``s3://``): the model file is read once by the driver and shipped to the actors through Ray's
object store, so workers need no copy of it. Rows that cannot be translated (a source longer
than the model's limit, say) keep their place with a null translation and the reason in
``error_column``, as ``graphgen translate --on-error skip`` does; none is dropped. A translation
that used every position up to ``max_length`` (HF's ``generate`` stops there too, so it may be cut
short) is flagged True in ``max_length_column``, where ``graphgen translate`` warns on stderr.

    import ray
    from graphgen.ray import translate

    ray.init()
    rows = ray.data.read_text("corpus.txt", drop_empty_lines=False)
    translate(rows, "model.onnx", concurrency=4).write_json("translated/")

(``read_text`` splits rows as ``str.splitlines`` does; ``translate_text_file`` reads a file's lines
as ``graphgen translate -i`` does.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import ray
import ray.data

from graphgen._errors import GraphgenError
from graphgen.runtime.bulk import Item, text_lines, translate_items
from graphgen.runtime.translator import Translator, generation_settings, resolve_providers

__all__ = ["TranslateBatch", "translate", "translate_text_file"]


class TranslateBatch:
    """The per-actor callable: loads the model once, then translates one batch per call."""

    def __init__(
        self,
        model: list[Any],
        *,
        column: str,
        output_column: str,
        error_column: str,
        max_length_column: str | None,
        threads: int | None,
        truncate: bool | None,
        settings: dict[str, Any],
        providers: Sequence[str] = ("cpu",),
    ) -> None:
        (source,) = model  # an object-store reference (wrapped, so Ray hands it over unresolved) or a path
        self.translator = Translator(
            ray.get(source) if isinstance(source, ray.ObjectRef) else source,
            threads=threads,
            providers=resolve_providers(providers),
        )
        self.column, self.output_column, self.error_column = column, output_column, error_column
        self.max_length_column = max_length_column
        self.truncate, self.settings = truncate, settings

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = batch[self.column]
        items = [Item(line=index, text=None, record=None) for index in range(len(texts))]
        for item, text in zip(items, texts, strict=True):
            if isinstance(text, str):
                item.text = text
            else:
                item.error = f"column {self.column!r} holds {type(text).__name__}, not a string"
        todo = [item for item in items if item.error is None]
        if todo:
            translate_items(self.translator, todo, self.truncate, self.settings)
        translations = np.empty(len(items), dtype=object)
        translations[:] = [item.translation for item in items]
        batch[self.output_column] = translations
        batch[self.error_column] = np.array([item.error for item in items], dtype=object)
        if self.max_length_column is not None:
            batch[self.max_length_column] = np.array([item.used_max_length for item in items], dtype=bool)
        return batch


def translate(
    dataset: ray.data.Dataset,
    model: str | Path,
    *,
    column: str = "text",
    output_column: str = "translation",
    error_column: str = "error",
    max_length_column: str | None = "used_max_length",
    batch_size: int = 16,
    concurrency: int = 2,
    threads_per_actor: int = 1,
    cpus_per_actor: float | None = None,
    truncate: bool | None = None,
    ship_model: bool = True,
    providers: Sequence[str] = ("cpu",),
    gpus_per_actor: float = 0.0,
    **settings: Any,
) -> ray.data.Dataset:
    """``dataset`` with ``output_column``, ``error_column`` and ``max_length_column`` (a bool: the
    translation used every position up to ``max_length``, so may be cut short; ``None`` leaves it
    out) added; rows keep their order.

    ``concurrency`` actors each hold one session using ``threads_per_actor`` cores; Ray reserves
    ``cpus_per_actor`` CPUs for each (default: ``threads_per_actor``). The actors must leave at
    least one CPU of the cluster free: Ray Data's read tasks need one, and with none left the
    pipeline waits forever, so that case is refused. ``ship_model=False`` makes each actor open
    ``model`` itself, for files with external data (> 2 GB) that every node can read at one path.
    ``providers`` (as ``graphgen translate --providers``: ``("cuda",)`` for a GPU) are those of each
    actor's session, checked by name here and started in the actor; Ray reserves ``gpus_per_actor``
    GPUs for each (a fraction shares one GPU between actors).
    """
    path = Path(model)
    if not path.is_file():
        raise GraphgenError(f"{path} does not exist")
    added = [output_column, error_column] + ([max_length_column] if max_length_column is not None else [])
    if len(set(added)) < len(added) or column in added:
        raise GraphgenError(f"column={column!r} and the added columns {added} must all differ")
    if batch_size < 1 or concurrency < 1 or threads_per_actor < 1:
        raise GraphgenError("batch_size, concurrency and threads_per_actor must be at least 1")
    cpus = float(threads_per_actor if cpus_per_actor is None else cpus_per_actor)
    available = ray.cluster_resources().get("CPU", 0.0)
    if concurrency * cpus > available - 1:
        raise GraphgenError(
            f"{concurrency} actors × {cpus:g} CPUs leave less than one of the cluster's {available:g} CPUs for "
            "reading the data (the run would wait forever); lower concurrency or cpus_per_actor"
        )
    if ship_model and path.with_name(path.name + ".data").exists():
        raise GraphgenError(f"{path} keeps its weights in {path.name}.data; pass ship_model=False and a shared path")
    resolve_providers(providers, here=False)  # a misspelt name fails here; a missing GPU, in the actor
    probe = Translator(path, threads=1)  # fail here, not in an actor, on a bad file or bad settings
    try:
        generation_settings(probe.defaults, probe.max_positions, settings)
    except (TypeError, ValueError) as error:
        raise GraphgenError(str(error)) from error
    del probe
    source: Any = ray.put(path.read_bytes()) if ship_model else str(path.resolve())
    translated = dataset.map_batches(
        TranslateBatch,
        fn_constructor_kwargs={
            "model": [source],
            "column": column,
            "output_column": output_column,
            "error_column": error_column,
            "max_length_column": max_length_column,
            "threads": threads_per_actor,
            "truncate": truncate,
            "settings": dict(settings),
            "providers": list(providers),
        },
        batch_size=batch_size,
        batch_format="numpy",
        concurrency=concurrency,
        num_cpus=cpus,
        num_gpus=gpus_per_actor,
    )
    # Output row i is input row i. Execution reads the option from the dataset's own copy of the
    # context, taken when the dataset was made, not from the current one.
    translated.context.execution_options.preserve_order = True
    return translated


def translate_text_file(source: str, destination: str, model: str | Path, **options: Any) -> None:
    """Translate a text file (one sentence per line, blank lines kept) into JSON Lines files under ``destination``.

    Each output row is ``{"text": ..., "translation": ..., "error": ..., "used_max_length": ...}``, in
    input order across the files Ray writes (named by block, in order). The lines are those
    ``graphgen translate -i`` reads (``runtime.bulk.text_lines``): one row per newline-ended line,
    where ``ray.data.read_text`` would also start a row at a form feed, U+0085 or U+2028 and keep a
    byte order mark in the first.
    """
    files = ray.data.read_binary_files(source, include_paths=True)
    rows = files.flat_map(lambda file: [{"text": line} for line in text_lines(file["bytes"], file["path"])])
    translate(rows, model, **options).write_json(destination)
