"""Measure how often the exported graph matches HF generate, per generation setting.

    python benchmarks/parity_table.py [--checkpoint models/demo-en-zh] [--sentences 120]

Prints a markdown table (docs/parity.md's table comes from here). "top-1" compares the best
hypothesis only; "all" compares every returned hypothesis in order.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from transformers import MarianMTModel, MarianTokenizer

from graphgen import export
from graphgen.testing import DEMO_DIR, open_session
from graphgen.verify.parity import compare, graph_generate, hf_generate

SETTINGS: list[tuple[str, dict[str, object]]] = [
    ("greedy", {"num_beams": 1}),
    ("4 beams (checkpoint default)", {}),
    ("4 beams, 2 returned", {"num_return_sequences": 2}),
    ("4 beams, 4 returned", {"num_return_sequences": 4}),
    ("length_penalty 0.6", {"length_penalty": 0.6}),
    ("length_penalty 2.0", {"length_penalty": 2.0}),
    ("repetition_penalty 1.3, greedy", {"num_beams": 1, "repetition_penalty": 1.3}),
    ("repetition_penalty 1.3, 4 beams", {"repetition_penalty": 1.3}),
    ("min_length 14", {"min_length": 14}),
    ("max_length 9 (forced EOS)", {"max_length": 9}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEMO_DIR))
    parser.add_argument("--sentences", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    lines = (Path(args.checkpoint) / "test.tsv").read_text(encoding="utf-8").splitlines()
    sentences = [line.split("\t")[0] for line in lines][: args.sentences]
    model = MarianMTModel.from_pretrained(args.checkpoint).eval()
    tokenizer = MarianTokenizer.from_pretrained(args.checkpoint)
    config = model.generation_config
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ids.onnx"
        export(args.checkpoint, str(path), tokenizer=False)
        session = open_session(path)
        print(f"{len(sentences)} sentences of {args.checkpoint}, batch {args.batch_size}\n")
        print("| setting | top-1 identical | all returned identical | HF s | graph s |")
        print("|---|---|---|---|---|")
        for label, settings in SETTINGS:
            started = time.perf_counter()
            expected = hf_generate(model, tokenizer, sentences, args.batch_size, **settings)
            hf_seconds = time.perf_counter() - started
            started = time.perf_counter()
            actual = graph_generate(
                session, tokenizer, sentences, args.batch_size, config.eos_token_id, config.pad_token_id, **settings
            )
            graph_seconds = time.perf_counter() - started
            top1 = compare(label, sentences, [r[:1] for r in expected], [r[:1] for r in actual])
            full = compare(label, sentences, expected, actual)
            print(
                f"| {label} | {top1.matches}/{top1.total} | {full.matches}/{full.total} "
                f"| {hf_seconds:.1f} | {graph_seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
