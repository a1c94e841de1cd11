"""Text files on onnxruntime-web's WebGPU provider: every node it claims must fit its kernel.

onnxruntime-web's default build (``ort.min.js``, the ``onnxruntime-web`` import) runs a session on
WebGPU with ``executionProviders: ["webgpu"]``: the nodes with a WebGPU kernel run as shaders, the
others (the tokenizer's string and integer ops among them) on the WebAssembly CPU provider beside
it. A WebGPU kernel that cannot handle a node's form fails the run instead of handing the node to
the CPU. Measured with onnxruntime-web 1.30.0 in headless Chromium (SwiftShader), each rule below a
failure the file had before it followed the rule; the kernels are in onnxruntime's
``js/web/lib/wasm/jsep/webgpu/ops``:

- ``slice.ts``: without ``axes`` the kernel slices every axis of the data ("start, ends and axes
  should have the same number of elements"), where ONNX means the first ``len(starts)``;
- ``split.ts``: the sizes come from the ``split`` input, never from ``num_outputs`` (the outputs
  are missized, and the next node fails);
- ``multihead-attention.ts`` (``com.microsoft.MultiHeadAttention``): no ``key_padding_mask``
  ("Mask not supported"), no ``bias`` input for a single query position ("AddBiasReshape is not
  implemented"; a decoding step has one), and an ``attention_bias`` only of the full
  ``[batch, heads, queries, keys]`` shape (no broadcasting).

``examples/node/test/browser.test.js`` runs the demo and NLLB files on WebGPU in Chromium; this
test holds every text-file kind to the rules, so CI guards them without a browser. (One failure
these rules do not catch, int64 indices handed to the wrong ``Gather``, is avoided in
``step_positions``; docs/platforms.md.)
"""

from __future__ import annotations

from pathlib import Path

import onnx
from graphgen.custom_ops.builder import MS_DOMAIN
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, helper


def webgpu_kernel_problems(model: ModelProto) -> list[str]:
    """The nodes, subgraphs included, that onnxruntime-web's WebGPU kernels refuse (module docstring)."""
    problems = []

    def given(node: onnx.NodeProto, index: int) -> bool:
        return len(node.input) > index and node.input[index] != ""

    def visit(graph: GraphProto) -> None:
        for node in graph.node:
            name = node.name or node.output[0]
            if node.domain in ("", "ai.onnx") and node.op_type == "Slice" and not given(node, 3):
                problems.append(f"Slice {name}: no axes")
            if node.domain in ("", "ai.onnx") and node.op_type == "Split" and not given(node, 1):
                problems.append(f"Split {name}: no split sizes")
            if node.domain == MS_DOMAIN and node.op_type == "MultiHeadAttention":
                if given(node, 3):
                    problems.append(f"MultiHeadAttention {name}: a bias input")
                if given(node, 4):
                    problems.append(f"MultiHeadAttention {name}: a key padding mask")
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    visit(attribute.g)

    visit(model.graph)
    return problems


def test_the_rules_catch_what_the_kernels_refuse() -> None:
    """The check itself, on a graph with one node of each refused form and their fixed twins."""
    names = ["x", "starts", "ends", "axes", "sizes", "q", "k", "v", "bias", "mask"]
    nodes = [
        helper.make_node("Slice", ["x", "starts", "ends"], ["a"], name="slice"),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["b"], name="slice_axes"),
        helper.make_node("Split", ["x"], ["c", "d"], name="split", axis=0, num_outputs=2),
        helper.make_node("Split", ["x", "sizes"], ["e", "f"], name="split_sizes", axis=0),
        helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias"], ["g"], name="biased", domain=MS_DOMAIN),
        helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "mask"], ["h"], name="masked", domain=MS_DOMAIN),
        helper.make_node("MultiHeadAttention", ["q", "k", "v", "", ""], ["i"], name="plain", domain=MS_DOMAIN),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names], []
    )
    assert webgpu_kernel_problems(helper.make_model(graph)) == [
        "Slice slice: no axes",
        "Split split: no split sizes",
        "MultiHeadAttention biased: a bias input",
        "MultiHeadAttention masked: a key padding mask",
    ]


def test_every_text_file_fits_the_webgpu_kernels(text_file_kinds: dict[str, Path]) -> None:
    found = {name: webgpu_kernel_problems(onnx.load(str(path))) for name, path in text_file_kinds.items()}
    assert not any(found.values()), {name: problems[:3] for name, problems in found.items() if problems}
