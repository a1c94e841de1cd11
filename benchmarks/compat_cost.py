"""What the compatibility work costs on the newest ONNX Runtime: this tree's graph against an older revision's.

Both revisions export the full-size opus-mt-en-zh shape (random weights) text-level and id-level,
float32 and int8; each pair then runs alternately in this process (same inputs, exactly 40 new
tokens via min_length = max_length) and the script prints medians and new/old ratios. The old
revision is checked out into a temporary git worktree.

    python benchmarks/compat_cost.py [--old REV] [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from graphgen.testing import REPO, open_session, opus_mt_shaped_checkpoint

EXPORT = "import sys, graphgen; graphgen.export(sys.argv[1], sys.argv[2], tokenizer=sys.argv[3] == 'text', int8=sys.argv[4] == 'int8', progress=lambda _: None)"  # noqa: E501


def export(tree: Path, checkpoint: Path, out: Path, interface: str, precision: str) -> None:
    env = {"PYTHONPATH": str(tree)}
    subprocess.run(
        [sys.executable, "-c", EXPORT, str(checkpoint), str(out), interface, precision], check=True, env=env, cwd=tree
    )


def session(path: Path) -> ort.InferenceSession:
    """The extensions library always registered: an older revision's files may not say they need it."""
    return open_session(path, extensions=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", default="a214408", help="revision to compare against (default: before issue 14)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        old_tree = work / "old"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old_tree), args.old], cwd=REPO, check=True, capture_output=True
        )
        try:
            checkpoint = opus_mt_shaped_checkpoint(work / "checkpoint", placeholder_tokenizer=True)
            rng = np.random.default_rng(0)
            ids = rng.integers(10, 60000, size=(1, 20)).astype(np.int32)
            ids[0, -1] = 0
            batch16 = rng.integers(10, 60000, size=(16, 24)).astype(np.int32)
            batch16[:, -1] = 0
            text = np.array([" ".join(f"w{i}" for i in rng.integers(2, 64000, 18))], dtype=object)
            for interface in ("ids", "text"):
                for precision in ("fp32", "int8"):
                    files = {}
                    for label, tree in (("old", old_tree), ("new", REPO)):
                        files[label] = work / f"{label}-{interface}-{precision}.onnx"
                        export(tree, checkpoint, files[label], interface, precision)
                    sessions = {label: session(path) for label, path in files.items()}
                    cases = [("batch 1, greedy", 1, ids), ("batch 1, 4 beams", 4, ids)]
                    if interface == "ids":
                        cases.append(("batch 16, 4 beams", 4, batch16))
                    for case, beams, source in cases:
                        feeds = {"max_length": np.array([41], np.int32), "min_length": np.array([41], np.int32)}
                        feeds["num_beams"] = np.array([beams], np.int32)
                        if interface == "ids":
                            feeds |= {"input_ids": source, "attention_mask": np.ones_like(source)}
                        else:
                            feeds["text"] = text
                        times: dict[str, list[float]] = {"old": [], "new": []}
                        outputs = {}
                        for run in range(args.runs + 1):
                            for label in ("old", "new") if run % 2 else ("new", "old"):
                                started = time.perf_counter()
                                outputs[label] = sessions[label].run(["sequences"], feeds)[0]
                                if run:  # the first round warms up
                                    times[label].append((time.perf_counter() - started) * 1000)
                        same = np.array_equal(outputs["old"], outputs["new"])
                        old, new = statistics.median(times["old"]), statistics.median(times["new"])
                        line = f"{interface} {precision:4} {case:18} old {old:8.1f} ms  new {new:8.1f} ms"
                        print(f"{line}  new/old {new / old:5.2f}  same ids: {same}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=REPO, check=False)


if __name__ == "__main__":
    main()
