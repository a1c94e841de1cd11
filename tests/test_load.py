"""Reading checkpoints: safetensors without torch, other formats through the HF model class, the same spec;
what each T5 variant's spec takes from its checkpoint."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoConfig, MarianMTModel

from graphgen import CheckpointError, export
from graphgen.checkpoint.load import _torch_weights, load_checkpoint
from graphgen.families import ADAPTERS, CheckpointData
from graphgen.model.spec import ModelSpec, RelativeAttention
from graphgen.testing import DEMO_DIR, FAMILIES, IdFiles, TextFiles, no_torch_python, random_marian


def torch_path_spec(directory: Path) -> ModelSpec:
    """The spec through HF's model class and ``state_dict`` (what every export did before)."""
    config = AutoConfig.from_pretrained(directory)
    adapter = ADAPTERS[type(config).__name__]
    tensors, generation_config = _torch_weights(directory, adapter, str(directory))
    return adapter.to_spec(CheckpointData(config, generation_config, tensors, str(directory)))


def assert_same_spec(actual: ModelSpec, expected: ModelSpec) -> None:
    assert sorted(actual.weights) == sorted(expected.weights)
    for name, array in expected.weights.items():
        assert actual.weights[name].dtype == np.float32, name
        np.testing.assert_array_equal(actual.weights[name], array, err_msg=name)
    assert actual.aliases == expected.aliases
    assert actual.generation == expected.generation
    assert (actual.renormalize_logits, actual.forced_eos) == (expected.renormalize_logits, expected.forced_eos)


@pytest.mark.parametrize("which", ["demo (tied tables)", "separate vocabularies", "random tiny"])
def test_safetensors_spec_equals_the_torch_model_spec(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if which.startswith("demo"):
        directory = DEMO_DIR
    elif which.startswith("separate"):
        directory = request.getfixturevalue("separate_vocab_dir")
    else:
        directory = random_marian(tmp_path / "tiny")
    assert (directory / "model.safetensors").is_file()
    assert_same_spec(load_checkpoint(directory).spec, torch_path_spec(directory))


def bin_checkpoint(directory: Path) -> Path:
    """The demo checkpoint with its weights in pytorch_model.bin instead of model.safetensors."""
    shutil.copytree(DEMO_DIR, directory, ignore=shutil.ignore_patterns("model.safetensors"))
    torch.save(MarianMTModel.from_pretrained(DEMO_DIR).state_dict(), directory / "pytorch_model.bin")
    return directory


def test_bfloat16_and_pytorch_bin_checkpoints(tmp_path: Path) -> None:
    model = MarianMTModel.from_pretrained(DEMO_DIR).eval()
    model.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    assert_same_spec(load_checkpoint(tmp_path / "bf16").spec, torch_path_spec(tmp_path / "bf16"))
    directory = bin_checkpoint(tmp_path / "bin")
    assert_same_spec(load_checkpoint(directory).spec, load_checkpoint(DEMO_DIR).spec)


def test_missing_weight_is_named(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    directory = random_marian(tmp_path / "tiny")
    tensors = load_file(directory / "model.safetensors")
    del tensors["model.decoder.layers.1.fc2.bias"]
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"lack model\.decoder\.layers\.1\.fc2\.bias"):
        load_checkpoint(directory)


def test_export_without_torch_gives_the_same_file(tmp_path: Path) -> None:
    """In a venv where torch is not installed, `graphgen export` of a safetensors checkpoint works and
    writes the same bytes as this venv does (for the text- and the id-level file)."""
    python = no_torch_python()
    for interface, flags in (("text", []), ("ids", ["--no-tokenizer"])):
        ours = tmp_path / f"{interface}-torch.onnx"
        theirs = tmp_path / f"{interface}-no-torch.onnx"
        export(str(DEMO_DIR), str(ours), tokenizer=interface == "text")
        done = subprocess.run(
            [python, "-m", "graphgen", "export", str(DEMO_DIR), "-o", str(theirs), "-q", *flags],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert theirs.read_bytes() == ours.read_bytes(), interface
        assert "PyTorch was not found" not in done.stderr  # transformers' advice, which misleads here
    probe = textwrap.dedent("""
        import importlib.util, sys
        print(importlib.util.find_spec("torch") is None)
    """)
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True"  # torch really is absent there


def test_bin_checkpoint_without_torch_is_a_clear_error(tmp_path: Path) -> None:
    bin_checkpoint(tmp_path / "bin")
    done = subprocess.run(
        [no_torch_python(), "-m", "graphgen", "export", str(tmp_path / "bin"), "-o", str(tmp_path / "m.onnx")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "has no model.safetensors, so reading its weights needs torch" in done.stderr


@pytest.mark.parametrize("family", [name for name, family in FAMILIES.items() if family.relative_positions])
def test_the_t5_variants_differ_where_they_should(family_ids: Callable[[str], IdFiles], family: str) -> None:
    variant = FAMILIES[family].architecture
    spec = load_checkpoint(family_ids(family).directory).spec
    assert spec.gated_feed_forward == (variant != "t5")
    assert (spec.output_scale != 1.0) == (variant == "t5")
    assert (spec.weight_name("lm_head.weight") == "lm_head.weight") == (variant != "t5")
    assert spec.head_dim(spec.encoder_heads) == 6 and spec.relative_attention == RelativeAttention(10, 14)


@pytest.mark.parametrize("family", [name for name, family in FAMILIES.items() if family.text_parity])
def test_family_export_without_torch_gives_the_same_file(
    family_text: Callable[[str], TextFiles], family: str, tmp_path: Path
) -> None:
    """The tokenizer files and safetensors weights of the other families need no torch either: the
    same bytes from a torch-free venv."""
    files = family_text(family)
    theirs = tmp_path / "no-torch.onnx"
    done = subprocess.run(
        [no_torch_python(), "-m", "graphgen", "export", str(files.directory), "-o", str(theirs), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert theirs.read_bytes() == files.onnx.read_bytes()
