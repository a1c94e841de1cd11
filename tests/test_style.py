"""The codebase stays ruff-clean (lint and format), checked with the rest of the suite."""

from __future__ import annotations

import re
import subprocess
import sys

from graphgen.testing import REPO

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


def test_every_package_folder_is_installed() -> None:
    """pyproject.toml lists the packages one by one (custom_ops/ installs as graphgen.custom_ops):
    a new folder left out of the list would be missing from the wheel while tests, which run on the
    source tree, still pass."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "graphgen").rglob("__init__.py")} | {
        "graphgen.custom_ops"
    }
    assert listed == folders


def test_custom_ops_is_imported_under_graphgen() -> None:
    """Nothing imports a top-level ``custom_ops``: installed, only ``graphgen`` is in site-packages (a
    stale import would still pass here, where the repository root is on the path)."""
    pattern = re.compile(r"^\s*(from|import) custom_ops\b", re.M)
    offenders = [
        str(path.relative_to(REPO))
        for folder in PATHS
        for path in (REPO / folder).rglob("*.py")
        if "node_modules" not in path.parts and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert not offenders
