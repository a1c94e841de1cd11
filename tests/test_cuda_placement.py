"""Text files on CUDA: no string tensor may reach a node that ONNX Runtime would place on the GPU.

ONNX Runtime's CUDA provider claims every node for which it has a kernel whose type constraint
admits the node's types, then copies inputs to the device with ``MemcpyFromHost``, which has no
string kernel: a string tensor on such a node stops the session from loading ("Type
'tensor(string)' of input parameter ... of operator (MemcpyFromHost) ... is invalid", measured with
onnxruntime-gpu 1.31.1 on an H200 when the detokenizer joined its pieces in a ``Loop``). The CUDA
kernels whose constraints admit ``tensor(string)``, from ONNX Runtime's registrations
(``onnxruntime/core/providers/cuda``; the type lists in ``core/framework/element_type_lists.h``:
``AllIRv4`` is the fixed-size types plus ``std::string``, ``AllFixedSizeTensorTypes`` has none):

- ``controlflow/loop.cc``, ``controlflow/if.cc``: ``Loop``, ``If`` (opset 13+, constraint ``V`` →
  ``AllTensorAndSequenceTensorTypes()``; only the trip count and conditions are CPU inputs), and
  their implicit inputs (outer values a body reads) travel with them;
- ``controlflow/scan.cc``: ``Scan`` (opset 8: ``V`` → ``AllTensorTypes()``);
- ``tensor/size.cc``: ``Size`` (``T`` → ``AllTensorTypes()``);
- ``generator/random.cc``: ``RandomNormalLike``, ``RandomUniformLike`` (``T1`` → ``AllTensorTypes()``).

Everything else that handles strings in these files (``Gather``, ``Concat``, ``Expand``,
``Reshape``, ``Slice``, ``Identity``, ``Shape``, ``StringConcat``, ``LabelEncoder``, the
extensions' ops) has no string-admitting CUDA kernel and stays on the CPU. ``Cast`` to string is
sent to the CPU by the provider itself (``CastNeedFallbackToCPU``). The rule is checked here on
every text-file kind, so CI guards it without a GPU.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto

from graphgen import export
from graphgen.testing import family_checkpoint

# (domain, op type) of the CUDA kernels that admit tensor(string); see the module docstring.
CUDA_STRING_KERNELS = {("", op) for op in ("Loop", "If", "Scan", "Size", "RandomNormalLike", "RandomUniformLike")}
# onnxruntime-extensions' ops in the extensions files (no CUDA kernels): their outputs' types,
# which ONNX shape inference does not know.
CUSTOM_OUTPUT_TYPES = {"SentencepieceTokenizer": [TensorProto.INT32, TensorProto.INT64]}


def _types(graph: GraphProto, types: dict[str, int]) -> None:
    """Element types of every value: ONNX inference's, then, for what it leaves open (outputs of
    ``com.microsoft`` ops and what follows them), the type of the node's first typed input (these
    ops keep their input's type: attention, quantized matmul)."""
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types[info.name] = info.type.tensor_type.elem_type
    for tensor in graph.initializer:
        types[tensor.name] = tensor.data_type
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                _types(attribute.g, types)
        if node.domain == "ai.onnx.contrib":
            for name, elem in zip(node.output, CUSTOM_OUTPUT_TYPES[node.op_type], strict=False):
                types[name] = elem
        known = [types[name] for name in node.input if name in types]
        for name in node.output:
            if name not in types and known:
                types[name] = known[0]


def _defined(graph: GraphProto) -> set[str]:
    names = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        names |= set(node.output)
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                names |= _defined(attribute.g)
    return names


def _read(graph: GraphProto) -> set[str]:
    names = set()
    for node in graph.node:
        names |= set(node.input)
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                names |= _read(attribute.g)
    return names - {""}


def string_on_cuda_kernels(model: ModelProto) -> list[str]:
    """Every (node, value) where a string or untyped value meets a CUDA string-admitting kernel."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types: dict[str, int] = {}
    _types(inferred.graph, types)
    problems = []

    def visit(graph: GraphProto) -> None:
        for node in graph.node:
            bodies = [a.g for a in node.attribute if a.type == AttributeProto.GRAPH]
            if (node.domain, node.op_type) in CUDA_STRING_KERNELS:
                implicit = {name for body in bodies for name in _read(body) - _defined(body)}
                for name in [*node.input, *node.output, *sorted(implicit)]:
                    if name and types.get(name, TensorProto.STRING) == TensorProto.STRING:
                        problems.append(f"{node.op_type} {node.name or node.output[0]}: {name}")
            for body in bodies:
                visit(body)

    visit(inferred.graph)
    return problems


@pytest.fixture(scope="module")
def text_files(tmp_path_factory: pytest.TempPathFactory, demo_dir: Path) -> dict[str, Path]:
    """Every text-file kind: both tokenizers, float32 and float16, the four tokenizer families."""
    folder = tmp_path_factory.mktemp("cuda_placement")
    quiet = {"progress": lambda _: None}
    files = {}
    sources = {"marian": demo_dir}
    for family in ("nllb", "m2m100", "mbart50", "t5"):  # one per tokenizer kind
        family_checkpoint(folder / family, family)
        sources[family] = folder / family
    for family, source in sources.items():
        for kind in ("onnx", "extensions"):
            path = folder / f"{family}-{kind}.onnx"
            export(source, path, tokenizer=kind, **quiet)
            files[path.stem] = path
        path = folder / f"{family}-onnx-fp16.onnx"
        export(source, path, fp16=True, **quiet)
        files[path.stem] = path
    return files


def test_the_rule_catches_a_string_loop() -> None:
    """The check itself: a Loop that carries a string is reported, one over integers is not."""

    def loop_model(elem: int) -> ModelProto:
        body = onnx.helper.make_graph(
            [
                onnx.helper.make_node("Identity", ["cond"], ["cond_out"]),
                onnx.helper.make_node("Identity", ["x"], ["y"]),
            ],
            "body",
            [
                onnx.helper.make_tensor_value_info("i", TensorProto.INT64, []),
                onnx.helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                onnx.helper.make_tensor_value_info("x", elem, None),
            ],
            [
                onnx.helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                onnx.helper.make_tensor_value_info("y", elem, None),
            ],
        )
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("Loop", ["n", "", "start"], ["out"], body=body)],
            "g",
            [onnx.helper.make_tensor_value_info("start", elem, [2])],
            [onnx.helper.make_tensor_value_info("out", elem, [2])],
            initializer=[onnx.helper.make_tensor("n", TensorProto.INT64, [], [2])],
        )
        return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 20)])

    assert string_on_cuda_kernels(loop_model(TensorProto.STRING))
    assert not string_on_cuda_kernels(loop_model(TensorProto.INT64))


def test_no_string_reaches_a_cuda_kernel(text_files: dict[str, Path]) -> None:
    found = {name: string_on_cuda_kernels(onnx.load(str(path))) for name, path in text_files.items()}
    assert not any(found.values()), {name: problems[:3] for name, problems in found.items() if problems}
