"""The simulated backend: a cost model that prices a placement in microseconds instead of seconds.

For a placement (a device per compute op) it

1. cuts the graph into submodels the way OpenVINO's HETERO plugin does (`HeteroCutter`): connected regions
   of same-device ops, split further where a region would both feed and depend on another region (HETERO
   breaks such cycles; the count matches ``HETERO_NUMBER_OF_SUBMODELS`` of real compiles for most placements,
   see `HeteroCutter`);
2. prices every op on its device (`placement_gym.backends.profiles.DeviceProfile.op_times`: measured per-op
   times where the profile has them for this model, a roofline elsewhere), kernels as OpenVINO forms them: an op
   fused into its producer's kernel (`placement_gym.backends.fusion`) pays no launch and no memory round trip of
   its own, unless a device boundary separates the two, which prevents the fusion;
3. charges every tensor that crosses from one submodel to another once per (producer, consumer submodel), as
   HETERO does, at ``link.latency_s + bytes / link.bandwidth_Bps``, every submodel beyond the first
   ``boundary_overhead_s``, and a placement cut at all ``split_overhead_s``;
4. checks what the profile forbids: an op on a device that lists its type in ``unsupported_ops``, a device
   HETERO cannot use (``hetero=False``, the NPU) sharing the model with another device, or a device
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
memory checks and the throughput bottleneck are array operations over the whole batch; the HETERO cut and the
sums over each placement's ops and crossing tensors run in a compiled kernel (`placement_gym.backends._kernel`,
Numba), one placement after another in plain loops, so one call prices a batch without a Python-level loop per
placement or per op; only the ``"parallel"`` schedule's list scheduler and the building of each `Measurement` run
in Python per placement. `measure` is the same pricing for a batch of one.

Everything that does not depend on the placement (per-op times per device, per-edge transfer times per device
pair, the reachability bitsets the cut needs) is computed once per graph and kept while the graph lives.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..graph import ComputationGraph
from ._kernel import price_batch
from .base import DEVICE_FEATURES, Backend, Measurement, MeasurementBatch, check_objective
from .fusion import fusion_parent
from .profiles import SCHEDULES, Profile, device_memory_bytes, format_bytes

#: The cost model's version: raise it whenever a change makes the simulator price the same placement of the same
#: graph under the same profile differently, so that results of two versions are never compared as equals
#: (`placement_gym.benchmark` records it and refuses to mix versions).
COST_MODEL_VERSION = 2

logger = logging.getLogger(__name__)

#: Graphs with more ops than this skip HETERO's cycle splitting (its reachability bitsets take N^2 / 8 bytes,
#: 50 MB at 20,000 ops): their submodel count is the number of connected same-device regions, an undercount.
MAX_OPS_FOR_CYCLE_SPLIT = 20_000

#: A batch is split over threads only when each thread's share is expected to take at least this long: handing a
#: share to a pool thread and joining it has a fixed cost (thread wake-up, the GIL, Numba's dispatch), so a
#: shorter share would lose more than it saves. The expectation is the kernel's recent seconds per placement on
#: this graph, which depend on the placements (long same-device runs are cheaper to cut than random ones).
MIN_SECONDS_PER_THREAD = 150e-6


def available_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS reports one, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_pool: ThreadPoolExecutor | None = None
_pool_pid = 0  # the process that started `_pool`'s threads
_pool_lock = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    """One thread pool for every backend of the process (threads are started on first use, at most one per core).
    A forked child (a subprocess vector env, a worker pool) gets a pool of its own: its parent's threads were not
    copied into it, so work handed to the parent's pool would never run."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2),
                                       thread_name_prefix="placement-gym-pricing")
            _pool_pid = os.getpid()
        return _pool
# ============================================================================================ cutting
class HeteroCutter:
    """Splits placed graphs into submodels as OpenVINO's HETERO plugin does, a batch of placements at a time.

    HETERO (``SubgraphCollector``) joins ops connected by same-device edges into subgraphs, then, while some
    subgraph both feeds another and (through it) depends on it, cuts the edges inside it that lead from its ops
    not downstream of such an exit to ops downstream of one, and repeats. This class does the same on the
    compute ops, one placement at a time in compiled loops (`placement_gym.backends._kernel`): a union-find over
    the same-device edges, then rounds in which "downstream of an exit of my own subgraph" is read from
    precomputed descendant bitsets.

    Checked against OpenVINO 2026.4: this rule is a port of ``SubgraphCollector`` in OpenVINO's sources, and
    was compared with a line-by-line Python port of that source on random, blocky and contiguous placements of
    the zoo models (BERT: now and then one submodel too many) and with the real ``HETERO_NUMBER_OF_SUBMODELS``
    of compiled placements (benchmarks/fidelity/simulator_fidelity.py). With only a few ops on the second device the
    released plugin sometimes cuts where the branches fork instead of where they join, giving a few submodels
    more (per-op profiling under HETERO shows the pieces). tests/test_simulated.py compiles tiny_branch
    placements and compares.
    """

    def __init__(self, graph: ComputationGraph) -> None:
        self.n = graph.n_ops
        self.src = np.ascontiguousarray(graph.edge_index[0], dtype=np.int64)
        self.dst = np.ascontiguousarray(graph.edge_index[1], dtype=np.int64)
        self.split_cycles = self.n <= MAX_OPS_FOR_CYCLE_SPLIT
        self._descendants = self._descendant_bits(graph) if self.split_cycles else np.zeros((1, 1), dtype=np.uint64)
        # The edges by producer op, each op's in ascending edge order, for the crossing tensors.
        self.out_edges = np.argsort(self.src, kind="stable").astype(np.int64)
        self._seconds_per_placement: float | None = None  # the kernel's recent time per placement (`price`)

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
        return np.frombuffer(packed, dtype="<u8").reshape(n, width // 8).copy()

    def price(self, placements: np.ndarray, cut_all: bool, op_seconds: np.ndarray, edge_seconds: np.ndarray,
              edge_bytes: np.ndarray, n_devices: int, want_labels: bool, threads: int = 1) -> tuple:
        """`placement_gym.backends._kernel.price_batch` on this graph: cut each placement of `placements` ((B, N)
        int64) that uses two or more devices (every one with `cut_all`) and sum its compute and crossing tensors.

        With `threads` > 1 a batch expected to take long enough (`MIN_SECONDS_PER_THREAD` per share, from the
        seconds per placement the kernel took lately on this graph) is cut into consecutive shares priced at once
        on threads (the kernel runs without the GIL) and the outputs joined in order: each placement is priced
        alone either way, so the results are the same to the bit whatever the threads."""
        def kernel(lo: int, hi: int) -> tuple:
            start = time.perf_counter()
            priced = price_batch(placements[lo:hi], cut_all, op_seconds, edge_seconds, edge_bytes, self.src,
                                 self.dst, self.out_edges, self._descendants, self.split_cycles,
                                 n_devices, want_labels)
            if hi - lo >= 8:  # a moving average (the mix of placements drifts as a policy learns)
                seconds = (time.perf_counter() - start) / (hi - lo)
                self._seconds_per_placement = seconds if self._seconds_per_placement is None else \
                    0.7 * self._seconds_per_placement + 0.3 * seconds
            return priced

        b = len(placements)
        expected = b * (self._seconds_per_placement or 0.0)
        affordable = int(expected / MIN_SECONDS_PER_THREAD) if MIN_SECONDS_PER_THREAD > 0 else b
        shares = max(1, min(threads, affordable, b))
        if shares == 1:
            return kernel(0, b)
        bounds = np.linspace(0, b, shares + 1).astype(int).tolist()
        others = [_shared_pool().submit(kernel, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
        priced = [kernel(bounds[0], bounds[1])] + [future.result() for future in others]  # this thread: share 1
        return tuple(np.concatenate(parts) for parts in zip(*priced))

    def cut(self, placement: np.ndarray) -> tuple[int, np.ndarray]:
        """Submodels of one placement ((N,) int64): `cut_many` of a batch of one.

        Returns:
            n_submodels: how many submodels HETERO compiles.
            labels: (N,) int64 submodel label of each op (the smallest op index in its submodel).
        """
        counts, labels = self.cut_many(np.asarray(placement, dtype=np.int64)[None, :])
        return int(counts[0]), labels[0]

    def cut_many(self, placements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Submodels of each of a batch of placements (each cut alone: the result does not depend on the batch).

        Args:
            placements: (B, N) int64 device per op, one placement per row.

        Returns:
            n_submodels: (B,) int64 how many submodels HETERO compiles for each placement.
            labels: (B, N) int64 submodel label of each op (the smallest op index in its submodel).
        """
        placements = np.ascontiguousarray(placements, dtype=np.int64)
        b, n = placements.shape
        d = int(placements.max()) + 1 if placements.size else 1
        # Cut every placement, single-device ones included (their cut is their connected components).
        counts, labels, *_ = self.price(placements, True, np.zeros((n, d)),
                                        np.zeros((d * d, self.src.size)), np.zeros(self.src.size), d, True)
        return counts, labels


# ============================================================================================ backend
@dataclass
class _PreparedGraph:
    """Per-graph arrays that do not depend on the placement."""

    op_seconds: np.ndarray  # (N, D) seconds of op i on device d
    measured: np.ndarray  # (N, D) bool, the time was measured (else roofline)
    edge_seconds: np.ndarray  # (D * D, E) transfer seconds of edge k's tensor from device a to device b (row a*D+b)
    edge_bytes: np.ndarray  # (E,) float64 bytes of edge k's tensor
    cutter: HeteroCutter
    in_edges: list[list[int]]  # per op, the indices of its incoming edges (for the parallel scheduler)
    supported: np.ndarray  # (N, D) bool: device d can run op i (profile's unsupported_ops)
    everywhere: bool  # every device can run every op (`supported` is all True)
    fused: np.ndarray  # (F,) int64 the ops fused into a producer's kernel (`fusion_parent` >= 0) with a price to lose
    fused_parent: np.ndarray  # (F,) int64 that producer
    unfused_s: np.ndarray  # (F, D) seconds each such op costs more when a device boundary separates it from it


class SimulatedBackend(Backend):
    """Latency from a cost model (see the module docstring); implements the `Backend` protocol.

    Args:
        profile: a preset name (``"paper"``), a profile JSON path (``placement-gym calibrate``) or a `Profile`.
        devices: ``"auto"`` (every device of the profile) or the profile devices to use, in placement order.
        schedule: override the profile's schedule (``"sequential"`` or ``"parallel"``) of the latency objective.
        objective: ``"latency"`` (one synchronous inference) or ``"throughput"`` (steady-state seconds per
            inference with requests in flight); see the module docstring.
        threads: threads that price a big batch (`measure_many`, the vector env) together, each a share of its
            placements (`HeteroCutter.price`); ``None``: one per core this process may use (`available_cores`).
            The prices do not depend on it.
    """

    name = "simulated"
    simulated = True

    def __init__(self, profile: "str | Profile" = "paper", devices: "str | Sequence[str]" = "auto", *,
                 schedule: str | None = None, objective: str = "latency", threads: int | None = None) -> None:
        self.objective = check_objective(objective)
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None (one per core), got {threads!r}")
        self.threads = available_cores() if threads is None else threads
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
            "cost_model_version": COST_MODEL_VERSION,
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

    def submodel_overhead_s(self) -> float:
        """Seconds each submodel beyond the first adds (the profile's ``boundary_overhead_s``)."""
        return float(self.profile.boundary_overhead_s)

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

    def hetero_devices(self) -> np.ndarray:
        """(D,) bool: the devices HETERO can place ops on (`DeviceProfile.hetero`); any other runs a whole model or
        nothing."""
        return np.array([d.hetero for d in self.profile.devices], dtype=bool)

    def check_feasible(self, graph: ComputationGraph, placement: np.ndarray) -> str | None:
        """Why `placement` ((N,) ints) cannot run (an op on a device that cannot run it, a device out of memory, a
        device outside HETERO sharing the model with another), or None."""
        return self._problems(graph, self._check_placements(graph, np.asarray(placement)[None, :])).get(0)

    # ------------------------------------------------------------------------------- measure
    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Simulated latency of `graph` with op ``i`` on device ``placement[i]`` ((N,) ints in 0..D-1): the
        pricing of `measure_many` for a batch of one.

        The cost model is deterministic and keeps no measurements, so `use_cache` changes nothing."""
        array = np.asarray(placement)
        if array.shape != (graph.n_ops,):
            raise ValueError(f"placement must be an integer array of shape ({graph.n_ops},), got {array.dtype} {array.shape}")
        return self._measurements(*self._priced(graph, self._check_placements(graph, array[None, :])))[0]

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
        return self._measurements(*self._priced(graph, self._check_placements(graph, np.asarray(placements))))

    def measure_batch(self, graph: ComputationGraph, placements: "np.ndarray | Sequence[np.ndarray]", *,
                      use_cache: bool = True) -> MeasurementBatch:
        """`measure_many` in columns (`placement_gym.backends.base.MeasurementBatch`), filled straight from the
        priced arrays: a caller that reads columns (the vector env) gets no `Measurement` object built per
        placement unless it asks for them."""
        if len(placements) == 0:
            return MeasurementBatch.of([])
        return self._price(graph, self._check_placements(graph, np.asarray(placements)))

    def _check_placements(self, graph: ComputationGraph, placements: np.ndarray) -> np.ndarray:
        """(B, N) int64 `placements`, or ``ValueError`` saying what is expected."""
        d = len(self.profile.devices)
        if placements.ndim != 2 or placements.shape[1] != graph.n_ops or placements.dtype.kind not in "iu":
            raise ValueError(f"placements must be an integer array of shape (B, {graph.n_ops}), got "
                             f"{placements.dtype} {placements.shape}")
        placements = placements.astype(np.int64, copy=False)
        if placements.size and placements.view(np.uint64).max() >= d:  # one pass: a negative value reads as huge
            raise ValueError(f"placement values must be device indices 0..{d - 1} ({self.device_names}), "
                             f"got {placements.min()}..{placements.max()}")
        return placements

    def _problems(self, graph: ComputationGraph, placements: np.ndarray) -> dict[int, str]:
        """Why each placement of `placements` ((B, N) int64) that cannot run cannot: row -> text (`check_feasible`)."""
        prepared = self.prepare(graph)
        problems: dict[int, str] = {}
        if not prepared.everywhere:
            runnable = prepared.supported[np.arange(graph.n_ops), placements]  # (B, N)
            for row in np.flatnonzero(~runnable.all(axis=1)).tolist():
                bad = ~runnable[row]
                i = int(np.argmax(bad))
                problems[row] = (f"{graph.op_types[i]} is not supported on {self.device_names[placements[row, i]]} "
                                 f"(op {graph.op_names[i]!r}; {int(bad.sum())} op(s) of the placement are on a device "
                                 f"that cannot run them)")
        alone = [j for j, d in enumerate(self.profile.devices) if not d.hetero]
        if alone and len(self.profile.devices) > 1:
            used = np.stack([(placements == j).any(axis=1) for j in range(len(self.profile.devices))], axis=1)
            mixed = (used.sum(axis=1) > 1) & used[:, alone].any(axis=1)
            for row in np.flatnonzero(mixed).tolist():
                if row not in problems:
                    j = next(j for j in alone if used[row, j])
                    problems[row] = (f"{self.device_names[j]} cannot share a model with another device: OpenVINO's "
                                     f"HETERO plugin does not run on it, so it runs the whole model or nothing "
                                     f"({int((placements[row] == j).sum())} of {graph.n_ops} ops placed on it)")
        capacity = [d.memory_bytes for d in self.profile.devices]
        if any(c is not None for c in capacity):
            need = device_memory_bytes(graph, placements, len(capacity))  # (B, D)
            over = need > np.array([np.inf if c is None else c for c in capacity])
            for row in np.flatnonzero(over.any(axis=1)).tolist():
                if row not in problems:
                    j = int(np.argmax(over[row]))  # the first listed device out of memory
                    problems[row] = (f"out of memory on {self.device_names[j]}: {format_bytes(need[row, j])} > "
                                     f"{format_bytes(capacity[j])}")
        return problems

    def _price(self, graph: ComputationGraph, placements: np.ndarray) -> MeasurementBatch:
        """The measurements of `placements` ((B, N) int64, validated) in columns (`_priced`); their `Measurement`
        objects are built only if asked for."""
        problems, latency, n_submodels, breakdown, partial = priced = self._priced(graph, placements)
        b, latencies = len(placements), latency.tolist()
        ok, error = np.ones(b, dtype=bool), np.full(b, None, dtype=object)
        for row, problem in problems.items():
            ok[row], error[row] = False, problem
        # A simulated latency is exact: no timed runs, so no spread, and the interval is the latency itself.
        columns = {"latency_s": latency, "ok": ok,
                   "raw_latency_s": latency.copy(),
                   "interval_s": np.fromiter(zip(latencies, latencies), dtype=object, count=b),
                   "spread_s": np.zeros(b), "compile_s": np.zeros(b), "n_submodels": n_submodels,
                   "error": error, "simulated": np.ones(b, dtype=bool)}
        present = dict(zip(breakdown, np.ones((len(breakdown), b), dtype=bool)))  # a row of its own per key
        present.update(partial)
        return MeasurementBatch(columns, breakdown, present, lambda: self._measurements(*priced))

    def _priced(self, graph: ComputationGraph, placements: np.ndarray) -> tuple:
        """Price `placements` ((B, N) int64, validated): failures for those that cannot run, the cost model's price
        (module docstring) for the others. Returns why each that cannot run cannot (row -> str), latencies (B,) seconds
        (inf where it fails), submodel counts (B,) int64 (1 where it fails), the breakdown columns (per key, (B,),
        in the order the measurements name them: the first priced placement's keys, then the ones it lacks, the
        busy keys of the throughput objective that only split placements have) and, for the keys that some
        placements lack, where each is present ((B,) bool; every other key is present on every placement)."""
        problems = self._problems(graph, placements)
        b = len(placements)
        if not problems:
            return (problems, *self._price_feasible(graph, placements))
        ok = np.ones(b, dtype=bool)
        ok[list(problems)] = False
        latency, n_submodels, breakdown, partial = np.full(b, np.inf), np.ones(b, dtype=np.int64), {}, {}
        if ok.any():  # failures: latency inf, one submodel (`Measurement.failure`), no breakdown
            feasible = self._price_feasible(graph, placements[ok])
            latency[ok], n_submodels[ok] = feasible[0], feasible[1]
            for key, values in feasible[2].items():
                breakdown[key] = np.zeros(b)
                breakdown[key][ok] = values
                partial[key] = ok.copy()
                if key in feasible[3]:
                    partial[key][ok] = feasible[3][key]
        return problems, latency, n_submodels, breakdown, partial

    def _measurements(self, problems: dict[int, str], latency: np.ndarray, n_submodels: np.ndarray,
                      breakdown: dict[str, np.ndarray], partial: dict[str, np.ndarray]) -> list[Measurement]:
        """The `Measurement` of each placement `_priced` priced, with Python numbers as `measure` gives them."""
        objective = self.objective
        latencies, counts = latency.tolist(), n_submodels.tolist()
        values = {key: column.tolist() for key, column in breakdown.items()}
        has = {key: mask.tolist() for key, mask in partial.items()}

        def breakdown_of(row: int) -> dict[str, float]:
            if not has:
                return {key: column[row] for key, column in values.items()}
            return {key: column[row] for key, column in values.items() if key not in has or has[key][row]}

        return [Measurement(latency_s=latencies[row], simulated=True, n_submodels=counts[row],
                            breakdown=breakdown_of(row), objective=objective) if row not in problems
                else Measurement.failure(problems[row], simulated=True, objective=objective)
                for row in range(len(latencies))]

    def _price_feasible(self, graph: ComputationGraph, placements: np.ndarray) -> tuple:
        """Price each of `placements` ((B, N) int64, all runnable): latencies (B,) seconds, submodel counts (B,)
        int64, the breakdown columns (per key, a (B,) float64 array, in `_priced`'s key order) and, for the keys
        some placements lack, where each is present ((B,) bool: the throughput objective's busy keys are only on
        placements cut in several submodels). The cut and every sum over a placement's ops or tensors run per
        placement in the compiled kernel (`placement_gym.backends._kernel.price_batch`), so a placement's price does
        not depend on its batch."""
        prepared = self.prepare(graph)
        profile = self.profile
        b, n = placements.shape
        d = len(profile.devices)
        placements = np.ascontiguousarray(placements)
        parallel = self.objective == "latency" and profile.schedule == "parallel"
        (n_submodels, cut_labels, compute, transfer_s, transfer_bytes, n_transfers, link_s,
         per_device) = prepared.cutter.price(placements, False, prepared.op_seconds, prepared.edge_seconds,
                                             prepared.edge_bytes, d, parallel, self.threads)
        is_split = n_submodels > 1  # the placements on two or more devices (only they were cut)
        unfused = self._unfused_s(prepared, placements) if prepared.fused.size and is_split.any() else None
        if unfused is not None:  # (B, N): what each op pays for a fusion its device boundary prevents
            compute = compute + np.stack([np.where(placements == j, unfused, 0.0).sum(axis=1) for j in range(d)],
                                         axis=1)
        compute_s = compute.sum(axis=1)
        boundary_s = np.where(is_split, (n_submodels - 1) * profile.boundary_overhead_s + profile.split_overhead_s, 0.0)
        names = self.device_names
        breakdown: dict[str, np.ndarray] = {f"compute_s/{name}": column for name, column in zip(names, compute.T)}
        partial: dict[str, np.ndarray] = {}
        if self.objective == "throughput":
            # The busiest device (compute + dispatch of its submodels beyond the first) or directed link; one
            # device alone: its compute.
            latency = compute_s.copy()
            split = np.flatnonzero(is_split)
            busy = np.zeros((b, d))
            link_busy = np.zeros(b)
            if split.size:
                busy[split] = compute[split] + np.maximum(per_device[split] - 1, 0) * profile.boundary_overhead_s
                link_busy[split] = link_s[split].max(axis=1)
                latency[split] = np.maximum(busy[split].max(axis=1), link_busy[split]) + profile.split_overhead_s
            for key, column in [*zip((f"busy_s/{name}" for name in names), busy.T), ("busiest_link_s", link_busy)]:
                breakdown[key], partial[key] = column, is_split
            breakdown["throughput_per_s"] = 1.0 / latency
        elif not parallel:
            latency = compute_s + transfer_s + boundary_s  # one device alone: + 0.0 + 0.0, its compute
        else:
            latency = compute_s.copy()
            split = np.flatnonzero(is_split)
            op_s = prepared.op_seconds[np.arange(n), placements]  # (B, N) seconds of each op on its device
            if unfused is not None:
                op_s = op_s + unfused
            latency[split] = [self._parallel_makespan(prepared, placements[s], cut_labels[s], op_s[s]) + boundary_s[s]
                              for s in split.tolist()]
        breakdown.update(zip(("compute_s", "transfer_s", "boundary_s", "transfers", "transfer_bytes"),
                             (compute_s, transfer_s, boundary_s, n_transfers, transfer_bytes)))
        if not partial:
            return latency, n_submodels, breakdown, partial
        # The keys in the order the measurements name them: the first placement's, then the ones it lacks (the
        # busy keys when it is on one device); a key no placement has is left out.
        order = [key for key in sorted(breakdown, key=lambda key: key in partial and not partial[key][0])
                 if key not in partial or partial[key].any()]
        return latency, n_submodels, {key: breakdown[key] for key in order}, \
            {key: partial[key] for key in order if key in partial}

    @staticmethod
    def _unfused_s(prepared: _PreparedGraph, placements: np.ndarray) -> np.ndarray:
        """(B, N) seconds each op of each placement ((B, N) int64) pays beyond its fused price because a device
        boundary separates it from the producer whose kernel would absorb it (zero elsewhere)."""
        device = placements[:, prepared.fused]  # (B, F)
        separated = device != placements[:, prepared.fused_parent]
        extra = np.zeros(placements.shape)
        extra[:, prepared.fused] = np.where(separated, prepared.unfused_s[np.arange(prepared.fused.size), device], 0.0)
        return extra

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
        # A fused op separated from its producer by a device boundary is a kernel of its own (measured times already
        # are what the real kernels took).
        unfused = np.stack([device.op_times(graph, fused=False)[0] for device in devices], axis=1) - op_seconds
        unfused[measured] = 0.0
        parent = fusion_parent(graph)
        fused = np.flatnonzero((parent >= 0) & (unfused > 0).any(axis=1))
        prepared = _PreparedGraph(op_seconds, measured, edge_seconds, edge_bytes, HeteroCutter(graph), in_edges, supported,
                                  bool(supported.all()), fused, parent[fused].astype(np.int64), unfused[fused])
        self._prepared[graph] = prepared
        return prepared


__all__ = ["COST_MODEL_VERSION", "HeteroCutter", "SimulatedBackend", "MAX_OPS_FOR_CYCLE_SPLIT"]
