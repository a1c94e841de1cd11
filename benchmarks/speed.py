"""graphgen against its peers, side by side on the same inputs, in one run; writes a report and a chart.

    make bench          # creates .venv and .venv-optimum, then runs this script (about 15 minutes)

Models: the full opus-mt-en-zh shape (vocab 65001, 6+6 layers, d_model 512) with random weights,
and the bundled demo model. Workloads: batch 1 with a 20-token input and a batch of 16 mixed-length
inputs, greedy and 4 beams, exactly N new tokens for every system (min length = max length).
Systems (``systems.py``) each run in a worker process of their own (``worker.py``); the driver
alternates between them per workload. Each timing is the median of ``--runs`` after a warm-up.
Also reported: file size, session load time and peak RSS per system, latency against output length
(chart), a roofline figure for graphgen fp32 greedy, and int8/int4 quality on the demo test set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from systems import SYSTEMS, System, cpu_model  # this folder is sys.path[0] when run as a script

from graphgen.testing import (
    DEMO_DIR,
    FULL_SIZE_EOS,
    FULL_SIZE_PAD,
    FULL_SIZE_SHAPES,
    REPO,
    demo_sources,
    full_size_family_checkpoint,
    opus_mt_shaped_checkpoint,
)

HERE = Path(__file__).resolve().parent
REPLY = "@@"


@dataclass
class Worker:
    system: System
    process: subprocess.Popen[str] | None = None
    info: dict[str, object] = field(default_factory=dict)
    failure: str = ""

    def ask(self, request: dict[str, object] | None = None) -> dict[str, object]:
        assert self.process is not None and self.process.stdout is not None and self.process.stdin is not None
        if request is not None:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY) :])
        raise RuntimeError(f"{self.system.label} worker ended: {self.process.wait()}")


def _python_for(system: System, optimum_python: Path) -> Path:
    return optimum_python if system.python == "optimum" else Path(sys.executable)


def start_workers(systems: list[System], checkpoint: Path, work: Path, optimum_python: Path) -> list[Worker]:
    """Prepare (export/convert) and load every system; a system that cannot is kept with the reason."""
    workers = []
    for system in systems:
        worker = Worker(system)
        workers.append(worker)
        python = _python_for(system, optimum_python)
        if not python.exists():
            worker.failure = f"no interpreter at {python} (run `make bench` to create it)"
            continue
        script = [str(python), str(HERE / "worker.py")]
        args = [system.key, str(checkpoint), str(work)]
        print(f"  preparing {system.label}", flush=True)
        done = subprocess.run([*script, "prepare", *args], capture_output=True, text=True)
        if done.returncode != 0:
            worker.failure = _last_error(done.stderr)
            print(f"    failed: {worker.failure}", flush=True)
            continue
        replies = [line[2:] for line in done.stdout.splitlines() if line.startswith("@@")]
        prepared = json.loads(replies[-1]) if replies else {}
        worker.process = subprocess.Popen(
            [*script, "serve", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            worker.info = worker.ask() | prepared
        except RuntimeError as error:
            worker.failure = str(error)
            worker.process = None
    return workers


def _last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "failed without a message"


def stop_workers(workers: list[Worker]) -> None:
    for worker in workers:
        if worker.process is not None:
            assert worker.process.stdin is not None
            worker.process.stdin.close()
            worker.process.wait()


@dataclass
class Workload:
    name: str
    ids: np.ndarray
    mask: np.ndarray


def random_workloads(pad: int, eos: int, batch: int = 16, top: int = 60000) -> list[Workload]:
    rng = np.random.default_rng(0)
    result = []
    for name, lengths in (
        ("batch 1, 20-token input", [20]),
        (f"batch {batch}, 5-40 tokens", rng.integers(5, 41, batch)),
    ):
        ids = np.full((len(lengths), max(lengths)), pad, dtype=np.int32)
        for row, n in enumerate(lengths):
            ids[row, :n] = rng.integers(10, top, size=n)
            ids[row, n - 1] = eos
        result.append(Workload(name, ids, (ids != pad).astype(np.int32)))
    return result


def demo_workloads() -> list[Workload]:
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(DEMO_DIR)
    sources = demo_sources()
    lengths = [len(tokenizer(s).input_ids) for s in sources]
    nearest_20 = sources[int(np.argmin([abs(n - 20) for n in lengths]))]
    result = []
    for name, texts in (
        (f"batch 1, {lengths[sources.index(nearest_20)]}-token sentence", [nearest_20]),
        ("batch 16 test sentences", sources[:16]),
    ):
        batch = tokenizer(texts, padding=True, return_tensors="np")
        result.append(Workload(name, batch.input_ids.astype(np.int32), batch.attention_mask.astype(np.int32)))
    return result


@dataclass
class Row:
    model: str
    workload: str
    search: str
    system: str
    ms: float
    tokens_per_s: float
    vs_hf: float | None


def _median_ms(workers: list[Worker], workload: Workload, beams: int, new_tokens: int, runs: int) -> dict[str, float]:
    """Median latency per system, the runs interleaved (system A run 1, B run 1, ..., A run 2, ...)
    so that a noisy minute on this shared machine hits every system alike."""
    base = {"ids": workload.ids.tolist(), "mask": workload.mask.tolist(), "beams": beams, "new_tokens": new_tokens}
    live = [w for w in workers if w.process is not None]
    times: dict[str, list[float]] = {w.system.key: [] for w in live}
    for round_ in range(runs):
        for worker in live:
            answer = worker.ask({**base, "runs": 1, "warm_up": round_ == 0})
            if answer["steps"] != [new_tokens] * len(workload.ids):
                raise RuntimeError(f"{worker.system.label} produced {answer['steps']} tokens, not {new_tokens}")
            times[worker.system.key] += answer["times_ms"]  # type: ignore[arg-type]
    return {key: statistics.median(values) for key, values in times.items()}


def time_workloads(
    model: str, workers: list[Worker], workloads: list[Workload], new_tokens: int, runs: int
) -> list[Row]:
    rows = []
    for workload in workloads:
        for beams in (1, 4):
            search = "greedy" if beams == 1 else f"{beams} beams"
            medians = _median_ms(workers, workload, beams, new_tokens, runs)
            hf_ms = medians.get("hf")
            produced = len(workload.ids) * new_tokens
            for worker in workers:
                if worker.system.key not in medians:
                    continue
                ms = medians[worker.system.key]
                ratio = hf_ms / ms if hf_ms else None
                rows.append(Row(model, workload.name, search, worker.system.label, ms, 1000 * produced / ms, ratio))
                print(f"  {workload.name}, {search}: {worker.system.label} {ms:.0f} ms", flush=True)
    return rows


def time_lengths(
    workers: list[Worker], workload: Workload, beams: int, lengths: list[int], runs: int
) -> dict[str, list[float]]:
    curves: dict[str, list[float]] = {w.system.label: [] for w in workers if w.process is not None}
    for n in lengths:
        medians = _median_ms(workers, workload, beams, n, runs)
        for worker in workers:
            if worker.system.key in medians:
                curves[worker.system.label].append(medians[worker.system.key])
        print(f"  chart: {n} new tokens done", flush=True)
    return curves


# --- extra figures -----------------------------------------------------------------------------


def read_bandwidth() -> float:
    """Bytes per second that ONNX Runtime reads weights at with 2 threads, best of 5: a
    one-row Gemm over a 256 MiB matrix, the same access pattern as a decoder step at batch 1."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    rows, width = 2**17, 512  # 256 MiB of float32, far beyond any cache
    gemm = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width]),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [rows, width]),
    ]
    graph = helper.make_graph([gemm], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {"x": np.ones((1, width), np.float32), "w": np.ones((rows, width), np.float32)}
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        session.run(None, feeds)
        best = min(best, time.perf_counter() - started)
    return feeds["w"].nbytes / best


def roofline(greedy_ms: float, steps: int, bandwidths: list[float]) -> str:
    """Decoder weight bytes read per greedy step x steps / time, against measured read bandwidth."""
    d, ffn, layers, vocab = 512, 2048, 6, 65001
    per_layer = 4 * d * d + 2 * d * d + 2 * d * ffn  # self q,k,v,o; cross q,o (k,v are cached); FFN
    bytes_per_step = 4 * (layers * per_layer + vocab * d)  # + the output projection, fp32
    achieved = bytes_per_step * steps / (greedy_ms / 1000)
    low, high = min(bandwidths), max(bandwidths)
    return (
        f"graphgen fp32 greedy, batch 1, full-size shape: {bytes_per_step / 1e6:.0f} MB of decoder weights per "
        f"step x {steps} steps in {greedy_ms:.0f} ms = {achieved / 1e9:.1f} GB/s. Read bandwidth measured in this "
        f"run just before and just after the timings (2 threads, a one-row Gemm over 256 MiB): "
        f"{low / 1e9:.1f}-{high / 1e9:.1f} GB/s, so the decoder reads its weights at "
        f"{100 * achieved / high:.0f}-{100 * achieved / low:.0f}% of the memory roofline (this shared machine's "
        "bandwidth drifts between and within runs)."
    )


def quantized_quality(work: Path) -> list[str]:
    """The quantized files against fp32 and against the references (demo test set): exact-match
    rates, and chrF (sacrebleu, characters: the targets are Chinese)."""
    from sacrebleu.metrics import CHRF

    from graphgen import Translator, export
    from graphgen.testing import demo_test_pairs

    pairs = demo_test_pairs()
    sources = [source for source, _ in pairs]
    references = [reference for _, reference in pairs]
    outputs, sizes = {}, {}
    for name, options in (("fp32", {}), ("int8", {"int8": True}), ("int4", {"int4": True})):
        path = work / f"demo-{name}.onnx"
        export(str(DEMO_DIR), str(path), progress=lambda _: None, **options)
        translator = Translator(path, threads=2)
        outputs[name] = [t for i in range(0, len(sources), 16) for t in translator.translate(sources[i : i + 16])]
        sizes[name] = path.stat().st_size / 2**20
    n = len(pairs)
    lines = [
        f"Demo model, {n} held-out test sentences, default search (4 beams).",
        "",
        "| file | MB | identical to fp32 | chrF vs fp32 | equal to the reference | chrF vs the references |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ("fp32", "int8", "int4"):
        out = outputs[name]
        same = sum(a == b for a, b in zip(outputs["fp32"], out, strict=True))
        correct = sum(o == r for o, r in zip(out, references, strict=True))
        to_fp32 = CHRF().corpus_score(out, [outputs["fp32"]]).score
        to_references = CHRF().corpus_score(out, [references]).score
        lines.append(
            f"| {name} | {sizes[name]:.1f} | {same}/{n} | {to_fp32:.1f} | {correct}/{n} | {to_references:.1f} |"
        )
    return lines


def describe_machine(workers: list[Worker]) -> str:
    cpu = cpu_model()
    memory = next(
        (line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")),
        "0",
    )
    versions: dict[str, str] = {}
    for worker in workers:
        versions |= {f"{k} ({worker.system.python} venv)": v for k, v in worker.info.get("versions", {}).items()}
    listed = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    return (
        f"{cpu}, {os.cpu_count()} cores visible, {int(memory) / 2**20:.0f} GiB RAM; {platform.platform()}; "
        f"Python {platform.python_version()}; all systems limited to 2 threads. Versions: {listed}."
    )


# --- report ------------------------------------------------------------------------------------


def chart(curves: dict[str, list[float]], lengths: list[int], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for label, values in curves.items():
        axes.plot(lengths, values, marker="o", label=label)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(lengths, [str(n) for n in lengths])
    axes.set_xlabel("new tokens generated")
    axes.set_ylabel("latency, ms (log scale)")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def memory_chart(peaks: dict[str, dict[str, float]], path: Path) -> None:
    """Peak RSS per system (horizontal bars), one panel per model: ``peaks[model][system]`` in MB."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(len(peaks), 1, figsize=(8, 1.2 + 0.45 * sum(map(len, peaks.values()))))
    for axes, (model, systems) in zip([panels] if len(peaks) == 1 else panels, peaks.items(), strict=True):
        labels = list(systems)
        bars = axes.barh(labels, [systems[label] for label in labels], color="#4c72b0")
        axes.bar_label(bars, fmt="%.0f", fontsize=8, padding=2)
        axes.invert_yaxis()
        axes.set_title(model, fontsize=9)
        axes.set_xlabel("peak RSS, MB")
        axes.tick_params(labelsize=8)
        axes.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


# Peers graphgen is compared with at the same precision (issue 5: graphgen should lead each).
PEERS = {
    "graphgen fp32": ["CTranslate2 float32", "optimum-onnx ORTModelForSeq2SeqLM (with past)"],
    "graphgen int8": ["CTranslate2 int8", "optimum-onnx ORTModelForSeq2SeqLM (with past)"],
}
WHY_BEHIND: dict[str, str] = {}  # known causes by search, for the lines below (none known now)


def against_peers(rows: list[Row]) -> list[str]:
    """Where graphgen trails a peer at the same precision, by how much and (where known) why."""
    by_key = {(r.model, r.workload, r.search, r.system): r.ms for r in rows}
    lines = ["## graphgen against its peers", ""]
    behind = []
    compared = 0
    for (model, workload, search, system), ms in by_key.items():
        for peer in PEERS.get(system, []):
            peer_ms = by_key.get((model, workload, search, peer))
            if peer_ms is None:
                continue
            compared += 1
            if ms > peer_ms:
                why = WHY_BEHIND.get(search, "") if workload.startswith("batch 16") else ""
                behind.append(
                    f"- {model}, {workload}, {search}: {system} {ms:.0f} ms, {peer} {peer_ms:.0f} ms "
                    f"({ms / peer_ms:.2f}x slower){': ' + why if why else ''}"
                )
    lines.append(f"{compared - len(behind)} of {compared} same-precision comparisons won by graphgen.")
    if behind:
        lines += ["", "Behind in:", "", *behind]
    return [*lines, ""]


def markdown(
    args: argparse.Namespace,
    rows: list[Row],
    per_model_workers: dict[str, list[Worker]],
    extras: list[str],
    elapsed_s: float,
) -> str:
    lines = [
        "# graphgen speed report",
        "",
        f"Written by `benchmarks/speed.py` on {time.strftime('%Y-%m-%d')} in {elapsed_s / 60:.1f} minutes "
        f"(`make bench`). {args.new_tokens} new tokens per input for every system, median of {args.runs} "
        "runs after a warm-up, the runs of all systems interleaved, each system in its own process.",
        "",
        f"Machine: {args.machine}",
        "",
        "## Latency",
        "",
        "| model | workload | search | system | latency ms | tokens/s | speed-up vs HF |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        ratio = f"{r.vs_hf:.2f}x" if r.vs_hf else ""
        lines.append(
            f"| {r.model} | {r.workload} | {r.search} | {r.system} | {r.ms:.0f} | {r.tokens_per_s:.0f} | {ratio} |"
        )
    lines += ["", "## Size, load time, memory", ""]
    lines += [
        "| model | system | file MB | export/convert s | its peak RSS MB | load s | peak RSS MB |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for model, workers in per_model_workers.items():
        for w in workers:
            if w.failure:
                lines.append(f"| {model} | {w.system.label} | could not run: {w.failure} | | | | |")
                continue
            info: dict = w.info
            prepared = (
                f"{float(info['prepare_s']):.0f} | {float(info['prepare_rss_mb']):.0f}"
                if w.system.key != "hf" and "prepare_s" in info
                else "| "
            )
            lines.append(
                f"| {model} | {w.system.label} | {float(info['size']) / 1e6:.1f} | {prepared} "
                f"| {float(info['load_s']):.2f} | {float(info['final_rss_mb']):.0f} |"
            )
    lines += [
        "",
        "Export/convert: the untimed preparation (graphgen export, CTranslate2's converter, optimum's export) "
        "in a process of its own, with that process's peak RSS. Load time: constructing the session/model "
        "from the prepared files. Peak RSS: the worker process's maximum resident set over the whole run "
        "(Python and the system's libraries included).",
        "",
        *extras,
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--chart-lengths", default="8,16,32,64,128")
    parser.add_argument("--chart-runs", type=int, default=3)
    parser.add_argument(
        "--models", default="full,demo", help=f"comma-separated: full, demo, {', '.join(FULL_SIZE_SHAPES)}"
    )
    parser.add_argument(
        "--tiny-families",
        action="store_true",
        help="2-layer, 2,000-token versions of the family shapes (a quick check)",
    )
    parser.add_argument("--systems", default=",".join(s.key for s in SYSTEMS if not s.key.endswith("-ext")))
    parser.add_argument("--optimum-python", type=Path, default=REPO / ".venv-optimum" / "bin" / "python")
    parser.add_argument("--report", type=Path, default=HERE / "report.md")
    args = parser.parse_args()
    started = time.perf_counter()
    systems = [s for s in SYSTEMS if s.key in args.systems.split(",")]
    lengths = [int(n) for n in args.chart_lengths.split(",")]
    rows: list[Row] = []
    per_model: dict[str, list[Worker]] = {}
    extras: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model in args.models.split(","):
            print(f"model: {model}", flush=True)
            if model == "full":
                checkpoint = opus_mt_shaped_checkpoint(work / "full-checkpoint", placeholder_tokenizer=True)
                label, workloads = "opus-mt-en-zh shape (random weights)", random_workloads(65000, 0)
            elif model in FULL_SIZE_SHAPES:
                folder = work / f"{model}-checkpoint"
                checkpoint = full_size_family_checkpoint(folder, model, tiny=args.tiny_families)
                label = FULL_SIZE_SHAPES[model][1] + (" (tiny)" if args.tiny_families else "")
                top = 1990 if args.tiny_families else 60000
                workloads = random_workloads(FULL_SIZE_PAD, FULL_SIZE_EOS, batch=8, top=top)
            else:
                checkpoint = work / "demo-checkpoint"
                shutil.copytree(DEMO_DIR, checkpoint)
                label, workloads = "demo-en-zh", demo_workloads()
            workers = start_workers(systems, checkpoint, work / model, args.optimum_python)
            per_model[label] = workers
            bandwidths = [read_bandwidth()]
            rows += time_workloads(label, workers, workloads, args.new_tokens, args.runs)
            bandwidths.append(read_bandwidth())
            if model == "full":
                curves = time_lengths(workers, workloads[0], 1, lengths, args.chart_runs)
                chart_path = args.report.with_name("latency_vs_length.png")
                chart(curves, lengths, f"{label}: {workloads[0].name}, greedy", chart_path)
                extras += ["## Latency against output length", "", f"![latency vs length]({chart_path.name})", ""]
                extras += ["| system | " + " | ".join(f"{n} tokens" for n in lengths) + " |"]
                extras += ["|---|" + "---:|" * len(lengths)]
                extras += [f"| {k} | " + " | ".join(f"{v:.0f}" for v in vs) + " |" for k, vs in curves.items()]
                extras.append("")
                greedy = [r for r in rows if r.model == label and r.system == "graphgen fp32" and r.search == "greedy"]
                if greedy:
                    extras += ["## Roofline", "", roofline(greedy[0].ms, args.new_tokens, bandwidths), ""]
            for worker in workers:
                if worker.process is not None:
                    worker.info["final_rss_mb"] = worker.ask({"rss_only": True})["rss_mb"]
            stop_workers(workers)
        args.machine = describe_machine([w for ws in per_model.values() for w in ws])
        peaks = {
            label: {w.system.label: float(w.info["final_rss_mb"]) for w in workers if not w.failure}
            for label, workers in per_model.items()
        }
        memory_path = args.report.with_name(args.report.stem + "_memory.png")
        memory_chart(peaks, memory_path)
        extras = [*against_peers(rows), "## Peak RSS per system", "", f"![peak RSS]({memory_path.name})", "", *extras]
        if "demo" in args.models:
            extras += ["## int8 and int4 quality", "", *quantized_quality(work), ""]
    report = markdown(args, rows, per_model, extras, time.perf_counter() - started)
    args.report.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
