"""ONNX Runtime's load peak for matrices read inside a ``Loop`` body, against the same in the main graph.

    python benchmarks/ort_load_peak.py            # four 256 MiB float32 matrices, external data
    python benchmarks/ort_load_peak.py --mib 64   # smaller

The figures docs/performance.md cites ("Why the peak stays above the steady state"), as a script
anyone can run on any ONNX Runtime release and attach to an upstream report. ORT prepacks every
constant matrix of a ``MatMul`` and frees the original once its last reader has packed it. From
1.29 (PR 31141) a ``Loop`` body's outer-scope constants stay referenced until the whole body is set
up, so every original the body packs is in memory beside its packed copy until then: the load
peak of a decoder in a search loop is about twice its weights. Each file is loaded in a fresh
process; the script prints the peak (VmHWM) and the resident set after loading (VmRSS), in GB.

A second finding goes with it: a ``Loop`` node whose second loop-carried output is unnamed (``""``,
a file ``onnx.checker.check_model(full_check=True)`` accepts) kills the process with a segmentation
fault on ONNX Runtime 1.28 and 1.32 (``--unnamed-outputs`` runs it in a fresh process and prints
its exit status, -11 there), where an error would be expected if ORT does not support it.

Measured here with ``--mib 32`` (GB, peak / after loading): 1.28.0 main graph 0.21 / 0.18, Loop body
0.21 / 0.18; 1.32.0 main graph 0.22 / 0.19, Loop body 0.32 / 0.19.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MEASURE = """
import sys, numpy as np, onnxruntime as ort
options = ort.SessionOptions(); options.log_severity_level = 3
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
status = dict(line.split(":", 1) for line in open("/proc/self/status") if line.startswith(("VmHWM", "VmRSS")))
session.run(None, {"x": np.ones((4, int(sys.argv[2])), np.float32)})
print(int(status["VmHWM"].split()[0]) / 1e6, int(status["VmRSS"].split()[0]) / 1e6)
"""


def _weights(count: int, side: int) -> list[onnx.TensorProto]:
    rng = np.random.default_rng(0)
    return [numpy_helper.from_array(rng.standard_normal((side, side), dtype=np.float32), f"w{i}") for i in range(count)]


def _chain(x: str, count: int, prefix: str) -> tuple[list[onnx.NodeProto], str]:
    nodes, value = [], x
    for i in range(count):
        nodes.append(helper.make_node("MatMul", [value, f"w{i}"], [f"{prefix}{i}"]))
        value = f"{prefix}{i}"
    return nodes, value


def main_graph_file(count: int, side: int) -> onnx.ModelProto:
    nodes, last = _chain("x", count, "h")
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    return _model(nodes, _weights(count, side), side)


def loop_file(count: int, side: int, unnamed_outputs: bool = False) -> onnx.ModelProto:
    """The same products in a ``Loop`` body run once; the weights are the main graph's."""
    body_nodes, last = _chain("state", count, "b")
    body_nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"]))
    body_nodes.append(helper.make_node("Identity", [last], ["state_out"]))
    body_nodes.append(helper.make_node("Identity", ["extra"], ["extra_out"]))
    state = helper.make_tensor_value_info
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            state("i", TensorProto.INT64, []),
            state("cond", TensorProto.BOOL, []),
            state("state", TensorProto.FLOAT, ["rows", "columns"]),
            state("extra", TensorProto.FLOAT, ["rows", "columns"]),
        ],
        [
            state("cond_out", TensorProto.BOOL, []),
            state("state_out", TensorProto.FLOAT, ["rows", "columns"]),
            state("extra_out", TensorProto.FLOAT, ["rows", "columns"]),
        ],
    )
    constants = [numpy_helper.from_array(np.array(1, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go")]
    outputs = ["y", ""] if unnamed_outputs else ["y", "unused"]
    loop = helper.make_node("Loop", ["trips", "go", "x", "x"], outputs, body=body)
    return _model([loop], [*_weights(count, side), *constants], side)


def _model(nodes: list[onnx.NodeProto], initializers: list[onnx.TensorProto], side: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, side])],
        initializer=initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, path, save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="size of each matrix in MiB (default 256)")
    parser.add_argument("--count", type=int, default=4, help="number of matrices (default 4)")
    parser.add_argument("--unnamed-outputs", action="store_true", help="also load the Loop with an unnamed output")
    args = parser.parse_args(argv)
    side = int(np.sqrt(args.mib * 2**20 / 4))
    import onnxruntime

    print(f"onnxruntime {onnxruntime.__version__}: {args.count} matrices of {side}x{side} float32 ({args.mib} MiB)")
    with tempfile.TemporaryDirectory() as folder:
        files = {
            "main graph": _save(main_graph_file(args.count, side), Path(folder) / "main.onnx"),
            "Loop body": _save(loop_file(args.count, side), Path(folder) / "loop.onnx"),
        }
        for name, path in files.items():
            done = subprocess.run([sys.executable, "-c", MEASURE, path, str(side)], capture_output=True, text=True)
            if done.returncode:
                print(f"{name}: failed ({done.returncode}): {done.stderr.strip()[-500:]}")
                continue
            peak, after = map(float, done.stdout.split())
            print(f"{name:10s}  peak while loading {peak:5.2f} GB   after loading {after:5.2f} GB")
        if args.unnamed_outputs:
            path = _save(loop_file(args.count, 64, unnamed_outputs=True), Path(folder) / "unnamed.onnx")
            done = subprocess.run([sys.executable, "-c", MEASURE, path, "64"], capture_output=True, text=True)
            print(f"Loop with an unnamed output: exit status {done.returncode} {done.stderr.strip()[-300:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
