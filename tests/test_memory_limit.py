"""``benchmarks/memory_limit.py``'s search for the least memory limit, with a stand-in for the runs.

The script itself needs root and a memory cgroup; what can be checked anywhere is that the bisection
returns the least passing limit to its resolution, counts a slow run as a failure, and never
reports a limit it did not see pass.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def memory_limit():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("memory_limit")
    finally:
        sys.path.remove(str(BENCHMARKS))


class FakeGroup:
    def __init__(self) -> None:
        self.current: int | None = None

    def limit(self, megabytes: int) -> None:
        self.current = megabytes

    def unlimit(self) -> None:
        self.current = None


@pytest.mark.parametrize(("needs", "thrash_below"), [(700, 0), (700, 900), (2500, 2600)])
def test_bisection_finds_the_least_passing_limit(memory_limit, monkeypatch, needs: int, thrash_below: int) -> None:
    """A run is killed under ``needs`` MB and takes 3x as long under ``thrash_below``."""
    group = FakeGroup()
    seen: dict[int, bool] = {}

    def fake_run(group_, key, checkpoint, work, request, timeout):
        limit = group.current
        if limit is not None and limit < needs:
            seen[limit] = False
            return None
        seconds = 3.0 if limit is not None and limit < thrash_below else 1.0
        if seconds > timeout:
            seen[limit] = False
            return None
        if limit is not None:
            seen[limit] = True
        return {"seconds": seconds, "peak_mb": 3000.0}

    monkeypatch.setattr(memory_limit, "one_run", fake_run)
    free, least = memory_limit.least_memory(group, "key", Path(), Path(), {})
    assert free["peak_mb"] == 3000.0 and group.current is None
    threshold = max(needs, thrash_below)
    assert threshold <= least < threshold + memory_limit.STEP_MB
    assert seen[least], "reported a limit it did not see pass"
