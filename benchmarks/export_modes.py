"""Every export mode of the full NLLB-200-distilled-600M and mBART-50 shapes: export, load, run.

    python benchmarks/export_modes.py     # part of `make bench`; about 10 minutes, 16 GB of RAM

For each shape (random weights) and each mode (loop or op search × float32, int8, float16; int4
with the loop) the export runs in a process of its own (so its peak RSS is its own), then a second
process loads the file on the CPU and generates 8 tokens for one input. Files past protobuf's 2 GB are written with
external data. ORT's CPU BeamSearch refuses float16 subgraphs, which the op float16 row shows as
its run result. Writes ``export_report.md``.

    python benchmarks/export_modes.py --shapes madlad --modes "loop int8,loop int4" \
        --out benchmarks/export_report_madlad.md   # MADLAD-400-3B: about 5 minutes, 25 GB of disk
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from systems import cpu_model  # this folder is sys.path[0] when run as a script

from graphgen.testing import FULL_SIZE_SHAPES, full_size_family_checkpoint

HERE = Path(__file__).resolve().parent

MODES = {
    "loop float32": {},
    "loop int8": {"int8": True},
    "loop int4": {"int4": True},
    "loop float16": {"fp16": True},
    "op float32": {"search": "op"},
    "op int8": {"search": "op", "int8": True},
    "op float16": {"search": "op", "fp16": True},
}

# Peak RSS from VmHWM: ru_maxrss survives execve, so a child would report its parent's peak.
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) / 1024"

EXPORT = """
import json, sys, time
from pathlib import Path
from graphgen import export
started = time.perf_counter()
result = export(sys.argv[1], sys.argv[2], tokenizer=False, progress=lambda _: None, **json.loads(sys.argv[3]))
print(json.dumps({
    "seconds": time.perf_counter() - started,
    "peak_mb": PEAK,
    "files": {f.name: f.stat().st_size for f in result.files},
}))
"""

RUN = r"""
import json, re, sys, time
import numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 3
started = time.perf_counter()
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
load = time.perf_counter() - started
ids = np.array([[5, 6, 7, 8, 2]], np.int32)
length = np.array([9], np.int32)  # decoder start + exactly 8 tokens
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "min_length": length, "max_length": length}
try:
    sequences = session.run(["sequences"], feeds)[0]
    ran = f"{sequences.shape[2] - 1} tokens"
except Exception as error:
    reason = re.search(r"[A-Z]\w* does not support[^.]*", str(error))
    ran = "refused: " + (reason.group(0) if reason else str(error).splitlines()[0][-120:])
print(json.dumps({"load_s": load, "ran": ran, "peak_mb": PEAK}))
"""


def _python(code: str, *args: str) -> dict[str, object]:
    code = code.replace("PEAK", PEAK)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="nllb,mbart", help="keys of FULL_SIZE_SHAPES (madlad: 3B, ~30 GB of disk)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    parser.add_argument("--tiny", action="store_true", help="2 layers, vocab 2000 (a smoke test)")
    parser.add_argument("--out", type=Path, default=HERE / "export_report.md")
    args = parser.parse_args()
    begun = time.perf_counter()
    lines = [
        "# Export modes of the full multilingual shapes",
        "",
        "Each export in a fresh process, then each file loaded on the CPU (ONNX Runtime) in another, generating",
        "8 tokens for one input. Peak RSS in MB.",
        "",
        "",  # the run's line, once it is over
        "",
        "| shape | mode | export s | export peak | files (MB) | load s | run | run peak |",
        "|---|---|---:|---:|---|---:|---|---:|",
    ]
    with tempfile.TemporaryDirectory() as temporary:
        for shape in args.shapes.split(","):
            checkpoint = full_size_family_checkpoint(Path(temporary) / shape, shape, tiny=args.tiny)
            label = FULL_SIZE_SHAPES[shape][1] + (" (tiny)" if args.tiny else "")
            for mode in args.modes.split(","):
                options = MODES[mode]
                path = Path(temporary) / f"{shape}-{mode.replace(' ', '-')}.onnx"
                exported = _python(EXPORT, str(checkpoint), str(path), json.dumps(options))
                if "error" in exported:
                    lines.append(f"| {label} | {mode} | failed: {exported['error']} | | | | | |")
                    print(lines[-1], flush=True)
                    continue
                files = ", ".join(f"{name} {size / 2**20:.0f}" for name, size in exported["files"].items())  # type: ignore[union-attr]
                run = _python(RUN, str(path))
                ran = run.get("ran", f"failed: {run.get('error')}")
                lines.append(
                    f"| {label} | {mode} | {exported['seconds']:.0f} | {exported['peak_mb']:.0f} | {files} | "
                    f"{run.get('load_s', float('nan')):.1f} | {ran} | {run.get('peak_mb', float('nan')):.0f} |"
                )
                print(lines[-1], flush=True)
                for file in path.parent.glob(path.name + "*"):
                    file.unlink()
    lines[5] = (
        f"Written by `benchmarks/export_modes.py --shapes {args.shapes} --modes {args.modes!r}"
        f"{' --tiny' if args.tiny else ''}` on {date.today().isoformat()} "
        f"({(time.perf_counter() - begun) / 60:.1f} minutes), onnxruntime {_ort_version()}, "
        f"{platform.platform()}, {cpu_model()}, {os.cpu_count()} CPUs."
    )
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _ort_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


if __name__ == "__main__":
    main()
