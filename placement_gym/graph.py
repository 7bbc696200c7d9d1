"""The computation graph an agent places: compute ops, directed data edges and their costs.

`ComputationGraph.from_model` turns an `ov.Model` into the graph the env observes and the backends measure:

* placeable nodes are the compute ops (every op but Constant / Parameter / Result), in topological order;
* each Constant follows its first consumer, each Parameter its first consumer and each Result its producer
  (HETERO needs an affinity on every op, so these ride along with the compute op they are `attached` to);
* edges are producer -> consumer pairs between compute ops, with the bytes of the tensors that flow.

Placements are applied by op *name* (`op_names`), never by list position in the OpenVINO model.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

try:  # OpenVINO is a hard dependency of the package, but the graph itself can be built without it.
    import openvino as ov
    from openvino import passes as ov_passes
except ImportError:  # pragma: no cover
    ov = ov_passes = None

#: Ops that carry no compute of their own; they follow a compute op instead of being placed.
NON_COMPUTE_TYPES = frozenset({"Constant", "Parameter", "Result"})


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class ComputationGraph:
    """An immutable DAG of compute ops.

    Attributes (N = number of compute ops, E = number of edges):
        name: model name.
        op_names: (N,) friendly names of the compute ops, in topological order.
        op_types: (N,) OpenVINO op type names (``"Convolution"``, ``"MatMul"``, ...).
        output_shapes: (N,) tuple of output shapes per op (dynamic dims are -1).
        bytes_out: (N,) int64, bytes of all outputs of each op.
        flops: (N,) float64, estimated floating-point operations of each op.
        edge_index: (2, E) int64, ``edge_index[:, k] = (producer, consumer)``; sources precede targets.
        edge_bytes: (E,) int64, bytes flowing along each edge.
        attached: maps the name of every non-compute op (Constant/Parameter/Result) to the index of the
            compute op whose device it takes.
        layer_types: op-type counts over *all* IR layers (compute or not), for `stats()`.
        n_layer_edges: number of data edges over all IR layers.
        model: the (constant-folded) `ov.Model` the graph came from, or None for synthetic graphs.
    """

    name: str
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    output_shapes: tuple[tuple[tuple[int, ...], ...], ...]
    bytes_out: np.ndarray
    flops: np.ndarray
    edge_index: np.ndarray
    edge_bytes: np.ndarray
    attached: Mapping[str, int] = field(default_factory=dict)
    layer_types: Mapping[str, int] = field(default_factory=dict)
    n_layer_edges: int = 0
    model: object | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n = len(self.op_names)
        if n == 0:
            raise ValueError(f"graph {self.name!r} has no compute ops to place")
        if len(set(self.op_names)) != n:
            raise ValueError(f"graph {self.name!r} has duplicate op names; placement is applied by name")
        edge_index = np.asarray(self.edge_index, dtype=np.int64).reshape(2, -1)
        if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
            raise ValueError(f"edge_index refers to nodes outside 0..{n - 1}")
        if edge_index.size and np.any(edge_index[0] >= edge_index[1]):
            raise ValueError("edges must go from an earlier to a later op in topological order")
        object.__setattr__(self, "edge_index", _frozen(edge_index))
        object.__setattr__(self, "edge_bytes", _frozen(np.asarray(self.edge_bytes, dtype=np.int64)))
        object.__setattr__(self, "bytes_out", _frozen(np.asarray(self.bytes_out, dtype=np.int64)))
        object.__setattr__(self, "flops", _frozen(np.asarray(self.flops, dtype=np.float64)))
        if not self.layer_types:
            object.__setattr__(self, "layer_types", dict(Counter(self.op_types)))
            object.__setattr__(self, "n_layer_edges", int(edge_index.shape[1]))

    # ------------------------------------------------------------------ sizes
    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def in_degree(self) -> np.ndarray:
        """(N,) int64 number of distinct compute-op producers of each op."""
        return np.bincount(self.edge_index[1], minlength=self.n_ops)

    def out_degree(self) -> np.ndarray:
        """(N,) int64 number of distinct compute-op consumers of each op."""
        return np.bincount(self.edge_index[0], minlength=self.n_ops)

    def require_model(self, user: str) -> "ov.Model":
        """The `ov.Model` the graph came from, or ``ValueError`` saying that `user` (e.g. "the OpenVINO backend")
        needs one and this graph has none (a ``synthetic:N`` graph or one built by hand): only the simulated
        backend can measure such a graph."""
        if self.model is None:
            raise ValueError(
                f"graph {self.name!r} has no OpenVINO model (ov.Model): it is synthetic or was built without one, "
                f"and {user} needs one to compile and run; measure it with backend='simulated'"
            )
        return self.model

    def stats(self) -> dict:
        """Graph statistics in the layout of the paper's Table 1.

        ``average_degree`` is ``2|E|/|V|`` (edges counted at both ends, as the paper does). ``compute`` counts the
        placeable ops; ``all_layers`` counts every IR layer after constant folding (the paper counts all layers).
        """
        def block(nodes: int, edges: int, types: Mapping[str, int]) -> dict:
            return {
                "nodes": nodes,
                "edges": edges,
                "average_degree": round(2.0 * edges / nodes, 3) if nodes else 0.0,
                "op_types": dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
            }

        return {
            "model": self.name,
            "compute": block(self.n_ops, self.n_edges, Counter(self.op_types)),
            "all_layers": block(sum(self.layer_types.values()), self.n_layer_edges, self.layer_types),
            "total_flops": float(self.flops.sum()),
            "total_bytes_out": int(self.bytes_out.sum()),
        }

    # ------------------------------------------------------------ construction
    @classmethod
    def from_model(cls, model: "ov.Model", name: str | None = None, *, fold_constants: bool = True) -> "ComputationGraph":
        """Extract the graph from `model`.

        `model` is constant-folded **in place** first (BERT's shape subgraph breaks HETERO otherwise), so pass a
        copy you own (`placement_gym.models.load_model` returns one). The folded model is kept in ``.model``.
        """
        if ov is None:  # pragma: no cover
            raise ImportError("openvino is required to build a graph from an ov.Model")
        if not isinstance(model, ov.Model):
            raise TypeError(f"expected an openvino.Model, got {type(model).__name__}")
        if fold_constants:
            manager = ov_passes.Manager()
            manager.register_pass(ov_passes.ConstantFolding())
            manager.run_passes(model)

        ordered = model.get_ordered_ops()  # topological order
        index_of_op: dict[str, int] = {}  # friendly name -> compute index
        names, types, shapes, bytes_out, flops = [], [], [], [], []
        layer_types: Counter = Counter()
        n_layer_edges = 0
        edge_bytes: dict[tuple[int, int], int] = {}
        counted_tensors: set[tuple[int, int, int]] = set()  # (producer, output index, consumer)

        for op in ordered:
            op_type = op.get_type_name()
            layer_types[op_type] += 1
            n_layer_edges += sum(len(out.get_target_inputs()) for out in op.outputs())
            if op_type in NON_COMPUTE_TYPES:
                continue
            name_ = op.get_friendly_name()
            if name_ in index_of_op:
                raise ValueError(f"two ops are named {name_!r}; placement is applied by name")
            idx = len(names)
            index_of_op[name_] = idx
            names.append(name_)
            types.append(op_type)
            out_shapes = tuple(_static_dims(out.get_partial_shape()) for out in op.outputs())
            shapes.append(out_shapes)
            out_bytes = [_tensor_bytes(s, out.get_element_type().size) for s, out in zip(out_shapes, op.outputs())]
            bytes_out.append(sum(out_bytes))
            flops.append(_estimate_flops(op, op_type, out_shapes))
            for inp in op.inputs():
                producer_output = inp.get_source_output()
                producer = producer_output.get_node()
                pname = producer.get_friendly_name()
                if producer.get_type_name() in NON_COMPUTE_TYPES:
                    continue
                src = index_of_op[pname]
                # Several tensors between the same pair of ops become one edge carrying all their bytes;
                # the same tensor feeding one op twice (x * x) crosses a device boundary once.
                tensor = (src, producer_output.get_index(), idx)
                edge_bytes.setdefault((src, idx), 0)
                if tensor not in counted_tensors:
                    counted_tensors.add(tensor)
                    edge_bytes[(src, idx)] += _output_bytes(producer_output)

        attached = _attach_non_compute(ordered, index_of_op)
        edges = sorted(edge_bytes)
        edge_index = np.array(edges, dtype=np.int64).T.reshape(2, -1)
        return cls(
            name=name or model.get_friendly_name() or "model",
            op_names=tuple(names),
            op_types=tuple(types),
            output_shapes=tuple(shapes),
            bytes_out=np.array(bytes_out, dtype=np.int64),
            flops=np.array(flops, dtype=np.float64),
            edge_index=edge_index,
            edge_bytes=np.array([edge_bytes[e] for e in edges], dtype=np.int64),
            attached=attached,
            layer_types=dict(layer_types),
            n_layer_edges=n_layer_edges,
            model=model,
        )


def format_stats_table(stats: Sequence[Mapping]) -> str:
    """The paper's Table 1 layout for `ComputationGraph.stats()` dicts: one row per model, all IR layers and
    compute ops side by side."""
    header = f"{'model':<14} {'IR layers |V|':>13} {'|E|':>6} {'avg deg':>8}   {'compute |V|':>11} {'|E|':>6} {'avg deg':>8}"
    lines = [header, "-" * len(header)]
    for s in stats:
        a, c = s["all_layers"], s["compute"]
        lines.append(f"{s['model']:<14} {a['nodes']:>13} {a['edges']:>6} {a['average_degree']:>8.2f}"
                     f"   {c['nodes']:>11} {c['edges']:>6} {c['average_degree']:>8.2f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- helpers
def _output_bytes(output) -> int:
    return _tensor_bytes(_static_dims(output.get_partial_shape()), output.get_element_type().size)


def _static_dims(partial_shape) -> tuple[int, ...]:
    if partial_shape.rank.is_dynamic:
        return (-1,)
    return tuple(d.get_length() if d.is_static else -1 for d in partial_shape)


def _tensor_bytes(shape: Sequence[int], itemsize: int) -> int:
    return int(np.prod([max(d, 1) for d in shape], dtype=np.int64)) * int(itemsize)


def _elements(shape: Sequence[int]) -> float:
    return float(np.prod([max(d, 1) for d in shape], dtype=np.float64))


def _estimate_flops(op, op_type: str, out_shapes: tuple[tuple[int, ...], ...]) -> float:
    """Rough FLOPs: exact multiply-adds for convolutions and matmuls, one per element otherwise."""
    out_elems = _elements(out_shapes[0]) if out_shapes else 0.0
    in_shapes = [_static_dims(inp.get_partial_shape()) for inp in op.inputs()]
    if op_type in ("Convolution", "GroupConvolution") and len(in_shapes) >= 2:
        kernel = in_shapes[1]
        # Convolution weights: (O, I, k...); GroupConvolution: (G, O/G, I/G, k...). I (per group) and the
        # kernel window are the multiply-adds per output element.
        per_output = _elements(kernel[2:]) if op_type == "Convolution" else _elements(kernel[3:])
        per_output *= max(kernel[1] if op_type == "Convolution" else kernel[2], 1)
        return 2.0 * out_elems * per_output
    if op_type == "MatMul" and len(in_shapes) >= 2 and len(in_shapes[0]) >= 1:
        transpose_a = bool(op.get_attributes().get("transpose_a", False))
        a = in_shapes[0]
        k = a[-2] if (transpose_a and len(a) >= 2) else a[-1]
        return 2.0 * out_elems * max(k, 1)
    largest_input = max((_elements(s) for s in in_shapes), default=0.0)
    return max(out_elems, largest_input)


def _attach_non_compute(ordered, index_of_op: Mapping[str, int]) -> dict[str, int]:
    """Constants and Parameters follow their first compute consumer, Results their producer."""
    attached: dict[str, int] = {}
    for op in ordered:
        op_type = op.get_type_name()
        if op_type not in NON_COMPUTE_TYPES:
            continue
        if op_type == "Result":
            producer = op.input(0).get_source_output().get_node()
            target = index_of_op.get(producer.get_friendly_name(), attached.get(producer.get_friendly_name(), 0))
        else:
            consumers = [
                index_of_op[t.get_node().get_friendly_name()]
                for out in op.outputs()
                for t in out.get_target_inputs()
                if t.get_node().get_friendly_name() in index_of_op
            ]
            target = min(consumers) if consumers else 0
        attached[op.get_friendly_name()] = target
    return attached
