"""One benchmark system in a process of its own, driven by ``speed.py`` over stdin/stdout.

    python benchmarks/worker.py prepare KEY CHECKPOINT WORK   # export/convert, then exit
    python benchmarks/worker.py serve KEY CHECKPOINT WORK     # load, then answer timing requests

A process per system gives each its own peak RSS and load time, and lets optimum-onnx run in the
virtual environment it needs (transformers 4.x) while the driver alternates between systems.
Replies are single lines starting with ``@@`` (libraries may print other lines).
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
from systems import BY_KEY  # this folder is sys.path[0] when run as a script

REPLY = "@@"


def _peak_rss_mb() -> float:
    """This process's high-water mark: VmHWM resets at exec, unlike ru_maxrss, which a child
    inherits from the driver it was forked from."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for package in ("onnxruntime", "torch", "transformers", "ctranslate2", "optimum-onnx"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    return found


def _reply(payload: dict[str, object]) -> None:
    print(REPLY + json.dumps(payload), flush=True)


def serve(key: str, checkpoint: Path, work: Path) -> None:
    system = BY_KEY[key]
    started = time.perf_counter()
    runner = system.load(checkpoint, work)
    load_s = time.perf_counter() - started
    size = system.size_bytes(checkpoint, work)
    _reply({"load_s": load_s, "rss_mb": _peak_rss_mb(), "size": size, "versions": _versions()})
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("rss_only"):
            _reply({"rss_mb": _peak_rss_mb()})
            continue
        ids = np.array(request["ids"], dtype=np.int32)
        mask = np.array(request["mask"], dtype=np.int32)
        args = (ids, mask, request["beams"], request["new_tokens"])
        steps = runner.generate(*args) if request.get("warm_up") else None
        times = []
        for _ in range(request["runs"]):
            begun = time.perf_counter()
            steps = runner.generate(*args)
            times.append(1000 * (time.perf_counter() - begun))
        _reply({"times_ms": times, "steps": steps, "rss_mb": _peak_rss_mb()})


def main() -> None:
    command, key, checkpoint, work = sys.argv[1:5]
    if command == "prepare":
        started = time.perf_counter()
        BY_KEY[key].prepare(Path(checkpoint), Path(work))
        _reply({"prepare_s": time.perf_counter() - started, "prepare_rss_mb": _peak_rss_mb()})
    else:
        serve(key, Path(checkpoint), Path(work))


if __name__ == "__main__":
    main()
