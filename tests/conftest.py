"""Shared fixtures: the demo model and its exported file, a separate-vocabulary twin, and the family files.

Only fixtures live here; what tests import (checkpoint factories, the demo test set, session helpers)
is in ``graphgen.testing``, which the benchmarks use too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from graphgen.testing import (
    DEMO_DIR,
    FAMILIES,
    Family,
    IdFiles,
    TextFiles,
    family_checkpoint,
    separate_vocab_checkpoint,
)

T = TypeVar("T")


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return DEMO_DIR


@pytest.fixture(scope="session")
def demo_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model exported text-level with the defaults; shared, so tests must not change it."""
    from graphgen import export

    path = tmp_path_factory.mktemp("demo") / "demo.onnx"
    export(str(DEMO_DIR), str(path))
    return path


@pytest.fixture(scope="session")
def separate_vocab_dir(tmp_path_factory: pytest.TempPathFactory, demo_dir: Path) -> Path:
    """The demo model re-laid as a separate-vocabulary checkpoint (``separate_vocab_checkpoint``)."""
    return separate_vocab_checkpoint(demo_dir, tmp_path_factory.mktemp("separate_vocab"))


@pytest.fixture(scope="session")
def text_file_kinds(tmp_path_factory: pytest.TempPathFactory, demo_dir: Path) -> dict[str, Path]:
    """Every text-file kind, by name: both tokenizers, float32 and float16, the five families (one
    checkpoint per tokenizer kind), and the demo's int8 file; for the checks of what a file's nodes
    are (GPU placement, onnxruntime-web's WebGPU kernels). Tests must not change them."""
    from graphgen import export

    folder = tmp_path_factory.mktemp("text_file_kinds")
    quiet = {"progress": lambda _: None}
    files = {}
    sources = {"marian": demo_dir}
    for family in ("nllb", "m2m100", "mbart50", "t5"):  # one per tokenizer kind
        family_checkpoint(folder / family, family)
        sources[family] = folder / family
    for family, source in sources.items():
        for kind in ("onnx", "extensions"):
            path = folder / f"{family}-{kind}.onnx"
            export(source, path, tokenizer=kind, **quiet)
            files[path.stem] = path
        path = folder / f"{family}-onnx-fp16.onnx"
        export(source, path, fp16=True, **quiet)
        files[path.stem] = path
    path = folder / "marian-onnx-int8.onnx"
    export(demo_dir, path, int8=True, **quiet)
    files[path.stem] = path
    return files


def _built_on_first_use(
    build: Callable[[Family, Path], T], tmp: pytest.TempPathFactory, kind: str
) -> Callable[[str], T]:
    built: dict[str, T] = {}

    def get(name: str) -> T:
        if name not in built:
            built[name] = build(FAMILIES[name], tmp.mktemp(f"{name}-{kind}") / "checkpoint")
        return built[name]

    return get


@pytest.fixture(scope="session")
def family_ids(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], IdFiles]:
    """A family's id-level file and HF model by ``FAMILIES`` name, built on first use: the tests of
    several modules share them, and a parametrized test builds only the families it asks for."""
    return _built_on_first_use(IdFiles.build, tmp_path_factory, "ids")


@pytest.fixture(scope="session")
def family_text(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], TextFiles]:
    """A family's text-level file, checkpoint and HF model by ``FAMILIES`` name, built on first use
    (shared as ``family_ids``). Tests must not change them."""
    return _built_on_first_use(TextFiles.build, tmp_path_factory, "text")
