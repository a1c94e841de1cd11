"""Bulk throughput: a 10,000-line file through graphgen's file path and through CTranslate2's batch API.

    .venv/bin/python benchmarks/bulk.py [--lines 10000] [--threads 2]

Both translate the same lines with the demo model (real sentences from its corpus generator, so
real lengths and natural stops), 4 beams (the checkpoint's default), batches of 16, the same
number of threads, in this one process, one after the other. graphgen's figure is
``graphgen translate --input/--output`` end to end (file read, in-graph tokenizer, search,
detokenizer, file written); CTranslate2's includes SentencePiece tokenization and detokenization
in Python, which it leaves to the caller, and gets the whole list at once, so that it can sort
the lines by length itself. Prints lines/s, the ratio to graphgen fp32, and how many outputs
agree exactly with graphgen's (CTranslate2's beam search stops by a different rule than HF's
``early_stopping=False``, which graphgen reproduces).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from graphgen import Translator, export
from graphgen.runtime.bulk import TextLines, translate_file
from graphgen.testing import DEMO_DIR, corpus_pairs


def graphgen_run(model: Path, source: Path, work: Path, threads: int) -> tuple[float, list[str]]:
    translator = Translator(model, threads=threads)
    target = work / f"{model.stem}.out"
    started = time.perf_counter()
    translate_file(translator, source, target, TextLines(), overwrite=True, batch_size=16, progress=False)
    seconds = time.perf_counter() - started
    return seconds, target.read_text(encoding="utf-8").split("\n")[:-1]


def ct2_run(folder: Path, compute: str, lines: list[str], threads: int) -> tuple[float, list[str]]:
    import ctranslate2
    import sentencepiece as spm

    translator = ctranslate2.Translator(str(folder), device="cpu", compute_type=compute, intra_threads=threads)
    processor = spm.SentencePieceProcessor(model_file=str(DEMO_DIR / "source.spm"))
    started = time.perf_counter()
    batch = []
    for line in lines:
        language, _, rest = line.partition(" ") if line.startswith(">>") else ("", "", line)
        batch.append(([language] if language else []) + processor.encode(rest, out_type=str) + ["</s>"])
    results = translator.translate_batch(
        batch, max_batch_size=16, batch_type="examples", beam_size=4, max_decoding_length=512
    )
    outputs = ["".join(result.hypotheses[0]).replace("\u2581", " ").strip() for result in results]
    return time.perf_counter() - started, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from ctranslate2.converters import TransformersConverter

    lines = [source for source, _ in corpus_pairs(args.lines, seed=2026)]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        source = work / "corpus.txt"
        source.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        export(str(DEMO_DIR), str(work / "graphgen-fp32.onnx"))
        export(str(DEMO_DIR), str(work / "graphgen-int8.onnx"), int8=True)
        export(str(DEMO_DIR), str(work / "graphgen-int8-op.onnx"), int8=True, search="op")
        for compute in ("float32", "int8"):
            TransformersConverter(str(DEMO_DIR)).convert(str(work / f"ct2-{compute}"), quantization=compute, force=True)
        runs: dict[str, tuple[float, list[str]]] = {}
        for name in ("graphgen-fp32", "graphgen-int8", "graphgen-int8-op"):
            runs[name] = graphgen_run(work / f"{name}.onnx", source, work, args.threads)
            print(f"{name}: {args.lines / runs[name][0]:.0f} lines/s", file=sys.stderr, flush=True)
        for compute in ("float32", "int8"):
            runs[f"ct2-{compute}"] = ct2_run(work / f"ct2-{compute}", compute, lines, args.threads)
            print(f"ct2-{compute}: {args.lines / runs[f'ct2-{compute}'][0]:.0f} lines/s", file=sys.stderr, flush=True)
    reference = runs["graphgen-fp32"][1]
    labels = {
        "graphgen-fp32": "graphgen fp32 (`graphgen translate --input`)",
        "graphgen-int8": "graphgen int8",
        "graphgen-int8-op": "graphgen int8 --search op (ORT BeamSearch op, one input at a time)",
        "ct2-float32": "CTranslate2 float32 (translate_batch)",
        "ct2-int8": "CTranslate2 int8 (translate_batch)",
    }
    print(f"\n{args.lines:,} lines, demo model, 4 beams, batch 16, {args.threads} threads\n")
    print("| system | seconds | lines/s | vs graphgen fp32 | outputs equal to graphgen fp32 |")
    print("|---|---:|---:|---:|---:|")
    for name, (seconds, outputs) in runs.items():
        same = sum(a == b for a, b in zip(outputs, reference, strict=True))
        speed = runs["graphgen-fp32"][0] / seconds
        print(
            f"| {labels[name]} | {seconds:.1f} | {args.lines / seconds:.0f} | {speed:.2f}× | {same:,}/{args.lines:,} |"
        )
    print(json.dumps({name: round(seconds, 2) for name, (seconds, _) in runs.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
