"""The least memory each system translates in: graphgen against CTranslate2 under a memory limit.

    sudo python benchmarks/memory_limit.py [--models nllb,full] [--systems ...]   # Linux, root

Peak RSS, the figure the other reports give, counts every page a process has touched, the pages of
a memory-mapped file included. Those are clean file pages: the kernel drops them when memory runs
short and reads them again if they are needed. A graphgen file with ``--external-data`` is mapped,
and ONNX Runtime reads every weight once while it loads (it keeps the originals a search loop
prepacks until the whole session is loaded), so its peak RSS overstates what it needs. What a small
machine needs is measured here: each system runs in a fresh process inside a memory cgroup whose
limit (resident memory and page cache together, no swap) is lowered by bisection until the run is
killed or takes more than ``SLOWER`` times its unconstrained time; the report gives the least limit
that passed, beside the unconstrained peak RSS. Writes ``memory_limit_report.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

from systems import BY_KEY, cpu_model  # this folder is sys.path[0] when run as a script

from graphgen.testing import full_size_family_checkpoint, opus_mt_shaped_checkpoint

HERE = Path(__file__).resolve().parent
REPLY = "@@"
SLOWER = 1.5  # a run this much slower than unconstrained counts as failed (the machine thrashes)
STEP_MB = 32  # bisection resolution
MODELS = {
    "full": ("opus-mt-en-zh shape (random weights)", 65000),
    "nllb": ("NLLB-200-distilled-600M shape (random weights)", 256000),
}
DEFAULT_SYSTEMS = "ct2-float32,ct2-int8,graphgen-fp32-ext,graphgen-int8-ext,graphgen-int4-ext"


class Unavailable(Exception):
    """This machine cannot limit a process's memory for us (not Linux, no cgroup, not root)."""


class MemoryCgroup:
    """A memory cgroup (v1 or v2) with a limit on memory and swap, for the children placed in it."""

    def __init__(self) -> None:
        v1 = Path("/sys/fs/cgroup/memory")
        v2 = Path("/sys/fs/cgroup")
        if (v1 / "memory.limit_in_bytes").exists():
            self.path, self.version = v1 / f"graphgen-bench-{os.getpid()}", 1
        elif (v2 / "cgroup.controllers").is_file() and "memory" in (v2 / "cgroup.controllers").read_text().split():
            self.path, self.version = v2 / f"graphgen-bench-{os.getpid()}", 2
        else:
            raise Unavailable("no memory cgroup controller here (Linux cgroup v1 or v2 is needed)")
        try:
            self.path.mkdir()
        except OSError as error:
            raise Unavailable(f"cannot create {self.path} ({error.strerror}): run as root") from error

    def limit(self, megabytes: int) -> None:
        value = str(megabytes * 2**20)
        if self.version == 1:  # memory+swap may never be below memory: lift it, set memory, lower it
            self.unlimit()
            (self.path / "memory.limit_in_bytes").write_text(value)
            with contextlib.suppress(OSError):  # absent where the kernel accounts no swap
                (self.path / "memory.memsw.limit_in_bytes").write_text(value)
        else:
            (self.path / "memory.max").write_text(value)
            with contextlib.suppress(OSError):
                (self.path / "memory.swap.max").write_text("0")

    def unlimit(self) -> None:
        if self.version == 1:
            with contextlib.suppress(OSError):
                (self.path / "memory.memsw.limit_in_bytes").write_text("-1")
            (self.path / "memory.limit_in_bytes").write_text("-1")
        else:
            (self.path / "memory.max").write_text("max")

    def enter(self) -> None:
        """Called in the child between fork and exec."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


def drop_page_cache() -> None:
    """Each try starts with the model's files on disk, not in memory (as after a reboot)."""
    os.sync()
    with contextlib.suppress(OSError):
        Path("/proc/sys/vm/drop_caches").write_text("1")


def one_run(
    group: MemoryCgroup, key: str, checkpoint: Path, work: Path, request: dict[str, object], timeout: float
) -> dict[str, float] | None:
    """Load ``key`` and run ``request`` (``runs`` times) in a fresh process inside ``group``; its wall
    time and peak RSS, or None where it was killed, failed or ran past ``timeout``."""
    drop_page_cache()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "worker.py"), "serve", key, str(checkpoint), str(work)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=group.enter,
    )
    assert process.stdin is not None and process.stdout is not None
    timer = threading.Timer(timeout, process.kill)  # a thrashing process prints nothing: kill it on time
    timer.start()
    replies = []
    try:
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.close()
        for line in process.stdout:
            if line.startswith(REPLY):
                replies.append(json.loads(line[len(REPLY) :]))
        process.wait()
    except BrokenPipeError:  # killed before it read the request
        process.kill()
        process.wait()
        return None
    finally:
        timer.cancel()
    seconds = time.perf_counter() - started
    if len(replies) < 2 or process.returncode != 0 or seconds > timeout:
        return None
    return {"seconds": seconds, "peak_mb": float(replies[1]["rss_mb"])}


def least_memory(
    group: MemoryCgroup, key: str, checkpoint: Path, work: Path, request: dict[str, object]
) -> tuple[dict[str, float], int]:
    """The unconstrained run and the least limit (MB) at which the run passed."""
    group.unlimit()
    free = one_run(group, key, checkpoint, work, request, timeout=3600)
    if free is None:
        raise RuntimeError(f"{key} failed without a memory limit")
    allowed = SLOWER * free["seconds"] + 1.0

    def passes(limit: int) -> bool:
        group.limit(limit)
        result = one_run(group, key, checkpoint, work, request, timeout=allowed)
        outcome = f"{result['seconds']:.1f} s" if result else "failed"
        print(f"    {limit} MB: {outcome}", flush=True)
        return result is not None

    passed, failed = int(free["peak_mb"]) + STEP_MB, 0
    while not passes(passed):  # the peak is not always enough: a cgroup also counts page cache
        failed, passed = passed, 2 * passed
        if passed > 8 * free["peak_mb"]:
            raise RuntimeError(f"{key} did not run within 8x its peak RSS")
    while passed - failed > STEP_MB:
        limit = (passed + failed) // 2
        if passes(limit):
            passed = limit
        else:
            failed = limit
    group.unlimit()
    return free, passed


def checkpoint_for(model: str, folder: Path) -> Path:
    if model == "full":
        return opus_mt_shaped_checkpoint(folder, placeholder_tokenizer=True)
    return full_size_family_checkpoint(folder, model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="nllb,full", help="nllb, full (the opus-mt shape)")
    parser.add_argument("--systems", default=DEFAULT_SYSTEMS)
    parser.add_argument(
        "--workloads", default="1x4,8x4", help="BATCHxBEAMS, comma-separated (one input; the benchmark's batch)"
    )
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--out", type=Path, default=HERE / "memory_limit_report.md")
    args = parser.parse_args()
    keys = args.systems.split(",")
    unknown = [key for key in keys if key not in BY_KEY]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}; choose from {', '.join(BY_KEY)}")
    try:
        group = MemoryCgroup()
    except Unavailable as reason:  # `make bench` goes on without this report
        print(f"memory_limit.py: not measured here: {reason}")
        return
    begun = time.perf_counter()
    rows = []
    try:
        for model in args.models.split(","):
            label, top = MODELS[model]
            with tempfile.TemporaryDirectory(prefix="graphgen-memory-limit-") as temporary:
                work = Path(temporary)
                print(f"{label}: making the checkpoint", flush=True)
                checkpoint = checkpoint_for(model, work / "checkpoint")
                for key in keys:
                    print(f"  {BY_KEY[key].label}: preparing", flush=True)
                    BY_KEY[key].prepare(checkpoint, work)
                    size = BY_KEY[key].size_bytes(checkpoint, work) / 1e6
                    for workload in args.workloads.split(","):
                        batch, beams = (int(n) for n in workload.split("x"))
                        ids = [[(7 + 131 * i + 17 * j) % top + 4 for j in range(11)] + [2] for i in range(batch)]
                        request = {
                            "ids": ids,
                            "mask": [[1] * len(row) for row in ids],
                            "beams": beams,
                            "new_tokens": args.new_tokens,
                            # twice: a process that serves translations runs more than once, and
                            # what a second run of the same shapes adds counts too
                            "runs": 2,
                        }
                        free, least = least_memory(group, key, checkpoint, work, request)
                        rows.append((label, BY_KEY[key].label, size, f"batch {batch} × {beams} beams", free, least))
                        print(f"  {BY_KEY[key].label}, {workload}: peak {free['peak_mb']:.0f} MB, runs in {least} MB")
    finally:
        group.remove()
    lines = [
        "# The least memory each system translates in",
        "",
        f"Written by `benchmarks/memory_limit.py --models {args.models} --systems {args.systems} "
        f"--workloads {args.workloads}` on "
        f"{date.today().isoformat()} ({(time.perf_counter() - begun) / 60:.1f} minutes), "
        f"{platform.platform()}, {cpu_model()}, {os.cpu_count()} CPUs. "
        f"Exactly {args.new_tokens} new tokens, 2 threads, "
        "each try a fresh process (load and two runs of the workload) with the page cache dropped first.",
        "",
        f"Least limit: the smallest memory cgroup limit (resident memory and page cache, no swap; "
        f"bisection to {STEP_MB} MB) under which the process loaded and translated within {SLOWER}× its "
        "unconstrained time. Peak RSS: the same process without a limit. File sizes in 10^6 bytes, "
        "memory in MiB, as in the other reports.",
        "",
        "| model | system | file MB | workload | peak RSS MB | least limit MB | s without limit |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for label, system, size, workload, free, least in rows:
        measured = f"{free['peak_mb']:.0f} | {least} | {free['seconds']:.1f}"
        lines.append(f"| {label} | {system} | {size:.0f} | {workload} | {measured} |")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
