"""Kernels of onnxruntime-web's WebGPU provider that graphgen's files depend on, each against the
WebAssembly provider in the same browser: run this after upgrading onnxruntime-web, or on a machine
with a real GPU, before telling page authors which files to use on WebGPU.

    python benchmarks/webgpu_kernels.py                     # Chromium's software GPU (SwiftShader)
    python benchmarks/webgpu_kernels.py --adapter ""        # the machine's own GPU, where it has one

Needs Chromium and ``npm ci --ignore-scripts`` in examples/node (its onnxruntime-web is the one
measured). Each case is a one- or few-node model with random inputs: a float32 ``MatMul`` (the
control), graphgen's int4 ``MatMulNBits`` at several block sizes (``export --int4-block-size``;
graphgen's quantizer, its accuracy level), and float16 ``Gather``, ``MatMul`` and
``LayerNormalization`` (what ``export --fp16`` layers are made of; outputs cast to float32). A case
passes when the WebGPU outputs are within 1% of the largest WebAssembly output. Measured on
SwiftShader with onnxruntime-web 1.31.1 (2026-12-06): ``MatMulNBits`` wrong at blocks of 64 and 128,
right at 16 and 32; every float16 case zeros (that adapter has no ``shader-f16``). Writes
``webgpu_kernels_report.md`` beside this script.
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

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from graphgen.model.weights import INT4_ACCURACY_LEVEL, quantize_blocks  # noqa: E402

NODE_EXAMPLE = HERE.parent / "examples" / "node"
M, K, N = 4, 256, 384  # rows, inputs, outputs: several blocks per row at every block size
TOLERANCE = 0.01


def _model(nodes: list, inputs: list, initializers: list, outputs: list[str]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "case",
        inputs,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return model


def cases(rng: np.random.Generator) -> dict[str, tuple[onnx.ModelProto, dict[str, np.ndarray]]]:
    """name → (model, feeds)."""
    x = rng.standard_normal((1, M, K)).astype(np.float32)
    weight = (rng.standard_normal((K, N)) * 0.1).astype(np.float32)
    x_input = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, M, K])
    found = {
        "MatMul float32 (control)": (
            _model(
                [helper.make_node("MatMul", ["x", "w"], ["y"])],
                [x_input],
                [numpy_helper.from_array(weight, "w")],
                ["y"],
            ),
            {"x": x},
        )
    }
    for block in (16, 32, 64, 128):
        matrix = quantize_blocks(weight.T.copy(), block)
        node = helper.make_node(
            "MatMulNBits",
            ["x", "codes", "scales"],
            ["y"],
            domain="com.microsoft",
            K=K,
            N=N,
            bits=4,
            block_size=block,
            accuracy_level=INT4_ACCURACY_LEVEL,
        )
        tensors = [numpy_helper.from_array(matrix.codes, "codes"), numpy_helper.from_array(matrix.scales, "scales")]
        found[f"MatMulNBits, blocks of {block}"] = (_model([node], [x_input], tensors, ["y"]), {"x": x})
    table = (rng.standard_normal((50, K)) * 0.5).astype(np.float16)
    ids = rng.integers(0, 50, (1, M)).astype(np.int32)
    gather = [
        helper.make_node("Gather", ["table", "ids"], ["rows"]),
        helper.make_node("Cast", ["rows"], ["y"], to=TensorProto.FLOAT),
    ]
    found["Gather float16"] = (
        _model(
            gather,
            [helper.make_tensor_value_info("ids", TensorProto.INT32, [1, M])],
            [numpy_helper.from_array(table, "table")],
            ["y"],
        ),
        {"ids": ids},
    )
    half = [
        helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("MatMul", ["h", "w"], ["p"]),
        helper.make_node("LayerNormalization", ["p", "gamma", "beta"], ["n"], axis=-1),
        helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["n"], ["z"], to=TensorProto.FLOAT),
    ]
    tensors = [
        numpy_helper.from_array(weight.astype(np.float16), "w"),
        numpy_helper.from_array(np.ones(N, np.float16), "gamma"),
        numpy_helper.from_array(np.zeros(N, np.float16), "beta"),
    ]
    found["MatMul + LayerNormalization float16"] = (_model(half, [x_input], tensors, ["y", "z"]), {"x": x})
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--adapter", default="swiftshader", help='Chromium\'s WebGPU adapter; "" for its default')
    parser.add_argument("--out", type=Path, default=HERE / "webgpu_kernels_report.md")
    args = parser.parse_args(argv)
    version = json.loads((NODE_EXAMPLE / "node_modules" / "onnxruntime-web" / "package.json").read_text())["version"]
    built = cases(np.random.default_rng(0))
    with tempfile.TemporaryDirectory() as folder:
        files = Path(folder)
        names = {}
        for index, (name, (model, feeds)) in enumerate(built.items()):
            names[f"case{index}"] = name
            onnx.save(model, files / f"case{index}.onnx")
            spec = {
                key: {
                    "type": {np.float32: "float32", np.int32: "int32"}[value.dtype.type],
                    "dims": list(value.shape),
                    "data": value.ravel().tolist(),
                }
                for key, value in feeds.items()
            }
            (files / f"case{index}.json").write_text(json.dumps(spec))
        jobs = {"files": str(files), "chromium": args.chromium, "adapter": args.adapter, "models": list(names)}
        (files / "jobs.json").write_text(json.dumps(jobs))
        done = subprocess.run(
            ["node", str(HERE / "browser" / "kernels.mjs"), str(files / "jobs.json")],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    if done.returncode:
        raise SystemExit(f"the browser run failed:\n{done.stderr[-3000:]}")
    results: dict[str, dict[str, dict]] = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        results.setdefault(names[row["model"]], {})[row["ep"]] = row
    features = next((r["webgpu"].get("features", []) for r in results.values() if "features" in r["webgpu"]), [])
    lines = [
        "# onnxruntime-web's WebGPU provider against its WebAssembly provider, kernel by kernel",
        "",
        f"Written by `benchmarks/webgpu_kernels.py` on {date.today()}: onnxruntime-web {version} (`ort.min.js`), "
        f"headless Chromium, WebGPU adapter `{args.adapter or 'default'}` ({platform.machine()}); the device's "
        f"`shader-f16`: {'yes' if 'shader-f16' in features else 'no'}. Inputs {M} × {K}, {N} outputs. A case "
        f"passes when WebGPU's outputs are within {TOLERANCE:.0%} of WebAssembly's largest output.",
        "",
        "| case | max difference / max output | verdict |",
        "|---|---:|---|",
    ]
    for name, by_provider in results.items():
        wasm, gpu = by_provider["wasm"], by_provider["webgpu"]
        if "error" in wasm or "error" in gpu:
            lines.append(f"| {name} | | error: {(gpu.get('error') or wasm.get('error'))[:200]} |")
            continue
        worst = 0.0
        for output, reference in wasm["outputs"].items():
            a, b = np.array(reference), np.array(gpu["outputs"][output])
            worst = max(worst, float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30)))
        verdict = "same" if worst <= TOLERANCE else "**wrong**"
        lines.append(f"| {name} | {worst:.3g} | {verdict} |")
        print(name, f"{worst:.3g}", verdict, flush=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
