"""The codebase stays ruff-clean (lint and format), checked with the rest of the suite."""

from __future__ import annotations

import re
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


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_documentation_links_resolve() -> None:
    """Every relative link of the README, docs/ and the benchmark reports names a file that exists
    and, for a Markdown file, a heading it has."""
    broken = []
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "benchmarks").glob("*.md")]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and destination.suffix == ".md":
                headings = re.findall(r"(?m)^#+ (.+)$", destination.read_text(encoding="utf-8"))
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
