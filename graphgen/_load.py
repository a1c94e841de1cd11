"""Stage 1 of the export: find the checkpoint, pick its adapter, and produce a ModelSpec."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ._errors import CheckpointError, UnsupportedModelError
from ._spec import ModelSpec
from .adapters import ADAPTERS, supported_architectures

log = logging.getLogger(__name__)

# Files MarianTokenizer reads; the text-level graph is built from the same files.
MARIAN_TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")


@dataclass
class LoadedCheckpoint:
    spec: ModelSpec
    directory: Path  # local directory holding config and tokenizer files (the hub cache for hub ids)


def _resolve(model: str) -> Path:
    """A local directory as given, or a hub id downloaded (needs network) to the local cache."""
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise CheckpointError(f"{model} is a file; expected a checkpoint directory with a config.json")
        if not (path / "config.json").is_file():
            raise CheckpointError(f"{model} is not a checkpoint: it has no config.json")
        return path
    if model.count("/") > 1 or model.startswith((".", "/", "~")):
        raise CheckpointError(f"{model} does not exist")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model))
    except Exception as error:  # the hub client raises many types; all mean "could not get it"
        raise CheckpointError(
            f"{model} is neither a local directory nor a hub id that could be downloaded ({error})"
        ) from error


def load_checkpoint(model: str | Path) -> LoadedCheckpoint:
    import transformers

    directory = _resolve(str(model))
    try:
        config = transformers.AutoConfig.from_pretrained(directory)
    except (OSError, ValueError, KeyError) as error:
        raise CheckpointError(f"cannot read the config of {model}: {error}") from error
    adapter = ADAPTERS.get(type(config).__name__)
    if adapter is None:
        raise UnsupportedModelError(
            f"{model} is a {type(config).__name__} checkpoint; graphgen supports: "
            + ", ".join(supported_architectures())
        )
    model_class = getattr(transformers, adapter.model_class)
    try:
        hf_model = model_class.from_pretrained(directory).eval()
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"cannot load the weights of {model}: {error}") from error
    log.info("loaded %s from %s", adapter.model_class, directory)
    spec = adapter.to_spec(hf_model, str(model))
    spec.validate()
    return LoadedCheckpoint(spec=spec, directory=directory)


def check_tokenizer_files(directory: Path) -> None:
    missing = [name for name in MARIAN_TOKENIZER_FILES if not (directory / name).is_file()]
    if missing:
        raise CheckpointError(
            f"{directory} lacks tokenizer files {', '.join(missing)}; pass --no-tokenizer for an id-level graph"
        )
