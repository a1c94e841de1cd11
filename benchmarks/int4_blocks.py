"""The int4 block size: quality on the demo model, memory and speed on the NLLB-200-distilled-600M shape.

    python benchmarks/int4_blocks.py                  # blocks 32, 64, 128; about 5 minutes
    python benchmarks/int4_blocks.py --blocks 32,64   # a subset

Why this script: ``graphgen export --int4`` stores one float32 scale per ``INT4_BLOCK`` inputs
(``graphgen/model/weights.py``), and the choice trades accuracy for memory and speed. ONNX
Runtime keeps each scale three times once the file is loaded (the mapped original, the packed copy,
and a per-block sum for its int8 products), so at 32 inputs per block the scales cost as much
memory as the 4-bit codes. For each block size this prints:

- the demo model's 300 test sentences (4 beams) through the int4 text file: strings identical to
  the fp32 file's, and equal to the references;
- the mean per-token KL divergence from fp32 of HF's model with the int4 weights (dequantized,
  teacher-forced on the references, embeddings and output projection included): finer than
  exact strings, which a model this small rarely changes;
- on the NLLB-600M shape (random weights, ``--external-data``, one input × 4 beams, 40 tokens):
  the resident set after loading, the peak, and the median of 3 runs, each file in a fresh process.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import graphgen.model.weights as weights
from graphgen import Translator, export
from graphgen.testing import DEMO_DIR, demo_test_pairs, full_size_family_checkpoint

RUN = """
import json, statistics, sys, time
import numpy as np, onnxruntime as ort
from graphgen.runtime.translator import session_options
status = lambda key: int(next(l for l in open('/proc/self/status') if l.startswith(key)).split()[1]) / 1024
session = ort.InferenceSession(sys.argv[1], session_options(2, extensions=False), providers=["CPUExecutionProvider"])
after_load = status("VmRSS")
ids = np.array([[(7 + 17 * j) % 60000 + 4 for j in range(11)] + [2]], np.int32)
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "num_beams": np.array([4], np.int32),
         "max_length": np.array([41], np.int32), "min_length": np.array([41], np.int32)}
times = []
for _ in range(4):
    started = time.perf_counter(); session.run(["sequences"], feeds); times.append(time.perf_counter() - started)
print(json.dumps({"after_load": after_load, "peak": status("VmHWM"), "ms": 1000 * statistics.median(times[1:])}))
"""


def _dequantized(matrix: np.ndarray, block: int) -> np.ndarray:
    """``matrix`` [out, in] through graphgen's int4 quantizer and back, as MatMulNBits reads it."""
    q = weights.quantize_blocks(np.ascontiguousarray(matrix, dtype=np.float32), block)
    low, high = q.codes & 15, q.codes >> 4
    codes = np.stack([low, high], axis=-1).reshape(q.outputs, q.blocks, block).astype(np.float32)
    values = (codes - 8) * q.scales.reshape(q.outputs, q.blocks, 1)
    return values.reshape(q.outputs, -1)[:, : q.inputs]


def teacher_forced_kl(blocks: list[int]) -> dict[int, float]:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEMO_DIR)
    model = AutoModelForSeq2SeqLM.from_pretrained(DEMO_DIR).eval()
    pairs = demo_test_pairs()
    batch = tokenizer([s for s, _ in pairs], text_target=[t for _, t in pairs], return_tensors="pt", padding=True)
    counted = batch["labels"] != tokenizer.pad_token_id
    result = {}
    with torch.no_grad():
        reference = model(**batch).logits.log_softmax(-1)
        for block in blocks:
            quantized = copy.deepcopy(model)
            table = quantized.get_input_embeddings().weight  # tied to the output projection
            matrices = [m.weight for m in quantized.modules() if isinstance(m, torch.nn.Linear)]
            for weight in {id(w): w for w in [table, *matrices]}.values():
                weight.copy_(torch.from_numpy(_dequantized(weight.detach().numpy(), block)))
            log_probs = quantized(**batch).logits.log_softmax(-1)
            kl = (reference.exp() * (reference - log_probs)).sum(-1)[counted].mean()
            result[block] = float(kl)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", default="32,64,128")
    parser.add_argument("--no-nllb", action="store_true", help="skip the NLLB-600M shape (memory and speed)")
    args = parser.parse_args(argv)
    blocks = [int(b) for b in args.blocks.split(",")]
    chosen = weights.INT4_BLOCK
    pairs = demo_test_pairs()
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]

    def translations(path: Path) -> list[str]:
        translator = Translator(path, threads=2)
        return [t for i in range(0, len(sources), 16) for t in translator.translate(sources[i : i + 16])]

    rows = []
    kl = teacher_forced_kl(blocks)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        export(str(DEMO_DIR), str(work / "fp32.onnx"), progress=lambda _: None)
        fp32 = translations(work / "fp32.onnx")
        nllb = None if args.no_nllb else full_size_family_checkpoint(work / "nllb", "nllb")
        for block in blocks:
            demo = work / f"demo-{block}.onnx"
            export(str(DEMO_DIR), str(demo), progress=lambda _: None, int4=True, int4_block_size=block)
            out = translations(demo)
            row = {
                "block": block,
                "same": sum(a == b for a, b in zip(fp32, out, strict=True)),
                "references": sum(a == b for a, b in zip(out, references, strict=True)),
                "kl": kl[block],
            }
            if nllb is not None:
                path = work / f"nllb-{block}" / "model.onnx"
                path.parent.mkdir()
                options = {"int4": True, "int4_block_size": block, "tokenizer": False, "external_data": True}
                export(str(nllb), str(path), progress=lambda _: None, **options)  # type: ignore[arg-type]
                row["data_mb"] = sum(p.stat().st_size for p in path.parent.iterdir()) / 1e6
                done = subprocess.run([sys.executable, "-c", RUN, path], capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"{path}: the run failed\n{done.stderr[-2000:]}")
                row |= json.loads(done.stdout)
            rows.append(row)
            print(row, flush=True)
    n = len(pairs)
    print(f"\nint4 block size (graphgen's: {chosen}); demo model, {n} test sentences, 4 beams")
    print("| inputs per scale | identical to fp32 | equal to the reference | KL to fp32 per token |", end="")
    print(" NLLB data MB | RSS after loading MB | peak RSS MB | 1 × 4 beams ms |" if not args.no_nllb else "")
    print("|---:|---:|---:|---:|" + ("---:|---:|---:|---:|" if not args.no_nllb else ""))
    for r in rows:
        line = f"| {r['block']} | {r['same']}/{n} | {r['references']}/{n} | {r['kl']:.5f} |"
        if "ms" in r:
            line += f" {r['data_mb']:.0f} | {r['after_load']:.0f} | {r['peak']:.0f} | {r['ms']:.0f} |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
