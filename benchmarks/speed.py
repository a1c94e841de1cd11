"""First speed comparison: graphgen fp32/int8 against HF generate and CTranslate2, in one process.

    pip install -e ".[export,bench]" && python benchmarks/speed.py [--runs 5] [--new-tokens 40]

Uses the full opus-mt-en-zh shape (vocab 65001, 6+6 layers, d_model 512) with random weights,
batch 1, a 20-token input and exactly N new tokens for every system (min_length = max_length),
greedy and 4 beams; prints medians and ratios as a markdown table. Issue 5's full benchmark
(optimum-onnx, the seed approach, batch 16, charts, roofline) builds on this. CTranslate2 gets
exactly N tokens through min/max_decoding_length (its hypotheses exclude EOS; HF's and graphgen's
N-th new token is the forced EOS).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_full_size import opus_mt_shaped_checkpoint  # noqa: E402
from transformers import MarianMTModel  # noqa: E402

from graphgen._export import export  # noqa: E402


def add_placeholder_tokenizer(checkpoint: Path) -> list[str]:
    """Tokenizer files for the random checkpoint (CTranslate2's converter reads the vocabulary)."""
    import json
    import shutil

    size = 65001
    pieces = ["</s>", "<unk>", *[f"▁w{i}" for i in range(2, size - 1)], "<pad>"]
    (checkpoint / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}), encoding="utf-8")
    for name in ("source.spm", "target.spm"):
        shutil.copy(ROOT / "models" / "demo-en-zh" / name, checkpoint / name)
    (checkpoint / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": False}), encoding="utf-8")
    return pieces


def median_ms(run: object, runs: int) -> float:
    run()  # type: ignore[operator]  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = opus_mt_shaped_checkpoint(Path(tmp) / "checkpoint")
        graphs = {}
        for name, int8 in (("graphgen fp32", False), ("graphgen int8", True)):
            path = Path(tmp) / f"{name.split()[1]}.onnx"
            export(checkpoint, path, tokenizer=False, int8=int8)
            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = 2
            graphs[name] = (ort.InferenceSession(str(path), options), path.stat().st_size)
        model = MarianMTModel.from_pretrained(checkpoint).eval()
        pieces = add_placeholder_tokenizer(checkpoint)
        translators = {}
        try:
            import ctranslate2
            from ctranslate2.converters import TransformersConverter

            for compute in ("float32", "int8"):
                folder = Path(tmp) / f"ct2-{compute}"
                TransformersConverter(str(checkpoint)).convert(str(folder), quantization=compute)
                size = sum(f.stat().st_size for f in folder.iterdir())
                translators[f"CTranslate2 {ctranslate2.__version__} {compute}"] = (
                    ctranslate2.Translator(str(folder), device="cpu", compute_type=compute, intra_threads=2),
                    size,
                )
        except ImportError:
            print("CTranslate2 not installed (pip install ctranslate2): skipped\n")
        length = args.new_tokens + 1  # + the decoder start token
        rng = np.random.default_rng(0)
        workloads = {
            "batch 1, 20-token input": [20],
            "batch 16, inputs of 5-40 tokens": [int(n) for n in rng.integers(5, 41, size=16)],
        }
        print(f"{args.new_tokens} new tokens per input, median of {args.runs}, 2 threads\n")
        print("| workload | system | search | latency ms | tokens/s | speed-up vs HF | file MB |")
        print("|---|---|---|---|---|---|---|")
        timings: dict[tuple[str, str, int], float] = {}
        for workload, lengths in workloads.items():
            ids = np.full((len(lengths), max(lengths)), 65000, dtype=np.int32)
            for row, n in enumerate(lengths):
                ids[row, :n] = rng.integers(10, 60000, size=n)
                ids[row, n - 1] = 0
            mask = (ids != 65000).astype(np.int32)
            produced = len(lengths) * args.new_tokens
            source = [[pieces[i] for i in row[:n]] for row, n in zip(ids, lengths, strict=True)]
            for beams in (1, 4):
                search = "greedy" if beams == 1 else f"{beams} beams"

                def hf(beams: int = beams, ids: np.ndarray = ids, mask: np.ndarray = mask) -> None:
                    with torch.no_grad():
                        model.generate(
                            input_ids=torch.from_numpy(ids).long(),
                            attention_mask=torch.from_numpy(mask),
                            num_beams=beams,
                            min_length=length,
                            max_length=length,
                        )

                hf_ms = median_ms(hf, args.runs)
                print(
                    f"| {workload} | HF generate (torch {torch.__version__}) | {search} | {hf_ms:.0f} "
                    f"| {1000 * produced / hf_ms:.0f} | 1.00 | |",
                    flush=True,
                )
                runs: dict[str, tuple[object, int]] = {}
                for name, (translator, size) in translators.items():
                    runs[name] = (
                        lambda t=translator, b=beams, s=source: t.translate_batch(  # type: ignore[attr-defined]
                            s, beam_size=b, min_decoding_length=args.new_tokens, max_decoding_length=args.new_tokens
                        ),
                        size,
                    )
                for name, (session, size) in graphs.items():
                    feeds = {
                        "input_ids": ids,
                        "attention_mask": mask,
                        "min_length": np.array([length], np.int32),
                        "max_length": np.array([length], np.int32),
                        "num_beams": np.array([beams], np.int32),
                    }
                    runs[name] = (lambda s=session, f=feeds: s.run(None, f), size)
                for name, (run, size) in runs.items():
                    ms = median_ms(run, args.runs)
                    timings[(workload, name, beams)] = ms
                    print(
                        f"| {workload} | {name} | {search} | {ms:.0f} | {1000 * produced / ms:.0f} "
                        f"| {hf_ms / ms:.2f} | {size / 1e6:.0f} |",
                        flush=True,
                    )
        report_roofline(timings[("batch 1, 20-token input", "graphgen fp32", 1)], args.new_tokens)


def memory_bandwidth() -> float:
    """Bytes per second of a large array copy (one read and one write per byte)."""
    source = np.ones(2**28 // 4, dtype=np.float32)  # 256 MiB, far beyond any cache
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - started)
    return 2 * source.nbytes / best


def report_roofline(greedy_ms: float, steps: int) -> None:
    """Decoder weight bytes read per greedy step x steps / time, against measured bandwidth."""
    d, ffn, layers, vocab = 512, 2048, 6, 65001
    per_layer = 4 * d * d + 2 * d * d + 2 * d * ffn  # self q,k,v,o; cross q,o (k,v are cached); FFN
    bytes_per_step = 4 * (layers * per_layer + vocab * d)  # + the output projection, fp32
    achieved = bytes_per_step * steps / (greedy_ms / 1000)
    bandwidth = memory_bandwidth()
    print(
        f"\nroofline, graphgen fp32 greedy batch 1: {bytes_per_step / 1e6:.0f} MB of decoder weights per step, "
        f"{achieved / 1e9:.1f} GB/s achieved vs {bandwidth / 1e9:.1f} GB/s measured copy bandwidth "
        f"({100 * achieved / bandwidth:.0f}%)"
    )


if __name__ == "__main__":
    main()
