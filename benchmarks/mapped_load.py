"""A single file read whole, the same file with its weights mapped from it, and ``--external-data``.

    python benchmarks/mapped_load.py [--models full,nllb] [--precisions fp32,int8,int4]

``graphgen.Translator`` maps a single file's weights from the file where ONNX Runtime allows it
(``graphgen/runtime/mapped_weights.py``). This measures what that changes on the full-size shapes
(random weights, id-level files): each file is loaded in a fresh process, three ways, and runs one
batch of 4 inputs × 4 beams for exactly 40 new tokens; the process reports the load time, its
resident set right after loading (heap and file pages apart) and its peak over load and run. The
three ways must give the same ids (asserted). Writes ``mapped_load_report.md`` beside this script.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from graphgen import export  # noqa: E402
from graphgen.testing import opus_mt_shaped_checkpoint  # noqa: E402
from graphgen.testing.checkpoints import full_size_family_checkpoint  # noqa: E402

NAMES = {"full": "opus-mt-en-zh shape", "nllb": "NLLB-200-distilled-600M shape"}
WAYS = {
    "whole": "single file, read whole",
    "mapped": "single file, weights mapped (Translator)",
    "external": "`--external-data`",
}
MEASURE = """
import json, sys, time
import numpy as np, onnxruntime as ort
from graphgen.runtime.mapped_weights import session_source
from graphgen.runtime.translator import session_options

def status():
    fields = ("VmHWM", "RssAnon", "RssFile")
    lines = [line.split(":", 1) for line in open("/proc/self/status") if line.startswith(fields)]
    return {key: int(value.split()[0]) / 1024 for key, value in lines}

path, way = sys.argv[1], sys.argv[2]
started = time.perf_counter()
source = session_source(path, map_weights=way == "mapped")
assert (source.mapped_weights > 0) == (way == "mapped"), (way, source.mapped_weights)
options = session_options(2, extensions=False, config=source.config)
session = ort.InferenceSession(source.model, options, providers=["CPUExecutionProvider"])
load = time.perf_counter() - started
loaded = status()
ids = np.random.default_rng(0).integers(5, 60000, (4, 20)).astype(np.int32)
ids[:, -1] = 2
lengths = {"num_beams": 4, "min_length": 41, "max_length": 41}
settings = {name: np.array([value], np.int32) for name, value in lengths.items()}
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), **settings}
(sequences,) = session.run(["sequences"], feeds)
print(json.dumps({"load": load, "loaded": loaded, "peak": status()["VmHWM"], "ids": sequences.tolist()}))
"""


def measure(path: Path, way: str) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path), way], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{path.name} ({way}) failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="full,nllb")
    parser.add_argument("--precisions", default="fp32,fp16,int8,int4")
    parser.add_argument("--out", type=Path, default=HERE / "mapped_load_report.md")
    args = parser.parse_args()
    import onnxruntime

    begun = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="graphgen-mapped-") as work:
        for model in args.models.split(","):
            folder = Path(work) / model
            if model == "full":
                checkpoint = opus_mt_shaped_checkpoint(folder / "checkpoint", placeholder_tokenizer=True)
            else:
                checkpoint = full_size_family_checkpoint(folder / "checkpoint", model)
            for precision in args.precisions.split(","):
                options = {"int8": precision == "int8", "int4": precision == "int4", "fp16": precision == "fp16"}
                files = {}
                for way, external in (("single", False), ("external", True)):
                    files[way] = folder / f"{precision}-{way}" / "model.onnx"
                    files[way].parent.mkdir(parents=True)
                    result = export(
                        str(checkpoint),
                        str(files[way]),
                        tokenizer=False,
                        external_data=external,
                        progress=lambda _: None,
                        **options,
                    )
                    if not external and len(result.files) > 1:  # past 2 GB: external data anyway
                        files.pop("single")
                if "single" not in files:
                    print(f"{model} {precision}: past 2 GB, a single file is not possible; skipped", flush=True)
                    continue
                size = files["single"].stat().st_size / 2**20
                results = {way: measure(files["external" if way == "external" else "single"], way) for way in WAYS}
                ids = {json.dumps(r.pop("ids")) for r in results.values()}
                assert len(ids) == 1, f"{model} {precision}: the three ways gave different ids"
                for way, r in results.items():
                    print(model, precision, way, {k: v for k, v in r.items()}, flush=True)
                    rows.append((model, precision, size, way, r))
    minutes = (time.perf_counter() - begun) / 60
    lines = [
        "# A single file read whole, mapped from itself, and with `--external-data`",
        "",
        f"Written by `benchmarks/mapped_load.py` on {date.today()} ({minutes:.1f} minutes; ONNX Runtime "
        f"{onnxruntime.__version__}, {platform.machine()}, 2 threads). Random-weight full-size shapes, "
        "id-level files, each loaded in a fresh process and run on 4 inputs × 4 beams for exactly 40 new "
        "tokens; the three ways gave the same ids in every row (asserted). After loading: the resident "
        "set right after the session was created, heap (anonymous) and file pages apart; file pages are "
        "clean pages of the model's file that the kernel drops when memory runs short. Peak: VmHWM over "
        "load and run, file pages included.",
        "",
        "| model | precision | file MB | loaded as | load s | after loading: heap MB | file pages MB | peak MB |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for model, precision, size, way, r in rows:
        loaded = r["loaded"]
        lines.append(
            f"| {NAMES.get(model, model)} | {precision} | {size:.0f} | {WAYS[way]} | {r['load']:.2f} | "
            f"{loaded['RssAnon']:.0f} | {loaded['RssFile']:.0f} | {r['peak']:.0f} |"
        )
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
