"""int8 activations quantized per row (graphgen's int8 since 2026-12-07) against one scale per tensor.

    python benchmarks/int8_rows.py           # the opus-mt shape and the demo model, about 4 minutes
    python benchmarks/int8_rows.py --nllb    # also the NLLB-200-distilled-600M shape (2.5 GB of disk)

An int8 file quantizes the activations of every matrix product as it runs. With ONNX Runtime's
``DynamicQuantizeMatMul`` (one node; graphgen's int8 until 2026-12-07, "tensor" here) one scale
covers the whole tensor, every input of a batch and its beams, so an input's result depends on its
neighbours. graphgen now gives each row its own scale (``weights.row_quantized_matmul``, "row"),
at the cost of six more nodes per product. For each this prints and writes
``int8_rows_report.md``:

- speed: id-level files of the opus-mt-en-zh shape (random weights; ``--nllb``: also NLLB-600M's),
  20-token inputs, exactly 40 new tokens, batch 1 greedy, batch 1 x 4 beams and 16 x 4 beams, 2
  threads; the two files alternate in fresh processes, median of the rounds;
- the demo model's 300 test sentences with 4 beams, alone and in batches of 16: translations the
  same as the float32 file's, score differences from it, and the scores that are the same bits in
  a batch as alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

from systems import cpu_model  # this folder is sys.path[0] when run as a script

HERE = Path(__file__).resolve().parent
SCHEMES = ("row", "tensor")
WORKLOADS = ((1, 1), (1, 4), (16, 4))

# The per-tensor scheme, as graphgen built it before: one com.microsoft DynamicQuantizeMatMul.
EXPORT = """
import sys
import numpy as np
import graphgen.model.weights as weights
from graphgen import export
from graphgen.custom_ops.builder import MS_DOMAIN

def per_tensor(self, b, x, name, key, bias):
    codes = b.derived(f"{name}.int8", self._codes(key))
    scales = b.derived(f"{name}.scale", self._scales(key))
    if key.startswith("table:"):
        outputs = self.spec.weights[key.removeprefix("table:")].shape[0]
    else:
        outputs = sum(self.spec.weights[part].shape[1] for part in key.split("+"))
    zero = b.derived(f"int8_zero_points_{outputs}", np.zeros(outputs, np.int8))
    return b.op("DynamicQuantizeMatMul", [x, codes, scales, zero, bias], domain=MS_DOMAIN)

if sys.argv[3] == "tensor":
    weights.Int8Weights._matmul = per_tensor
tokenizer = sys.argv[4] == "text"
export(sys.argv[1], sys.argv[2], tokenizer=tokenizer, int8=sys.argv[3] != "float32", progress=lambda _: None)
"""

TIME = """
import json, sys, time
import numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 4
options.intra_op_num_threads = 2
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
batch, beams = int(sys.argv[2]), int(sys.argv[3])
ids = np.random.default_rng(0).integers(4, 60000, size=(batch, 20)).astype(np.int32)
ids[:, -1] = int(sys.argv[4])  # EOS
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "num_beams": np.array([beams], np.int32),
         "max_length": np.array([41], np.int32), "min_length": np.array([41], np.int32)}
session.run(None, feeds)
times = []
for _ in range(5 if batch == 1 else 3):
    start = time.perf_counter()
    session.run(None, feeds)
    times.append(time.perf_counter() - start)
print(json.dumps(1000 * sorted(times)[len(times) // 2]))
"""


def export(checkpoint: Path, output: Path, scheme: str, kind: str) -> Path:
    subprocess.run([sys.executable, "-c", EXPORT, str(checkpoint), str(output), scheme, kind], check=True)
    return output


def timed(model: Path, batch: int, beams: int, eos: int) -> float:
    command = [sys.executable, "-c", TIME, str(model), str(batch), str(beams), str(eos)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def speed(name: str, checkpoint: Path, work: Path, eos: int, rounds: int) -> list[str]:
    files = {scheme: export(checkpoint, work / f"{name}-{scheme}.onnx", scheme, "ids") for scheme in SCHEMES}
    lines = []
    for batch, beams in WORKLOADS:
        runs: dict[str, list[float]] = {scheme: [] for scheme in SCHEMES}
        for _ in range(rounds):
            for scheme in SCHEMES:
                runs[scheme].append(timed(files[scheme], batch, beams, eos))
        row, tensor = (statistics.median(runs[scheme]) for scheme in SCHEMES)
        workload = f"batch {batch}, {'greedy' if beams == 1 else f'{beams} beams'}"
        lines.append(f"| {name} | {workload} | {row:.0f} | {tensor:.0f} | {row / tensor:.2f} |")
        print(lines[-1], flush=True)
    for path in files.values():
        path.unlink()
    return lines


def demo_quality(work: Path) -> list[str]:
    import numpy as np

    from graphgen import Translator
    from graphgen.testing import DEMO_DIR, demo_sources

    sources = demo_sources()
    results = {}
    for scheme in ("float32", *SCHEMES):
        translator = Translator(export(DEMO_DIR, work / f"demo-{scheme}.onnx", scheme, "text"))
        for batch in (1, 16):
            texts, scores = [], []
            for start in range(0, len(sources), batch):
                out = translator.run(sources[start : start + batch], num_beams=4)
                texts += out["translation"][:, 0].tolist()
                scores += out["sequence_scores"][:, 0].tolist()
            results[scheme, batch] = (texts, np.array(scores))
    lines = []
    for scheme in SCHEMES:
        for batch in (1, 16):
            texts, scores = results[scheme, batch]
            reference_texts, reference_scores = results["float32", batch]
            same = [i for i, (a, b) in enumerate(zip(texts, reference_texts, strict=True)) if a == b]
            difference = np.abs(scores[same] - reference_scores[same])
            equal_bits = int((results[scheme, 1][1] == results[scheme, 16][1]).sum())
            lines.append(
                f"| {scheme} | {'alone' if batch == 1 else 'batches of 16'} | {len(same)}/{len(sources)} | "
                f"{difference.mean():.2g} | {difference.max():.2g} | {equal_bits}/{len(sources)} |"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nllb", action="store_true", help="also time the NLLB-600M shape")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "int8_rows_report.md")
    args = parser.parse_args()
    import onnxruntime

    from graphgen.testing import FULL_SIZE_EOS, full_size_family_checkpoint, opus_mt_shaped_checkpoint

    with tempfile.TemporaryDirectory(prefix="graphgen-int8-rows-") as temporary:
        work = Path(temporary)
        speed_lines = speed("opus-mt", opus_mt_shaped_checkpoint(work / "opus-mt"), work, 0, args.rounds)
        if args.nllb:
            checkpoint = full_size_family_checkpoint(work / "nllb", "nllb")
            speed_lines += speed("NLLB-600M", checkpoint, work, FULL_SIZE_EOS, args.rounds)
        quality_lines = demo_quality(work)
    cpu = cpu_model()
    lines = [
        "# int8 activations: a scale per row against one per tensor",
        "",
        f"Written by `benchmarks/int8_rows.py` on {date.today()} ({cpu}, ONNX Runtime "
        f"{onnxruntime.__version__}). Speed: id-level int8 files, random weights, 20-token inputs, exactly "
        f"40 new tokens, 2 threads, median over {args.rounds} rounds (ms); the files alternate in fresh processes.",
        "",
        "| shape | workload | row | tensor | row / tensor |",
        "|---|---|---:|---:|---:|",
        *speed_lines,
        "",
        "Demo model, 300 test sentences, 4 beams, against the float32 file translating them the same way:",
        "",
        "| int8 activations | translated | translations as float32's | mean score difference | largest | "
        "scores the same bits alone and in batches |",
        "|---|---|---:|---:|---:|---:|",
        *quality_lines,
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")
    print(json.dumps({"speed": speed_lines}))


if __name__ == "__main__":
    main()
