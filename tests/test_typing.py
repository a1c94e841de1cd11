"""The package and the graph building blocks type-check (mypy, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from graphgen.testing import REPO


def test_mypy() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
