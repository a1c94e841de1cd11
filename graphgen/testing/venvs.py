"""Virtual environments beside the project's own, for checks that need a different set of packages
installed (no torch; a Triton client), kept in the checkout so they are built once, not per run."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

from graphgen.testing.demo import REPO

NO_TORCH_VENV = REPO / ".venv-notorch"


def cached_venv(folder: Path, *requirements: str) -> Path:
    """The interpreter of a venv holding ``requirements``, built on first use and kept.

    A marker file says the venv is whole, so an interrupted build is redone, not reused.
    """
    python = folder / "bin" / "python"
    marker = folder / ".complete"
    if not marker.is_file():
        venv.create(folder, with_pip=True, clear=True)
        command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements]
        subprocess.run(command, check=True)
        marker.touch()
    return python


def no_torch_python() -> Path:
    """A venv with graphgen[export-safetensors] and no torch: a safetensors checkpoint must export
    there to the same bytes as in the full environment."""
    return cached_venv(NO_TORCH_VENV, "-e", f"{REPO}[export-safetensors]")
