"""Full-size files in a real browser: onnxruntime-web (WebAssembly) in headless Chromium.

    python benchmarks/browser.py   # needs Chromium and `npm ci --ignore-scripts` in examples/node

The browser tests of `make test` translate with the demo model; this measures what a web page pays
for a model of the size people ship: the full opus-mt-en-zh shape (random weights, the synthetic
32,000-piece vocabulary of `benchmarks/tokenizer.py`) as a text file in float32, int8 and int4,
baked with 4 beams and greedy (`graphgen bake --num-beams N --max-length 41`: JavaScript cannot set
the optional inputs), and the NLLB-200-distilled-600M shape as an id-level file in int8 and int4
(its float32 file is 2.5 GB of external data). For each file, in a
fresh browser: the time to fetch it and create the session, the first translation of one 20-token
sentence and the median of the next ones, and the renderer process's peak resident memory (its
WebAssembly heap, the fetched file and the JavaScript heap; `benchmarks/browser/driver.mjs`). Beside
it, the same file through `graphgen.Translator` (native ONNX Runtime, mapped from the file), one
thread each, and whether the two translations are the same string (asserted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tokenizer import checkpoint, sentence  # noqa: E402  (benchmarks/tokenizer.py)

NODE_EXAMPLE = HERE.parent / "examples" / "node"
PRECISIONS = {"fp32": {}, "int8": {"int8": True}, "int4": {"int4": True}}
NLLB_PRECISIONS = ("int8", "int4")  # float32's 2.5 GB must be external data, past what a page fetches whole


def native(path: Path, texts: list[str], runs: int) -> dict[str, object]:
    """Load time, first and median translation time and the output through ``Translator``."""
    from graphgen import Translator

    started = time.perf_counter()
    translator = Translator(path, threads=1)
    load = time.perf_counter() - started
    times = []
    for _ in range(runs + 1):
        begun = time.perf_counter()
        output = translator.translate(texts)
        times.append((time.perf_counter() - begun) * 1000)
    return {"loadMs": load * 1000, "firstMs": times[0], "medianMs": statistics.median(times[1:]), "output": output}


def native_ids(path: Path, ids: list[int], runs: int) -> dict[str, object]:
    """The same for an id-level file through a plain session (mapped, as ``Translator`` loads)."""
    import numpy as np

    from graphgen.testing import open_session

    started = time.perf_counter()
    session = open_session(path, 1)
    load = time.perf_counter() - started
    feeds = {"input_ids": np.array([ids], dtype=np.int32), "attention_mask": np.ones((1, len(ids)), np.int32)}
    times = []
    for _ in range(runs + 1):
        begun = time.perf_counter()
        (sequences,) = session.run(["sequences"], feeds)
        times.append((time.perf_counter() - begun) * 1000)
    output = [int(i) for i in sequences.reshape(-1)]
    return {"loadMs": load * 1000, "firstMs": times[0], "medianMs": statistics.median(times[1:]), "output": output}


def peaks(result: dict[str, Any]) -> str:
    """The renderer's peaks over a file's runs, as a range where they differ."""
    low, high = min(result.get("peaks", [0])), max(result.get("peaks", [0]))
    return f"{high:.0f}" if high - low < 20 else f"{low:.0f}–{high:.0f}"


def one_node_model(path: Path) -> None:
    """A model of one node with an id-level file's inputs and output: what the page costs by itself."""
    from onnx import TensorProto, helper, save

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT32, [1, None])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT32, [1, None])
    sequences = helper.make_tensor_value_info("sequences", TensorProto.INT32, [1, None])
    masked = helper.make_tensor_value_info("mask", TensorProto.INT32, [1, None])
    nodes = [
        helper.make_node("Identity", ["input_ids"], ["sequences"]),
        helper.make_node("Identity", ["attention_mask"], ["mask"]),
    ]
    graph = helper.make_graph(nodes, "one_node", [ids, mask], [sequences, masked])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def onnxruntime_web_version() -> str:
    package = NODE_EXAMPLE / "node_modules" / "onnxruntime-web" / "package.json"
    return json.loads(package.read_text(encoding="utf-8"))["version"]


def chromium_version(chromium: str) -> str:
    return subprocess.run([chromium, "--version"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timed translations after the first")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument("--report", type=Path, default=HERE / "browser_report.md")
    parser.add_argument("--no-nllb", action="store_true", help="skip the NLLB-600M id-level files (needs torch)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # one native measurement
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.ids:
            result = native_ids(args.worker, json.loads(args.ids), args.runs)
        else:
            result = native(args.worker, json.loads(args.texts), args.runs)
        # VmHWM, not ru_maxrss: that one keeps the high-water mark of the process that forked this one
        status = Path("/proc/self/status").read_text(encoding="utf-8")
        peak = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
        print(json.dumps(result | {"peakMiB": peak / 1024}))
        return
    if not (NODE_EXAMPLE / "node_modules" / "playwright-core").is_dir():
        sys.exit("run `npm ci --ignore-scripts` in examples/node first")
    if not Path(args.chromium).exists():
        sys.exit(f"no Chromium at {args.chromium} (apt-get install chromium, or --chromium PATH)")

    from graphgen import export

    texts = [sentence(20, 0)]
    rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []

    def add(file: Path, shape: str, precision: str, search: str, feed: dict[str, Any]) -> None:
        """One browser job and its row: ``feed`` is ``{"texts": ...}`` or ``{"ids": ...}``."""
        data = file.with_name(file.name + ".data")
        job = {"model": file.name, "runs": args.runs, **feed} | ({"data": data.name} if data.exists() else {})
        jobs.append(job)
        size = file.stat().st_size + (data.stat().st_size if data.exists() else 0)
        layout = "external data" if data.exists() else "one file"
        rows.append({"file": file, "name": f"{shape} {precision}, {search}, {layout}", "MB": size / 1e6, **feed})

    with tempfile.TemporaryDirectory() as folder:
        files = Path(folder) / "files"
        files.mkdir()
        directory = checkpoint(Path(folder) / "opus-mt-shape")
        for precision, options in PRECISIONS.items():
            for external in (False, True) if precision != "int4" else (False,):
                suffix = "-x" if external else ""
                path = Path(folder) / f"opus-mt-{precision}{suffix}.onnx"
                export(directory, path, progress=lambda _: None, external_data=external, **options)
                # JavaScript cannot feed the optional inputs: the settings are baked in
                for search, beams in (("4 beams", "4"), ("greedy", "1")):
                    file = files / f"opus-mt-{precision}{suffix}-{beams}.onnx"
                    bake = ["bake", str(path), "-o", str(file), "--num-beams", beams, "--max-length", "41"]
                    subprocess.run([sys.executable, "-m", "graphgen", *bake], check=True, capture_output=True)
                    add(file, "opus-mt text", precision, search, {"texts": texts})
        if not args.no_nllb:
            from graphgen.testing import FULL_SIZE_EOS, full_size_family_checkpoint

            nllb = full_size_family_checkpoint(Path(folder) / "nllb-shape", "nllb")
            ids = [*(4 + (7919 * i) % 250_000 for i in range(19)), FULL_SIZE_EOS]
            for precision in NLLB_PRECISIONS:
                for external in (False, True):
                    path = files / f"nllb-600m-{precision}{'-x' if external else ''}.onnx"
                    options = PRECISIONS[precision]
                    export(nllb, path, tokenizer=False, external_data=external, progress=lambda _: None, **options)
                    add(path, "NLLB-600M ids", precision, "greedy", {"ids": ids})
        tiny = files / "one-node.onnx"  # the page's own cost: onnxruntime-web and a one-node model
        one_node_model(tiny)
        jobs.append({"model": tiny.name, "runs": args.runs, "ids": [1, 2, 3]})
        worker = [sys.executable, __file__, "--worker", str(tiny), "--runs", "1", "--ids", "[1, 2, 3]"]
        baseline = json.loads(subprocess.run(worker, capture_output=True, text=True, check=True).stdout)
        for row in rows:  # each in a process of its own, for its peak
            feed = ["--ids", json.dumps(row["ids"])] if "ids" in row else ["--texts", json.dumps(texts)]
            worker = [sys.executable, __file__, "--worker", str(row["file"]), "--runs", str(args.runs), *feed]
            row["native"] = json.loads(subprocess.run(worker, capture_output=True, text=True, check=True).stdout)
        config = Path(folder) / "jobs.json"
        # every file twice, in fresh browsers: the page's peak moves with when the fetched file is collected
        config.write_text(json.dumps({"files": str(files), "chromium": args.chromium, "jobs": jobs + jobs}))
        driver = subprocess.run(
            ["node", str(HERE / "browser" / "driver.mjs"), str(config)], capture_output=True, text=True, check=True
        )
        results: dict[str, dict[str, Any]] = {}
        for result in map(json.loads, driver.stdout.splitlines()):
            first = results.setdefault(result["model"], result)
            first.setdefault("peaks", []).append(result.get("rendererPeakMiB", 0))
            if "error" in result:
                first["error"] = result["error"]

    lines = [
        "# Full-size files in the browser",
        "",
        f"Written by `benchmarks/browser.py`: onnxruntime-web {onnxruntime_web_version()} (WebAssembly, one",
        f"thread) in {chromium_version(args.chromium)} (headless), against `graphgen.Translator` on",
        f"onnxruntime {__import__('onnxruntime').__version__} (native, one thread), on {platform.machine()}",
        f"with {os.cpu_count()} CPUs. The full opus-mt-en-zh shape (random weights, a synthetic 32,000-piece",
        "vocabulary) as a text file, one 20-token sentence; the NLLB-200-distilled-600M shape (random",
        "weights) as an id-level file, 20 ids. First run, then the",
        f"median of {args.runs}. Load: fetching the file and creating the session (browser), creating the",
        "`Translator` or session (native). Peak: the renderer process's peak resident memory (VmHWM), over",
        "two runs of each file in fresh browsers (a range where they differ: it moves with when the fetched",
        "file is collected); the times are the first run's.",
        "",
        "| file | MB | browser load s | first ms | median ms | renderer peak MB "
        "| native load s | median ms | native peak MB | browser / native time | same output |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    page = results.get("one-node.onnx", {})
    lines.insert(
        -3,
        f"The page alone (onnxruntime-web and a one-node model) peaks at {max(page.get('peaks', [0])):.0f} MB; "
        f"a Python process running it natively at {baseline['peakMiB']:.0f} MB.\n",
    )
    failures = []
    for row in rows:
        web, own = results.get(row["file"].name, {"error": "no result"}), row["native"]
        name = row["name"]
        if "error" in web:
            failures.append(f"{name}: {web['error']}")
            lines.append(
                f"| {name} | {row['MB']:.0f} | failed: {web['error'][:80]} | | | {peaks(web)} | "
                f"{own['loadMs'] / 1000:.2f} | {own['medianMs']:.0f} | {own['peakMiB']:.0f} | | |"
            )
            continue
        median = statistics.median(web["times"])
        same = web["output"] == own["output"]
        lines.append(
            f"| {name} | {row['MB']:.0f} | {web['loadMs'] / 1000:.2f} | {web['firstMs']:.0f} | {median:.0f} | "
            f"{peaks(web)} | {own['loadMs'] / 1000:.2f} | {own['medianMs']:.0f} | "
            f"{own['peakMiB']:.0f} | {median / own['medianMs']:.1f}× | {'yes' if same else 'NO'} |"
        )
        if not same:
            failures.append(f"{name}: the browser's output {web['output']!r} is not {own['output']!r}")
    lines.append("")
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
