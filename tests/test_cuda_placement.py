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
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto

from graphgen import export
from graphgen._graphs import implicit_inputs, layer, set_layer
from graphgen.contract import LAYER_ANNOTATION, SEQUENCES, TEXT_ON_CPU, read_file_info
from graphgen.testing import cuda_copies, family_checkpoint
from graphgen.testing.cuda_copies import DEVICE

# (domain, op type) of the CUDA kernels that admit tensor(string); see the module docstring.
CUDA_STRING_KERNELS = {("", op) for op in ("Loop", "If", "Scan", "Size", "RandomNormalLike", "RandomUniformLike")}


def string_on_cuda_kernels(model: ModelProto) -> list[str]:
    """Every (node, value) where a string or untyped value meets a CUDA string-admitting kernel."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = cuda_copies.element_types(model)
    problems = []

    def visit(graph: GraphProto) -> None:
        for node in graph.node:
            bodies = [a.g for a in node.attribute if a.type == AttributeProto.GRAPH]
            if (node.domain, node.op_type) in CUDA_STRING_KERNELS:
                implicit = implicit_inputs(node)
                for name in [*node.input, *node.output, *sorted(implicit)]:
                    if name and types.get(name, TensorProto.STRING) == TensorProto.STRING:
                        problems.append(f"{node.op_type} {node.name or node.output[0]}: {name}")
            for body in bodies:
                visit(body)

    visit(inferred.graph)
    return problems


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


def test_no_string_reaches_a_cuda_kernel(text_file_kinds: dict[str, Path]) -> None:
    found = {name: string_on_cuda_kernels(onnx.load(str(path))) for name, path in text_file_kinds.items()}
    assert not any(found.values()), {name: problems[:3] for name, problems in found.items() if problems}


# -- copies between the GPU and the host in a decoding step ---------------------------------------


def test_the_copy_model_follows_onnx_runtime_rules() -> None:
    """The model of graphgen.testing.cuda_copies on a small graph: a Shape chain stays on the host
    and feeds Reshape's shape without a copy; a count computed on the GPU and read as TopK's K is
    copied to the host; so is, on every step, a GPU value a loop body reads as a condition, and a
    loop condition that passed through a GPU node."""
    h = onnx.helper
    body = h.make_graph(
        [
            h.make_node("Greater", ["limit", "zero"], ["flag"]),  # in the outer graph: on the GPU
            h.make_node(
                "If",
                ["flag"],
                ["y"],
                then_branch=_constant_branch("then", 1.0),
                else_branch=_constant_branch("else", 2.0),
            ),
            h.make_node("Identity", ["cond"], ["cond_out"]),
        ],
        "body",
        [h.make_tensor_value_info("i", TensorProto.INT64, []), h.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [
            h.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            h.make_tensor_value_info("y", TensorProto.FLOAT, [1]),
        ],
    )
    nodes = [
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Concat", ["shape", "one"], ["new_shape"], axis=0),  # host: a Shape output and a small constant
        h.make_node("Reshape", ["x", "new_shape"], ["reshaped"]),
        h.make_node("ReduceSum", ["x_int"], ["limit"], keepdims=1),  # a count computed on the GPU
        h.make_node("TopK", ["x", "limit"], ["values", "indices"]),
        h.make_node(
            "Loop",
            [
                "steps",
                "",
            ],
            ["ys"],
            body=body,
        ),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [
            h.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            h.make_tensor_value_info("x_int", TensorProto.INT64, [4]),
        ],
        [
            h.make_tensor_value_info(name, elem, None)
            for name, elem in (
                ("reshaped", TensorProto.FLOAT),
                ("values", TensorProto.FLOAT),
                ("ys", TensorProto.FLOAT),
            )
        ],
        initializer=[
            h.make_tensor("one", TensorProto.INT64, [1], [1]),
            h.make_tensor("zero", TensorProto.INT64, [1], [0]),
            h.make_tensor("steps", TensorProto.INT64, [], [3]),
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    placement = cuda_copies.place(model)
    sides = dict(zip([n.op_type for n in nodes], placement.sides["g"], strict=True))
    assert sides == {
        "Shape": "device",
        "Concat": "host",
        "Reshape": "device",
        "ReduceSum": "device",
        "TopK": "device",
        "Loop": "device",
    }
    copies = {(c.graph, c.value, c.direction, c.reason) for c in placement.copies}
    assert ("g", "limit", "to host", "TopK input 1") in copies
    assert not any(c.value == "new_shape" for c in placement.copies)
    assert ("body", "flag", "to host", "If input 0") in copies  # Greater runs on the GPU every step
    # A node whose inputs are only the body's formal inputs is never considered for the host: the
    # Identity of the (host) condition runs on the GPU, and its output goes back every step.
    assert {("body", "cond", "to device", "feed"), ("body", "cond_out", "to host", "fetch")} <= copies


def test_the_copy_model_follows_the_layer_assignment() -> None:
    """The model with a layer assignment (``session.layer_assignment_settings``): an annotated node
    and the body of an annotated Loop go to the CPU, the rest as before; a host value of a GPU node
    (a Shape's) read by a node assigned to the CPU is reported, since ONNX Runtime 1.30's
    GetCpuPreferredNodes then dereferences a null node."""
    h = onnx.helper
    body = h.make_graph(
        [h.make_node("Add", ["x_in", "one"], ["x_out"], name="body_add"), h.make_node("Identity", ["cond"], ["c"])],
        "body",
        [
            h.make_tensor_value_info("i", TensorProto.INT64, []),
            h.make_tensor_value_info("cond", TensorProto.BOOL, []),
            h.make_tensor_value_info("x_in", TensorProto.INT64, [1]),
        ],
        [
            h.make_tensor_value_info("c", TensorProto.BOOL, []),
            h.make_tensor_value_info("x_out", TensorProto.INT64, [1]),
        ],
    )
    nodes = [
        h.make_node("Add", ["x", "one"], ["y"], name="text_add"),
        h.make_node("Loop", ["steps", "", "y"], ["looped"], body=body, name="text_loop"),
        h.make_node("Mul", ["looped", "x"], ["z"], name="gpu_mul"),
        h.make_node("Shape", ["z"], ["shape"], name="gpu_shape"),
        h.make_node("Add", ["shape", "one"], ["shape_plus"], name="reader"),
    ]
    set_layer(nodes[:2], LAYER_ANNOTATION, "graphgen.text")
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.INT64, [1])],
        [
            h.make_tensor_value_info("z", TensorProto.INT64, [1]),
            h.make_tensor_value_info("shape_plus", TensorProto.INT64, [1]),
        ],
        initializer=[
            h.make_tensor("one", TensorProto.INT64, [1], [1]),
            h.make_tensor("steps", TensorProto.INT64, [], [2]),
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    assert cuda_copies.place(model).sides == {
        "g": ["device", "device", "device", "device", "host"],
        "body": ["device"] * 2,
    }
    placement = cuda_copies.place(model, TEXT_ON_CPU)
    assert placement.sides == {"g": ["host", "host", "device", "device", "host"], "body": ["host", "host"]}
    assert ("g", "looped", "to device", "Mul input 0") in {
        (c.graph, c.value, c.direction, c.reason) for c in placement.copies
    }
    assert not placement.hazards
    set_layer([model.graph.node[4]], LAYER_ANNOTATION, "graphgen.text")
    assert cuda_copies.place(model, TEXT_ON_CPU).hazards == [
        "g: reader, assigned to the CPU, reads a host value of the GPU's"
    ]


def test_the_tokenizer_and_detokenizer_stay_on_the_cpu(text_file_kinds: dict[str, Path]) -> None:
    """Every text file asks (metadata graphgen.session_config) for the layer assignment that keeps
    its tokenizer and detokenizer on the CPU, and with it, as modelled, only the ids (and the forced
    first token of a language file) cross to the GPU and only the sequences come back: no node of
    theirs, loop bodies included, is offered to CUDA. Without it, modelled on the demo file at batch
    16 × 4 beams (cuda_copies.per_call), a call waits for the GPU 216 times and runs 4689 kernels on
    it (44 and 3095 with it); a tokenizer loop that runs once per byte of the text waits twice on
    each pass."""
    problems = {}
    for name, path in text_file_kinds.items():
        config = read_file_info(path).session_config
        assert config == TEXT_ON_CPU, name
        basic = cuda_copies.basic_graph(path)
        placement = cuda_copies.place(basic, config)
        text_values = {out for node in basic.graph.node if layer(node, LAYER_ANNOTATION) for out in node.output}
        crossing = [c for c in placement.copies if c.graph == basic.graph.name and c.value in text_values | {SEQUENCES}]
        to_device = [c.value for c in crossing if c.direction == "to device"]
        on_gpu = [
            g
            for g, sides in placement.sides.items()
            if g.startswith(("tokenizer/", "detokenizer/")) and DEVICE in sides
        ]
        top = basic.graph.node
        on_gpu += [
            n.name
            for n, side in zip(top, placement.sides[basic.graph.name], strict=True)
            if layer(n, LAYER_ANNOTATION) and side == DEVICE
        ]
        expected = 3 if read_file_info(path).languages else 2
        if (
            placement.hazards
            or on_gpu
            or len(to_device) != expected
            or [c.value for c in crossing if c.direction == "to host"] != [SEQUENCES]
        ):
            problems[name] = (placement.hazards, on_gpu[:3], crossing)
    assert not problems, problems


def _constant_branch(name: str, value: float) -> GraphProto:
    h = onnx.helper
    return h.make_graph(
        [h.make_node("Constant", [], [f"{name}_out"], value=h.make_tensor("v", TensorProto.FLOAT, [1], [value]))],
        name,
        [],
        [h.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [1])],
    )


def _forced_eos_file(folder: Path) -> Path:
    """An mBART-50 file whose generation config forces EOS at max_length without renormalising (as
    the hub's mBART-50 config does): its steps also ask whether this is the forced step."""
    family_checkpoint(folder / "checkpoint", "mbart50", forced_eos_token_id=2, renormalize_logits=False)
    export(folder / "checkpoint", folder / "forced-eos.onnx", tokenizer=False, progress=lambda _: None)
    return folder / "forced-eos.onnx"


def test_a_decoding_step_waits_for_the_gpu_only_at_its_end(text_file_kinds: dict[str, Path], tmp_path: Path) -> None:
    """On ONNX Runtime's CUDA provider (as modelled by graphgen.testing.cuda_copies), a usual decoding
    step of every text file, greedy and beam search, copies two values back to the host: the count
    of rows whose caches go on, and the loop's condition, both at the step's end, where the next
    step depends on them anyway. A copy to the host waits for the GPU. Modelled on the demo file,
    the loop made 28 of them per step before this test (6eb20fa), 5 for greedy and 15 for beam
    search once greedy search had its own branch, most in the step's middle: the settings read as
    counts and conditions (computed on the GPU from the graph inputs), the first step's condition,
    beam search's GatherND and Pad on the int32 sequences (no CUDA kernel for int32)."""
    problems = {}
    # the int8 file is for CPUs (its integer products), and the model holds no quantization kernels
    files = {name: path for name, path in text_file_kinds.items() if "int8" not in name}
    for name, path in {**files, "mbart50-forced-eos": _forced_eos_file(tmp_path)}.items():
        placement = cuda_copies.place(cuda_copies.basic_graph(path))
        unknown = {op for ops in placement.unknown.values() for op in ops}
        assert not unknown, f"{name}: ops the model does not know: {unknown}"
        for search in ("greedy_step", "beam_step"):
            back = [c for c in cuda_copies.step_copies(placement, search) if c.direction == "to host"]
            if sorted(c.reason for c in back) != ["Slice input 2", "fetch"]:
                problems[f"{name} {search}"] = back
    assert not problems, problems
