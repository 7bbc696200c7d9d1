"""Node features: the one place where a `ComputationGraph` becomes a float matrix.

Each *family* is a function ``graph -> (N, F_family) float32``; `node_features` concatenates the families asked
for, in the order given. Families are switchable so that agents can run the paper's ablations (drop output
shape, node id, structure, ...). The vocabulary and widths are fixed, so features of different graphs line up
and an agent trained on one model can be applied to another.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .graph import ComputationGraph

#: Op types with a one-hot slot of their own; everything else shares the last slot ("other").
OP_TYPE_VOCAB: tuple[str, ...] = (
    "Convolution", "GroupConvolution", "MatMul", "Add", "Multiply", "Subtract", "Divide", "Relu", "Clamp",
    "Gelu", "Tanh", "Sigmoid", "Swish", "Exp", "Sqrt", "Power", "Erf", "Softmax", "MVN", "NormalizeL2",
    "BatchNormInference", "MaxPool", "AvgPool", "ReduceMean", "ReduceSum", "ReduceMax", "Concat", "Split",
    "VariadicSplit", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Gather", "StridedSlice", "Slice",
    "Convert", "Select", "Broadcast", "ShapeOf", "ScaledDotProductAttention", "Interpolate", "Pad",
)
_OP_TYPE_INDEX = {name: i for i, name in enumerate(OP_TYPE_VOCAB)}

#: Dimensions of the output shape that are encoded (right-aligned, so NCHW's H, W and a sequence's hidden
#: size land in fixed columns).
SHAPE_DIMS = 4
#: Width of the sinusoidal encoding of the topological index ("node id" in the paper).
POSITION_DIMS = 8


def op_type_onehot(graph: ComputationGraph) -> np.ndarray:
    """(N, len(OP_TYPE_VOCAB) + 1) one-hot op type; the last column is "other"."""
    out = np.zeros((graph.n_ops, len(OP_TYPE_VOCAB) + 1), dtype=np.float32)
    cols = [_OP_TYPE_INDEX.get(t, len(OP_TYPE_VOCAB)) for t in graph.op_types]
    out[np.arange(graph.n_ops), cols] = 1.0
    return out


def output_shape(graph: ComputationGraph) -> np.ndarray:
    """(N, SHAPE_DIMS + 2): log2(1 + dim) of the first output's last 4 dims (right-aligned, 0 = absent),
    its rank / 4 and log2(1 + number of elements) / 32. Scaled to roughly [0, 1]."""
    out = np.zeros((graph.n_ops, SHAPE_DIMS + 2), dtype=np.float32)
    for i, shapes in enumerate(graph.output_shapes):
        shape = [max(d, 1) for d in (shapes[0] if shapes else ())]
        tail = shape[-SHAPE_DIMS:]
        if tail:
            out[i, SHAPE_DIMS - len(tail):SHAPE_DIMS] = np.log2(1.0 + np.array(tail, dtype=np.float64)) / 16.0
        out[i, SHAPE_DIMS] = len(shape) / 4.0
        out[i, SHAPE_DIMS + 1] = np.log2(1.0 + float(np.prod(shape, dtype=np.float64))) / 32.0
    return out


def node_id(graph: ComputationGraph) -> np.ndarray:
    """(N, POSITION_DIMS + 1): the topological index as a transformer-style sinusoidal encoding, plus the
    relative position index / (N - 1) in [0, 1]."""
    n = graph.n_ops
    position = np.arange(n, dtype=np.float64)[:, None]
    freqs = 1.0 / (10000.0 ** (np.arange(0, POSITION_DIMS, 2, dtype=np.float64) / POSITION_DIMS))
    enc = np.concatenate([np.sin(position * freqs), np.cos(position * freqs)], axis=1)
    relative = position / max(n - 1, 1)
    return np.concatenate([enc, relative], axis=1).astype(np.float32)


def degree(graph: ComputationGraph) -> np.ndarray:
    """(N, 2): log2(1 + in-degree), log2(1 + out-degree) over compute-op edges."""
    return np.log2(1.0 + np.stack([graph.in_degree(), graph.out_degree()], axis=1)).astype(np.float32)


def cost(graph: ComputationGraph) -> np.ndarray:
    """(N, 2): log10(1 + FLOPs) / 10 and log10(1 + output bytes) / 10: what an op costs to run and to move."""
    return (np.stack([np.log10(1.0 + graph.flops), np.log10(1.0 + graph.bytes_out)], axis=1) / 10.0).astype(np.float32)


# ----------------------------------------------------------------------------------- graph structure
# Both structural families work on hop distances over the compute-op DAG, computed with scipy's BFS in chunks of
# source nodes (memory O(chunk x N), not O(N^2)).
_DISTANCE_CHUNK = 512


def _adjacency(graph: ComputationGraph):
    from scipy.sparse import csr_matrix

    n = graph.n_ops
    src, dst = graph.edge_index
    return csr_matrix((np.ones(src.shape[0], dtype=np.float64), (src, dst)), shape=(n, n))


def _hop_distances(adjacency, directed: bool):
    """Yield (sources, (len(sources), N) hop distances, inf where unreachable) over all nodes, chunk by chunk."""
    from scipy.sparse.csgraph import shortest_path

    n = adjacency.shape[0]
    for start in range(0, n, _DISTANCE_CHUNK):
        sources = np.arange(start, min(n, start + _DISTANCE_CHUNK))
        yield sources, shortest_path(adjacency, method="D", directed=directed, unweighted=True, indices=sources)


def fractal_dimension(graph: ComputationGraph) -> np.ndarray:
    """(N, 1): each node's fractal (box-growth) dimension: the least-squares slope of log(number of nodes within
    r hops) against log(r), for r = 1 .. the node's eccentricity, over the graph taken as undirected (as the
    HSDAG paper's features; 0 when fewer than two radii exist). Chain-like neighbourhoods give ~1, branching
    ones more."""
    n = graph.n_ops
    out = np.zeros((n, 1), dtype=np.float32)
    for sources, dist in _hop_distances(_adjacency(graph), directed=False):
        finite = np.isfinite(dist)
        hops = np.where(finite, dist, -1).astype(np.int64)
        ecc = hops.max(axis=1)  # eccentricity within the node's connected component
        r_max = int(ecc.max()) if ecc.size else 0
        if r_max < 2:
            continue
        rows = np.repeat(np.arange(len(sources)), n)[finite.ravel()]
        hist = np.bincount(rows * (r_max + 1) + hops.ravel()[finite.ravel()], minlength=len(sources) * (r_max + 1))
        within = np.cumsum(hist.reshape(len(sources), r_max + 1), axis=1)[:, 1:] - 1  # exclude the node itself
        radii = np.arange(1, r_max + 1, dtype=np.float64)
        use = radii[None, :] <= ecc[:, None]  # (chunk, R): radii up to each node's eccentricity
        x = np.where(use, np.log(radii)[None, :], 0.0)
        y = np.where(use, np.log(np.maximum(within, 1)), 0.0)
        count = use.sum(axis=1)
        mean_x, mean_y = x.sum(1) / np.maximum(count, 1), y.sum(1) / np.maximum(count, 1)
        cov = (use * (x - mean_x[:, None]) * (y - mean_y[:, None])).sum(1)
        var = (use * (x - mean_x[:, None]) ** 2).sum(1)
        out[sources, 0] = np.where((count >= 2) & (var > 0), cov / np.where(var > 0, var, 1.0), 0.0)
    return out


def centrality(graph: ComputationGraph) -> np.ndarray:
    """(N, 3): harmonic closeness centrality over the undirected graph (mean of 1 / hops to every other node,
    in [0, 1]), and the fractions of the other nodes that are the node's ancestors and its descendants in the
    DAG (how much of the computation waits for it, and how much it waits for)."""
    n = graph.n_ops
    out = np.zeros((n, 3), dtype=np.float32)
    if n < 2:
        return out
    adjacency = _adjacency(graph)
    for sources, dist in _hop_distances(adjacency, directed=False):
        with np.errstate(divide="ignore"):
            inverse = np.where(dist > 0, 1.0 / dist, 0.0)
        out[sources, 0] = inverse.sum(axis=1) / (n - 1)
    for column, matrix in ((1, adjacency.T.tocsr()), (2, adjacency)):  # ancestors: walk the edges backwards
        for sources, dist in _hop_distances(matrix, directed=True):
            out[sources, column] = (np.isfinite(dist).sum(axis=1) - 1) / (n - 1)
    return out


#: Every feature family by name. Agents may register more (e.g. structural features) with `register_family`.
FEATURE_FAMILIES: dict[str, Callable[[ComputationGraph], np.ndarray]] = {
    "op_type": op_type_onehot,
    "output_shape": output_shape,
    "node_id": node_id,
    "degree": degree,
    "cost": cost,
    "fractal_dim": fractal_dimension,
    "centrality": centrality,
}

#: What the env observes unless told otherwise.
DEFAULT_FAMILIES: tuple[str, ...] = ("op_type", "output_shape", "node_id", "degree", "cost")


def register_family(name: str, fn: Callable[[ComputationGraph], np.ndarray]) -> None:
    """Add a feature family (``graph -> (N, F) float32``) under `name`."""
    FEATURE_FAMILIES[name] = fn


def node_features(graph: ComputationGraph, families: Sequence[str] = DEFAULT_FAMILIES) -> np.ndarray:
    """(N, F) float32: the named families concatenated in the order given."""
    unknown = [f for f in families if f not in FEATURE_FAMILIES]
    if unknown:
        raise ValueError(f"unknown feature families {unknown}; known: {sorted(FEATURE_FAMILIES)}")
    if not families:
        raise ValueError("at least one feature family is needed")
    blocks = [np.asarray(FEATURE_FAMILIES[f](graph), dtype=np.float32) for f in families]
    for f, b in zip(families, blocks):
        if b.ndim != 2 or b.shape[0] != graph.n_ops:
            raise ValueError(f"feature family {f!r} returned shape {b.shape}, expected ({graph.n_ops}, F)")
    return np.concatenate(blocks, axis=1)
