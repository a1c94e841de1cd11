"""Where ONNX Runtime's CUDA provider would run each node of a file, and the copies between the GPU
and the host that a decoding step would make: a model of ONNX Runtime's own rules, for a machine
without a GPU.

A copy from the GPU to the host makes the host wait for every kernel queued before it, so the host
stops running ahead of the GPU; in the loop body each such copy happens on every decoding step.
The model, from ONNX Runtime's source (main at 1.30, whose kernel registrations equal those of the
onnxruntime-gpu 1.31.1 binary; paths under ``onnxruntime/``):

- a node goes to CUDA if a CUDA kernel admits its version and types (``KERNELS``: the registrations
  in ``core/providers/cuda/cuda_execution_provider.cc`` and ``contrib_ops/cuda``); ``Cast`` to
  string and ``ArgMax`` with ``select_last_index`` stay on the CPU (``CastNeedFallbackToCPU``,
  ``ArgMaxOrArgMinNeedFallbackToCPU``);
- then ``GetCpuPreferredNodes`` (``core/framework/fallback_cpu_capability.cc``) moves to the CPU,
  in topological order from the consumers of host outputs (``Shape``'s), each node whose every
  input is a small initializer (≤ 100 elements, outer scopes included), a formal input of its graph,
  or a host value the kernel does not itself take on the host; never a node with a float16 input;
- a node the session's layer assignment (``session.layer_assignment_settings``, matched against the
  node's ``layer_ann`` annotation or, unannotated, inherited from the node holding its graph;
  ``core/framework/layering_annotations.cc``) gives the CPU is not offered to CUDA at all;
- ``MemcpyTransformer`` (``core/optimizer/transformer_memcpy.cc``) copies a host value into a CUDA
  node's device input and a device value into a CPU node or a kernel's host input (``cpu_inputs``),
  once per value and direction;
- ``Compress`` and ``NonZero`` on the GPU copy their output's size back to the host inside their run
  (``WAITING_KERNELS``): a wait like a copy;
- a subgraph's feeds (implicit inputs, a loop's carried values, iteration number and condition,
  the last two made on the host) are copied on every execution when they live elsewhere than
  where the subgraph's nodes read them; a loop's carried outputs go back to where its inputs
  were, its condition to the host, an ``If`` branch's outputs to where the ``If`` puts them
  (``core/framework/utils.cc`` ``ExecuteSubgraph``, ``core/providers/cpu/controlflow/loop.cc``).

Level-1 rewrites run before the placement, so the model reads the graph ONNX Runtime's basic level
leaves (:func:`basic_graph`). Not modelled: initializers used on both sides (ONNX Runtime copies
them once per session), later fusions, and memory types beyond host and device.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto

from graphgen._graphs import all_graphs, all_nodes, implicit_inputs, layer, set_layer, subgraphs
from graphgen.contract import LAYER_ANNOTATION, LAYER_ASSIGNMENT

HOST, DEVICE = "host", "device"
BOOL, INT32, INT64 = TensorProto.BOOL, TensorProto.INT32, TensorProto.INT64
FLOAT, DOUBLE, FLOAT16, BFLOAT16 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16
FLOATS = frozenset({FLOAT, DOUBLE, FLOAT16, BFLOAT16})
INT8, UINT8, INT16 = TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16
UINT32, UINT64 = TensorProto.UINT32, TensorProto.UINT64
INTEGERS = frozenset({INT8, UINT8, INT16, INT32, INT64, UINT32, UINT64})
NUMBERS = FLOATS | INTEGERS  # no bool
SMALL_INITIALIZER = 100  # fallback_cpu_capability.cc kSmallInitializerThreshold


@dataclass(frozen=True)
class Kernel:
    """A CUDA kernel registration: the element types its main constraint admits (``None``: every
    fixed-size type), the input that constraint binds, and the inputs/outputs it keeps on the host."""

    types: frozenset[int] | None = None
    typed_input: int = 0
    cpu_inputs: frozenset[int] = frozenset()
    cpu_outputs: frozenset[int] = frozenset()


def _k(
    types: Iterable[int] | None = None, typed: int = 0, cpu_in: Iterable[int] = (), cpu_out: Iterable[int] = ()
) -> Kernel:
    return Kernel(None if types is None else frozenset(types), typed, frozenset(cpu_in), frozenset(cpu_out))


_COMPARE = NUMBERS - {INT8, UINT8, INT16, BFLOAT16}
_BOOLEAN = [BOOL]
# ONNX Runtime 1.30/1.31.1 CUDA kernels for the ops of graphgen's files at opset 20 (file names
# under core/providers/cuda unless marked): math/binary_elementwise_ops.cc (Add ... Xor),
# reduction/reduction_ops.cc, tensor/*.cc, generator/*.cc, controlflow/{if,loop}.cc, nn/layer_norm.cc,
# math/{topk,softmax,matmul,gemm,variadic_elementwise_ops}.cc; contrib_ops/cuda/bert/*.cc.
KERNELS: dict[str, Kernel] = {
    **{op: _k(NUMBERS) for op in ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min")},
    "Pow": _k(FLOATS | {INT32, INT64}),
    **{op: _k(_BOOLEAN) for op in ("And", "Or", "Xor", "Not")},
    "Equal": _k(_COMPARE | {BOOL}),
    **{op: _k(_COMPARE) for op in ("Greater", "GreaterOrEqual", "Less", "LessOrEqual")},
    "Where": _k(NUMBERS - {INT8, INT16, UINT32, UINT64}, typed=1),
    **{op: _k({FLOAT, DOUBLE, FLOAT16}) for op in ("ArgMax", "ArgMin")},
    "LogSoftmax": _k({FLOAT, DOUBLE, FLOAT16}),
    "Softmax": _k({FLOAT, DOUBLE, FLOAT16}),
    **{op: _k(FLOATS) for op in ("MatMul", "Gemm", "Sigmoid", "LayerNormalization", "Erf", "Tanh", "Relu", "Sqrt")},
    "ReduceMean": _k(FLOATS | {INT32}, cpu_in=[1]),
    "CumSum": _k({INT32, INT64, UINT32, UINT64, FLOAT, DOUBLE, FLOAT16}, cpu_in=[1]),
    "TopK": _k(NUMBERS - {UINT32, UINT64, BFLOAT16}, cpu_in=[1]),
    "ReduceSum": _k(FLOATS | {INT32, INT64}, cpu_in=[1]),
    "ReduceProd": _k({FLOAT, DOUBLE, FLOAT16, INT32}, cpu_in=[1]),
    **{op: _k(FLOATS | {INT32, INT64, INT8, UINT8}, cpu_in=[1]) for op in ("ReduceMax", "ReduceMin")},
    "Range": _k({FLOAT, DOUBLE, INT16, INT32, INT64}, cpu_in=[0, 1, 2]),
    "Pad": _k({FLOAT, DOUBLE, FLOAT16, BOOL}, cpu_in=[1, 2, 3]),
    "GatherND": _k({FLOAT, FLOAT16, DOUBLE, INT64, BFLOAT16, BOOL}),
    "Cast": _k(),
    "Compress": _k(typed=0),  # tensor/compress.cc (11+); waits for the GPU, see WAITING_KERNELS
    "Concat": _k(),
    "ConstantOfShape": _k(cpu_in=[0]),
    "Expand": _k(cpu_in=[1]),
    "Flatten": _k(),
    "NonZero": _k({BOOL, UINT8, INT32, INT64, FLOAT, FLOAT16}),
    "Gather": _k(),
    "GatherElements": _k(),
    "Identity": _k(),
    "If": _k(cpu_in=[0]),
    "Loop": _k(cpu_in=[0, 1]),
    "Reshape": _k(cpu_in=[1]),
    "ScatterElements": _k(),
    "Shape": _k(cpu_out=[0]),
    "Size": _k(cpu_out=[0]),
    "Slice": _k(cpu_in=[1, 2, 3, 4]),
    "Split": _k(cpu_in=[1]),
    "Squeeze": _k(cpu_in=[1]),
    "Unsqueeze": _k(cpu_in=[1]),
    "Transpose": _k(),
    "Tile": _k(cpu_in=[1]),
    # ml/label_encoder.cc (numeric types only; the (input, output) pairs are LABEL_ENCODER_PAIRS)
    "ai.onnx.ml.LabelEncoder": _k(),
    "com.microsoft.MultiHeadAttention": _k({FLOAT, FLOAT16, BFLOAT16}, cpu_in=[8]),
    "com.microsoft.SkipLayerNormalization": _k({FLOAT, FLOAT16, BFLOAT16}),
    **{f"com.microsoft.{op}": _k(FLOATS) for op in ("QuickGelu", "BiasGelu", "FastGelu", "Gelu")},
}

# ai.onnx.ml opset 3 (graphgen's files) means LabelEncoder-2, which ml/label_encoder.cc registers
# (versions 2-3) for these (keys, values) element types; string keys or values stay on the CPU.
LABEL_ENCODER_PAIRS = frozenset({(FLOAT, INT64), (INT64, FLOAT), (FLOAT, FLOAT), (INT64, INT64)})

# CUDA kernels that copy a count back to the host inside their own run, to size their output
# (tensor/compress.cc, tensor/nonzero_op.cc: ``cudaMemcpyAsync`` device to host into pageable
# memory, which returns once the copy is done): each run on the GPU is one wait, like a copy.
WAITING_KERNELS = frozenset({"Compress", "NonZero"})

# Ops with no CUDA kernel in ONNX Runtime (they run on the CPU parts of a CUDA session): the bitwise
# ops, the string ops, and onnxruntime-extensions' (``ai.onnx.contrib``) ops.
HOST_ONLY = frozenset(
    {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "StringConcat", "StringSplit", "RegexFullMatch"}
)


@dataclass(frozen=True)
class Copy:
    """One copy a graph's execution makes: ``value``, ``direction`` (``"to host"``/``"to device"``),
    in ``graph`` (a subgraph's name), and why (a node's input, a feed, a fetch)."""

    graph: str
    value: str
    direction: str
    reason: str


@dataclass
class Placement:
    """Each node's side (by graph name and node index) and the copies, per graph."""

    sides: dict[str, list[str]] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    # per graph: op types neither KERNELS nor HOST_ONLY knows (placed on the host)
    unknown: dict[str, set[str]] = field(default_factory=dict)
    hazards: list[str] = field(default_factory=list)  # see _place_graph

    def per_execution(self, graphs: Iterable[str]) -> list[Copy]:
        """The copies one execution of each of ``graphs`` makes (feeds and fetches included)."""
        wanted = set(graphs)
        return [copy for copy in self.copies if copy.graph in wanted]


def basic_graph(path: Path | str) -> ModelProto:
    """The graph after ONNX Runtime's level-1 rewrites (constant folding and the like), which run
    before the providers are chosen; the weights are left out of the copy."""
    return profile(path).graph


@dataclass(frozen=True)
class Profile:
    """A file's level-1 graph (:func:`basic_graph`) and how many times each of its nodes ran (by
    name) in one ``session.run`` on the CPU."""

    graph: ModelProto
    runs: Counter[str]


def profile(path: Path | str, feeds: dict | None = None) -> Profile:
    """:func:`basic_graph` and the node runs of ``session.run(None, feeds)`` (none without ``feeds``),
    from one session."""
    import json

    import onnxruntime as ort

    from graphgen.runtime.translator import session_options

    header = onnx.load(str(path), load_external_data=False)
    extensions = any(opset.domain == "ai.onnx.contrib" for opset in header.opset_import)
    runs: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as folder:
        options = session_options(extensions=extensions)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(Path(folder) / "basic.onnx")
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        if feeds is not None:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(folder) / "profile")
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        if feeds is not None:
            session.run(None, feeds)
            suffix = "_kernel_time"
            for event in json.loads(Path(session.end_profiling()).read_text(encoding="utf-8")):
                if event.get("cat") == "Node" and event["name"].endswith(suffix):
                    runs[event["name"][: -len(suffix)]] += 1
        basic = onnx.load(str(Path(folder) / "basic.onnx"), load_external_data=False)
    # ONNX Runtime does not write the layering annotations back: they follow the node names, and a
    # node a rewrite made takes the annotation of the node that makes its first input (the rewrites
    # give new nodes the annotation of the node they replace; docs/Optimizer_Layering_Annotations.md).
    names = {node.name for node in all_nodes(header.graph)}
    annotations = {node.name: value for node in all_nodes(header.graph) if (value := layer(node, LAYER_ANNOTATION))}
    made_by: dict[str, str] = {}
    for node in all_nodes(basic.graph):
        value = annotations.get(node.name)
        if value is None and node.name not in names and node.input:
            value = made_by.get(node.input[0])
        if value is not None:
            set_layer([node], LAYER_ANNOTATION, value)
            made_by.update(dict.fromkeys(node.output, value))
    return Profile(basic, runs)


# onnxruntime-extensions' ops in ``--tokenizer extensions`` files (no CUDA kernels): their
# outputs' types, which ONNX shape inference does not know.
EXTENSIONS_OUTPUT_TYPES = {"SentencepieceTokenizer": [INT32, INT64]}


def element_types(model: ModelProto) -> dict[str, int]:
    """Every value's element type: ONNX inference's, ``EXTENSIONS_OUTPUT_TYPES``, then for what is
    left open (outputs of ``com.microsoft`` ops and what follows) the type of the node's first typed
    input (these ops keep their input's type: attention, layer norms, quantized matmuls)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types: dict[str, int] = {}

    def visit(graph: GraphProto) -> None:
        for info in [*graph.input, *graph.output, *graph.value_info]:
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                types[info.name] = info.type.tensor_type.elem_type
        for tensor in graph.initializer:
            types[tensor.name] = tensor.data_type
        for node in graph.node:
            for sub in subgraphs(node):
                visit(sub)
            if node.domain == "ai.onnx.contrib":
                types.update(zip(node.output, EXTENSIONS_OUTPUT_TYPES[node.op_type], strict=False))
            cast = next((a.i for a in node.attribute if node.op_type == "Cast" and a.name == "to"), None)
            known = [types[name] for name in node.input if name in types]
            for name in node.output:
                if name and name not in types and (cast or known):
                    types[name] = cast or known[0]

    visit(inferred.graph)
    return types


def _key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _kernel(node: onnx.NodeProto, types: dict[str, int]) -> Kernel | None:
    kernel = KERNELS.get(_key(node))
    if kernel is None:
        return None
    attributes = {a.name: a for a in node.attribute}
    if node.op_type == "Cast" and attributes["to"].i == TensorProto.STRING:
        return None
    if node.op_type == "ArgMax" and "select_last_index" in attributes and attributes["select_last_index"].i:
        return None
    typed = node.input[kernel.typed_input] if len(node.input) > kernel.typed_input else ""
    if kernel.types is None and types.get(typed) == TensorProto.STRING:  # fixed-size types only
        return None
    if kernel.types is not None and types.get(typed) not in kernel.types:
        return None
    if node.op_type == "Cast" and types.get(node.input[0]) == TensorProto.STRING:
        return None
    if (
        node.op_type == "LabelEncoder"
        and (types.get(node.input[0]), types.get(node.output[0])) not in LABEL_ENCODER_PAIRS
    ):
        return None
    return kernel


@dataclass
class _Scope:
    """What a graph sees of the graphs around it."""

    locations: dict[str, str]  # every visible value's side
    small: set[str]  # initializers of at most SMALL_INITIALIZER elements
    initializers: set[str]


def cpu_layers(config: dict[str, str]) -> tuple[set[str], set[str]]:
    """The annotation prefixes and exact annotations that ``config``'s layer assignment
    (``session.layer_assignment_settings``, ``device(prefix, =exact, ...); ...``) sends to the CPU."""
    prefixes: set[str] = set()
    exact: set[str] = set()
    for rule in config.get(LAYER_ASSIGNMENT, "").split(";"):
        device, _, names = rule.strip().partition("(")
        if device.strip() != "cpu":
            continue
        for name in names.rstrip(")").split(","):
            name = name.strip()
            if name.startswith("="):
                exact.add(name[1:])
            elif name:
                prefixes.add(name)
    return prefixes, exact


def place(model: ModelProto, config: dict[str, str] | None = None) -> Placement:
    """Model the CUDA provider's placement of ``model`` (see the module docstring) in a session with
    the session config entries ``config`` (the layer assignment is the one modelled)."""
    types = element_types(model)
    placement = Placement()
    inputs = {value.name: HOST for value in model.graph.input}
    rules = cpu_layers(config or {})
    _place_graph(model.graph, _Scope({}, set(), set()), types, placement, formal=inputs, rules=rules)
    return placement


def _on_cpu(node: onnx.NodeProto, rules: tuple[set[str], set[str]], inherited: bool) -> bool:
    """Whether the layer assignment sends ``node`` to the CPU (``layering_annotations.cc``: its own
    annotation when a rule matches it, else its parent node's assignment)."""
    annotation = layer(node, LAYER_ANNOTATION)
    if annotation:
        prefixes, exact = rules
        if annotation in exact or any(annotation.startswith(prefix) for prefix in prefixes):
            return True
    return inherited


def _place_graph(
    graph: GraphProto,
    outer: _Scope,
    types: dict[str, int],
    placement: Placement,
    formal: dict[str, str],
    rules: tuple[set[str], set[str]] = (set(), set()),
    inherited: bool = False,
) -> dict[str, str]:
    """Place ``graph``'s nodes; ``formal`` maps its formal inputs to where they are fed from;
    ``rules``: the layer assignment's CPU annotations, ``inherited``: the parent node is assigned to
    the CPU. Returns the side each value of the graph ends on (where its nodes read it)."""
    initializers = {t.name for t in graph.initializer}
    small = outer.small | {t.name for t in graph.initializer if _elements(t) <= SMALL_INITIALIZER}
    known = outer.initializers | initializers
    nodes = list(graph.node)
    # A node the layer assignment gives the CPU is not offered to CUDA (graph_partitioner.cc).
    assigned = [_on_cpu(node, rules, inherited) for node in nodes]
    kernels = [None if assigned[i] else _kernel(node, types) for i, node in enumerate(nodes)]
    placement.unknown[graph.name] = {
        node.op_type
        for node in nodes
        if _key(node) not in KERNELS and node.op_type not in HOST_ONLY and node.domain != "ai.onnx.contrib"
    }
    producer = {name: index for index, node in enumerate(nodes) for name in node.output if name}
    consumers: dict[str, list[int]] = {}  # implicit inputs included, as ONNX Runtime's Graph counts them
    for index, node in enumerate(nodes):
        for name in {*node.input, *implicit_inputs(node)} - {""}:
            consumers.setdefault(name, []).append(index)

    # GetCpuPreferredNodes, in topological order (an ONNX graph lists its nodes in one).
    host_values: set[str] = set()
    candidates: set[int] = set()
    for index, kernel in enumerate(kernels):
        if kernel is not None:
            for slot in kernel.cpu_outputs:
                if slot < len(nodes[index].output) and nodes[index].output[slot]:
                    host_values.add(nodes[index].output[slot])
                    candidates.update(consumers.get(nodes[index].output[slot], []))
    on_host: set[int] = set()
    visited: set[int] = set()
    while candidates:
        index = min(candidates)
        candidates.remove(index)
        if index in visited:
            continue
        visited.add(index)
        node, kernel = nodes[index], kernels[index]
        if assigned[index]:
            # GetCpuPreferredNodes follows host values to all their readers but looks each up in the
            # graph CUDA was offered, which lacks the nodes assigned to the CPU: a null node,
            # dereferenced (fallback_cpu_capability.cc, 1.30). Recorded: files must not do this.
            placement.hazards.append(f"{graph.name}: {node.name}, assigned to the CPU, reads a host value of the GPU's")
        if kernel is None:  # runs on the CPU anyway: its outputs are host values
            host_values.update(name for name in node.output if name)
            candidates.update(c for name in node.output for c in consumers.get(name, []))
            continue
        movable = True
        for slot, name in enumerate(node.input):
            if types.get(name) in (FLOAT16, BFLOAT16):
                movable = False
                break
            if name in small or name in formal:
                continue
            if name not in host_values or slot in kernel.cpu_inputs:
                movable = False
                break
        if movable:
            on_host.add(index)
            host_values.update(name for name in node.output if name)
            candidates.update(c for name in node.output for c in consumers.get(name, []))

    sides = [HOST if kernels[i] is None or i in on_host else DEVICE for i in range(len(nodes))]
    placement.sides[graph.name] = sides

    def produced_side(name: str) -> str | None:
        """Where a value of this graph is made (None: a feed or an initializer)."""
        if name in producer:
            index = producer[name]
            kernel = kernels[index]
            if sides[index] == HOST:
                return HOST
            slot = list(nodes[index].output).index(name)
            return HOST if kernel is not None and slot in kernel.cpu_outputs else DEVICE
        return None

    def wanted_side(index: int, slot: int) -> str:
        kernel = kernels[index]
        if sides[index] == HOST or (kernel is not None and slot in kernel.cpu_inputs):
            return HOST
        return DEVICE

    # Where each feed (formal or implicit input) is read in this graph: MemcpyTransformer keeps a
    # value read on both sides on the host and copies it for the device readers.
    feeds = {**outer.locations, **formal}
    feed_target: dict[str, str] = {}
    for name, source in feeds.items():
        if name in known:
            continue
        readers = {wanted_side(i, s) for i, node in enumerate(nodes) for s, n in enumerate(node.input) if n == name}
        if not readers:  # read only inside a nested graph: it stays where it is (allocation_planner CASE 1)
            continue
        target = feed_target[name] = HOST if HOST in readers else DEVICE
        if readers == {HOST, DEVICE}:
            placement.copies.append(Copy(graph.name, name, "to device", "read on both sides"))
        if source != target:
            placement.copies.append(Copy(graph.name, name, f"to {target}", "feed"))

    # Copies between this graph's own nodes (MemcpyTransformer makes one per value and direction,
    # shared by the value's readers on that side), and the counts waiting kernels copy back.
    copied: set[tuple[str, str]] = set()
    for index, node in enumerate(nodes):
        if node.op_type in WAITING_KERNELS and sides[index] == DEVICE:
            placement.copies.append(Copy(graph.name, node.output[0], "to host", f"{node.op_type} output size"))
        for slot, name in enumerate(node.input):
            made = produced_side(name) if name else None
            wanted = wanted_side(index, slot)
            if made is not None and made != wanted and (name, wanted) not in copied:
                copied.add((name, wanted))
                placement.copies.append(Copy(graph.name, name, f"to {wanted}", f"{node.op_type} input {slot}"))

    locations = dict(outer.locations)
    locations.update({name: feed_target.get(name, side) for name, side in formal.items()})
    for name in feed_target:
        locations[name] = feed_target[name]
    for name in producer:
        locations[name] = produced_side(name) or DEVICE
    scope = _Scope(locations, small, known)

    # Subgraphs, with their feeds and fetches.
    for index, node in enumerate(nodes):
        for attribute in node.attribute:
            if attribute.type != AttributeProto.GRAPH:
                continue
            sub = attribute.g
            sub_formal: dict[str, str] = {}
            if node.op_type == "Loop":
                sub_formal[sub.input[0].name] = HOST  # iteration number, made on the host
                sub_formal[sub.input[1].name] = HOST  # condition
                for slot, info in enumerate(sub.input[2:], start=2):  # where the Loop node reads them
                    sub_formal[info.name] = wanted_side(index, slot)
            inner = _place_graph(sub, scope, types, placement, sub_formal, rules, assigned[index])
            for slot, info in enumerate(sub.output):
                made = inner.get(info.name, DEVICE)
                if node.op_type == "Loop" and slot == 0:  # the condition, read on the host
                    target = HOST
                elif node.op_type == "Loop" and slot + 1 < len(sub.input):  # back where it was fed from
                    target = sub_formal[sub.input[slot + 1].name]
                else:  # an If's outputs and a Loop's scan outputs: where the node puts its outputs
                    target = sides[index]
                if made != target:
                    placement.copies.append(Copy(sub.name, info.name, f"to {target}", "fetch"))
    return locations


def _elements(tensor: TensorProto) -> int:
    count = 1
    for dim in tensor.dims:
        count *= dim
    return count


@dataclass(frozen=True)
class Call:
    """What one ``session.run`` would do on the GPU, as modelled: the waits for the GPU (copies to
    the host and sizes copied back inside kernels), the copies to the GPU, and the kernels run there."""

    waits: int
    copies_to_gpu: int
    kernels: int


def per_call(run: Profile, config: dict[str, str] | None = None) -> Call:
    """Model the profiled ``session.run`` (:func:`profile`) in a CUDA session with the session config
    entries ``config``: each graph's copies count once per execution of that graph, executions being
    those of the CPU run (the same data take the same branches)."""
    placement = place(run.graph, config)
    graphs = {graph.name: list(graph.node) for graph in all_graphs(run.graph.graph)}
    waits = to_gpu = kernels = 0
    for name, sides in placement.sides.items():
        nodes = graphs[name]
        executions = max((run.runs[node.name] for node in nodes), default=0)
        copies = placement.per_execution([name])
        back = sum(1 for copy in copies if copy.direction == f"to {HOST}")
        waits += back * executions
        to_gpu += (len(copies) - back) * executions
        kernels += sum(
            run.runs[node.name]
            for node, side in zip(nodes, sides, strict=True)
            if side == DEVICE and node.op_type not in ("If", "Loop")  # control flow launches no kernel
        )
    return Call(waits, to_gpu, kernels)


# The branches of graphgen's loop body a usual decoding step runs: not the first step (which forces
# a first token), no repetition penalty, not the forced-EOS step; greedy or beam search.
USUAL_STEP = ("later_step", "no_penalty", "not_forced")


def step_copies(placement: Placement, search: str) -> list[Copy]:
    """The copies a usual step of graphgen's loop body makes (``search``: ``"greedy_step"`` or
    ``"beam_step"``), its feeds and fetches included."""
    wanted = (*USUAL_STEP, search)
    graphs = []
    for name in placement.sides:
        parts = name.split("/")
        if parts[0] == "search_step" and all(part.rsplit("_", 1)[0] in wanted for part in parts[1:]):
            graphs.append(name)
    return placement.per_execution(graphs)
