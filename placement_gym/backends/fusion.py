"""Kernels as OpenVINO's CPU plugin forms them: which IR ops fuse into their producer's kernel.

The simulator prices kernels, not IR ops. A fused op costs no launch and no memory round trip of its own; a
device boundary between it and the op whose kernel would absorb it prevents the fusion (HETERO compiles each
side on its own).

* `fusion_parent` (pure numpy, cached per graph): for each compute op the direct producer whose kernel absorbs
  it, or -1 where it starts a kernel of its own;
* `kernel_roots` / `kernel_count`: the kernels of a placement (a boundary to the parent starts a new kernel);
  `view_ops`: the shape-only ops, never a kernel;
* `runtime_kernels` / `runtime_kernels_of`: what the real plugin formed, read from a compiled model's runtime
  model (``layerType`` and ``originalLayersNames`` of each runtime node), mapped to IR ops the way per-op
  profiling does (`runtime_groups`);
* `compare_with_runtime`: predicted against real, kernel counts and op by op.

Where the rules come from
-------------------------
The CPU plugin decides fusion in two steps, and the rules below mirror both:

1. ``SnippetsMarkSkipped`` (src/plugins/intel_cpu/src/transformations/snippets/x64/pass/snippets_mark_skipped.cpp)
   walks the IR in topological order and marks *fusing chains*: an anchor op whose output has exactly one
   consumer starts a chain, and a suitable child joins it; the chain continues only while each member has one
   consumer (the last one may have several). The graph optimizer (graph_optimizer.cpp: FuseConvolutionAndBias,
   FuseConvolutionAndSimpleOperation, FuseFCAndSimpleOperation, FuseMVNAndSimpleOperation,
   FuseReduceAndSimpleOperation, FuseConvolutionSumAndConvolutionSumActivation, ...) then fuses those chains
   into the anchor's kernel.
2. The ops no chain took are tokenized by Snippets (TokenizeSnippets) into ``Subgraph`` kernels: a chain of
   elementwise ops becomes one kernel, joining the kernel of an elementwise producer unless that would make a
   cycle (a path from that kernel to the op through other kernels); attention (ScaledDotProductAttention with
   its input and output Transposes) becomes one MHA ``Subgraph``.

Rule table (checked op by op against the real CPU plugin, OpenVINO 2026.4, on ResNet-50, Inception-V3, BERT-base,
MobileNetV2 and the tiny models, on an AMD EPYC (AVX2, f32) and on an Intel Xeon with native bf16 (its default
precision) as well as in f32 there: kernel counts equal on all of them; ``benchmarks/fidelity/kernel_fusion.py``
writes ``benchmarks/results/kernel_fusion.json``):

* **anchor** (`ANCHORS`: Convolution, GroupConvolution, MatMul, MVN, ReduceMean/Sum/..., AvgPool, ...): starts a
  kernel; absorbs a fusing chain if its output has one reader.
* **post-op** (`POST_OPS`: Relu, Clamp, Sigmoid, Gelu, Tanh, Swish, ...): joins its producer's chain (one
  non-constant input; the producer has one reader and is an anchor or a chain member still open).
* **scale/shift** (Add, Multiply, Subtract, Divide with one constant input): joins the chain the same way when its
  constant is per-tensor or per-channel on the chain's channel axis: the bias of a Convolution or a MatMul
  (FullyConnected), a BatchNorm folded to a scale/shift; not LayerNorm's gamma/beta after MVN (they run along the
  last axis).
* **residual sum** (Add of two computed tensors of one shape): joins the kernel of a Convolution producer that holds
  only its bias and has one reader, the one on input port 0 first (the other where port 0's has several readers, or
  is on another device); never a producer whose output other ops still read later (ResNet's identity shortcut); a
  `SUM_POST_OPS` activation after it joins too (``conv + bias + add + relu``).
* **elementwise** (`SNIPPETS_OPS`: Add, Multiply, Gelu, Convert f32, ...) that no chain took: joins the Subgraph
  kernels of its elementwise producers (all it can join without a cycle: a path from that kernel to the op through
  other kernels), else starts a Subgraph (BERT's residual adds, LayerNorm's affine, the attention mask; an LSTM
  cell's gate arithmetic).
* **ScaledDotProductAttention**: one MHA kernel with the Transposes of its query (it starts the kernel), value and
  output; the key's Transpose stays a kernel (the plugin merges it with the transpose of K for Q.K^T). Without a
  mask input the plugin scales the query in a Subgraph kernel of its own: the query's Transpose then stands for that
  kernel and the attention op starts the MHA kernel. In bf16 / f16 (`fusion_parent`'s `precision`) the output
  Transpose is a kernel of its own.
* **shape-only** (`FREE_OPS`: Reshape, Squeeze, Unsqueeze): a view of its producer's output, never a kernel (parent =
  its producer, -1 where it reads only model inputs; `view_ops`).
* **anything else** (Concat, MaxPool, Gather, Softmax, Transpose, Split, ...): a kernel of its own.

The parent is always a direct producer, so a kernel is a tree rooted at the op that starts it. Two fusions of
the plugin are not trees and are given a producer outside the kernel as parent (no kernel of their own, as in
the plugin, but their root is that producer's): the value's Transpose read by the MHA kernel, and a second
Subgraph merged into an elementwise op's Subgraph (an LSTM cell's four gates, each reading the Split). A device
boundary right before such an op counts a kernel where the plugin may not form one.

Kernel counts under a placement (`kernel_count`, `kernel_roots`): an op whose parent is on another device starts a
kernel; a residual sum then takes its other Convolution where it can, and views are never a kernel. Against
HETERO compiles (two CPU devices) this is exact or within 2 kernels on ResNet-50 and Inception-V3 splits and on
contiguous BERT splits; BERT placements cut into tens of submodels have 5-10% more real kernels (attention split
from its Transposes keeps extra scale and transpose kernels that no IR op stands for), and HETERO itself sometimes
cuts a device's ops into more submodels than the placement needs (pass its submodel labels as the placement).

Graphs without an ``ov.Model`` (synthetic ones) are judged from op types and edges only: every input is taken
as computed and every constant as per-channel (so bias adds and activations fuse).

The plugin's choices depend on the processor and the device's settings: with ``INFERENCE_NUM_THREADS=1`` it also
tokenizes small MatMul chains into one Subgraph (tiny_chain: 3 kernels instead of 4; no change on the zoo's big
models), which the rule does not model.

Runtime node types counted as layout / weight plumbing, not compute kernels (`PLUMBING_TYPES`):
Input, Output, Const, Reshape, Squeeze, Unsqueeze (views, executed in place), any node whose inputs are all
constant (weight transposes and reshapes, computed once), and Reorder / Convert nodes the plugin inserted
(`INSERTED_PLUMBING_TYPES`: layout or precision changes that carry no IR op's name; a Reorder or Convert that
executes an IR op counts). Concatenation counts as a kernel (the plugin may run it in place, but it is an IR op's
node).
"""
from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..graph import ComputationGraph

# ------------------------------------------------------------------------------------------------- the table
#: Ops that start a fusing chain (SnippetsMarkSkipped: isSuitableConvolutionParent, isSuitableMatMulParent,
#: isSuitableMiscParent, isSuitableReduceParent), with the chain's kind.
ANCHORS: dict[str, str] = {
    "Convolution": "conv", "GroupConvolution": "conv",
    "MatMul": "matmul",
    "MVN": "misc", "NormalizeL2": "misc", "Interpolate": "misc", "AvgPool": "misc", "LSTMCell": "misc",
    "ConvolutionBackpropData": "misc", "GroupConvolutionBackpropData": "misc",
    "ReduceMean": "reduce", "ReduceSum": "reduce", "ReduceProd": "reduce", "ReduceMax": "reduce",
    "ReduceMin": "reduce", "ReduceL1": "reduce", "ReduceL2": "reduce",
}
#: Activations that may follow a residual sum inside a Convolution's kernel
#: (SupportsFusingWithConvolution_SumActivation).
SUM_POST_OPS = frozenset({"Relu", "PRelu", "Elu", "Sigmoid", "HSigmoid", "Clamp", "Swish", "HSwish", "Mish", "Round"})
#: Unary post-ops any chain absorbs (SupportsFusingWithConvolution_Simple, less the scale/shift case).
POST_OPS = SUM_POST_OPS | {"Tanh", "Gelu", "Abs", "Sqrt", "FakeQuantize"}
#: Binary ops that a chain absorbs as a scale/shift when their constant is per-tensor or per-channel.
SCALE_SHIFT_OPS = frozenset({"Add", "Multiply", "Subtract", "Divide"})
#: Elementwise ops Snippets tokenizes into Subgraph kernels (snippets' is_supported_op; Convert only between
#: the precisions in `SNIPPETS_CONVERT_TYPES`).
SNIPPETS_OPS = frozenset({
    "Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "SquaredDifference", "FloorMod", "Mod",
    "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "LogicalXor",
    "LogicalNot", "Xor", "Select", "Abs", "Clamp", "Elu", "Erf", "Exp", "Floor", "Ceiling", "Gelu", "HSwish",
    "Negative", "Relu", "Round", "Sigmoid", "Sqrt", "Swish", "Tanh", "PRelu", "Convert", "FakeQuantize",
})
SNIPPETS_CONVERT_TYPES = frozenset({"f32", "f16", "bf16", "i8", "u8"})
#: Shape-only ops: views of their producer's output, no kernel (the plugin's Reshape node runs in place).
FREE_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze"})
ATTENTION = "ScaledDotProductAttention"

#: Runtime (compiled-model) node types that are layout / weight plumbing, never a compute kernel.
PLUMBING_TYPES = frozenset({"Input", "Output", "Parameter", "Result", "Const", "Reshape", "Squeeze", "Unsqueeze"})
#: Runtime node types that are plumbing when the plugin inserted them (no IR compute op in originalLayersNames).
INSERTED_PLUMBING_TYPES = frozenset({"Reorder", "Convert"})


# --------------------------------------------------------------------------------------------- op facts
@dataclass(frozen=True)
class _Input:
    producer: int  # compute op index, or -1 (constant or model input)
    const: bool  # a Constant (weights, bias, ...)
    shape: tuple  # static dims (-1 dynamic), () when unknown
    const_uses: int  # consumers of that constant (a scale/shift needs its constant to itself)


@dataclass(frozen=True)
class _OpFacts:
    inputs: tuple  # per op: tuple of _Input, by input port
    consumers: tuple  # per op: tuple of (consumer index, input port) over compute consumers
    n_uses: np.ndarray  # per op: readers of its outputs, model outputs (Results) included
    in_type: tuple  # per op: element type name of input 0 ("" unknown)
    out_type: tuple  # per op: element type name of output 0
    fully_connected: np.ndarray  # per op: a MatMul with constant weights of rank 2-3 (the plugin's FullyConnected)
    reduce_axis: np.ndarray  # per op: channel axis after a Reduce (-1: reduced away)


def _facts(graph: ComputationGraph) -> _OpFacts:
    n = graph.n_ops
    index = {name: i for i, name in enumerate(graph.op_names)}
    inputs: list[list[_Input]] = [[] for _ in range(n)]
    consumers: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    n_uses = np.zeros(n, dtype=np.int64)
    in_type, out_type = [""] * n, [""] * n
    fully_connected = np.zeros(n, dtype=bool)
    reduce_axis = np.ones(n, dtype=np.int64)
    if graph.model is None:  # synthetic: edges only; all inputs computed, constants per-channel
        for s, d in graph.edge_index.T.tolist():
            inputs[d].append(_Input(s, False, graph.output_shapes[s][0] if graph.output_shapes[s] else (), 1))
            consumers[s].append((d, len(inputs[d]) - 1))
        n_uses[:] = np.maximum(graph.out_degree(), 1)
        for i, op_type in enumerate(graph.op_types):
            fully_connected[i] = op_type == "MatMul" and len(inputs[i]) == 1
        return _OpFacts(tuple(map(tuple, inputs)), tuple(map(tuple, consumers)), n_uses, tuple(in_type),
                        tuple(out_type), fully_connected, reduce_axis)

    for op in graph.model.get_ordered_ops():
        i = index.get(op.get_friendly_name())
        if i is None or graph.op_types[i] != op.get_type_name():
            continue
        n_uses[i] = sum(len(out.get_target_inputs()) for out in op.outputs())
        out_type[i] = op.get_output_element_type(0).get_type_name() if op.get_output_size() else ""
        for port, inp in enumerate(op.inputs()):
            source = inp.get_source_output()
            node = source.get_node()
            const = node.get_type_name() == "Constant"
            producer = -1 if const else index.get(node.get_friendly_name(), -1)
            shape = _dims(source.get_partial_shape())
            inputs[i].append(_Input(producer, const, shape, len(source.get_target_inputs()) if const else 0))
            if producer >= 0:
                consumers[producer].append((i, port))
            if port == 0:
                in_type[i] = source.get_element_type().get_type_name()
        op_type = graph.op_types[i]
        if op_type == "MatMul" and len(inputs[i]) == 2:
            a, w = inputs[i]
            fully_connected[i] = w.const and 1 < len(a.shape) <= 3 and 1 < len(w.shape) <= 3
        elif ANCHORS.get(op_type) == "reduce" and len(inputs[i]) == 2 and inputs[i][1].const:
            axes = [int(a) for a in np.ravel(op.input(1).get_source_output().get_node().get_data())]
            keep = bool(op.get_attributes().get("keep_dims", False))
            rank = len(inputs[i][0].shape)
            axes = [a + rank if a < 0 else a for a in axes]
            reduce_axis[i] = 1 if keep else (-1 if 1 in axes else (0 if 0 in axes else 1))
    return _OpFacts(tuple(map(tuple, inputs)), tuple(map(tuple, consumers)), n_uses, tuple(in_type),
                    tuple(out_type), fully_connected, reduce_axis)


_FACTS: "weakref.WeakKeyDictionary[ComputationGraph, _OpFacts]" = weakref.WeakKeyDictionary()


def _cached_facts(graph: ComputationGraph) -> _OpFacts:
    cached = _FACTS.get(graph)
    if cached is None:
        cached = _FACTS[graph] = _facts(graph)
    return cached


def _dims(partial_shape) -> tuple:
    if partial_shape.rank.is_dynamic:
        return ()
    return tuple(d.get_length() if d.is_static else -1 for d in partial_shape)


def _per_channel(data: tuple, weight: tuple, axis: int) -> bool:
    """The plugin's isPerTensorOrPerChannelBroadcastable: `weight` is one value, or its only non-1 dim is `axis`
    of `data` (right-aligned) and matches it."""
    if not weight or int(np.prod([max(d, 1) for d in weight])) == 1:
        return True
    if not data or len(weight) > len(data) or axis < 0:
        return False
    padded = (1,) * (len(data) - len(weight)) + tuple(weight)
    return all(w == 1 for k, w in enumerate(padded) if k != axis) and padded[axis] == data[axis]


# ------------------------------------------------------------------------------------------------ the rule
@dataclass(frozen=True)
class _Rule:
    parent: np.ndarray  # (N,) the rule's parent (-1: starts a kernel)
    alternate: np.ndarray  # (N,) a second producer that absorbs the op when the parent is on another device, or -1
    view: np.ndarray  # (N,) bool: shape-only ops (`FREE_OPS`), never a kernel
    f32_only: np.ndarray  # (N,) bool: fused only where the device infers in f32
    low_precision_parent: np.ndarray  # (N,) `parent` with the f32-only fusions undone


_RULES: "weakref.WeakKeyDictionary[ComputationGraph, _Rule]" = weakref.WeakKeyDictionary()


def _rule(graph: ComputationGraph) -> _Rule:
    cached = _RULES.get(graph)
    if cached is None:
        fuser = _Fuser(graph, _cached_facts(graph))
        fuser.run()
        view = np.array([t in FREE_OPS for t in graph.op_types], dtype=bool)
        low = np.where(fuser.f32_only, -1, fuser.parent)
        for array in (fuser.parent, fuser.alternate, view, fuser.f32_only, low):
            array.setflags(write=False)
        cached = _RULES[graph] = _Rule(fuser.parent, fuser.alternate, view, fuser.f32_only, low)
    return cached


def fusion_parent(graph: ComputationGraph, precision: str = "f32") -> np.ndarray:
    """(N,) int64, read-only: for each compute op the index of the direct producer (an edge parent -> op
    exists) whose kernel absorbs it on OpenVINO's CPU plugin, or -1 where the op starts its own kernel.

    Shape-only ops (`FREE_OPS`, `view_ops`) are views: their parent is their producer, or -1 where they read only
    model inputs, and they are never a kernel (`kernel_count` leaves them out). Rules: the module's table
    (`ANCHORS`, `POST_OPS`, `SCALE_SHIFT_OPS`, `SUM_POST_OPS`, `SNIPPETS_OPS`, `FREE_OPS`, attention). Cached per
    graph.

    `precision`: the precision the device infers in (``INFERENCE_PRECISION_HINT``: ``"f32"``, ``"bf16"``,
    ``"f16"``; `inference_precision` reads it). In bf16 / f16 the plugin leaves attention's output Transpose out of
    the attention kernel (seen on BERT-base on a Xeon with native bf16, OpenVINO's CPU default there)."""
    rule = _rule(graph)
    return rule.parent if _is_f32(precision) else rule.low_precision_parent


def _is_f32(precision: Any) -> bool:
    return str(precision).lower() in ("f32", "float32", "fp32", "<type: 'float32'>")


def inference_precision(core: Any, device: str, properties: dict | None = None) -> str:
    """The precision `device` (an OpenVINO device name) infers in with compile `properties`: their
    ``INFERENCE_PRECISION_HINT`` or the plugin's default (f32; bf16 on CPUs that run it natively), as a type name
    (``"f32"``, ``"bf16"``, ``"f16"``)."""
    hint = (properties or {}).get("INFERENCE_PRECISION_HINT")
    if hint is None:
        try:
            hint = core.get_property(device.split(".")[0], "INFERENCE_PRECISION_HINT")
        except Exception:  # noqa: BLE001 (a plugin without the property infers in f32)
            return "f32"
    name = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    return {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(name.lower(), name.lower())


def _checked(graph: ComputationGraph, placement: np.ndarray) -> np.ndarray:
    placement = np.asarray(placement).reshape(-1)
    if placement.shape[0] != graph.n_ops:
        raise ValueError(f"placement has {placement.shape[0]} entries, graph {graph.name!r} has {graph.n_ops} ops")
    return placement


def view_ops(graph: ComputationGraph) -> np.ndarray:
    """(N,) bool, read-only: the shape-only ops (`FREE_OPS`: Reshape, Squeeze, Unsqueeze), views of their
    producer's output that never run as a kernel (the plugin's Reshape node works in place), also across a
    device boundary."""
    return _rule(graph).view


class _Fuser:
    """One topological pass that applies the rule table (see the module docstring)."""

    def __init__(self, graph: ComputationGraph, facts: _OpFacts) -> None:
        self.graph = graph
        self.facts = facts
        n = graph.n_ops
        self.parent = np.full(n, -1, dtype=np.int64)
        self.alternate = np.full(n, -1, dtype=np.int64)
        self.f32_only = np.zeros(n, dtype=bool)  # fusions the plugin makes only when it infers in f32
        self.root = np.arange(n, dtype=np.int64)
        self.kind = [""] * n  # kind of the kernel an op roots: conv, matmul, misc, reduce, subgraph, attention, own
        self.chain = [""] * n  # the fusing chain an op leaves open for its one consumer ("" = closed)
        self.axis = np.ones(n, dtype=np.int64)  # channel axis of that chain
        self.bias_only = np.zeros(n, dtype=bool)  # a Convolution kernel holding only its bias so far
        self.producers = [sorted({x.producer for x in ins if x.producer >= 0}) for ins in self.facts.inputs]
        self.tokenized = np.zeros(n, dtype=bool)  # in a Snippets Subgraph kernel
        self.members: dict[int, list[int]] = {}  # Subgraph kernels: root -> ops (the merged kernel, not the tree)

    # ------------------------------------------------------------------ helpers
    def _attach(self, i: int, p: int) -> None:
        self.parent[i] = p
        self.root[i] = self.root[p]

    def _computed_inputs(self, i: int) -> list[_Input]:
        return [x for x in self.facts.inputs[i] if not x.const]

    def _reaches(self, start: int, target_root: int) -> bool:
        """Whether some op of the kernel rooted at `target_root` is `start` or one of its ancestors."""
        return self._search_up(start, target_root, lambda x: self.root[x] == target_root)

    def _is_ancestor(self, a: int, b: int) -> bool:
        return self._search_up(b, a, lambda x: x == a)

    def _search_up(self, start: int, floor: int, hit) -> bool:
        """Depth-first over producers from `start`, only through ops at index `floor` or above (topological order:
        nothing below it can lead back up to it): whether some op visited satisfies `hit`."""
        stack, seen = [start], {start}
        while stack:
            x = stack.pop()
            if hit(x):
                return True
            for y in self.producers[x]:
                if y >= floor and y not in seen:
                    seen.add(y)
                    stack.append(y)
        return False

    def _open(self, i: int, chain: str, axis: int) -> None:
        """`i` ends chain `chain`; the chain stays open for a child only if `i` has one reader."""
        self.chain[i] = chain if self.facts.n_uses[i] == 1 else ""
        self.axis[i] = axis

    # ------------------------------------------------------------------ rules
    def run(self) -> np.ndarray:
        graph, facts = self.graph, self.facts
        for i, op_type in enumerate(graph.op_types):
            computed = self._computed_inputs(i)
            producers = [x.producer for x in computed if x.producer >= 0]
            if op_type in FREE_OPS:  # a view: rides with its producer's kernel
                if producers:
                    self._attach(i, producers[0])
                else:
                    self.kind[i] = "own"
                continue
            if op_type in ANCHORS:
                self._anchor(i, op_type)
                continue
            if op_type == ATTENTION:
                self._attention(i)
                continue
            if op_type == "Transpose" and self._attention_input(i):
                continue
            if op_type == "Transpose" and producers and graph.op_types[producers[0]] == ATTENTION \
                    and facts.n_uses[producers[0]] == 1:
                self._attach(i, producers[0])  # the attention output's Transpose: part of the MHA kernel,
                self.f32_only[i] = True  # in f32 only (in bf16 / f16 the plugin runs it as a kernel of its own)
                continue
            if self._chain_child(i, op_type, computed):
                continue
            if self._residual_sum(i, op_type, computed):
                continue
            if self._snippets(i, op_type):
                continue
            self.kind[i] = "own"
        return self.parent

    def _anchor(self, i: int, op_type: str) -> None:
        kind = ANCHORS[op_type]
        shape = self.graph.output_shapes[i][0] if self.graph.output_shapes[i] else ()
        if kind == "matmul":
            if self.facts.fully_connected[i]:
                axis = 2 if len(shape) == 3 else 1
            else:
                axis = max(len(shape) - 1, 0)
        elif kind == "reduce":
            axis = int(self.facts.reduce_axis[i])
        else:
            axis = 1
        self.kind[i] = kind
        self.bias_only[i] = kind == "conv"
        self._open(i, kind, axis)

    def _chain_child(self, i: int, op_type: str, computed: list[_Input]) -> bool:
        """A post-op or scale/shift joining the open fusing chain of its one computed producer."""
        if len(computed) != 1 or computed[0].producer < 0:
            return False
        p = computed[0].producer
        chain = self.chain[p]
        if not chain:
            return False
        if chain == "sum":  # after a residual sum only its activation joins (then the chain ends)
            if op_type in SUM_POST_OPS:
                self._attach(i, p)
                return True
            return False
        axis = int(self.axis[p])
        if op_type in POST_OPS:
            fits = True
        elif op_type in SCALE_SHIFT_OPS:
            constants = [x for x in self.facts.inputs[i] if x.const]
            fits = all(c.const_uses <= 1 and _per_channel(computed[0].shape, c.shape, axis) for c in constants)
            if self.graph.model is None:
                fits = True
        else:
            fits = False
        if not fits:
            return False
        self._attach(i, p)
        self.bias_only[i] = bool(self.bias_only[p] and self.kind[self.root[p]] == "conv" and p == self.root[p]
                                 and op_type == "Add")
        self._open(i, chain, axis)
        return True

    def _residual_sum(self, i: int, op_type: str, computed: list[_Input]) -> bool:
        """An Add of two computed tensors of one shape joins a Convolution producer's kernel (port 0 first), as
        FuseConvolutionSumAndConvolutionSumActivation does in f32."""
        if op_type != "Add" or len(computed) != 2 or any(x.producer < 0 for x in computed):
            return False
        if computed[0].shape != computed[1].shape or computed[0].producer == computed[1].producer:
            return False
        p0, p1 = computed[0].producer, computed[1].producer
        s0, s1 = bool(self.bias_only[p0]), bool(self.bias_only[p1])
        if not (s0 or s1):
            return False
        uses = self.facts.n_uses
        if s0 and s1:
            merged, peer = (p0, p1) if uses[p0] == 1 else (p1, p0)
        else:
            merged, peer = (p0, p1) if s0 else (p1, p0)
        if not self._sum_allowed(i, merged, peer):
            return False
        self._attach(i, merged)
        self.chain[i] = "sum" if uses[i] == 1 else ""
        if s0 and s1 and self._sum_allowed(i, peer, merged):
            self.alternate[i] = peer  # where `merged` is on another device, the plugin picks the other convolution
        return True

    def _sum_allowed(self, i: int, merged: int, peer: int) -> bool:
        if self.facts.n_uses[merged] != 1 or self._reaches(peer, int(self.root[merged])):
            return False
        # The fused sum is computed in place over the peer's buffer: every other reader of the peer must come
        # before it (is_data_dependency).
        return all(c == i or self._is_ancestor(c, i) for c, _ in self.facts.consumers[peer])

    def _snippets(self, i: int, op_type: str) -> bool:
        """An elementwise op no chain took: joins the Subgraph kernels of its elementwise producers (all of them
        that it can join without a cycle, as TokenizeSnippets merges them), else starts one."""
        if op_type not in SNIPPETS_OPS:
            return False
        if op_type == "Convert" and not (self.facts.in_type[i] in SNIPPETS_CONVERT_TYPES
                                         and self.facts.out_type[i] in SNIPPETS_CONVERT_TYPES):
            return False
        self.tokenized[i] = True
        joined: list[int] = []  # roots of the Subgraph kernels merged with i
        for x in self.facts.inputs[i]:
            p = x.producer
            if p >= 0 and self.tokenized[p] and int(self.root[p]) not in joined \
                    and self._acyclic([*joined, int(self.root[p])], i):
                joined.append(int(self.root[p]))
        if not joined:
            self.kind[i] = "subgraph"
            self.members[i] = [i]
            return True
        keep = min(joined)  # the merged kernel starts at its earliest op
        candidates = [x.producer for x in self.facts.inputs[i]
                      if x.producer >= 0 and self.tokenized[x.producer] and int(self.root[x.producer]) in joined]
        # Parent: a producer whose parent chain leads to the kernel's first op, where one does.
        self.parent[i] = next((p for p in candidates if self._tree_root(p) == keep), candidates[0])
        self.root[i] = keep
        self.members[keep].append(i)
        for other in joined:
            if other == keep:
                continue
            # A second Subgraph merged in: one kernel less. Its first op has no producer inside the merged kernel,
            # and a parent must be a producer: it takes its own producer (it reads that op's output, as the value
            # Transpose of attention does), or stays -1 where it reads only model inputs.
            outside = self.producers[other]
            if outside and self.parent[other] < 0:
                self.parent[other] = outside[0]
            for m in self.members.pop(other):
                self.root[m] = keep
                self.members[keep].append(m)
        return True

    def _tree_root(self, i: int) -> int:
        while self.parent[i] >= 0:
            i = int(self.parent[i])
        return i

    def _acyclic(self, roots: list[int], i: int) -> bool:
        """Merging op `i` with the kernels rooted at `roots` makes no cycle: no path leaves the merged ops and
        comes back into them."""
        inside = {i, *(m for r in roots for m in self.members[r])}
        low = min(inside)
        for x in inside:
            for q in self.producers[x]:
                if q in inside:
                    continue
                stack, seen = [q], {q}
                while stack:
                    y = stack.pop()
                    for z in self.producers[y]:
                        if z in inside:
                            return False
                        if z >= low and z not in seen:
                            seen.add(z)
                            stack.append(z)
        return True

    def _attention_consumer(self, i: int) -> tuple[int, int] | None:
        """(SDPA op, input port) when `i`'s one reader is a ScaledDotProductAttention."""
        readers = self.facts.consumers[i]
        if self.facts.n_uses[i] != 1 or len(readers) != 1:
            return None
        c, port = readers[0]
        return (c, port) if self.graph.op_types[c] == ATTENTION else None

    def _attention_input(self, i: int) -> bool:
        """A Transpose read only by attention: the value's is read by the MHA kernel (given its producer as parent:
        no kernel), the key's stays a kernel of its own, and the query's starts the MHA kernel where attention has a
        mask; without one the plugin scales the query in a Subgraph kernel of its own, which the query's
        Transpose stands for (a kernel: the MHA kernel then starts at the attention op)."""
        found = self._attention_consumer(i)
        if found is None:
            return False
        attention, port = found
        if port == 0 and self._masked(attention):
            self.kind[i] = "attention"
        elif port == 2 and self.producers[i]:
            self._attach(i, self.producers[i][0])
        else:
            self.kind[i] = "own"
        return True

    def _masked(self, attention: int) -> bool:
        """Whether attention op `attention` has a mask input (port 3)."""
        return len(self.facts.inputs[attention]) > 3

    def _attention(self, i: int) -> None:
        query = self.facts.inputs[i][0].producer if self.facts.inputs[i] else -1
        if query >= 0 and self.kind[query] == "attention" and self.parent[query] < 0:
            self._attach(i, query)
        else:
            self.kind[i] = "attention"


# -------------------------------------------------------------------------------------------- kernels
def kernel_roots(graph: ComputationGraph, placement: np.ndarray | None = None,
                 precision: "str | Sequence[str]" = "f32") -> np.ndarray:
    """(N,) int64: the op that starts the kernel each op runs in (itself where it starts one), with `placement`
    ((N,) device ids, or HETERO submodel labels; None = one device) taken into account:

    * an op whose `fusion_parent` is on another device starts a kernel of its own (the boundary prevents the
      fusion), except that
    * a residual sum whose Convolution parent is on another device fuses into its other Convolution producer
      where that one could take it (the plugin takes whichever Convolution it can), and
    * a view (`view_ops`) always rides with its producer: it is no kernel on either side of a boundary.

    `precision`: the inference precision of every device (a str), or of each device by its index in `placement`
    (a sequence), as `fusion_parent` takes it."""
    rule = _rule(graph)
    alternate, view = rule.alternate, rule.view
    if isinstance(precision, str):
        parent = fusion_parent(graph, precision)
    else:
        if placement is None:
            raise ValueError("a precision per device needs a placement")
        low = np.array([not _is_f32(p) for p in precision], dtype=bool)
        parent = np.where(rule.f32_only & low[_checked(graph, placement)], -1, rule.parent)
    roots = np.arange(graph.n_ops, dtype=np.int64)
    if placement is None:
        for i in np.flatnonzero(parent >= 0):  # parents precede children: one pass in topological order
            roots[i] = roots[parent[i]]
        return roots
    placement = _checked(graph, placement)
    static = kernel_roots(graph)
    for i in np.flatnonzero(parent >= 0):
        p, other = parent[i], alternate[i]
        if view[i] or placement[p] == placement[i]:
            roots[i] = roots[p]
        elif other >= 0 and placement[other] == placement[i] and roots[other] == static[other] \
                and placement[static[other]] == placement[i]:
            roots[i] = roots[other]
    return roots


def kernel_count(graph: ComputationGraph, placement: np.ndarray | None = None,
                 precision: "str | Sequence[str]" = "f32") -> int:
    """How many compute kernels run: ops whose `fusion_parent` is -1, plus ops whose parent is on another device
    in `placement` ((N,) ints, device ids or HETERO submodel labels; None = one device): a boundary prevents the
    fusion. Views (`view_ops`) are never counted, and a residual sum takes its other Convolution where it can
    (`kernel_roots` says how, and how `precision` is given). Equal to the number of non-view ops that are their
    own `kernel_roots`."""
    roots = kernel_roots(graph, placement, precision)
    return int(np.count_nonzero((roots == np.arange(graph.n_ops)) & ~_rule(graph).view))


# ------------------------------------------------------------------------------------------ the real thing
def nearest_node(start, neighbours: Callable[[Any], Iterable], key: Callable[[Any], Any], wanted: Callable[[Any], bool]):
    """Breadth-first from `start`: the key of the closest other node for which `wanted(node)`, or None."""
    seen, frontier = {key(start)}, [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for nb in neighbours(node):
                if key(nb) in seen:
                    continue
                seen.add(key(nb))
                if wanted(nb):
                    return key(nb)
                next_frontier.append(nb)
        frontier = next_frontier
    return None


def runtime_groups(runtime_model, graph: ComputationGraph) -> dict[str, list[int]]:
    """Runtime node name -> the original compute ops (indices into `graph`) whose time that node's entry holds.

    Uses ``originalLayersNames`` of the runtime (executable) model. Nodes without original names (layout
    ``Reorder``s the plugin inserted) take the group of their nearest consumer, else producer, that has names.
    Compute ops that no runtime node names (a MatMul folded into the FullyConnected that names only its bias
    Add) join the group of their nearest consumer, else producer, in the original graph.
    """
    index = {name: i for i, name in enumerate(graph.op_names)}
    rt_ops = list(runtime_model.get_ordered_ops())
    members: dict[str, list[int]] = {}
    for op in rt_ops:
        info = op.get_rt_info()
        names = info["originalLayersNames"].astype(str).split(",") if "originalLayersNames" in info else []
        members[op.get_friendly_name()] = [index[n] for n in names if n in index]
    groups = {name: ops for name, ops in members.items() if ops}
    group_of = {i: name for name, ops in groups.items() for i in ops}

    def runtime_neighbours(op) -> Iterable:  # consumers first, then producers
        for out in op.outputs():
            for target in out.get_target_inputs():
                yield target.get_node()
        for inp in op.inputs():
            yield inp.get_source_output().get_node()

    for op in rt_ops:  # Reorders and other runtime-only nodes: the same list as their nearest named node's
        if not members[op.get_friendly_name()]:
            target = nearest_node(op, runtime_neighbours, lambda o: o.get_friendly_name(),
                              lambda o: bool(members.get(o.get_friendly_name())))
            if target is not None:
                groups[op.get_friendly_name()] = groups[target]  # shared: ops added below count here too

    neighbours: list[list[int]] = [[] for _ in range(graph.n_ops)]  # consumers first, then producers
    for s, d in graph.edge_index.T.tolist():
        neighbours[s].append(d)
    for s, d in graph.edge_index.T.tolist():
        neighbours[d].append(s)
    for i in range(graph.n_ops):  # original ops no runtime node names
        if i not in group_of:
            nearest = nearest_node(i, neighbours.__getitem__, lambda j: j, lambda j: j in group_of)
            if nearest is not None:
                groups[group_of[nearest]].append(i)
                group_of[i] = group_of[nearest]
    return groups


def _text(info: Any, key: str) -> str:
    return info[key].astype(str) if key in info else ""


def runtime_kernels_of(runtime_model: Any, graph: ComputationGraph) -> dict:
    """The compute kernels of a compiled model's runtime model (``compiled.get_runtime_model()``; HETERO's
    too), and which kernel absorbed each IR compute op of `graph`.

    A runtime node is plumbing, not a compute kernel, if its ``layerType`` is in `PLUMBING_TYPES`, if all its
    inputs are constant (weights prepared once), or if it is a Reorder / Convert that no IR compute op names
    (`INSERTED_PLUMBING_TYPES`). IR ops map to runtime nodes through ``originalLayersNames``; IR ops no node names
    (a MatMul folded into its FullyConnected, which names only the bias Add) take the kernel that
    `runtime_groups` gives them, except that an unnamed IR op whose every
    reader sits in one kernel joins that kernel, and a runtime kernel that names no IR op (BERT's key Transpose,
    merged with the transpose of K for Q.K^T) takes the unnamed IR op of its type that reads what it reads.

    Returns a dict: ``n_kernels``; ``kernels_by_type`` (layerType -> count); ``plumbing_by_type``;
    ``plumbing_types`` (the rule's type lists); ``kernel_of_op`` ((N,) runtime kernel name, or None for an op
    that only a plumbing node executes, e.g. an in-place Reshape); ``kernel_root`` ((N,) int64: the lowest IR
    index in each op's kernel, an op outside every kernel taking its first producer's; comparable to
    `kernel_roots`); ``unnamed_kernels`` (kernels that absorbed no IR op)."""

    index = {name: i for i, name in enumerate(graph.op_names)}
    nodes = list(runtime_model.get_ordered_ops())
    layer_type, named, constant, plumbing = {}, {}, {}, {}
    for node in nodes:
        name = node.get_friendly_name()
        info = node.get_rt_info()
        layer_type[name] = _text(info, "layerType") or node.get_type_name()
        named[name] = [index[n] for n in _text(info, "originalLayersNames").split(",") if n in index]
        sources = [inp.get_source_output().get_node().get_friendly_name() for inp in node.inputs()]
        constant[name] = layer_type[name] == "Const" or (bool(sources) and all(constant.get(s, False) for s in sources))
        plumbing[name] = (layer_type[name] in PLUMBING_TYPES or constant[name]
                          or (layer_type[name] in INSERTED_PLUMBING_TYPES and not named[name]))
    kernels = [node.get_friendly_name() for node in nodes if not plumbing[node.get_friendly_name()]]

    n = graph.n_ops
    owner: list[str | None] = [None] * n  # the runtime node that names each IR op
    for node in nodes:
        for i in named[node.get_friendly_name()]:
            if owner[i] is None or plumbing[owner[i]]:
                owner[i] = node.get_friendly_name()
    unnamed = [i for i in range(n) if owner[i] is None]

    # Runtime kernels that name no IR op: the unnamed IR op of their type that reads the same IR ops.
    producers = [[] for _ in range(n)]
    readers = [[] for _ in range(n)]
    for s, d in graph.edge_index.T.tolist():
        producers[d].append(s)
        readers[s].append(d)
    by_name = {node.get_friendly_name(): node for node in nodes}

    def named_inputs(name: str) -> set[int]:
        found, stack, seen = set(), [name], {name}
        while stack:  # back through plumbing nodes to nodes that name IR ops
            node = by_name[stack.pop()]
            for inp in node.inputs():
                src = inp.get_source_output().get_node().get_friendly_name()
                if src in seen:
                    continue
                seen.add(src)
                if named[src]:
                    found.update(named[src])
                elif plumbing[src] and not constant[src]:
                    stack.append(src)
        return found

    matched: dict[int, str] = {}
    for k in kernels:
        if named[k]:
            continue
        reads = named_inputs(k)
        candidates = [i for i in unnamed if i not in matched and graph.op_types[i] == layer_type[k]
                      and any(p in reads for p in producers[i])]
        if len(candidates) == 1:
            matched[candidates[0]] = k

    kernel_of: list[str | None] = [None if owner[i] is None or plumbing[owner[i]] else owner[i] for i in range(n)]
    for i, k in matched.items():
        kernel_of[i] = k
    groups = runtime_groups(runtime_model, graph)
    for i in reversed(unnamed):  # readers first: a MatMul joins the FullyConnected of its bias Add
        if i in matched:
            continue
        seen = {kernel_of[r] for r in readers[i]}
        if len(seen) == 1 and None not in seen:
            kernel_of[i] = seen.pop()
            continue
        for k in kernels:  # else where runtime_groups put it (its nearest named op's kernel)
            if named[k] and i in groups.get(k, ()):
                kernel_of[i] = k
                break

    members: dict[str, list[int]] = {}
    for i, k in enumerate(kernel_of):
        if k is not None:
            members.setdefault(k, []).append(i)
    root = np.arange(n, dtype=np.int64)
    for i in range(n):
        if kernel_of[i] is not None:
            root[i] = min(members[kernel_of[i]])
        elif producers[i]:  # only plumbing executes it: it rides with its producer
            root[i] = root[min(producers[i])]
    root.setflags(write=False)
    kernel_types = Counter(layer_type[k] for k in kernels)
    plumbing_types = Counter(layer_type[name] for name in layer_type if plumbing[name])
    return {
        "n_kernels": len(kernels),
        "kernels_by_type": dict(sorted(kernel_types.items(), key=lambda kv: (-kv[1], kv[0]))),
        "plumbing_by_type": dict(sorted(plumbing_types.items(), key=lambda kv: (-kv[1], kv[0]))),
        "n_plumbing": sum(plumbing_types.values()),
        "plumbing_types": {"always": sorted(PLUMBING_TYPES), "when_inserted": sorted(INSERTED_PLUMBING_TYPES),
                           "also": "any node whose inputs are all constant"},
        "kernel_of_op": kernel_of,
        "kernel_root": root,
        "unnamed_kernels": [k for k in kernels if k not in members],
    }


def _as_graph(graph_or_model: Any) -> ComputationGraph:
    if isinstance(graph_or_model, ComputationGraph):
        graph_or_model.require_model("reading OpenVINO's runtime kernels")
        return graph_or_model
    import openvino as ov

    if isinstance(graph_or_model, ov.Model):
        return ComputationGraph.from_model(graph_or_model.clone())
    raise TypeError(f"expected a ComputationGraph or an openvino.Model, got {type(graph_or_model).__name__}")


def runtime_kernels(graph_or_model: Any, device: str = "CPU", *, core: Any = None,
                    config: dict | None = None) -> dict:
    """Compile `graph_or_model` (a `ComputationGraph` with its model, or an ``ov.Model``) on `device` and read its
    runtime model: `runtime_kernels_of`, plus ``device``, ``inference_precision`` (the compiled model's, e.g.
    ``"f32"`` or ``"bf16"``) and ``graph`` (the `ComputationGraph` the per-op lists index)."""
    from ..devices import shared_core

    graph = _as_graph(graph_or_model)
    core = core or shared_core()
    compiled = core.compile_model(graph.model, device, dict(config or {}))
    result = runtime_kernels_of(compiled.get_runtime_model(), graph)
    try:
        precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    except Exception:  # noqa: BLE001 (a plugin without the property infers in f32)
        precision = "f32"
    del compiled
    return {"device": device, "graph": graph, "inference_precision": precision, **result}


def compare_with_runtime(graph_or_model: Any, device: str = "CPU", *, core: Any = None, config: dict | None = None,
                         runtime: dict | None = None) -> dict:
    """Predicted kernels (`kernel_roots`, one device) against the real ones (`runtime_kernels` on `device` with
    compile `config`, or `runtime` read before): counts, their ratio, the fraction of IR ops whose predicted
    kernel root is the real one, and the ops where they differ."""
    real = runtime if runtime is not None else runtime_kernels(graph_or_model, device, core=core, config=config)
    graph = real.get("graph") or _as_graph(graph_or_model)
    precision = real.get("inference_precision", "f32")
    predicted_roots = kernel_roots(graph, precision=precision)
    real_roots = real["kernel_root"]
    agree = predicted_roots == real_roots
    predicted = kernel_count(graph, precision=precision)
    return {
        "model": graph.name,
        "inference_precision": precision,
        "ir_compute_ops": graph.n_ops,
        "predicted_kernels": predicted,
        "runtime_kernels": real["n_kernels"],
        "ratio": predicted / real["n_kernels"] if real["n_kernels"] else float("inf"),
        "op_agreement": float(np.mean(agree)),
        "runtime_kernels_by_type": real["kernels_by_type"],
        "runtime_plumbing_by_type": real["plumbing_by_type"],
        "predicted_kernel_types": _root_types(graph, fusion_parent(graph, precision)),
        "disagreements": [
            {"op": graph.op_names[i], "type": graph.op_types[i],
             "predicted_root": graph.op_names[predicted_roots[i]], "real_root": graph.op_names[real_roots[i]],
             "real_kernel": real["kernel_of_op"][i]}
            for i in np.flatnonzero(~agree)
        ],
    }


def _root_types(graph: ComputationGraph, parent: np.ndarray) -> dict[str, int]:
    counts = Counter(graph.op_types[i] for i in np.flatnonzero((parent < 0) & ~view_ops(graph)))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


__all__ = [
    "ANCHORS", "ATTENTION", "FREE_OPS", "INSERTED_PLUMBING_TYPES", "PLUMBING_TYPES", "POST_OPS", "SCALE_SHIFT_OPS",
    "SNIPPETS_OPS", "SUM_POST_OPS", "compare_with_runtime", "fusion_parent", "inference_precision", "kernel_count",
    "kernel_roots", "runtime_kernels", "runtime_kernels_of", "view_ops",
]
