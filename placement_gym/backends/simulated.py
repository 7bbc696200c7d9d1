"""The simulated backend: a cost model that prices a placement in microseconds instead of seconds.

For a placement (a device per compute op) it

1. cuts the graph into submodels the way OpenVINO's HETERO plugin does (`HeteroCutter`): connected regions
   of same-device ops, split further where a region would both feed and depend on another region (HETERO
   breaks such cycles; the count matches ``HETERO_NUMBER_OF_SUBMODELS`` of real compiles for most placements,
   see `HeteroCutter`);
2. prices every op on its device (`placement_gym.backends.profiles.DeviceProfile.op_times`: measured per-op
   times where the profile has them for this model, a roofline elsewhere);
3. charges every tensor that crosses from one submodel to another once per (producer, consumer submodel), as
   HETERO does, at ``link.latency_s + bytes / link.bandwidth_Bps``, every submodel beyond the first
   ``boundary_overhead_s``, and a placement cut at all ``split_overhead_s``;
4. checks what the profile forbids: an op on a device that lists its type in ``unsupported_ops``, or a device
   whose ``memory_bytes`` the placement exceeds (`device_memory_bytes`: weights + the largest op working set),
   is a failed placement (``ok=False``, the error names the op or the device and the sizes);
5. prices one inference under the backend's ``objective``:

   * ``"latency"``: one synchronous inference, scheduled as the profile says (`Profile.schedule`):

     ``"sequential"`` (default): HETERO's synchronous inference runs the submodels one after another on the
     calling thread, so latency = compute + transfers + boundaries; ``"parallel"``: a list scheduler with one
     execution queue per device and one channel per (source, destination) device pair; ops are taken in
     topological order, an op starts when its device is free and its inputs have arrived, so ops on different
     devices overlap (the simulator of Placeto / Baechi);
   * ``"throughput"``: inferences stream through the placement with enough requests in flight that every
     device and link works on some request at all times (a pipeline, Tarnawski et al. 2020), so the time
     between completed inferences is the bottleneck: the busiest device (its ops' compute plus the dispatch
     of its submodels, ``boundary_overhead_s`` each beyond the first) or the busiest directed link (the
     tensors crossing it), plus ``split_overhead_s`` once for a split placement (the HETERO request wrapping
     the submodels). One device alone: its compute, the same as its latency.

A batch of placements of one graph is priced in one call (`SimulatedBackend.measure_many`): the op-support and
memory checks, the per-device compute sums, the HETERO cut (the batch is cut as one graph of disjoint copies of
the DAG), the tensors crossing submodels and the throughput bottleneck are array operations over the whole batch;
only the ``"parallel"`` schedule's list scheduler and the building of each `Measurement` run per placement.
`measure` is the same pricing for a batch of one.

Everything that does not depend on the placement (per-op times per device, per-edge transfer times per device
pair, the reachability bitsets the cut needs) is computed once per graph and kept while the graph lives.
"""
from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..graph import ComputationGraph
from .base import DEVICE_FEATURES, Backend, Measurement, check_objective
from .profiles import SCHEDULES, Profile, device_memory_bytes, format_bytes

logger = logging.getLogger(__name__)

#: Graphs with more ops than this skip HETERO's cycle splitting (its reachability bitsets take N^2 / 8 bytes,
#: 50 MB at 20,000 ops): their submodel count is the number of connected same-device regions, an undercount.
MAX_OPS_FOR_CYCLE_SPLIT = 20_000
#: `SimulatedBackend.measure_many` prices a batch in pieces of at most this many ops in all (placements x ops per
#: placement), so that the batch graph's arrays stay small (in cache, and bounded on big graphs).
MAX_BATCH_OPS = 16_384


# ============================================================================================ cutting
#: `_component_roots` labels up to this many edges with a union-find in pure Python (fewer fixed costs), more
#: with array operations (less per edge): one placement of a model takes the first, a batch the second.
PYTHON_UNION_FIND_MAX_EDGES = 512


def _union_find_labels(n: int, src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """Connected-component label of each of `n` nodes joined by the undirected edges ``src[k] - dst[k]``.

    The label is the smallest node index of the component. Pure Python: for the few hundred edges of a
    model this beats building a scipy sparse matrix by ~10x.
    """
    parent = list(range(n))
    for a, b in zip(src, dst):
        while parent[a] != a:
            a = parent[a]
        while parent[b] != b:
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    # Every parent has a smaller index, so one pass in index order resolves every node to its root.
    for i in range(n):
        parent[i] = parent[parent[i]]
    return parent


def _component_roots(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """(n,) int64 connected-component label of each of `n` nodes joined by the undirected edges
    ``src[k] - dst[k]`` ((E,) int64 each): the smallest node index of its component.

    Two equivalent ways, the cheaper one is used: `_union_find_labels` for a few edges
    (`PYTHON_UNION_FIND_MAX_EDGES`), else `_component_roots_vectorised`."""
    if src.size <= PYTHON_UNION_FIND_MAX_EDGES:
        return np.array(_union_find_labels(n, src.tolist(), dst.tolist()), dtype=np.int64)
    return _component_roots_vectorised(n, src, dst)


def _component_roots_vectorised(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """`_component_roots` as a union-find in array operations: each round hooks, for every edge whose ends have
    different roots, the larger root under the smaller one (where a root has several such edges, one of them
    wins), then points every node straight at its root (pointer jumping). Each round hooks every component that
    has a smaller neighbour, so there are few rounds (O(log n) in practice), each a few operations over the edges:
    one call labels a whole batch of placements (`HeteroCutter.cut_many`). A root only ever gets a smaller
    parent, so each component's smallest node stays its root, whichever hooks won.
    """
    labels = np.arange(n, dtype=np.int64)
    while True:
        a, b = labels[src], labels[dst]
        apart = a != b
        if not apart.any():
            return labels
        src, dst, a, b = src[apart], dst[apart], a[apart], b[apart]
        labels[np.maximum(a, b)] = np.minimum(a, b)
        while True:
            jumped = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped


class HeteroCutter:
    """Splits placed graphs into submodels as OpenVINO's HETERO plugin does, a batch of placements at a time.

    HETERO (``SubgraphCollector``) joins ops connected by same-device edges into subgraphs, then, while some
    subgraph both feeds another and (through it) depends on it, cuts the edges inside it that lead from its ops
    not downstream of such an exit to ops downstream of one, and repeats. This class does the same on the
    compute ops: the "downstream of an exit of my own subgraph" test uses precomputed descendant bitsets, so
    each round is a few vectorised operations plus a vectorised union-find over the same-device edges. A batch
    of B placements is cut as one graph of B disjoint copies of the DAG (`cut_many`), so the rounds run once per
    batch, not once per placement.

    Checked against OpenVINO 2026.4: this rule is a port of ``SubgraphCollector`` in OpenVINO's sources. A
    line-by-line Python port of that source agrees with it on 300 random, blocky and contiguous placements
    each of tiny_branch, ResNet-50 and Inception-V3 (BERT: one submodel too many in ~2% of them), and with the
    real ``HETERO_NUMBER_OF_SUBMODELS`` on every random (50/50), contiguous and 8-op-block placement compiled
    (12 ResNet, 6 Inception, 4 BERT, 15 tiny_branch; and the 30 of benchmarks/simulator_fidelity.py on
    ResNet). With only a few ops on the second device the released plugin sometimes cuts
    where the branches fork instead of where they join, giving 1-3 submodels more (~10% of such tiny_branch
    placements, 2 of 15 ResNet ones; per-op profiling under HETERO shows the pieces). tests/test_simulated.py
    compiles tiny_branch placements and compares.
    """

    def __init__(self, graph: ComputationGraph) -> None:
        self.n = graph.n_ops
        self.src, self.dst = graph.edge_index[0], graph.edge_index[1]
        self.split_cycles = self.n <= MAX_OPS_FOR_CYCLE_SPLIT
        self._descendants = self._descendant_bits(graph) if self.split_cycles else None

    def _descendant_bits(self, graph: ComputationGraph) -> np.ndarray:
        """(N, ceil(N/64)) uint64: row ``w`` has bit ``v`` set when ``v`` is ``w`` or reachable from it."""
        n = self.n
        children: list[list[int]] = [[] for _ in range(n)]
        for s, d in zip(self.src.tolist(), self.dst.tolist()):
            children[s].append(d)
        descendants = [0] * n
        for u in range(n - 1, -1, -1):  # reverse topological order: children are done first
            bits = 1 << u
            for c in children[u]:
                bits |= descendants[c]
            descendants[u] = bits
        width = 8 * ((n + 63) // 64)
        packed = b"".join(bits.to_bytes(width, "little") for bits in descendants)
        return np.frombuffer(packed, dtype="<u8").reshape(n, width // 8)

    def cut(self, placement: np.ndarray) -> tuple[int, np.ndarray]:
        """Submodels of one placement ((N,) int64): `cut_many` of a batch of one.

        Returns:
            n_submodels: how many submodels HETERO compiles.
            labels: (N,) int64 submodel label of each op (the smallest op index in its submodel).
        """
        counts, labels = self.cut_many(np.asarray(placement, dtype=np.int64)[None, :])
        return int(counts[0]), labels[0]

    def cut_many(self, placements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Submodels of each of a batch of placements.

        The batch is cut as one graph made of B disjoint copies of the DAG (op ``i`` of placement ``b`` is node
        ``b * N + i``). No edge joins two copies, so each placement's cut is exactly its cut alone.

        Args:
            placements: (B, N) int64 device per op, one placement per row.

        Returns:
            n_submodels: (B,) int64 how many submodels HETERO compiles for each placement.
            labels: (B, N) int64 submodel label of each op (the smallest op index in its submodel).
        """
        b, n = placements.shape
        m = b * n
        offset = np.arange(b, dtype=np.int64)[:, None] * n
        if b == 1:
            src, dst = self.src, self.dst
        else:
            src = (self.src[None, :] + offset).ravel()  # (B * E,) edges of the batch graph
            dst = (self.dst[None, :] + offset).ravel()
        device = placements.ravel()
        keep = device[src] == device[dst]  # edges inside a submodel
        labels = _component_roots(m, src[keep], dst[keep])
        # Which subgraphs reach themselves through another depends only on their own ops (the DAG is fixed),
        # so after the first round only the pieces of subgraphs that were just cut (their ops `ops`, the edges
        # leaving those ops `edges`) need checking again.
        ops, edges = np.arange(m), np.arange(src.size)
        edge_src, edge_dst = src, dst
        while self.split_cycles:
            exits = labels[edge_src] != labels[edge_dst]
            if not exits.any():
                break
            late = self._downstream_of_own_exit(labels, ops, edge_src[exits], edge_dst[exits])
            # Cut the edges inside a subgraph that lead from an op not downstream of one of its exits to one
            # that is: what HETERO's split_cyclic_dependencies promotes to subgraph inputs.
            cut = edges[keep[edges] & ~late[edge_src] & late[edge_dst]]
            if cut.size == 0:
                break  # no subgraph depends on itself through another: the cut is final
            keep[cut] = False
            # The subgraphs just cut lie within those checked this round: narrow `ops` and `edges` down to them.
            split = np.zeros(m, dtype=bool)
            split[labels[src[cut]]] = True
            ops = ops[split[labels[ops]]]  # ascending, so the smallest op of a piece stays its label
            edges = edges[split[labels[src[edges]]]]
            inside = edges[keep[edges]]
            pieces = _component_roots(ops.size, np.searchsorted(ops, src[inside]), np.searchsorted(ops, dst[inside]))
            labels[ops] = ops[pieces]
            edge_src, edge_dst = src[edges], dst[edges]
        roots = labels == np.arange(m)  # one root (label == op) per submodel
        return np.count_nonzero(roots.reshape(b, n), axis=1), labels.reshape(b, n) - offset

    def _downstream_of_own_exit(self, labels: np.ndarray, ops: np.ndarray, exit_src: np.ndarray,
                                exit_dst: np.ndarray) -> np.ndarray:
        """(M,) bool over the batch graph's nodes (`cut_many`): node ``v`` is reachable from an edge that leaves
        ``v``'s own subgraph. `labels` (M,) are batch-graph labels; `ops` (K,) the nodes of every subgraph that
        `exit_src` -> `exit_dst` (batch-graph edges) leave (others are False). Reachability stays within a copy
        of the DAG, so the descendant bitsets are read at ``node % N``.

        Two equivalent ways, the cheaper one is used: OR the descendant rows of each subgraph's exits together
        (cost ~ exits x N / 64 words), or test each (exit, later op of the exit's subgraph) pair (cost ~ the
        number of pairs: small when subgraphs are local, as in large graphs)."""
        n, m = self.n, labels.size
        words = self._descendants.shape[1]
        owner = labels[exit_src]
        late = np.zeros(m, dtype=bool)
        if words > 32:  # big graph: count the pairs first
            node_order = ops[np.lexsort((ops, labels[ops]))]  # ops grouped by subgraph, in topological order within
            keys = labels[node_order] * m + node_order
            first = np.searchsorted(keys, owner * m + exit_dst, side="right")  # first later op of the subgraph
            end = np.searchsorted(keys, (owner + 1) * m, side="left")
            counts = np.maximum(end - first, 0)
            total = int(counts.sum())
            if total < owner.size * words:
                if total:
                    exit_of_pair = np.repeat(np.arange(owner.size), counts)
                    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
                    pair_ops = node_order[np.repeat(first, counts) + offset]
                    late[pair_ops[_bit_set(self._descendants, exit_dst[exit_of_pair] % n, pair_ops % n)]] = True
                return late
        order = np.argsort(owner)
        owner = owner[order]
        starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        # Per subgraph with exits: everything reachable from the far ends of its exits.
        reach = np.bitwise_or.reduceat(self._descendants[exit_dst[order] % n], starts, axis=0)
        row_of_label = np.full(m, -1, dtype=np.int64)
        row_of_label[owner[starts]] = np.arange(starts.size)
        rows = row_of_label[labels[ops]]
        candidates = rows >= 0
        ops = ops[candidates]
        late[ops[_bit_set(reach, rows[candidates], ops if m == n else ops % n)]] = True
        return late


def _row_bincount(index: np.ndarray, weights: np.ndarray, d: int) -> np.ndarray:
    """(B, d) float64: for each row of `index` ((B, N) ints in 0..d-1), the sum of its `weights` ((B, N)) per
    index value, added in column order (one `np.bincount` with the row as part of the bin)."""
    b = index.shape[0]
    flat = (index + (np.arange(b, dtype=np.int64) * d)[:, None]).ravel()
    return np.bincount(flat, weights=weights.ravel(), minlength=b * d).reshape(b, d)


def _bit_set(bitsets: np.ndarray, rows: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """(K,) bool: bit ``bits[k]`` of row ``rows[k]`` of `bitsets` ((R, W) uint64, bit ``v`` in word ``v // 64``)."""
    words = bitsets.reshape(-1)[rows * bitsets.shape[1] + (bits >> 6)]
    return (words & (np.uint64(1) << (bits & 63).astype(np.uint64))) != 0


# ============================================================================================ backend
@dataclass
class _PreparedGraph:
    """Per-graph arrays that do not depend on the placement."""

    op_seconds: np.ndarray  # (N, D) seconds of op i on device d
    measured: np.ndarray  # (N, D) bool, the time was measured (else roofline)
    edge_seconds: np.ndarray  # (D * D, E) transfer seconds of edge k's tensor from device a to device b (row a*D+b)
    cutter: HeteroCutter
    in_edges: list[list[int]]  # per op, the indices of its incoming edges (for the parallel scheduler)
    supported: np.ndarray  # (N, D) bool: device d can run op i (profile's unsupported_ops)
    everywhere: bool  # every device can run every op (`supported` is all True)


class SimulatedBackend(Backend):
    """Latency from a cost model (see the module docstring); implements the `Backend` protocol.

    Args:
        profile: a preset name (``"paper"``), a profile JSON path (``placement-gym calibrate``) or a `Profile`.
        devices: ``"auto"`` (every device of the profile) or the profile devices to use, in placement order.
        schedule: override the profile's schedule (``"sequential"`` or ``"parallel"``) of the latency objective.
        objective: ``"latency"`` (one synchronous inference) or ``"throughput"`` (steady-state seconds per
            inference with requests in flight); see the module docstring.
    """

    name = "simulated"
    simulated = True

    def __init__(self, profile: "str | Profile" = "paper", devices: "str | Sequence[str]" = "auto", *,
                 schedule: str | None = None, objective: str = "latency") -> None:
        self.objective = check_objective(objective)
        resolved = Profile.resolve(profile)
        if devices != "auto":
            if not isinstance(devices, (str, list, tuple)):
                raise ValueError(f"devices must be 'auto' or the profile's device names (e.g. "
                                 f"{resolved.device_names}), got {devices!r}")
            resolved = resolved.select([devices] if isinstance(devices, str) else [str(d) for d in devices])
        if schedule is not None:
            if schedule not in SCHEDULES:
                raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
            resolved = replace(resolved, schedule=schedule)
        self.profile = resolved
        self._prepared: "weakref.WeakKeyDictionary[ComputationGraph, _PreparedGraph]" = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------------------ protocol
    @property
    def device_names(self) -> list[str]:
        return self.profile.device_names

    @property
    def virtual_devices(self) -> list[bool]:
        return [d.virtual for d in self.profile.devices]

    def describe(self) -> dict:
        coverage = {graph.name: self.profile.coverage(graph) for graph in list(self._prepared.keys())}
        return {
            "backend": self.name,
            "simulated": True,
            "note": "latencies are SIMULATED by a cost model (per-op times + transfers + submodel boundaries), not measured",
            "devices": self.device_names,
            **self.profile.describe(),
            "objective": self.objective,
            "measured_op_fraction": coverage,
            "fallback": "ops without measured times use each device's roofline (FLOPs, bytes, efficiency per op type)",
        }

    def close(self) -> None:
        self._prepared.clear()

    def action_mask(self, graph: ComputationGraph) -> np.ndarray:
        """(N, D) bool: device ``d`` can run op ``i`` (its type is not among the device's ``unsupported_ops``)."""
        return self.prepare(graph).supported.copy()

    def node_device_cost(self, graph: ComputationGraph) -> np.ndarray:
        """(N, D) float64 seconds of op ``i`` alone on device ``d`` (what the simulator charges); ``inf`` where
        the device cannot run it."""
        prepared = self.prepare(graph)
        return np.where(prepared.supported, prepared.op_seconds, np.inf)

    def device_features(self) -> np.ndarray:
        """(D, 5) float32, columns `DEVICE_FEATURES`, from the profile's figures."""
        rows = []
        for device in self.profile.devices:
            links = [self.profile.link_between(device.name, other.name) for other in self.profile.devices
                     if other is not device]
            link_bw = min((l.bandwidth_Bps or 1e12 for l in links), default=1e12)
            memory = device.memory_bytes or 1e12
            rows.append([np.log10(device.peak_flops), np.log10(device.memory_bandwidth_Bps), np.log10(memory),
                         np.log10(link_bw), np.log10(device.launch_overhead_s * 1e6 + 0.1) + 1.0])
        features = np.asarray(rows, dtype=np.float32)
        assert features.shape[1] == len(DEVICE_FEATURES)
        return features

    def check_feasible(self, graph: ComputationGraph, placement: np.ndarray) -> str | None:
        """Why `placement` ((N,) ints) cannot run (an op on a device that cannot run it, a device out of memory),
        or None."""
        return self._problems(graph, self._check_placements(graph, np.asarray(placement)[None, :]))[0]

    # ------------------------------------------------------------------------------- measure
    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Simulated latency of `graph` with op ``i`` on device ``placement[i]`` ((N,) ints in 0..D-1): the
        pricing of `measure_many` for a batch of one.

        The cost model is deterministic and keeps no measurements, so `use_cache` changes nothing."""
        array = np.asarray(placement)
        if array.shape != (graph.n_ops,):
            raise ValueError(f"placement must be an integer array of shape ({graph.n_ops},), got {array.dtype} {array.shape}")
        return self._price(graph, self._check_placements(graph, array[None, :]))[0]

    def measure_many(self, graph: ComputationGraph, placements: "np.ndarray | Sequence[np.ndarray]", *,
                     use_cache: bool = True) -> list[Measurement]:
        """Simulated latencies of a batch of placements of `graph`, priced together with array operations.

        Args:
            graph: the graph every placement places.
            placements: (B, N) ints in 0..D-1 (or B arrays of shape (N,)): op ``i`` of placement ``b`` runs on
                device ``placements[b, i]``.
            use_cache: accepted for the `Backend` protocol; the cost model keeps no measurements.

        Returns:
            B measurements, in order, each equal to what `measure` returns for that placement alone (same
            latency to the last bit, same submodels, breakdown and failure text).
        """
        if len(placements) == 0:
            return []
        return self._price(graph, self._check_placements(graph, np.asarray(placements)))

    def _check_placements(self, graph: ComputationGraph, placements: np.ndarray) -> np.ndarray:
        """(B, N) int64 `placements`, or ``ValueError`` saying what is expected."""
        d = len(self.profile.devices)
        if placements.ndim != 2 or placements.shape[1] != graph.n_ops or placements.dtype.kind not in "iu":
            raise ValueError(f"placements must be an integer array of shape (B, {graph.n_ops}), got "
                             f"{placements.dtype} {placements.shape}")
        if placements.size and (placements.min() < 0 or placements.max() >= d):
            raise ValueError(f"placement values must be device indices 0..{d - 1} ({self.device_names}), "
                             f"got {placements.min()}..{placements.max()}")
        return placements.astype(np.int64, copy=False)

    def _problems(self, graph: ComputationGraph, placements: np.ndarray) -> list[str | None]:
        """Per placement of `placements` ((B, N) int64): why it cannot run, or None (`check_feasible`)."""
        prepared = self.prepare(graph)
        problems: list[str | None] = [None] * len(placements)
        if not prepared.everywhere:
            runnable = prepared.supported[np.arange(graph.n_ops), placements]  # (B, N)
            for row in np.flatnonzero(~runnable.all(axis=1)).tolist():
                bad = ~runnable[row]
                i = int(np.argmax(bad))
                problems[row] = (f"{graph.op_types[i]} is not supported on {self.device_names[placements[row, i]]} "
                                 f"(op {graph.op_names[i]!r}; {int(bad.sum())} op(s) of the placement are on a device "
                                 f"that cannot run them)")
        capacity = [d.memory_bytes for d in self.profile.devices]
        if any(c is not None for c in capacity):
            need = device_memory_bytes(graph, placements, len(capacity))  # (B, D)
            over = need > np.array([np.inf if c is None else c for c in capacity])
            for row in np.flatnonzero(over.any(axis=1)).tolist():
                if problems[row] is None:
                    j = int(np.argmax(over[row]))  # the first listed device out of memory
                    problems[row] = (f"out of memory on {self.device_names[j]}: {format_bytes(need[row, j])} > "
                                     f"{format_bytes(capacity[j])}")
        return problems

    def _price(self, graph: ComputationGraph, placements: np.ndarray) -> list[Measurement]:
        """The measurement of each placement of `placements` ((B, N) int64, validated), in pieces of at most
        `MAX_BATCH_OPS` ops (bounding the memory the batch graph takes on big graphs)."""
        step = max(1, MAX_BATCH_OPS // max(graph.n_ops, 1))
        if len(placements) <= step:
            return self._price_piece(graph, placements)
        return [m for start in range(0, len(placements), step)
                for m in self._price_piece(graph, placements[start:start + step])]

    def _price_piece(self, graph: ComputationGraph, placements: np.ndarray) -> list[Measurement]:
        """The measurement of each placement of `placements` ((B, N) int64, validated): failures for those that
        cannot run, the cost model's price (module docstring) for the others."""
        problems = self._problems(graph, placements)
        measurements: list[Measurement | None] = [
            None if problem is None else Measurement.failure(problem, simulated=True, objective=self.objective)
            for problem in problems]
        feasible = [row for row, problem in enumerate(problems) if problem is None]
        if feasible:
            priced = self._price_feasible(graph, placements[feasible] if len(feasible) < len(placements) else placements)
            for row, measurement in zip(feasible, priced):
                measurements[row] = measurement
        return measurements

    def _price_feasible(self, graph: ComputationGraph, placements: np.ndarray) -> list[Measurement]:
        """Price each of `placements` ((B, N) int64, all runnable). Every sum over a placement's ops or tensors is
        one `np.bincount` over the batch with the row as part of the bin, so it adds the same numbers in the same
        order whatever else is in the batch: a placement's price does not depend on its batch."""
        prepared = self.prepare(graph)
        profile = self.profile
        b, n = placements.shape
        d = len(profile.devices)
        op_s = prepared.op_seconds[np.arange(n), placements]  # (B, N) seconds of each op on its device
        compute = _row_bincount(placements, op_s, d)  # (B, D) compute seconds per device
        compute_s = compute.sum(axis=1)
        # Placements on two or more devices: cut, then the tensors crossing submodels (row: their placement).
        split = np.flatnonzero((placements != placements[:, :1]).any(axis=1))
        n_submodels = np.ones(b, dtype=np.int64)
        row = edge = pair = np.zeros(0, dtype=np.int64)
        if split.size:
            split_placements = placements[split]
            counts, cut_labels = prepared.cutter.cut_many(split_placements)
            n_submodels[split] = counts
            row, edge, pair = self._crossings(graph, split_placements, cut_labels)
            row = split[row]
        seconds = prepared.edge_seconds[pair, edge]
        transfer_s = np.bincount(row, weights=seconds, minlength=b)
        transfer_bytes = np.bincount(row, weights=graph.edge_bytes[edge].astype(np.float64), minlength=b)
        n_transfers = np.bincount(row, minlength=b).astype(np.float64)
        boundary_s = np.where(n_submodels > 1, (n_submodels - 1) * profile.boundary_overhead_s
                              + profile.split_overhead_s, 0.0)
        busy = link_busy = None
        split_index: dict[int, int] = {}  # row of a split placement -> its row in `busy` / `link_busy`
        if self.objective == "throughput":
            # The busiest device (compute + dispatch of its submodels beyond the first) or directed link; one
            # device alone: its compute.
            latency = compute_s.copy()
            if split.size:
                roots = cut_labels == np.arange(n)
                per_device = _row_bincount(split_placements, roots.astype(np.float64), d)
                busy = compute[split] + np.maximum(per_device - 1, 0) * profile.boundary_overhead_s
                link_busy = np.bincount(row * d * d + pair, weights=seconds, minlength=b * d * d).reshape(b, d * d)[split]
                latency[split] = np.maximum(busy.max(axis=1), link_busy.max(axis=1)) + profile.split_overhead_s
                split_index = dict(zip(split.tolist(), range(split.size)))
        elif profile.schedule == "sequential":
            latency = compute_s + transfer_s + boundary_s  # one device alone: + 0.0 + 0.0, its compute
        else:
            latency = compute_s.copy()
            latency[split] = [
                self._parallel_makespan(prepared, split_placements[i], cut_labels[i], op_s[s]) + boundary_s[s]
                for i, s in enumerate(split.tolist())]

        # One Measurement per placement, with the same breakdown as always.
        names = self.device_names
        measurements = []
        compute_rows, latencies, submodels = compute.tolist(), latency.tolist(), n_submodels.tolist()
        totals = list(zip(compute_s.tolist(), transfer_s.tolist(), boundary_s.tolist(), n_transfers.tolist(),
                          transfer_bytes.tolist()))
        for i in range(b):
            breakdown = {f"compute_s/{name}": s for name, s in zip(names, compute_rows[i])}
            if self.objective == "throughput":
                j = split_index.get(i)
                if j is not None:
                    breakdown.update({f"busy_s/{name}": float(s) for name, s in zip(names, busy[j])})
                    breakdown["busiest_link_s"] = float(link_busy[j].max())
                breakdown["throughput_per_s"] = 1.0 / latencies[i]
            breakdown.update(zip(("compute_s", "transfer_s", "boundary_s", "transfers", "transfer_bytes"), totals[i]))
            measurements.append(Measurement(latency_s=latencies[i], simulated=True, n_submodels=submodels[i],
                                            breakdown=breakdown, objective=self.objective))
        return measurements

    def _crossings(self, graph: ComputationGraph, placements: np.ndarray,
                   labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The tensors crossing submodels, counted once per (producer op, consumer submodel) as HETERO does (the
        lowest-numbered edge of each such pair), for each of `placements` ((K, N) int64) cut into `labels` ((K, N)).

        Returns:
            row: (T,) int64 which placement each tensor belongs to (ascending).
            edge: (T,) int64 the edge that carries it.
            pair: (T,) int64 its (source device, destination device) as ``a * D + b`` (`_PreparedGraph.edge_seconds`).
        """
        src, dst = graph.edge_index
        n, d = graph.n_ops, len(self.profile.devices)
        row, edge = np.nonzero(labels[:, src] != labels[:, dst])  # by placement, then edge
        keys = (row * n + src[edge]) * n + labels[row, dst[edge]]
        _, first = np.unique(keys, return_index=True)
        row, edge = row[first], edge[first]
        pair = placements[row, src[edge]] * d + placements[row, dst[edge]]
        return row, edge, pair

    def _parallel_makespan(self, prepared: _PreparedGraph, placement: np.ndarray, labels: np.ndarray,
                           op_s: np.ndarray) -> float:
        """List schedule: one queue per device, one channel per device pair, ops in topological order."""
        d = len(self.profile.devices)
        device = placement.tolist()
        label = labels.tolist()
        seconds = op_s.tolist()
        edge_seconds = prepared.edge_seconds
        src = prepared.cutter.src
        finish = [0.0] * len(device)
        device_free = [0.0] * d
        channel_free: dict[int, float] = {}
        arrival: dict[tuple[int, int], float] = {}  # (producer, consumer submodel) -> when the tensor is there
        for i, edges in enumerate(prepared.in_edges):
            ready = 0.0
            for e in edges:
                s = int(src[e])
                if label[s] == label[i]:
                    at = finish[s]
                else:
                    key = (s, label[i])
                    at = arrival.get(key)
                    if at is None:  # first consumer in this submodel: the tensor is sent once
                        pair = device[s] * d + device[i]
                        start = max(finish[s], channel_free.get(pair, 0.0))
                        at = start + float(edge_seconds[pair, e])
                        channel_free[pair] = at
                        arrival[key] = at
                if at > ready:
                    ready = at
            start = max(ready, device_free[device[i]])
            finish[i] = start + seconds[i]
            device_free[device[i]] = finish[i]
        return max(finish)

    # ------------------------------------------------------------------------------- prepare
    def prepare(self, graph: ComputationGraph) -> _PreparedGraph:
        """The per-graph arrays (computed on first use, kept while the graph lives).

        Planners read them to plan on the very numbers the simulator charges (agents/baselines/costs.py):
        ``op_seconds`` (N, D) seconds per op and device, ``edge_seconds`` (D * D, E) seconds to move edge ``e``'s
        tensor from a submodel on device ``a`` to one on ``b`` (row ``a * D + b``), ``measured`` (N, D) bool.
        On top of these the simulator charges ``profile.boundary_overhead_s`` per extra submodel and
        ``profile.split_overhead_s`` once for any placement with two or more submodels.
        """
        prepared = self._prepared.get(graph)
        if prepared is not None:
            return prepared
        devices = self.profile.devices
        op_seconds = np.empty((graph.n_ops, len(devices)))
        measured = np.empty((graph.n_ops, len(devices)), dtype=bool)
        for j, device in enumerate(devices):
            op_seconds[:, j], measured[:, j] = device.op_times(graph)
        has_measurements = any(d.measured for d in devices)
        if has_measurements and not measured.all():
            models = sorted({m for d in devices for m in d.measured})
            logger.warning(
                "profile %r has measured per-op times for %s; %.0f%% of %s's op times come from the roofline fitted "
                "to each device instead (calibrate on this model for measured times)",
                self.profile.name, models, 100 * (1 - measured.mean()), graph.name,
            )
        edge_bytes = graph.edge_bytes.astype(np.float64)
        edge_seconds = np.empty((len(devices) ** 2, graph.n_edges))
        for a, source in enumerate(devices):
            for b, target in enumerate(devices):
                edge_seconds[a * len(devices) + b] = self.profile.link_between(source.name, target.name).transfer_s(edge_bytes)
        in_edges: list[list[int]] = [[] for _ in range(graph.n_ops)]
        for k, target in enumerate(graph.edge_index[1].tolist()):
            in_edges[target].append(k)
        supported = np.stack([device.supports(graph) for device in devices], axis=1)
        prepared = _PreparedGraph(op_seconds, measured, edge_seconds, HeteroCutter(graph), in_edges, supported,
                                  bool(supported.all()))
        self._prepared[graph] = prepared
        return prepared


__all__ = ["HeteroCutter", "SimulatedBackend", "MAX_OPS_FOR_CYCLE_SPLIT"]
