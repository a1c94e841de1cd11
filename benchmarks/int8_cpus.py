"""int8 files on x86 CPUs without VNNI: the same tokens as on this CPU, or not.

    python benchmarks/int8_cpus.py   # Linux x86-64 with QEMU's user mode (Debian: apt install qemu-user)

ONNX Runtime multiplies an int8 file's uint8 activations by its int8 weights with x86's u8×s8
instruction. Without VNNI (AVX2, and AVX-512 before VNNI: Intel before Cascade Lake, AMD before
Zen 4) that instruction adds two products into 16 bits with saturation: 255·127·2 overflows, so
codes up to 127 (ONNX Runtime's quantizer's, and graphgen's before 2026-12-06) give other sums
there than on a VNNI or ARM CPU; codes up to 63 (graphgen's ``weights.INT8_CODE_MAX``) cannot. This exports the
opus-mt-en-zh shape (random weights) as an id-level int8 file with codes up to 127 and up to 63,
and runs 4 inputs greedy and with 4 beams on
this CPU and under ``qemu-x86_64 -cpu Haswell`` (AVX2, no AVX-512, no VNNI: ONNX Runtime picks its
AVX2 kernels there), then writes ``int8_cpus_report.md``: the rows whose tokens are the same, and
the largest score difference.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

from systems import cpu_model  # this folder is sys.path[0] when run as a script

HERE = Path(__file__).resolve().parent

EXPORT = """
import sys
import graphgen.model.weights as weights
from graphgen import export
weights.INT8_CODE_MAX = int(sys.argv[3])
export(sys.argv[1], sys.argv[2], tokenizer=False, int8=True, progress=lambda _: None)
"""

RUN = """
import json, sys
import numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 4
options.intra_op_num_threads = 1
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
result = {}
for beams in (1, 4):
    ids = rng.integers(4, 60000, size=(4, 12)).astype(np.int32)
    ids[:, -1] = 0  # EOS
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "num_beams": np.array([beams], np.int32),
             "max_length": np.array([21], np.int32)}
    sequences, scores = session.run(["sequences", "sequence_scores"], feeds)
    result[beams] = {"sequences": sequences.tolist(), "scores": scores.ravel().tolist()}
print(json.dumps(result))
"""


def run(command: list[str]) -> dict[str, dict[str, list]]:
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "int8_cpus_report.md")
    args = parser.parse_args()
    qemu = shutil.which("qemu-x86_64")
    if qemu is None or platform.machine() != "x86_64":
        sys.exit("needs an x86-64 Linux machine with qemu-x86_64 (Debian: apt install qemu-user)")
    from graphgen.testing import opus_mt_shaped_checkpoint

    rows = []
    with tempfile.TemporaryDirectory(prefix="graphgen-int8-cpus-") as temporary:
        work = Path(temporary)
        checkpoint = opus_mt_shaped_checkpoint(work / "checkpoint")
        for top in (127, 63):
            model = work / f"int8-{top}.onnx"
            subprocess.run([sys.executable, "-c", EXPORT, str(checkpoint), str(model), str(top)], check=True)
            here = run([sys.executable, "-c", RUN, str(model)])
            haswell = run([qemu, "-cpu", "Haswell", sys.executable, "-c", RUN, str(model)])
            for beams in ("1", "4"):
                a, b = here[beams], haswell[beams]
                same = sum(x == y for x, y in zip(a["sequences"], b["sequences"], strict=True))
                score = max(abs(x - y) for x, y in zip(a["scores"], b["scores"], strict=True))
                rows.append((top, beams, same, len(a["sequences"]), score))
                print(f"codes up to {top}, {beams} beam(s): {same}/{len(a['sequences'])} rows the same; {score:.2g}")
    import onnxruntime

    cpu = cpu_model()
    vnni = "with" if "avx512_vnni" in Path("/proc/cpuinfo").read_text().split() else "without"
    lines = [
        "# int8 files on x86 CPUs without VNNI",
        "",
        f"Written by `benchmarks/int8_cpus.py` on {date.today()}: this machine ({cpu}, "
        f"{vnni} AVX-512 VNNI) against `qemu-x86_64 -cpu Haswell` (AVX2 without VNNI), ONNX Runtime "
        f"{onnxruntime.__version__}, the opus-mt-en-zh shape (random weights) as an id-level int8 "
        "file, 4 inputs of 11 tokens, 20 new tokens at most.",
        "",
        "| int8 codes | beams | rows with the same tokens | largest score difference |",
        "|---|---:|---:|---:|",
        *(f"| up to {top} | {beams} | {same}/{n} | {score:.2g} |" for top, beams, same, n, score in rows),
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
