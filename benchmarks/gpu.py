"""graphgen on a GPU against HF ``generate`` on the same GPU, in one run; writes ``gpu_report.md``.

    pip install -e ".[export]"                       # graphgen (and graphgen.testing) from this checkout
    pip uninstall -y onnxruntime && pip install onnxruntime-gpu   # for CUDA 12 or 13, cuDNN 9
    python benchmarks/gpu.py                         # one NVIDIA GPU; goal: under 8 minutes on an H200

(On a borrowed machine that takes little per transfer: ``benchmarks/gpu_wheel.py`` cuts the GPU wheel
to one architecture's kernels, 69 MB in two parts, and says how to unpack it there.)

1. Parity on the GPU: the demo model's 300 test sentences (4 beams, batches of 16) through the text
   files (float32 and float16, tokenizer in standard ops) on ``CUDAExecutionProvider``, against the
   same files on the CPU and HF ``generate`` (float32 and ``model.half()``) on the GPU.
2. Speed: the full opus-mt-en-zh and NLLB-200-distilled-600M shapes (random weights), exactly 40
   new tokens, batch 1 greedy, batch 1 × 4 beams, 16 × 4 and 64 × 4: HF float32 and float16,
   graphgen float32 and float16 (loop search), and ORT's BeamSearch op (float32, opus-mt only) for
   reference. Each time is the median of ``--runs`` after a warm-up; each system is checked to
   have produced exactly 40 tokens.
3. The text file's overhead on the GPU: the portable tokenizer and detokenizer run on the CPU
   parts of the session (the layer assignment the file asks for, ``contract.TEXT_ON_CPU``); the
   demo text file against its id-level twin at batch 16, and against a session without that
   setting, where most of the tokenizer's integer ops run on the GPU (as on ONNX Runtime 1.24 and
   older, which ignore it).
4. Where a decoding step's time goes (opus-mt shape, float32 and float16 loop files, batch 1 greedy
   and 16 × 4): ONNX Runtime's profile of one run, per step: the loop body's nodes run on the GPU
   and on the CPU, the copies between them (``Memcpy`` nodes ONNX Runtime inserted, counted in the
   graph it optimized for the session, with the ops they feed), the kernel time against the Loop
   node's own time (the rest is dispatch, copies of the body's inputs and waits), and the ops that
   take most of the kernel time.

``--device cpu --quick`` runs the same code on tiny shapes on the CPU (a smoke test, no GPU).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from systems import _forced_length_kwargs  # this folder is sys.path[0] when run as a script

from graphgen.testing import DEMO_DIR, demo_sources, hf_translate, open_session

HERE = Path(__file__).resolve().parent
NEW_TOKENS = 40
WORKLOADS = (("batch 1 greedy", 1, 1), ("batch 1 × 4 beams", 1, 4), ("batch 16 × 4", 16, 4), ("batch 64 × 4", 64, 4))
QUICK_WORKLOADS = (("batch 1 greedy", 1, 1), ("batch 4 × 2 beams", 4, 2))


@dataclass
class Setup:
    device: str  # "cuda" or "cpu"
    quick: bool
    runs: int
    work: Path

    @property
    def providers(self) -> list[str]:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"] if self.device == "cuda" else ["CPUExecutionProvider"]


def _session(path: Path, providers: list[str]):
    """A session on ``providers``, refused if ONNX Runtime fell back from the first (a silent CPU run
    would be timed as the GPU's)."""
    session = open_session(path, providers=providers)
    if providers[0] not in session.get_providers():
        raise RuntimeError(f"{path.name}: {providers[0]} not used (got {session.get_providers()})")
    return session


def _export(checkpoint: Path, path: Path, **options: object) -> Path:
    from graphgen import export

    if not path.exists():
        started = time.perf_counter()
        export(str(checkpoint), str(path), progress=lambda _: None, **options)  # type: ignore[arg-type]
        print(f"  exported {path.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


# --- 1. parity on the GPU ------------------------------------------------------------------------


def parity(setup: Setup) -> list[str]:
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    from graphgen import Translator

    sources = demo_sources()
    if setup.quick:
        sources = sources[:32]
    tokenizer = MarianTokenizer.from_pretrained(DEMO_DIR)
    results: dict[str, list[str]] = {}
    for name, dtype in (("HF float32", torch.float32), ("HF float16", torch.float16)):
        model = MarianMTModel.from_pretrained(DEMO_DIR, dtype=dtype).eval().to(setup.device)
        texts = []
        for start in range(0, len(sources), 16):
            texts += hf_translate(model, tokenizer, sources[start : start + 16], num_beams=4)
        results[name] = texts
    for precision, fp16 in (("float32", False), ("float16", True)):
        path = _export(DEMO_DIR, setup.work / f"demo-text-{precision}.onnx", fp16=fp16)
        for where, providers in ((setup.device.upper(), setup.providers), ("CPU", ["CPUExecutionProvider"])):
            translator = Translator(path, providers=providers)
            texts = []
            for start in range(0, len(sources), 16):
                texts += translator.translate(sources[start : start + 16], num_beams=4)
            results[f"graphgen {precision} text file on {where}"] = texts
    n = len(sources)

    def same(a: str, b: str) -> str:
        return f"{sum(x == y for x, y in zip(results[a], results[b], strict=True))}/{n}"

    gpu = setup.device.upper()
    lines = [
        f"Demo test set ({n} sentences, 4 beams, batches of 16), text files (tokenizer in standard ops) on {gpu}:",
        "",
        "| comparison | equal |",
        "|---|---:|",
    ]
    for precision, hf in (("float32", "HF float32"), ("float16", "HF float16")):
        ours = f"graphgen {precision} text file on {gpu}"
        lines.append(f"| graphgen {precision} on {gpu} = {hf} generate on {gpu} | {same(ours, hf)} |")
        on_cpu = same(ours, f"graphgen {precision} text file on CPU")
        lines.append(f"| graphgen {precision} on {gpu} = the same file on the CPU | {on_cpu} |")
    lines.append(f"| HF float16 = HF float32 (both on {gpu}) | {same('HF float16', 'HF float32')} |")
    return lines


# --- 2. speed ------------------------------------------------------------------------------------


class HF:
    def __init__(self, checkpoint: Path, device: str, half: bool) -> None:
        import torch
        from transformers import AutoModelForSeq2SeqLM

        self.torch, self.device = torch, device
        dtype = torch.float16 if half else torch.float32
        self.model = AutoModelForSeq2SeqLM.from_pretrained(checkpoint, dtype=dtype).eval().to(device)

    def __call__(self, ids: np.ndarray, mask: np.ndarray, beams: int) -> int:
        torch = self.torch
        with torch.no_grad():
            out = self.model.generate(
                input_ids=torch.from_numpy(ids).long().to(self.device),
                attention_mask=torch.from_numpy(mask).long().to(self.device),
                num_beams=beams,
                **_forced_length_kwargs(NEW_TOKENS),
            )
        return int(out.cpu().shape[1]) - 1

    def close(self) -> None:
        del self.model
        if self.device == "cuda":
            self.torch.cuda.empty_cache()


class Graphgen:
    def __init__(self, path: Path, providers: list[str], options=None) -> None:  # options: ort.SessionOptions
        if options is None:
            self.session = _session(path, providers)
        else:  # as configured (profiling): no fallback check, the plain run before it made that
            import onnxruntime as ort

            self.session = ort.InferenceSession(str(path), options, providers=providers)

    def __call__(self, ids: np.ndarray, mask: np.ndarray, beams: int) -> int:
        lengths = {k: np.array([v], np.int32) for k, v in _forced_length_kwargs(NEW_TOKENS).items()}
        feeds = {"input_ids": ids, "attention_mask": mask, "num_beams": np.array([beams], np.int32), **lengths}
        sequences = self.session.run(["sequences"], feeds)[0]
        # the sequences leave out a final EOS (HF's keep it): a row shorter than max_length ended by one
        return sequences.shape[2] - 1 + int(sequences.shape[2] < NEW_TOKENS + 1)

    def close(self) -> None:
        del self.session


def _inputs(batch: int, pad: int, eos: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(batch)
    lengths = [20] if batch == 1 else rng.integers(5, 41, batch)
    ids = np.full((len(lengths), max(lengths)), pad, dtype=np.int32)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(10, vocab - 10, size=n)
        ids[row, n - 1] = eos
    return ids, (ids != pad).astype(np.int32)


def _median_ms(run: Callable[[np.ndarray, np.ndarray, int], int], ids, mask, beams: int, runs: int) -> float:
    steps = run(ids, mask, beams)  # warm-up (and the check)
    if steps != NEW_TOKENS:
        raise RuntimeError(f"{steps} tokens instead of {NEW_TOKENS}")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run(ids, mask, beams)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def speed(setup: Setup, shape: str) -> list[str]:
    from graphgen.testing import FULL_SIZE_EOS, FULL_SIZE_PAD, full_size_family_checkpoint, opus_mt_shaped_checkpoint

    folder = setup.work / shape
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = folder / "checkpoint"
    pad, eos, vocab = (65000, 0, 65001) if shape == "opus-mt" else (FULL_SIZE_PAD, FULL_SIZE_EOS, 256206)
    if setup.quick and shape == "opus-mt":  # the demo model stands in for the opus-mt shape
        checkpoint, pad, vocab = DEMO_DIR, 458, 459
    elif setup.quick:
        vocab = 2000
    if not (checkpoint / "model.safetensors").exists():
        if shape == "opus-mt":
            opus_mt_shaped_checkpoint(checkpoint, placeholder_tokenizer=True)
        else:
            full_size_family_checkpoint(checkpoint, "nllb", tiny=setup.quick)
    files = {
        "graphgen float32": _export(checkpoint, folder / "fp32.onnx", tokenizer=False),
        "graphgen float16": _export(checkpoint, folder / "fp16.onnx", tokenizer=False, fp16=True),
    }
    if shape == "opus-mt":
        files["graphgen float32, BeamSearch op"] = _export(checkpoint, folder / "op.onnx", tokenizer=False, search="op")
    systems: dict[str, Callable[[], HF | Graphgen]] = {
        "HF float32": lambda: HF(checkpoint, setup.device, half=False),
        "HF float16": lambda: HF(checkpoint, setup.device, half=True),
    }
    for name, path in files.items():
        systems[name] = lambda path=path: Graphgen(path, setup.providers)
    workloads = QUICK_WORKLOADS if setup.quick else WORKLOADS
    table: dict[str, dict[str, float]] = {}
    for name, make in systems.items():
        runner = make()
        table[name] = {}
        for label, batch, beams in workloads:
            ids, mask = _inputs(batch, pad, eos, vocab)
            table[name][label] = _median_ms(runner, ids, mask, beams, setup.runs)
            print(f"  {shape} {name} {label}: {table[name][label]:.1f} ms", flush=True)
        runner.close()
    labels = [label for label, _, _ in workloads]
    lines = [f"| {shape} ({setup.device}) | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for name, times in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{times[label]:.1f}" for label in labels) + " |")
    hf16, gg16, gg32 = table["HF float16"], table["graphgen float16"], table["graphgen float32"]
    lines.append(
        "| graphgen float16 speed-up over HF float16 | "
        + " | ".join(f"{hf16[x] / gg16[x]:.1f}×" for x in labels)
        + " |"
    )
    lines.append(
        "| graphgen float16 speed-up over graphgen float32 | "
        + " | ".join(f"{gg32[x] / gg16[x]:.2f}×" for x in labels)
        + " |"
    )
    return lines


# --- 4. where a step's time goes -----------------------------------------------------------------


def _loop_body_nodes(graph) -> tuple[set[str], dict[str, int], list[str]]:  # graph: onnx.GraphProto
    """Names of the nodes in the search loop's body (its ``If`` branches included), how many of each
    op type, and what each ``Memcpy`` node there feeds (``MemcpyToHost → TopK``)."""
    import onnx

    names: set[str] = set()
    ops: dict[str, int] = {}
    copies: list[str] = []

    def walk(g, inside: bool) -> None:
        consumers: dict[str, list[str]] = {}
        for node in g.node:
            for name in node.input:
                consumers.setdefault(name, []).append(node.op_type)
        for node in g.node:
            if inside:
                names.add(node.name)
                ops[node.op_type] = ops.get(node.op_type, 0) + 1
                if node.op_type.startswith("Memcpy"):
                    fed = consumers.get(node.output[0], []) or ["a subgraph or output"]
                    copies.append(f"{node.op_type} → {'/'.join(sorted(set(fed)))}")
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g, inside or node.op_type == "Loop")

    walk(graph, False)
    return names, ops, copies


CONTROL_FLOW = ("If", "Loop", "Scan")


def step_profile(setup: Setup) -> list[str]:
    """ONNX Runtime's profile of the loop search's decoding steps on ``setup.device``."""
    import json

    import onnx
    import onnxruntime as ort

    folder = setup.work / "opus-mt"
    checkpoint, pad, eos, vocab = folder / "checkpoint", 65000, 0, 65001
    if setup.quick:
        checkpoint, pad, vocab = DEMO_DIR, 458, 459
    files = {
        "float32": _export(checkpoint, folder / "fp32.onnx", tokenizer=False),
        "float16": _export(checkpoint, folder / "fp16.onnx", tokenizer=False, fp16=True),
    }
    lines = [
        f"{'Demo model' if setup.quick else 'opus-mt-en-zh shape'}, loop search, one profiled run after a warm-up, "
        f"per decoding step ({NEW_TOKENS} steps): nodes of the loop body ONNX Runtime ran on {setup.device.upper()} "
        "and on the CPU, copies between the two (Memcpy nodes it inserted: in the body's graph / run in the whole "
        "call, per step), "
        "kernel time per step (an If's own time left out: its branches' nodes are counted), the Loop node's own "
        "time per step (what exceeds the kernel time is dispatch, copies of the body's inputs between devices "
        "and waits), and the five ops with most of the kernel time (ms per step, nodes per step).",
        "",
        "| file | workload | ms per step (unprofiled) | body nodes on device / CPU | Memcpy in body / per step "
        "| kernel ms per step | Loop ms per step | top ops |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    copies: set[str] = set()
    for precision, path in files.items():
        optimized = setup.work / f"optimized-{precision}.onnx"  # the graph as placed, copies included
        for label, batch, beams in (("batch 1 greedy", 1, 1), ("batch 16 × 4", 16, 4)):
            ids, mask = _inputs(batch, pad, eos, vocab)
            plain = Graphgen(path, setup.providers)
            step_ms = _median_ms(plain, ids, mask, beams, setup.runs) / NEW_TOKENS
            plain.close()
            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.enable_profiling = True
            options.profile_file_prefix = str(setup.work / f"profile-{precision}-{batch}")
            if not optimized.exists():  # the same graph for both workloads: written once (weights and all)
                options.optimized_model_filepath = str(optimized)
                options.add_session_config_entry(
                    "session.optimized_model_external_initializers_file_name", f"weights-{precision}.bin"
                )
                options.add_session_config_entry(
                    "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
                )
            runner = Graphgen(path, setup.providers, options)
            runner(ids, mask, beams)  # warm-up
            runner(ids, mask, beams)  # the run counted below
            events = json.loads(Path(runner.session.end_profiling()).read_text())
            runner.close()
            body, body_ops, body_copies = _loop_body_nodes(onnx.load(str(optimized), load_external_data=False).graph)
            last_run = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][-1]
            start, end = last_run["ts"], last_run["ts"] + last_run["dur"]
            on_device = on_cpu = memcpy = 0
            kernel_us = loop_us = 0.0
            by_op: dict[str, list[float]] = {}
            for event in events:
                if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
                    continue
                if not start <= event["ts"] <= end:
                    continue
                args = event.get("args", {})
                op = args.get("op_name", "?")
                memcpy += op.startswith("Memcpy")  # anywhere in the run: most are per step
                loop_us += event["dur"] if op == "Loop" else 0.0
                if event["name"][: -len("_kernel_time")] not in body:
                    continue
                if args.get("provider") == "CPUExecutionProvider":
                    on_cpu += 1
                else:
                    on_device += 1
                if op in CONTROL_FLOW:  # their time is their branches' nodes, counted one by one
                    continue
                kernel_us += event["dur"]
                by_op.setdefault(op, [0.0, 0])
                by_op[op][0] += event["dur"]
                by_op[op][1] += 1
            top = sorted(by_op.items(), key=lambda item: -item[1][0])[:5]
            top_text = ", ".join(f"{op} {us / 1000 / NEW_TOKENS:.2f} ({n / NEW_TOKENS:.0f})" for op, (us, n) in top)
            memcpy_in_body = sum(n for op, n in body_ops.items() if op.startswith("Memcpy"))
            lines.append(
                f"| {precision} | {label} | {step_ms:.2f} | {on_device / NEW_TOKENS:.0f} / {on_cpu / NEW_TOKENS:.0f} "
                f"| {memcpy_in_body} / {memcpy / NEW_TOKENS:.1f} | {kernel_us / 1000 / NEW_TOKENS:.2f} "
                f"| {loop_us / 1000 / NEW_TOKENS:.2f} | {top_text} |"
            )
            copies.update(f"{precision}: {copy}" for copy in body_copies)
            print(f"  profiled {precision} {label}", flush=True)
    inserted = "; ".join(sorted(copies)) or "none"
    lines += ["", f"Copies ONNX Runtime inserted in the loop body, and what they feed: {inserted}."]
    lines += ["", *_modelled_copies(files)]
    return lines


def _modelled_copies(files: dict[str, Path]) -> list[str]:
    """What graphgen.testing.cuda_copies (ONNX Runtime's placement rules, modelled for CI without a
    GPU) predicts for a usual decoding step: set beside the inserted copies above, it checks the model."""
    from graphgen.testing import cuda_copies

    lines = ["Modelled by graphgen.testing.cuda_copies for a usual step (feeds and fetches included):"]
    for precision, path in files.items():
        placement = cuda_copies.place(cuda_copies.basic_graph(path))
        for search in ("greedy_step", "beam_step"):
            found = cuda_copies.step_copies(placement, search)
            text = "; ".join(f"{c.value.rsplit('/', 1)[-1]} {c.direction} ({c.reason})" for c in found) or "none"
            lines.append(f"- {precision}, {search.split('_')[0]}: {text}")
    return lines


# --- 3. the text file's overhead -----------------------------------------------------------------


def text_overhead(setup: Setup) -> list[str]:
    from transformers import MarianTokenizer

    from graphgen import Translator

    sources = demo_sources()[:16]
    text = _export(DEMO_DIR, setup.work / "demo-text-float32.onnx")
    ids_file = _export(DEMO_DIR, setup.work / "demo-ids-float32.onnx", tokenizer=False)
    batch = MarianTokenizer.from_pretrained(DEMO_DIR)(sources, padding=True, return_tensors="np")
    ids, mask = batch.input_ids.astype(np.int32), batch.attention_mask.astype(np.int32)
    translator = Translator(text, providers=setup.providers)
    session = _session(ids_file, setup.providers)
    feeds = {"input_ids": ids, "attention_mask": mask, "num_beams": np.array([4], np.int32)}

    def median(run: Callable[[], object]) -> float:
        run()
        times = []
        for _ in range(max(setup.runs, 5)):
            started = time.perf_counter()
            run()
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    # The same file in a session without the layer assignment it asks for (contract.TEXT_ON_CPU), as
    # on ONNX Runtime 1.24 and older, which ignore it: the tokenizer's integer ops then run on the GPU.
    import onnxruntime as ort

    from graphgen.contract import read_file_info
    from graphgen.runtime.translator import session_options, utf8_batch
    from graphgen.testing.cuda_copies import per_call, profile

    assigned = _session(text, setup.providers)  # open_session sets what the file asks for
    unassigned = ort.InferenceSession(str(text), session_options(extensions=False), providers=setup.providers)
    text_feeds = {"text_utf8": utf8_batch(sources), "num_beams": np.array([4], np.int32)}
    # One long text (1354 characters, cut to the model's positions), decoding stopped after one step:
    # the tokenizer's share, whose loop runs once per character.
    long_text = " ".join(demo_sources()[:30])
    long_feeds = {
        "text_utf8": utf8_batch([long_text]),
        "truncate": np.array([True]),
        "num_beams": np.array([1], np.int32),
        "max_length": np.array([2], np.int32),
    }
    lines = []
    config = read_file_info(text).session_config
    for label, inputs in (
        ("16 test sentences, 4 beams", text_feeds),
        (f"one {len(long_text)}-character text", long_feeds),
    ):
        same = np.array_equal(assigned.run(["translation"], inputs)[0], unassigned.run(["translation"], inputs)[0])
        with_ms = median(lambda inputs=inputs: assigned.run(["translation"], inputs))
        without_ms = median(lambda inputs=inputs: unassigned.run(["translation"], inputs))
        run = profile(text, inputs)  # one CPU run, modelled with the setting and without it
        modelled = [per_call(run, entries) for entries in (config, {})]
        lines += [
            f"- {label}: {with_ms:.1f} ms with the layer assignment the file asks for (tokenizer and "
            f"detokenizer on the CPU), {without_ms:.1f} ms without it (their integer ops on the {setup.device}); "
            f"translations {'the same' if same else 'DIFFERENT'}. Modelled for a CUDA session "
            "(graphgen.testing.cuda_copies, from a CPU profile of the same call): "
            + "; ".join(
                f"{which}: {call.waits} waits for the GPU, {call.copies_to_gpu} copies to it, "
                f"{call.kernels} GPU kernels"
                for which, call in zip(("with it", "without it"), modelled, strict=True)
            )
            + "."
        ]
    text_ms = median(lambda: translator.translate(sources, num_beams=4))
    ids_ms = median(lambda: session.run(["sequences"], feeds))
    return [
        f"Demo model, 16 test sentences, 4 beams, on {setup.device}: text file (Translator) {text_ms:.1f} ms, "
        f"id-level file {ids_ms:.1f} ms: tokenizer + detokenizer {text_ms - ids_ms:.1f} ms.",
        "",
        "The text file in a session with and without the setting `session.layer_assignment_settings` = "
        f"`{config.get('session.layer_assignment_settings', '')}` (ONNX Runtime 1.25 and later; 1.24 and older "
        "ignore it):",
        "",
        *lines,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny shapes (a smoke test)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shapes", default="opus-mt,nllb")
    parser.add_argument("--work", type=Path, help="where exports go (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=HERE / "gpu_report.md")
    args = parser.parse_args()

    import onnxruntime as ort

    if args.device == "cuda":
        if hasattr(ort, "preload_dlls"):
            ort.preload_dlls()
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            sys.exit("no CUDAExecutionProvider here: pip install onnxruntime-gpu (see docs/platforms.md)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as temporary:
        setup = Setup(args.device, args.quick, args.runs, args.work or Path(temporary))
        setup.work.mkdir(parents=True, exist_ok=True)
        report = ["# graphgen on a GPU", ""]

        def add(lines: list[str]) -> None:
            """Append a section and write the report so far: a run cut short (a borrowed GPU's time
            limit) still leaves every finished section in the file and on stdout."""
            report.extend(lines)
            args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
            print("\n".join(lines), flush=True)

        add([f"onnxruntime {ort.__version__}, {platform.platform()}, device {args.device}", ""])
        add(["## Parity", "", *parity(setup), ""])
        add([f"## Speed (ms, median of {args.runs}, exactly {NEW_TOKENS} new tokens)", ""])
        for shape in args.shapes.split(","):
            add([*speed(setup, shape), ""])
        add(["## The text file's tokenizer and detokenizer", "", *text_overhead(setup), ""])
        if "opus-mt" in args.shapes.split(","):
            # the last section, a diagnosis: its failure must not cost the measurements above
            try:
                profile = step_profile(setup)
            except Exception as error:  # reported in the file, which still gets written
                profile = [f"The profile failed: {error!r}"]
            add(["## Where a decoding step's time goes", "", *profile, ""])
        add([f"Total {time.perf_counter() - started:.0f} s including exports."])


if __name__ == "__main__":
    main()
