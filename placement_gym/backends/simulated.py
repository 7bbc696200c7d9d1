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
from .base import DEVICE_FEATURES, Measurement, check_objective
from .profiles import SCHEDULES, Profile, device_memory_bytes, format_bytes

logger = logging.getLogger(__name__)

#: Graphs with more ops than this skip HETERO's cycle splitting (its reachability bitsets take N^2 / 8 bytes,
#: 50 MB at 20,000 ops): their submodel count is the number of connected same-device regions, an undercount.
MAX_OPS_FOR_CYCLE_SPLIT = 20_000


# ============================================================================================ cutting
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


class HeteroCutter:
    """Splits a placed graph into submodels as OpenVINO's HETERO plugin does.

    HETERO (``SubgraphCollector``) joins ops connected by same-device edges into subgraphs, then, while some
    subgraph both feeds another and (through it) depends on it, cuts the edges inside it that lead from its ops
    not downstream of such an exit to ops downstream of one, and repeats. This class does the same on the
    compute ops: the "downstream of an exit of my own subgraph" test uses precomputed descendant bitsets, so
    each round is a few vectorised operations plus a union-find over the same-device edges.

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
        self._node_ids = np.arange(self.n)
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
        """Submodels of `placement`.

        Args:
            placement: (N,) int64 device per op.

        Returns:
            n_submodels: how many submodels HETERO compiles.
            labels: (N,) int64 submodel label of each op (the smallest op index in its submodel).
        """
        src, dst = self.src, self.dst
        keep = placement[src] == placement[dst]  # edges inside a submodel
        labels = np.array(_union_find_labels(self.n, src[keep].tolist(), dst[keep].tolist()), dtype=np.int64)
        # Which subgraphs reach themselves through another depends only on their own ops (the DAG is fixed),
        # so after the first round only the pieces of subgraphs that were just cut need checking again.
        changed = None  # (N,) bool: ops of subgraphs made in the last round; None = all
        while self.split_cycles:
            exits = labels[src] != labels[dst]
            if changed is not None:
                exits &= changed[src]
            if not exits.any():
                break
            late = self._downstream_of_own_exit(labels, src[exits], dst[exits])
            # Cut the edges inside a subgraph that lead from an op not downstream of one of its exits to one
            # that is: what HETERO's split_cyclic_dependencies promotes to subgraph inputs.
            cut = keep & ~late[src] & late[dst]
            if not cut.any():
                break  # no subgraph depends on itself through another: the cut is final
            keep &= ~cut
            split = np.zeros(self.n, dtype=bool)
            split[labels[src[cut]]] = True
            changed = split[labels]
            ops = np.flatnonzero(changed)  # ascending, so the smallest op of a piece stays its label
            local = np.full(self.n, -1, dtype=np.int64)
            local[ops] = np.arange(ops.size)
            inside = keep & changed[src]
            roots = _union_find_labels(ops.size, local[src[inside]].tolist(), local[dst[inside]].tolist())
            labels[ops] = ops[roots]
        return int(np.count_nonzero(labels == self._node_ids)), labels  # one root (label == op) per submodel

    def _downstream_of_own_exit(self, labels: np.ndarray, exit_src: np.ndarray, exit_dst: np.ndarray) -> np.ndarray:
        """(N,) bool: op ``v`` is reachable from an edge that leaves ``v``'s own subgraph.

        Two equivalent ways, the cheaper one is used: OR the descendant rows of each subgraph's exits together
        (cost ~ exits x N / 64 words), or test each (exit, later op of the exit's subgraph) pair (cost ~ the
        number of pairs: small when subgraphs are local, as in large graphs)."""
        v = self._node_ids
        words = self._descendants.shape[1]
        owner = labels[exit_src]
        if words > 32:  # big graph: count the pairs first
            node_order = np.lexsort((v, labels))  # ops grouped by subgraph, in topological order within
            keys = labels[node_order] * self.n + v[node_order]
            first = np.searchsorted(keys, owner * self.n + exit_dst, side="right")  # first later op of the subgraph
            end = np.searchsorted(keys, (owner + 1) * self.n, side="left")
            counts = np.maximum(end - first, 0)
            total = int(counts.sum())
            if total < owner.size * words:
                late = np.zeros(self.n, dtype=bool)
                if total:
                    exit_of_pair = np.repeat(np.arange(owner.size), counts)
                    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
                    ops = node_order[np.repeat(first, counts) + offset]
                    rows = self._descendants[exit_dst[exit_of_pair], ops >> 6]
                    late[ops[((rows >> (ops & 63).astype(np.uint64)) & np.uint64(1)) == 1]] = True
                return late
        order = np.argsort(owner, kind="stable")
        owner = owner[order]
        starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        # Per subgraph with exits: everything reachable from the far ends of its exits.
        reach = np.bitwise_or.reduceat(self._descendants[exit_dst[order]], starts, axis=0)
        row_of_label = np.full(self.n, -1, dtype=np.int64)
        row_of_label[owner[starts]] = np.arange(starts.size)
        rows = row_of_label[labels]
        bits = (reach[np.maximum(rows, 0), v >> 6] >> (v & 63).astype(np.uint64)) & np.uint64(1)
        return (rows >= 0) & (bits == 1)


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


class SimulatedBackend:
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
        """Why `placement` cannot run (an op on a device that cannot run it, a device out of memory), or None."""
        prepared = self.prepare(graph)
        ok = prepared.supported[np.arange(graph.n_ops), placement]
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            return (f"{graph.op_types[i]} is not supported on {self.device_names[placement[i]]} (op {graph.op_names[i]!r}; "
                    f"{int((~ok).sum())} op(s) of the placement are on a device that cannot run them)")
        capacity = [d.memory_bytes for d in self.profile.devices]
        if any(c is not None for c in capacity):
            need = device_memory_bytes(graph, placement, len(capacity))
            for name, needed, cap in zip(self.device_names, need, capacity):
                if cap is not None and needed > cap:
                    return f"out of memory on {name}: {format_bytes(needed)} > {format_bytes(cap)}"
        return None

    # ------------------------------------------------------------------------------- measure
    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Simulated latency of `graph` with op ``i`` on device ``placement[i]`` ((N,) ints in 0..D-1).

        The cost model is deterministic and keeps no measurements, so `use_cache` changes nothing."""
        prepared = self.prepare(graph)
        placement = self._check_placement(graph, placement)
        problem = self.check_feasible(graph, placement)
        if problem is not None:
            return Measurement.failure(problem, simulated=True, objective=self.objective)
        d = len(self.profile.devices)
        op_s = prepared.op_seconds[np.arange(graph.n_ops), placement]
        compute_per_device = np.bincount(placement, weights=op_s, minlength=d)
        breakdown = {f"compute_s/{name}": float(s) for name, s in zip(self.device_names, compute_per_device)}

        first = placement[0]
        if graph.n_ops == 1 or not np.any(placement != first):  # one device: one submodel, nothing crosses
            n_submodels, labels = 1, None
            transfer_s, transfer_bytes, n_transfers = 0.0, 0, 0
        else:
            n_submodels, labels = prepared.cutter.cut(placement)
            transfer_s, transfer_bytes, n_transfers = self._transfers(graph, prepared, placement, labels)
        boundary_s = (n_submodels - 1) * self.profile.boundary_overhead_s
        if n_submodels > 1:
            boundary_s += self.profile.split_overhead_s
        compute_s = float(compute_per_device.sum())

        if self.objective == "throughput":
            latency = compute_s if labels is None else self._bottleneck(graph, prepared, placement, labels, n_submodels,
                                                                       compute_per_device, breakdown)
            breakdown["throughput_per_s"] = 1.0 / latency
        elif self.profile.schedule == "sequential" or labels is None:
            latency = compute_s + transfer_s + boundary_s
        else:
            latency = self._parallel_makespan(prepared, placement, labels, op_s) + boundary_s
        breakdown.update({
            "compute_s": compute_s,
            "transfer_s": transfer_s,
            "boundary_s": boundary_s,
            "transfers": float(n_transfers),
            "transfer_bytes": float(transfer_bytes),
        })
        return Measurement(latency_s=float(latency), simulated=True, n_submodels=n_submodels, breakdown=breakdown,
                           objective=self.objective)

    def _check_placement(self, graph: ComputationGraph, placement) -> np.ndarray:
        array = np.asarray(placement)
        d = len(self.profile.devices)
        if array.shape != (graph.n_ops,) or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"placement must be an integer array of shape ({graph.n_ops},), got {array.dtype} {array.shape}")
        if array.min() < 0 or array.max() >= d:
            raise ValueError(f"placement values must be device indices 0..{d - 1} ({self.device_names}), "
                             f"got {array.min()}..{array.max()}")
        return array.astype(np.int64, copy=False)

    def _transfers(self, graph, prepared: _PreparedGraph, placement: np.ndarray, labels: np.ndarray):
        """Tensors crossing submodels, counted once per (producer op, consumer submodel) as HETERO does."""
        src, dst = graph.edge_index
        crossing = np.flatnonzero(labels[src] != labels[dst])
        if crossing.size == 0:
            return 0.0, 0, 0
        keys = src[crossing] * graph.n_ops + labels[dst[crossing]]
        _, first = np.unique(keys, return_index=True)
        edges = crossing[first]
        d = len(self.profile.devices)
        pair = placement[src[edges]] * d + placement[dst[edges]]
        seconds = prepared.edge_seconds[pair, edges]
        return float(seconds.sum()), int(graph.edge_bytes[edges].sum()), int(edges.size)

    def _bottleneck(self, graph, prepared: _PreparedGraph, placement: np.ndarray, labels: np.ndarray,
                    n_submodels: int, compute_per_device: np.ndarray, breakdown: dict) -> float:
        """Steady-state seconds per inference of a split placement: the busiest device or directed link, plus
        the split overhead (module docstring). Records each device's and link's busy time in `breakdown`."""
        d = len(self.profile.devices)
        roots = np.flatnonzero(labels == np.arange(graph.n_ops))
        submodels_per_device = np.bincount(placement[roots], minlength=d)
        busy = compute_per_device + np.maximum(submodels_per_device - 1, 0) * self.profile.boundary_overhead_s
        link_busy = np.zeros(d * d)
        src, dst = graph.edge_index
        crossing = np.flatnonzero(labels[src] != labels[dst])
        if crossing.size:
            _, first = np.unique(src[crossing] * graph.n_ops + labels[dst[crossing]], return_index=True)
            edges = crossing[first]
            pair = placement[src[edges]] * d + placement[dst[edges]]
            link_busy = np.bincount(pair, weights=prepared.edge_seconds[pair, edges], minlength=d * d)
        for name, seconds in zip(self.device_names, busy):
            breakdown[f"busy_s/{name}"] = float(seconds)
        breakdown["busiest_link_s"] = float(link_busy.max())
        return float(max(busy.max(), link_busy.max()) + self.profile.split_overhead_s)

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
        prepared = _PreparedGraph(op_seconds, measured, edge_seconds, HeteroCutter(graph), in_edges, supported)
        self._prepared[graph] = prepared
        return prepared


__all__ = ["HeteroCutter", "SimulatedBackend", "MAX_OPS_FOR_CYCLE_SPLIT"]
