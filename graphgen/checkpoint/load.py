"""Stage 1 of the export: find the checkpoint, pick its adapter, and produce a ModelSpec."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphgen._errors import CheckpointError, UnsupportedModelError
from graphgen.checkpoint.safetensors import read_safetensors, safetensors_files
from graphgen.families import ADAPTERS, Adapter, CheckpointData, supported_architectures
from graphgen.model.spec import ModelSpec

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


class _WithoutTorchAdvice(logging.Filter):
    """Drops transformers' import-time advice that PyTorch was not found and "Models won't be
    available": a safetensors checkpoint exports without torch (``graphgen[export-safetensors]``),
    so the advice would only mislead, and a checkpoint that does need torch says so itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyTorch was not found")


def _import_transformers() -> Any:
    """``transformers``, imported without the advice above (its other messages pass)."""
    library_logger = logging.getLogger("transformers")
    advice = _WithoutTorchAdvice()
    library_logger.addFilter(advice)
    try:
        import transformers
    finally:
        library_logger.removeFilter(advice)
    return transformers


def _generation_config(directory: Path, config: Any) -> Any:
    """The generation config HF's ``from_pretrained`` would give the model."""
    from transformers import GenerationConfig

    if (directory / "generation_config.json").is_file():
        try:
            return GenerationConfig.from_pretrained(directory)
        except (OSError, ValueError) as error:
            raise CheckpointError(f"cannot read {directory / 'generation_config.json'}: {error}") from error
    return GenerationConfig.from_model_config(config)


def _torch_weights(directory: Path, adapter: Adapter, model: str) -> tuple[dict[str, np.ndarray], Any]:
    """Weights of a checkpoint that is not in safetensors form, through the HF model class (needs torch)."""
    try:
        import torch  # noqa: F401  (imported for the clear error below)
    except ImportError as error:
        raise CheckpointError(
            f"{model} has no model.safetensors, so reading its weights needs torch: "
            'pip install "graphgen[export]" (or convert the checkpoint to safetensors)'
        ) from error
    import transformers

    model_class = getattr(transformers, adapter.model_class)
    try:
        hf_model = model_class.from_pretrained(directory).eval()
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"cannot load the weights of {model}: {error}") from error
    tensors = {name: value.detach().cpu().float().numpy() for name, value in hf_model.state_dict().items()}
    return tensors, hf_model.generation_config


def load_checkpoint(model: str | Path) -> LoadedCheckpoint:
    """Read a checkpoint into a ModelSpec.

    A safetensors checkpoint is read without torch (weights straight from the file, configs with
    transformers' torch-free config classes); other checkpoints go through the HF model class.
    """
    transformers = _import_transformers()
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
    files = safetensors_files(directory)
    if files:
        tensors, generation_config = read_safetensors(files), _generation_config(directory, config)
        log.info("read %s from %s without torch", ", ".join(f.name for f in files), directory)
    else:
        tensors, generation_config = _torch_weights(directory, adapter, str(model))
        log.info("loaded %s from %s", adapter.model_class, directory)
    spec = adapter.to_spec(CheckpointData(config, generation_config, tensors, str(model)))
    spec.validate()
    return LoadedCheckpoint(spec=spec, directory=directory)


def check_tokenizer_files(directory: Path) -> None:
    missing = [name for name in MARIAN_TOKENIZER_FILES if not (directory / name).is_file()]
    if missing:
        raise CheckpointError(
            f"{directory} lacks tokenizer files {', '.join(missing)}; pass --no-tokenizer for an id-level graph"
        )
