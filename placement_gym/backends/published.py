"""The cost models of the field's published benchmarks, as backends: each prices a `PublishedGraph` exactly as its
authors' own program does (`placement_gym.models.published` reads the files).

**Tarnawski et al. (NeurIPS 2020)**, `TarnawskiBackend`: devices ``ACC0..ACC{k-1}`` (``maxFPGAs``) then
``CPU0..CPU{l-1}`` (``maxCPUs``). Time values are the file's milliseconds; ``latency_s`` = value / 1000.

* ``objective="throughput"``, max-load (their ``throughput-dp/dp.cpp``, ``computeLoadForResultOrg``): the load of an
  accelerator is the sum of its ops' ``fpgaLatency`` plus communication: once the cost of each op on it whose
  output leaves it, and once the cost of each op elsewhere whose output it reads; the load of a CPU is the sum of
  its ops' ``cpuLatency`` (a CPU pays no communication). ``latency_s`` is the largest load (time per sample). With
  several CPUs each is its own device, as in their DP (their pricing sums all CPUs into one group; every shipped
  throughput input has one CPU).
* ``objective="latency"`` (their ``latency-greedy/greedy.cpp``, ``-computeLatency``): each accelerator's ops are cut
  into contiguous pieces (their ``reworkSplitIntoContiguous``); a piece starts when every op outside it that feeds it
  has finished, and takes the cost of each such op, the sum of its ``fpgaLatency`` and the cost of each of its ops
  whose output leaves it; a CPU op takes its ``cpuLatency`` after its last input (CPUs are not shared). The latency is
  the last finish.
* Both: an op with ``supportedOnFpga`` false on an accelerator, an accelerator holding more than ``maxSizePerFPGA``
  bytes, or a colour class split over devices is a failed placement (their programs warn or stop).

**DOPPLER (Yao et al., ICLR 2026)**, `DopplerBackend`: ``n_devices`` identical devices ``GPU0..`` (default 4),
latency only. An op starts once all its inputs have arrived and its device is free (each device runs one op at a
time, first come first served); it takes its computation cost on any device; its output reaches a consumer on
another device after its communication cost, on the same device at once; links never contend. The makespan / 1e10
is ``latency_s``. Ties are broken in the order their SimPy simulator (``env/cost.py``, ``Simulator.get_cost``)
processes events, so the makespan is theirs exactly.
"""
from __future__ import annotations

import heapq
import weakref
from typing import NamedTuple, Sequence

import numpy as np

from ..models.published import (DOPPLER_COST_PER_SECOND, TARNAWSKI_MS_PER_SECOND, DopplerCosts, PublishedGraph,
                                TarnawskiCosts)
from .base import DEVICE_FEATURES, Backend, Measurement, check_objective

#: DOPPLER's device count when none is given (their 4-GPU graphs).
DOPPLER_DEFAULT_DEVICES = 4


def _costs(graph, family: str, backend: str):
    """`graph`'s costs if it is a published graph of `family`, else a ValueError saying what `backend` prices."""
    costs = getattr(graph, "costs", None)
    if not isinstance(graph, PublishedGraph) or costs is None or costs.family != family:
        raise ValueError(f"the {backend} backend prices only {family} benchmark graphs (load one with "
                         f"placement_gym.models.load_graph), not graph {getattr(graph, 'name', graph)!r}")
    return costs


def _as_placement(graph, placement, n_devices: int) -> np.ndarray | str:
    """`placement` as (N,) int64, or the error text when it does not fit `graph` and the devices."""
    p = np.asarray(placement).reshape(-1)
    if p.shape != (graph.n_ops,) or not np.issubdtype(p.dtype, np.integer):
        return f"placement has shape {p.shape} ({p.dtype}); expected ({graph.n_ops},) integers"
    if p.size and (p.min() < 0 or p.max() >= n_devices):
        wrong = int(p.max() if p.max() >= n_devices else p.min())
        return f"placement names device {wrong}; expected 0 to {n_devices - 1}"
    return p.astype(np.int64)


class _TarnawskiLists(NamedTuple):
    """What `TarnawskiBackend` reads of a graph on every measurement, built once per graph: its edges as pairs,
    each op's producers and consumers, and its ops ordered by colour class (``class_order``) with, per neighbour
    pair of that order, whether the two share a class (``same_class``)."""

    edges: tuple[tuple[int, int], ...]
    preds: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]
    class_order: np.ndarray
    same_class: np.ndarray


class TarnawskiBackend(Backend):
    """Tarnawski et al.'s cost model (module docstring) for inputs with `n_accelerators` and `n_cpus`."""

    name = "tarnawski"
    simulated = True

    def __init__(self, n_accelerators: int, n_cpus: int, objective: str = "latency") -> None:
        self.n_accelerators, self.n_cpus = int(n_accelerators), int(n_cpus)
        self.objective = check_objective(objective)
        self.device_names = [f"ACC{i}" for i in range(self.n_accelerators)] + \
                            [f"CPU{i}" for i in range(self.n_cpus)]
        self.virtual_devices = [False] * len(self.device_names)
        self._lists: "weakref.WeakKeyDictionary[PublishedGraph, _TarnawskiLists]" = weakref.WeakKeyDictionary()

    @classmethod
    def for_graph(cls, graph: PublishedGraph, objective: str = "latency") -> "TarnawskiBackend":
        """The backend for the devices `graph`'s file names."""
        costs: TarnawskiCosts = _costs(graph, "tarnawski", cls.name)
        return cls(costs.n_accelerators, costs.n_cpus, objective)

    def _checked(self, graph) -> TarnawskiCosts:
        costs: TarnawskiCosts = _costs(graph, "tarnawski", self.name)
        if (costs.n_accelerators, costs.n_cpus) != (self.n_accelerators, self.n_cpus):
            raise ValueError(f"graph {graph.name!r} is for {costs.n_accelerators} accelerators and {costs.n_cpus} "
                             f"CPUs, this backend for {self.n_accelerators} and {self.n_cpus}; price inputs with "
                             "different device counts with separate backends (separate commands)")
        return costs

    def _lists_of(self, graph, costs: TarnawskiCosts) -> _TarnawskiLists:
        """`graph`'s `_TarnawskiLists`, built on first use and kept while the graph lives."""
        lists = self._lists.get(graph)
        if lists is None:
            n = graph.n_ops
            edges = tuple(zip(graph.edge_index[0].tolist(), graph.edge_index[1].tolist()))
            preds: list[list[int]] = [[] for _ in range(n)]
            succs: list[list[int]] = [[] for _ in range(n)]
            for u, v in edges:
                preds[v].append(u)
                succs[u].append(v)
            order = np.argsort(costs.color_class, kind="stable")
            classes = costs.color_class[order]
            lists = _TarnawskiLists(edges, tuple(map(tuple, preds)), tuple(map(tuple, succs)), order,
                                    classes[1:] == classes[:-1])
            self._lists[graph] = lists
        return lists

    # ------------------------------------------------------------------ what a placement must respect
    def action_mask(self, graph) -> np.ndarray:
        """(N, D) bool: accelerators run the ops with ``supportedOnFpga``, CPUs run every op."""
        costs = self._checked(graph)
        mask = np.ones((graph.n_ops, len(self.device_names)), dtype=bool)
        mask[:, :self.n_accelerators] = costs.on_accelerator[:, None]
        return mask

    def check_feasible(self, graph, placement: np.ndarray) -> str | None:
        """The reason `placement` ((N,) int64) is not allowed (op support, accelerator memory, colour classes),
        or None."""
        costs = self._checked(graph)
        on_acc = placement < self.n_accelerators
        bad = np.flatnonzero(on_acc & ~costs.on_accelerator)
        if bad.size:
            return (f"op {graph.op_names[bad[0]]!r} cannot run on an accelerator (supportedOnFpga is false) but is "
                    f"placed on {self.device_names[placement[bad[0]]]}")
        used = np.bincount(placement[on_acc], weights=costs.size_bytes[on_acc], minlength=self.n_accelerators)
        over = np.flatnonzero(used > costs.memory_bytes)
        if over.size:
            return (f"out of memory: {self.device_names[over[0]]} holds {used[over[0]]:.6g} bytes, more than its "
                    f"{costs.memory_bytes:.6g} (maxSizePerFPGA)")
        lists = self._lists_of(graph, costs)
        order = lists.class_order
        devices = placement[order]
        split = np.flatnonzero(lists.same_class & (devices[1:] != devices[:-1]))
        if split.size:
            return (f"colour class {int(costs.color_class[order[split[0]]])} is split over devices (ops "
                    f"{graph.op_names[order[split[0]]]!r} and {graph.op_names[order[split[0] + 1]]!r}); its ops "
                    "must share one device")
        return None

    # ------------------------------------------------------------------ the two objectives
    def loads_ms(self, graph, placement: np.ndarray) -> np.ndarray:
        """(D,) float64 the max-load objective's load of each device (ms): compute plus, on an accelerator, the
        communication it takes part in (module docstring)."""
        costs = self._checked(graph)
        d = len(self.device_names)
        on_acc = placement < self.n_accelerators
        work = np.where(on_acc, costs.accelerator_ms, costs.cpu_ms)
        loads = np.bincount(placement, weights=work, minlength=d).astype(np.float64)
        src, dst = graph.edge_index
        cut = placement[src] != placement[dst]
        sends = np.zeros(graph.n_ops, dtype=bool)
        sends[src[cut]] = True
        receives = np.zeros((graph.n_ops, d), dtype=bool)  # op u's output read on device d (not its own)
        receives[src[cut], placement[dst[cut]]] = True
        comm = np.bincount(placement[sends], weights=costs.out_cost_ms[sends], minlength=d).astype(np.float64)
        comm += costs.out_cost_ms @ receives
        loads[:self.n_accelerators] += comm[:self.n_accelerators]
        return loads

    def latency_ms(self, graph, placement: np.ndarray) -> float | None:
        """The single-sample latency (ms) of the latency objective (module docstring), or None when the pieces of
        two accelerators feed each other (each piece is contiguous on its own device, but piece P of one device
        feeds piece Q of another which feeds P): their program refuses such a split ("contracted graph is not
        acyclic"), and so does this one."""
        costs = self._checked(graph)
        n = graph.n_ops
        lists = self._lists_of(graph, costs)
        preds, succs = lists.preds, lists.succs
        # Blocks: each CPU op alone; each accelerator's ops cut into contiguous pieces (their longest-path rule: an
        # op's piece is 1 + the number of times a path into it leaves and re-enters the accelerator's set).
        block = np.arange(n, dtype=np.int64) + n * (len(self.device_names) + 1)  # CPU ops: a block each
        for acc in range(self.n_accelerators):
            inside = placement == acc
            if not inside.any():
                continue
            piece = np.zeros(n, dtype=np.int64)
            for v in range(n):  # ops are in topological order
                best = 1 if inside[v] else 0
                for u in preds[v]:
                    best = max(best, piece[u] + int(inside[v] and not inside[u]))
                piece[v] = best
            block[inside] = acc * n + piece[inside]
        finish = np.zeros(n)
        members: dict[int, list[int]] = {}
        for v in range(n):
            members.setdefault(int(block[v]), []).append(v)
        # A block is ready once every op outside it feeding it has finished: process blocks in Kahn's order.
        block_ids = list(members)
        indeg = {b: 0 for b in block_ids}
        feeds: dict[int, set[int]] = {b: set() for b in block_ids}
        for u, v in lists.edges:
            bu, bv = int(block[u]), int(block[v])
            if bu != bv and bv not in feeds[bu]:
                feeds[bu].add(bv)
                indeg[bv] += 1
        ready = [b for b in block_ids if indeg[b] == 0]
        done = 0
        while ready:
            b = ready.pop()
            done += 1
            ops = members[b]
            if placement[ops[0]] >= self.n_accelerators:  # a CPU op
                v = ops[0]
                finish[v] = costs.cpu_ms[v] + max((finish[u] for u in preds[v]), default=0.0)
            else:
                mine = set(ops)
                feeders = {u for v in ops for u in preds[v] if u not in mine}
                leaving = [u for u in ops if any(w not in mine for w in succs[u])]
                total = (max((finish[u] for u in feeders), default=0.0) + sum(costs.out_cost_ms[u] for u in feeders)
                         + float(costs.accelerator_ms[ops].sum()) + sum(costs.out_cost_ms[u] for u in leaving))
                finish[ops] = total
            for c in feeds[b]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if done != len(block_ids):
            return None
        return float(finish.max())

    def measure(self, graph, placement, *, use_cache: bool = True) -> Measurement:
        """Seconds per sample (`objective`) of `placement` under their cost model; a placement their model
        forbids is a failed `Measurement` naming why."""
        p = _as_placement(graph, placement, len(self.device_names))
        if isinstance(p, str):
            return Measurement.failure(p, simulated=True, objective=self.objective)
        reason = self.check_feasible(graph, p)
        if reason is not None:
            return Measurement.failure(reason, simulated=True, objective=self.objective)
        if self.objective == "throughput":
            loads = self.loads_ms(graph, p)
            value_ms = float(loads.max())
            breakdown = {f"load_ms_{name}": float(x) for name, x in zip(self.device_names, loads)}
        else:
            value_ms = self.latency_ms(graph, p)
            breakdown = {}
            if value_ms is None:
                return Measurement.failure(
                    "their latency model cannot price this split: pieces on two accelerators feed each other "
                    "(latency-greedy/greedy.cpp refuses it: 'contracted graph is not acyclic')",
                    simulated=True, objective=self.objective)
        return Measurement(latency_s=value_ms / TARNAWSKI_MS_PER_SECOND, simulated=True,
                           n_submodels=int(np.unique(p).size), breakdown=breakdown, objective=self.objective)

    # ------------------------------------------------------------------ what agents and planners read
    def node_device_cost(self, graph) -> np.ndarray:
        """(N, D) seconds of each op alone on each device (``inf`` where an accelerator cannot run it)."""
        costs = self._checked(graph)
        acc = np.where(costs.on_accelerator, costs.accelerator_ms, np.inf)[:, None]
        seconds = np.concatenate([np.repeat(acc, self.n_accelerators, axis=1),
                                  np.repeat(costs.cpu_ms[:, None], self.n_cpus, axis=1)], axis=1)
        return seconds / TARNAWSKI_MS_PER_SECOND

    def edge_seconds(self, graph) -> np.ndarray:
        """(E,) seconds of each edge's transfer when its ends are on different devices (its source's cost)."""
        costs = self._checked(graph)
        return costs.out_cost_ms[graph.edge_index[0]] / TARNAWSKI_MS_PER_SECOND

    def device_features(self) -> np.ndarray:
        """(D, K) `DEVICE_FEATURES`: their model gives devices no speeds, only a kind: zeros, and the memory column
        12 (unbounded) for CPUs."""
        features = np.zeros((len(self.device_names), len(DEVICE_FEATURES)), dtype=np.float32)
        features[self.n_accelerators:, DEVICE_FEATURES.index("log10_memory_bytes")] = 12.0
        return features

    def describe(self) -> dict:
        semantics = ("max-load (time per sample) of throughput-dp/dp.cpp" if self.objective == "throughput"
                     else "single-sample latency of latency-greedy/greedy.cpp -computeLatency")
        return {"backend": self.name, "objective": self.objective,
                "profile": f"Tarnawski et al. 2020 costs from the input file ({semantics})",
                "schedule": "max-load" if self.objective == "throughput" else "blocks",
                "devices": list(self.device_names), "units": "file values are ms; latency_s = value / 1000"}

    def close(self) -> None:
        pass


class DopplerBackend(Backend):
    """DOPPLER's simulator (module docstring) on `n_devices` identical devices."""

    name = "doppler"
    simulated = True

    def __init__(self, n_devices: int = DOPPLER_DEFAULT_DEVICES, objective: str = "latency") -> None:
        if not isinstance(n_devices, (int, np.integer)) or isinstance(n_devices, bool) or not 1 <= n_devices <= 64:
            raise ValueError(f"n_devices is {n_devices!r}; expected an integer from 1 to 64 (DOPPLER's graphs are "
                             "for 4 or 8 GPUs)")
        if check_objective(objective) != "latency":
            raise ValueError("DOPPLER's simulator measures one execution (makespan); objective must be 'latency', "
                             f"not {objective!r}")
        self.objective = "latency"
        self.n_devices = int(n_devices)
        self.device_names = [f"GPU{i}" for i in range(self.n_devices)]
        self.virtual_devices = [False] * self.n_devices

    def makespan(self, graph, placement: np.ndarray) -> float:
        """The makespan (in the file's cost units) of `placement` ((N,) int64): a discrete-event run that
        schedules events in the order their SimPy simulator does (every SimPy event of theirs is one step
        here, in (time, creation order)), so that ties are broken as theirs are."""
        costs: DopplerCosts = _costs(graph, "doppler", self.name)
        n = graph.n_ops
        pending = graph.in_degree().astype(np.int64)
        free = [True] * self.n_devices
        queue: list[list[int]] = [[] for _ in range(self.n_devices)]
        heap: list[tuple[float, int, int, int]] = []  # (time, creation order, kind, op)
        counter = 0
        COND, GRANT, DONE, RELEASE, OUTPUT, ARRIVE, ARRIVED = range(7)

        def schedule(time: float, kind: int, op: int) -> None:
            nonlocal counter
            heapq.heappush(heap, (time, counter, kind, op))
            counter += 1

        def request(op: int) -> None:  # their Resource: a FIFO queue whose head takes the device when it is free
            device = placement[op]
            queue[device].append(op)
            if free[device]:
                free[device] = False
                schedule(now, GRANT, queue[device].pop(0))

        now = 0.0
        by_file = np.argsort(costs.node_ids)  # ops in the file's node order, the order their processes start in
        for op in by_file.tolist():
            if pending[op] == 0:
                schedule(0.0, COND, op)  # an op without inputs is ready at once
        arrive_of: list[tuple[int, int]] = []  # per ARRIVE event: (source, target)
        while heap:
            now, _, kind, item = heapq.heappop(heap)
            if kind == COND:  # all inputs arrived: ask for the device
                request(item)
            elif kind == GRANT:  # the device is the op's: compute
                schedule(now + float(costs.compute[item]), DONE, item)
            elif kind == DONE:  # computed: release the device, then announce the output
                free[placement[item]] = True
                schedule(now, RELEASE, item)
                schedule(now, OUTPUT, item)
            elif kind == RELEASE:  # the released device goes to the head of its queue
                device = placement[item]
                if free[device] and queue[device]:
                    free[device] = False
                    schedule(now, GRANT, queue[device].pop(0))
            elif kind == OUTPUT:  # one transfer per consumer, in the file's edge order
                for target in costs.successors[item]:
                    delay = 0.0 if placement[target] == placement[item] else float(costs.communication[item])
                    arrive_of.append((item, target))
                    schedule(now + delay, ARRIVE, len(arrive_of) - 1)
            elif kind == ARRIVE:  # the transfer's timer ran out; its process ends one event later
                schedule(now, ARRIVED, item)
            else:  # ARRIVED: the input is there
                target = arrive_of[item][1]
                pending[target] -= 1
                if pending[target] == 0:
                    schedule(now, COND, target)
        if np.any(pending > 0):  # cannot happen in a DAG; kept as a guard
            raise RuntimeError("some ops never received all their inputs")
        return now

    def measure(self, graph, placement, *, use_cache: bool = True) -> Measurement:
        """Seconds of one execution of `placement`: their makespan / 1e10."""
        p = _as_placement(graph, placement, self.n_devices)
        if isinstance(p, str):
            return Measurement.failure(p, simulated=True)
        return Measurement(latency_s=self.makespan(graph, p) / DOPPLER_COST_PER_SECOND, simulated=True,
                           n_submodels=int(np.unique(p).size))

    def action_mask(self, graph) -> np.ndarray:
        return np.ones((graph.n_ops, self.n_devices), dtype=bool)

    def node_device_cost(self, graph) -> np.ndarray:
        """(N, D) seconds of each op alone: its computation cost on every device."""
        costs: DopplerCosts = _costs(graph, "doppler", self.name)
        return np.repeat(costs.compute[:, None], self.n_devices, axis=1) / DOPPLER_COST_PER_SECOND

    def edge_seconds(self, graph) -> np.ndarray:
        """(E,) seconds of each edge's transfer when its ends are on different devices (its source's cost)."""
        costs: DopplerCosts = _costs(graph, "doppler", self.name)
        return costs.communication[graph.edge_index[0]] / DOPPLER_COST_PER_SECOND

    def device_features(self) -> np.ndarray:
        """(D, K) zeros: their devices are identical and have no stated speed."""
        return np.zeros((self.n_devices, len(DEVICE_FEATURES)), dtype=np.float32)

    def describe(self) -> dict:
        return {"backend": self.name, "objective": "latency",
                "profile": f"DOPPLER costs from the graph file, {self.n_devices} identical devices",
                "schedule": "work-conserving FIFO (their SimPy simulator)", "devices": list(self.device_names),
                "units": "file costs / 1e10 = seconds"}

    def close(self) -> None:
        pass


#: Backend names a published graph accepts (anything else is refused with this list).
PUBLISHED_BACKEND_NAMES = ("auto", "simulated", "tarnawski", "doppler")


def published_backend_of(models: Sequence, backend: "str | Backend" = "auto",
                         devices: "str | int | Sequence[str]" = "auto", **options) -> Backend | None:
    """The backend that prices `models` (graphs, or names of models not loaded) when they are published benchmark
    graphs: `published_backend` of the first; None when none of them is one (their backend is built as usual).
    ValueError when they mix published graphs with other models, or two families: each is priced by its own
    cost model."""
    published = [m for m in models if isinstance(m, PublishedGraph)]
    if not published:
        return None
    if len(published) != len(models) or len({g.family for g in published}) > 1:
        raise ValueError("the models mix published benchmark graphs (tarnawski:..., .json, .txt) with other models "
                         "(or two families); each is priced by its own cost model: give them separately")
    return published_backend(published[0], backend, devices, **options)


def published_backend(graph: PublishedGraph, backend: "str | Backend" = "auto",
                      devices: "str | int | Sequence[str]" = "auto", **options) -> Backend:
    """The backend that prices published graph `graph` with its authors' cost model.

    Args:
        backend: ``"auto"`` / ``"simulated"`` (or the family's name) choose the family's cost model; a ready
            `TarnawskiBackend` / `DopplerBackend` is returned as is.
        devices: Tarnawski: ``"auto"`` only (the file says how many). DOPPLER: ``"auto"`` (4 devices), a device
            count, or a list of that many names (only their number counts).
        options: ``objective`` (Tarnawski: ``"latency"`` or ``"throughput"``; DOPPLER: ``"latency"``), and for
            DOPPLER ``n_devices``. Any other option (a profile, measurement settings) is refused: these graphs
            carry their own costs.
    """
    if isinstance(backend, (TarnawskiBackend, DopplerBackend)):
        return backend
    family = graph.family
    if not isinstance(backend, str) or backend not in PUBLISHED_BACKEND_NAMES or \
            backend in ("tarnawski", "doppler") and backend != family:
        raise ValueError(f"graph {graph.name!r} is a {family} benchmark priced by its own cost model; backend must "
                         f"be 'auto', 'simulated' or {family!r}, not {backend!r}")
    objective = options.pop("objective", None) or "latency"
    n_devices = options.pop("n_devices", None)
    options = {k: v for k, v in options.items() if v is not None}
    if options:
        raise ValueError(f"graph {graph.name!r} carries its own costs ({family}); the options {sorted(options)} do "
                         f"not apply (accepted: objective{', n_devices' if family == 'doppler' else ''})")
    if family == "tarnawski":
        if devices not in ("auto", None) or n_devices is not None:
            raise ValueError(f"graph {graph.name!r} names its own devices ({graph.costs.n_accelerators} accelerators, "
                             f"{graph.costs.n_cpus} CPUs); leave devices='auto'")
        return TarnawskiBackend.for_graph(graph, objective)
    count = n_devices
    if devices not in ("auto", None):
        if isinstance(devices, str):
            devices = [devices]
        given = devices if isinstance(devices, int) else \
            (int(devices[0]) if len(devices) == 1 and str(devices[0]).isdigit() else len(devices))
        if count is not None and count != given:
            raise ValueError(f"n_devices={count} and devices={devices!r} disagree; give the DOPPLER device count once")
        count = given
    return DopplerBackend(DOPPLER_DEFAULT_DEVICES if count is None else count, objective)


def planning_tables(backend: Backend, graph) -> tuple[np.ndarray, np.ndarray] | None:
    """``(op seconds (N, D), edge seconds (E, D, D))`` of a published backend's cost model, for planners that
    price ops per device and edges per device pair (zero on the diagonal); None for any other backend. An edge
    costs its source's communication time when its ends differ (CPU ends included), as both peers price it."""
    if not isinstance(backend, (TarnawskiBackend, DopplerBackend)):
        return None
    op_seconds = backend.node_device_cost(graph)
    d = op_seconds.shape[1]
    edge = np.repeat(backend.edge_seconds(graph)[:, None, None], d, axis=1).repeat(d, axis=2)
    edge[:, np.arange(d), np.arange(d)] = 0.0
    return op_seconds, edge


__all__ = ["DopplerBackend", "TarnawskiBackend", "published_backend", "published_backend_of", "planning_tables",
           "PUBLISHED_BACKEND_NAMES", "DOPPLER_DEFAULT_DEVICES"]
