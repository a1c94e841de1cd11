"""The codebase stays ruff-clean (lint and format), checked with the rest of the suite."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

PATHS = ["graphgen", "custom_ops", "tests", "models", "benchmarks", "examples"]


def test_ruff_lint() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", *PATHS], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:]


def test_ruff_format() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *PATHS], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-4000:]
