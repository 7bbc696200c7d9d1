"""Node features: the one place where a `ComputationGraph` becomes a float matrix.

Each *family* is a function ``graph -> (N, F_family) float32``; `node_features` concatenates the families asked
for, in the order given. Families are switchable so that agents can run the paper's ablations (drop output
shape, node id, structure, ...). The vocabulary and widths are fixed, so features of different graphs line up
and an agent trained on one model can be applied to another.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
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



def edge_features(edge_bytes: np.ndarray) -> np.ndarray:
    """(E, 1) float32 log10(1 + bytes) / 10 of each edge's tensor: the observation's ``edge_features``."""
    return (np.log10(1.0 + np.asarray(edge_bytes).astype(np.float32)) / 10.0)[:, None]


def bytes_from_edge_features(features: np.ndarray) -> np.ndarray:
    """(E,) float64 bytes that `edge_features` encoded (float32 round-off: relative error ~1e-6)."""
    return np.power(10.0, 10.0 * np.asarray(features, dtype=np.float64).reshape(-1)) - 1.0

# ----------------------------------------------------------------------------------- graph structure
# Both structural families work on hop distances over the compute-op DAG. Up to `EXACT_STRUCTURE_MAX_OPS` ops they
# are exact: scipy's BFS from every node, in chunks of source nodes (time O(N (N + E)), memory O(chunk x N)).
# Above it they come from `structure_estimate` (time about O((budget + pivots) (N + E)), see there), because
# the exact path takes minutes at 10k ops and hours at 80k.
_DISTANCE_CHUNK = 512
#: Graphs with at most this many compute ops get the exact structure features (the zoo's are well below it).
EXACT_STRUCTURE_MAX_OPS = 4096
#: `structure_estimate`'s defaults: each node's exact BFS ball grows until it holds this many nodes ...
BALL_BUDGET = 256
#: ... and distances to everything farther are sampled from BFS trees of this many pivots.
N_PIVOTS = 256


def _adjacency(graph: ComputationGraph):
    from scipy.sparse import csr_matrix

    n = graph.n_ops
    src, dst = graph.edge_index
    return csr_matrix((np.ones(src.shape[0], dtype=np.float64), (src, dst)), shape=(n, n))


def _hop_distances(adjacency, directed: bool, sources: np.ndarray | None = None):
    """Yield (chunk of sources, (len(chunk), N) hop distances, inf where unreachable), chunk by chunk, from
    `sources` (default: every node)."""
    from scipy.sparse.csgraph import shortest_path

    sources = np.arange(adjacency.shape[0]) if sources is None else np.asarray(sources, dtype=np.int64)
    for start in range(0, len(sources), _DISTANCE_CHUNK):
        chunk = sources[start:start + _DISTANCE_CHUNK]
        yield chunk, shortest_path(adjacency, method="D", directed=directed, unweighted=True, indices=chunk)


def fractal_dimension(graph: ComputationGraph, *, exact_max_ops: int = EXACT_STRUCTURE_MAX_OPS) -> np.ndarray:
    """(N, 1): each node's fractal (box-growth) dimension: the least-squares slope of log(number of nodes within
    r hops) against log(r), for r = 1 .. the node's eccentricity, over the graph taken as undirected (as the
    HSDAG paper's features; 0 when fewer than two radii exist). Chain-like neighbourhoods give ~1, branching
    ones more. Exact up to `exact_max_ops` ops, estimated above (`structure_estimate`)."""
    if graph.n_ops > exact_max_ops:
        return structure_estimate(graph).fractal_dimension[:, None].astype(np.float32)
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


def centrality(graph: ComputationGraph, *, exact_max_ops: int = EXACT_STRUCTURE_MAX_OPS) -> np.ndarray:
    """(N, 3): harmonic closeness centrality over the undirected graph (mean of 1 / hops to every other node,
    in [0, 1]), and the fractions of the other nodes that are the node's ancestors and its descendants in the
    DAG (how much of the computation waits for it, and how much it waits for). Exact up to `exact_max_ops` ops,
    estimated above (`structure_estimate`)."""
    n = graph.n_ops
    if n > exact_max_ops:
        estimate = structure_estimate(graph)
        return np.stack([estimate.closeness, estimate.ancestors, estimate.descendants], axis=1).astype(np.float32)
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


# ------------------------------------------------------------------------- structure features, estimated
@dataclass(frozen=True)
class StructureEstimate:
    """Estimated structure features of every node (N = number of compute ops), as `fractal_dimension` and
    `centrality` define them: ``fractal_dimension`` (N,), ``closeness`` (N,) harmonic closeness in [0, 1],
    ``ancestors`` and ``descendants`` (N,) fractions of the other nodes in [0, 1]; all float64."""

    fractal_dimension: np.ndarray
    closeness: np.ndarray
    ancestors: np.ndarray
    descendants: np.ndarray


_ESTIMATES: "weakref.WeakKeyDictionary[ComputationGraph, dict[tuple[int, int, int], StructureEstimate]]" = \
    weakref.WeakKeyDictionary()


def structure_estimate(graph: ComputationGraph, *, ball_budget: int = BALL_BUDGET, n_pivots: int = N_PIVOTS,
                       seed: int = 0) -> StructureEstimate:
    """The structure features of a large graph, estimated in about O((ball_budget + 3 n_pivots) (N + E)) time.

    Exact near each node, sampled far from it:

    * **ball**: a BFS from every node at once over the undirected graph, layer by layer (the next layer of a
      node's BFS is its current layer's neighbours minus its current and previous layers), stopped for each
      node after the first layer at which its ball holds `ball_budget` nodes (or its component is exhausted:
      then everything about it is exact). Gives the exact number of nodes at each hop distance up to that
      radius, and their share of the harmonic sum.
    * **pivots**: `n_pivots` nodes, one drawn at random (`seed`) from each of `n_pivots` equal runs of the
      topological order, so every node is a pivot with about the same probability; a BFS from each (undirected,
      along the edges and against them; scipy's) gives every node's exact distance to every pivot and which
      pivots are its ancestors and descendants. Two more pivots from a double sweep (the farthest node from
      node 0, then the farthest from that) are used for eccentricities only.

    Then, per node ``v`` (``n_c`` = size of ``v``'s connected component):

    * fractal dimension: the same least-squares slope of log(nodes within r) on log(r) for r = 1 .. ecc(v),
      with the count exact up to the ball's radius ``r_b``; beyond it, ``(n_c - 1) x`` the fraction of the
      component's pivots within r (once 8 pivots are within r; between ``r_b`` and there, a power law through
      both ends). ecc(v) is the largest distance to a pivot (a lower bound; the double-sweep pivots make it
      tight on chain-like DAGs). Radii beyond 64 are pooled in buckets 4% wide, each weighted by its radii.
    * closeness: the ball's exact sum of 1 / hops, plus the nodes outside the ball times the mean of 1 / hops
      (0 if unreachable) to the pivots outside the ball.
    * ancestors (descendants): the nodes before (after) ``v`` in topological order times the fraction of the
      pivots before (after) ``v`` that are its ancestors (descendants); stratified, so the sample is where the
      answer is. With no pivot on that side (only within the first or last N / n_pivots nodes) all of them
      count.

    Cached per graph and parameters. Memory: O(N (n_pivots + radius of the ball)) at most.
    """
    if ball_budget < 1 or n_pivots < 1:
        raise ValueError(f"ball_budget and n_pivots must be >= 1, got {ball_budget} and {n_pivots}")
    key = (ball_budget, n_pivots, seed)
    cached = _ESTIMATES.setdefault(graph, {})
    if key not in cached:
        cached[key] = _estimate_structure(graph, ball_budget, n_pivots, seed)
    return cached[key]


def _estimate_structure(graph: ComputationGraph, ball_budget: int, n_pivots: int, seed: int) -> StructureEstimate:
    from scipy.sparse.csgraph import connected_components

    n = graph.n_ops
    if n < 2:
        zero = np.zeros(n)
        return StructureEstimate(zero, zero, zero, zero)
    adjacency = _adjacency(graph)
    undirected = (adjacency + adjacency.T).tocsr()
    _, component = connected_components(adjacency, directed=False)
    component_size = np.bincount(component)[component]
    ball = _ball_growth(undirected, ball_budget)

    rng = np.random.default_rng(seed)
    k = min(n_pivots, n)
    bounds = np.linspace(0, n, k + 1).astype(np.int64)
    pivots = bounds[:-1] + (rng.random(k) * (bounds[1:] - bounds[:-1])).astype(np.int64)  # one per run of N / k
    distance = np.concatenate([_as_hops(d) for _, d in _hop_distances(adjacency, False, pivots)])  # (k, N)
    far = _double_sweep(adjacency)
    far_distance = np.concatenate([_as_hops(d) for _, d in _hop_distances(adjacency, False, far)])
    reach_down = np.concatenate([np.isfinite(d) for _, d in _hop_distances(adjacency, True, pivots)])
    reach_up = np.concatenate([np.isfinite(d) for _, d in _hop_distances(adjacency.T.tocsr(), True, pivots)])

    eccentricity = np.maximum(np.maximum(distance.max(axis=0), far_distance.max(axis=0)), ball.radius)
    eccentricity = np.where(ball.exhausted, ball.radius, eccentricity)
    return StructureEstimate(
        fractal_dimension=_fractal_estimate(ball, distance, pivots, component, component_size, eccentricity),
        closeness=_closeness_estimate(ball, distance, n),
        ancestors=_stratified_fraction(reach_down, pivots, before=True),
        descendants=_stratified_fraction(reach_up, pivots, before=False),
    )


def _as_hops(distance: np.ndarray) -> np.ndarray:
    """Float hop distances (inf = unreachable) as int32, -1 = unreachable."""
    return np.where(np.isfinite(distance), distance, -1).astype(np.int32)


def _double_sweep(adjacency) -> np.ndarray:
    """(2,) two far-apart nodes: the farthest from node 0 (undirected), and the farthest from that one."""
    ends = []
    start = 0
    for _ in range(2):
        (_, distance), = _hop_distances(adjacency, False, np.array([start]))
        start = int(_as_hops(distance)[0].argmax())
        ends.append(start)
    return np.array(ends, dtype=np.int64)


@dataclass(frozen=True)
class _Ball:
    """Every node's exact BFS ball (`_ball_growth`): ``layers`` (R + 1, N) int32 nodes at exactly r hops
    (row 0: the node itself), ``radius`` (N,) the ball's radius, ``exhausted`` (N,) whether the ball is the
    node's whole component, ``harmonic`` (N,) sum of 1 / hops over the ball."""

    layers: np.ndarray
    radius: np.ndarray
    exhausted: np.ndarray
    harmonic: np.ndarray

    @property
    def size(self) -> np.ndarray:
        """(N,) nodes in the ball, the node itself included."""
        return self.layers.sum(axis=0)


def _ball_growth(undirected, budget: int) -> _Ball:
    """BFS from every node at once over a symmetric CSR adjacency, each stopped once its ball holds `budget`
    nodes (whole layers) or exhausts its component. The frontier is a set of (source, node) pairs, kept as
    sorted keys source * N + node."""
    n = undirected.shape[0]
    indptr, indices = undirected.indptr.astype(np.int64), undirected.indices.astype(np.int64)
    sources = np.arange(n, dtype=np.int64)
    frontier = sources * n + sources  # layer 0: each node itself
    previous = np.empty(0, dtype=np.int64)
    size = np.ones(n, dtype=np.int64)
    radius = np.zeros(n, dtype=np.int64)
    exhausted = np.zeros(n, dtype=bool)
    active = size < budget  # sources still growing
    harmonic = np.zeros(n)
    layers = [np.ones(n, dtype=np.int32)]
    frontier = frontier[active]
    r = 0
    while frontier.size:
        r += 1
        src, node = np.divmod(frontier, n)
        degree = indptr[node + 1] - indptr[node]
        first = np.repeat(indptr[node] - (np.cumsum(degree) - degree), degree)  # CSR offset minus output offset
        neighbour = indices[first + np.arange(int(degree.sum()))]
        candidates = _sorted_unique(np.repeat(src, degree) * n + neighbour)
        # In an undirected BFS a neighbour of layer r - 1 is at r - 2, r - 1 or r: drop the first two.
        new = candidates[~(_in_sorted(candidates, frontier) | _in_sorted(candidates, previous))]
        counts = np.bincount(new // n, minlength=n)
        exhausted |= active & (counts == 0)  # nothing at r hops: the BFS has seen the whole component
        radius[counts > 0] = r
        size += counts
        harmonic += counts / r
        layers.append(counts.astype(np.int32))
        active &= (counts > 0) & (size < budget)
        # `previous` may keep keys of sources that stopped: harmless, their keys are never produced again.
        previous, frontier = frontier, new[active[new // n]]
    return _Ball(np.stack(layers), radius, exhausted, harmonic)


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct `keys` (a plain sort: several times faster than ``np.unique``'s hashing on int64 keys)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if keys.size else keys


def _in_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """(len(keys),) bool: which `keys` occur in the sorted array `sorted_keys`."""
    if sorted_keys.size == 0:
        return np.zeros(keys.shape, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[at] == keys


#: Radii up to this are fitted one by one; beyond it they are pooled in buckets `_RADIUS_BUCKET` wide (relative).
_EXACT_RADII = 64
_RADIUS_BUCKET = 1.04
#: Pivots within r that make the sampled count of nodes within r trusted.
_MIN_PIVOTS = 8
_NODE_CHUNK = 4096


def _radius_buckets(max_radius: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` (G,) int64 radius buckets covering 1 .. max_radius: single radii up to `_EXACT_RADII`, then
    buckets growing by `_RADIUS_BUCKET`."""
    edges = list(range(1, min(max_radius, _EXACT_RADII) + 2))
    while edges[-1] <= max_radius:
        edges.append(max(edges[-1] + 1, int(edges[-1] * _RADIUS_BUCKET)))
    edges_ = np.array(edges, dtype=np.int64)
    return edges_[:-1], np.minimum(edges_[1:] - 1, max_radius)


def _fractal_estimate(ball: _Ball, distance: np.ndarray, pivots: np.ndarray, component: np.ndarray,
                      component_size: np.ndarray, eccentricity: np.ndarray) -> np.ndarray:
    """(N,) the fractal dimension's slope (see `structure_estimate`), node chunk by node chunk."""
    n = component.shape[0]
    max_ecc = int(eccentricity.max())
    out = np.zeros(n)
    if max_ecc < 2:
        return out
    lo, hi = _radius_buckets(max_ecc)
    log_prefix = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, max_ecc + 1)))])
    x_bucket = (log_prefix[hi] - log_prefix[lo - 1]) / (hi - lo + 1)  # mean log r over the bucket
    r_bucket = np.rint(np.exp(x_bucket)).astype(np.int64)  # its representative radius
    cumulative = np.cumsum(ball.layers, axis=0, dtype=np.int32) - 1  # (R + 1, N) nodes within r hops, the node excluded
    n_buckets = lo.size
    for start in range(0, n, _NODE_CHUNK):
        v = np.arange(start, min(n, start + _NODE_CHUNK))
        m = v.size
        ecc, r_ball = eccentricity[v], ball.radius[v]
        weight = np.clip(np.minimum(ecc[:, None], hi[None, :]) - lo[None, :] + 1, 0, None).astype(np.float64)
        # Exact counts inside the ball.
        inside = r_bucket[None, :] <= r_ball[:, None]
        exact = cumulative[np.minimum(r_bucket, cumulative.shape[0] - 1)[None, :], v[:, None]]
        within_ball = cumulative[r_ball, v].astype(np.float64)  # at the ball's radius
        # Sampled counts outside: pivots of the node's component within each bucket's radius.
        d = distance[:, v].T  # (m, k)
        same = (component[pivots][None, :] == component[v][:, None]) & (d > 0)
        first_bucket = np.searchsorted(r_bucket, d)  # pivot counted from this bucket on
        rows = np.repeat(np.arange(m), d.shape[1])[same.ravel()]
        hist = np.bincount(rows * (n_buckets + 1) + first_bucket.ravel()[same.ravel()],
                           minlength=m * (n_buckets + 1)).reshape(m, n_buckets + 1)[:, :n_buckets]
        pivots_within = np.cumsum(hist, axis=1)
        share = pivots_within / np.maximum(same.sum(axis=1), 1)[:, None]
        sampled = (component_size[v] - 1)[:, None] * share
        # Between the ball and the first bucket with `_MIN_PIVOTS` pivots: a power law through both ends.
        trusted = pivots_within >= _MIN_PIVOTS
        has_trusted = trusted.any(axis=1)
        first_trusted = np.where(has_trusted, trusted.argmax(axis=1), n_buckets - 1)
        r_far = r_bucket[first_trusted].astype(np.float64)
        c_far = np.maximum(sampled[np.arange(m), first_trusted], within_ball)
        log_r_ball = np.log(np.maximum(r_ball, 1))
        span = np.log(r_far) - log_r_ball  # > 0 wherever the bridge is used
        slope = np.where(span > 0, np.log(np.maximum(c_far, 1)) - np.log(np.maximum(within_ball, 1)), 0.0) / \
            np.where(span > 0, span, 1.0)
        bridged = np.exp(np.log(np.maximum(within_ball, 1))[:, None]
                         + slope[:, None] * (x_bucket[None, :] - log_r_ball[:, None]))
        outside = np.where(np.arange(n_buckets)[None, :] < first_trusted[:, None], bridged, sampled)
        count = np.where(inside, exact, np.maximum(outside, within_ball[:, None]))
        y = np.log(np.maximum(count, 1.0))
        total = weight.sum(axis=1)
        mean_x = (weight * x_bucket[None, :]).sum(axis=1) / np.maximum(total, 1)
        mean_y = (weight * y).sum(axis=1) / np.maximum(total, 1)
        dx = x_bucket[None, :] - mean_x[:, None]
        cov = (weight * dx * (y - mean_y[:, None])).sum(axis=1)
        var = (weight * dx ** 2).sum(axis=1)
        out[v] = np.where((total >= 2) & (var > 0), cov / np.where(var > 0, var, 1.0), 0.0)
    return out


def _closeness_estimate(ball: _Ball, distance: np.ndarray, n: int) -> np.ndarray:
    """(N,) harmonic closeness: exact over the ball, the rest from the pivots outside it (see
    `structure_estimate`)."""
    outside = distance.T > ball.radius[:, None]  # (N, k): pivot beyond the ball (unreachable ones are -1: not)
    unreachable = distance.T < 0
    beyond = outside | unreachable
    inverse = np.where(outside, 1.0 / np.maximum(distance.T, 1), 0.0)
    n_beyond = beyond.sum(axis=1)
    rest = n - ball.size  # nodes outside the ball (other components included)
    mean_inverse = np.where(n_beyond > 0, inverse.sum(axis=1) / np.maximum(n_beyond, 1), 1.0 / (ball.radius + 1))
    rest_sum = np.where(ball.exhausted, 0.0, rest * mean_inverse)
    return (ball.harmonic + rest_sum) / (n - 1)


def _stratified_fraction(reach: np.ndarray, pivots: np.ndarray, before: bool) -> np.ndarray:
    """(N,) fraction of the other nodes that are ancestors (`before`, `reach` (k, N) = node reachable from pivot)
    or descendants (`reach` = pivot reachable from node) of each node, from the pivots on that side of it in
    topological order (see `structure_estimate`)."""
    n = reach.shape[1]
    nodes = np.arange(n)
    side = (pivots[:, None] < nodes[None, :]) if before else (pivots[:, None] > nodes[None, :])  # (k, N)
    candidates = nodes if before else n - 1 - nodes  # nodes on that side of each node
    sampled = side.sum(axis=0)
    hits = (reach & side).sum(axis=0)
    share = np.where(sampled > 0, hits / np.maximum(sampled, 1), 1.0)
    return candidates * share / (n - 1)


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
