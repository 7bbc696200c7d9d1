"""The critical-path list-scheduling heuristic that DOPPLER (Yao et al., ICLR 2026) imitates, as the baseline
``critical-path``.

DOPPLER's code (github.com/xinyuyao/Doppler, ``cp_utils.py``, ``env/env.py``, ``scheduler/rl_agent.py``:
``get_cp_node_list`` / ``get_cp_device_list``; the heuristic of Kwok and Ahmad's survey, 1999) places the ops one
at a time:

1. **select**: of the ready ops (every producer placed), the one with the largest *bottom level*: the longest
   path from the op to a sink, counting every op's compute time and every tensor's transfer time on the way;
2. **place**: on the device where it can start (DOPPLER's identical devices) or, here, finish earliest: the device
   is free (the last op placed on it has finished, no back-filling) and its inputs have arrived (a producer on
   another device adds its tensor's transfer time and, here, the cost model's submodel overhead).

Differences from DOPPLER's heuristic, for this project's devices, which are not identical:

* an op's time and a tensor's transfer time depend on the devices: the bottom level uses each op's mean time over
  the devices that can run it and each tensor's mean transfer time over the pairs of distinct such devices (the
  averages HEFT's upward rank takes; on identical devices they are DOPPLER's numbers);
* the device is the one where the op **finishes** earliest (on identical devices this is the one where it starts
  earliest, DOPPLER's rule; with different speeds the earliest start would put a chain on whichever device is
  listed first);
* a device change costs the tensor's transfer **plus the cost model's submodel overhead** (``submodel_overhead_s``:
  the simulator's ``boundary_overhead_s``, what OpenVINO's HETERO pays per extra submodel). DOPPLER's engine has no
  such cost, so its heuristic prices the transfer alone; here a schedule that ignored it would change devices for
  savings smaller than the price the env charges for the change. The bottom levels (the selection's static priority) keep the mean transfer alone: the
  overhead is a price of a device change in the schedule, not of a tensor;
* ties go to the lowest op index and the lowest device index (DOPPLER draws among tied ops and devices at random);
* a device outside HETERO (the NPU, ``hetero=False``) never shares the model (the cost model prices it out of every
  op, `agents.baselines.costs.cost_model`); its whole-model placement is a candidate of its own
  (`agents.baselines.costs.standalone_devices`), as for `greedy` and `cheapest`;
* memory: a device takes an op only while its ops' weights plus the largest working set among them fit its memory
  (`agents.baselines.constraints.Constraints`, what `dp` and `optimal` respect); where no device that can run the
  op has room, the op goes where it finishes earliest anyway and the simulator reports the overflow.

The heuristic predicts a makespan from its own schedule; the env's simulator then measures the placement as it
runs it (OpenVINO's HETERO order, `placement_gym.backends.simulated`), which ignores the heuristic's order.
`ListSchedule` holds the schedule being built, so that DOPPLER's agent (`agents.doppler`) can read the same state
and ask the heuristic what it would do at any step of its own episodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.env import UNSUPPORTED_COST_S

from .constraints import Constraints
from .costs import CostModel, CostPlanner

__all__ = ["CriticalPath", "ListSchedule", "TieDraw", "bottom_levels", "critical_path_schedule", "mean_times",
           "top_levels", "usable_devices"]


def usable_devices(op_time_s: np.ndarray) -> np.ndarray:
    """(N, D) bool: device ``d`` can run op ``i`` (the cost model prices what it cannot at `UNSUPPORTED_COST_S`)."""
    usable = op_time_s < UNSUPPORTED_COST_S
    # An op no device can run (a broken cost model) keeps every device: the simulator then names the problem.
    usable[~usable.any(axis=1)] = True
    return usable


def mean_times(edge_index: np.ndarray, costs: CostModel) -> tuple[np.ndarray, np.ndarray]:
    """((N,) mean op seconds over the devices that can run each op, (E,) mean transfer seconds over the ordered
    pairs of distinct devices that can run its producer and its consumer; 0 with one device)."""
    usable = usable_devices(costs.op_time_s)
    op_mean = np.where(usable, costs.op_time_s, 0.0).sum(axis=1) / usable.sum(axis=1)
    e = edge_index.shape[1]
    d = costs.n_devices
    if e == 0 or d < 2:
        return op_mean, np.zeros(e)
    src, dst = edge_index
    pairs = usable[src][:, :, None] & usable[dst][:, None, :] & ~np.eye(d, dtype=bool)[None]  # (E, D, D)
    count = pairs.sum(axis=(1, 2))
    total = np.where(pairs, costs.edge_time_s, 0.0).sum(axis=(1, 2))
    return op_mean, np.where(count > 0, total / np.maximum(count, 1), 0.0)


def bottom_levels(edge_index: np.ndarray, costs: CostModel) -> np.ndarray:
    """(N,) seconds: each op's bottom level, its mean time plus the longest (transfer + bottom level) among its
    consumers, 0 past a sink (DOPPLER's ``compute_critical_paths``; the means: `mean_times`). Ops are in
    topological order (producers before consumers), so one backward sweep computes it."""
    op_mean, edge_mean = mean_times(edge_index, costs)
    tail = np.zeros_like(op_mean)  # the longest (transfer + bottom level) among each op's consumers
    src, dst = edge_index
    # Backward over the producers: every consumer v of op u comes after it, so v's tail is final when u's edges
    # are reached.
    for e in np.argsort(-src, kind="stable"):
        u, v = int(src[e]), int(dst[e])
        if u != v:
            tail[u] = max(tail[u], edge_mean[e] + op_mean[v] + tail[v])
    return op_mean + tail


def top_levels(edge_index: np.ndarray, costs: CostModel) -> np.ndarray:
    """(N,) seconds: each op's top level, its mean time plus the longest (top level + transfer) among its producers
    (DOPPLER's ``compute_critical_paths`` on the reversed graph)."""
    op_mean, edge_mean = mean_times(edge_index, costs)
    head = np.zeros_like(op_mean)
    src, dst = edge_index
    for e in np.argsort(dst, kind="stable"):  # forward over the consumers: their producers are final
        u, v = int(src[e]), int(dst[e])
        if u != v:
            head[v] = max(head[v], op_mean[u] + head[u] + edge_mean[e])
    return op_mean + head


class ListSchedule:
    """A list schedule being built one op at a time (DOPPLER's env state, ``env/env.py``): which ops are placed and
    where, when each started and finished, when each device is free, and what each device holds.

    Args:
        edge_index: (2, E) producer -> consumer pairs.
        costs: the cost model the times come from (op seconds (N, D), transfer seconds (E, D, D)).
        constraints: memory and op support (`Constraints`); None: none beyond the cost model's.

    Attributes (read by the heuristic and by DOPPLER's device state):
        placement: (N,) int64 device of each placed op, -1 for the others.
        start_s, finish_s: (N,) float64 seconds, NaN for ops not placed.
        device_free_s: (D,) when each device has finished its last op.
        device_compute_s: (D,) seconds of compute placed on each device.
        order: the ops in the order they were placed.
    """

    def __init__(self, edge_index: np.ndarray, costs: CostModel, constraints: Constraints | None = None) -> None:
        self.costs = costs
        n, d = costs.op_time_s.shape
        self.n_ops, self.n_devices = n, d
        self.usable = usable_devices(costs.op_time_s)
        # (D, D) the submodel overhead a tensor from device a pays to reach device b (0 on the diagonal)
        self.change_s = costs.submodel_overhead_s * (1.0 - np.eye(d))
        self.constraints = Constraints.none(n, d) if constraints is None else constraints
        self.preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # op -> [(producer, edge id)]
        self.succs: list[list[int]] = [[] for _ in range(n)]
        for e, (u, v) in enumerate(np.asarray(edge_index).T.tolist()):
            if u != v:
                self.preds[v].append((u, e))
                self.succs[u].append(v)
        self.waiting = np.array([len(p) for p in self.preds], dtype=np.int64)
        self.ready: list[int] = [i for i in range(n) if self.waiting[i] == 0]
        self.placement = np.full(n, -1, dtype=np.int64)
        self.start_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.device_free_s = np.zeros(d)
        self.device_compute_s = np.zeros(d)
        self.weights_used = np.zeros(d)
        self.working_max = np.zeros(d)
        self.order: list[int] = []

    @property
    def done(self) -> bool:
        return not self.ready

    def start_times(self, op: int) -> np.ndarray:
        """(D,) seconds: the earliest `op` could start on each device (its inputs arrived and the device free); an
        input from another device arrives after its transfer and the cost model's submodel overhead."""
        arrival = np.zeros(self.n_devices)
        for u, e in self.preds[op]:
            device = self.placement[u]
            crossing = self.costs.edge_time_s[e, device, :] + self.change_s[device]
            arrival = np.maximum(arrival, self.finish_s[u] + crossing)
        return np.maximum(arrival, self.device_free_s)

    def finish_times(self, op: int) -> np.ndarray:
        """(D,) seconds: when `op` would finish on each device (`start_times` + its time there)."""
        return self.start_times(op) + self.costs.op_time_s[op]

    def fits(self, op: int) -> np.ndarray:
        """(D,) bool: the devices that can run `op` and still hold their ops' weights plus the largest working set
        with it (`Constraints`)."""
        c = self.constraints
        need = self.weights_used + c.weights[op] + np.maximum(self.working_max, c.working[op])
        return self.usable[op] & c.supported[op] & (need <= c.capacity)

    def inputs_by_device(self, op: int) -> list[list[int]]:
        """For each device, the producers of `op` placed on it."""
        by_device: list[list[int]] = [[] for _ in range(self.n_devices)]
        for u, _ in self.preds[op]:
            by_device[self.placement[u]].append(u)
        return by_device

    def place(self, op: int, device: int) -> None:
        """Schedule ready `op` on `device` at its earliest start there; its consumers whose producers are all
        placed become ready."""
        if op not in self.ready:
            raise ValueError(f"op {op} is not ready (placed already, or a producer is not placed)")
        start = float(self.start_times(op)[device])
        finish = start + float(self.costs.op_time_s[op, device])
        self.placement[op], self.start_s[op], self.finish_s[op] = device, start, finish
        self.device_free_s[device] = finish
        self.device_compute_s[device] += self.costs.op_time_s[op, device]
        self.weights_used[device] += self.constraints.weights[op]
        self.working_max[device] = max(self.working_max[device], self.constraints.working[op])
        self.ready.remove(op)
        self.order.append(op)
        for v in self.succs[op]:
            self.waiting[v] -= 1
            if self.waiting[v] == 0:
                self.ready.append(v)

    # ------------------------------------------------------------------ the heuristic's two choices
    def critical_op(self, levels: np.ndarray, ties: TieDraw | None = None) -> int:
        """The ready op with the largest bottom level `levels` (N,): the lowest index among ties, or with `ties`
        one drawn among those within its tolerance of the largest."""
        ready = sorted(self.ready)
        if ties is None:
            return ready[int(np.argmax(levels[ready]))]
        return ready[ties.draw(-levels[ready])]

    def earliest_device(self, op: int, ties: TieDraw | None = None) -> int:
        """The device where `op` finishes earliest among those it fits (`fits`; every device that can run it when
        none has room): ties to the earliest start, then the lowest index, or with `ties` one drawn among those
        within its tolerance of the earliest finish."""
        allowed = self.fits(op)
        if not allowed.any():
            allowed = self.usable[op]
        start = self.start_times(op)
        finish = start + self.costs.op_time_s[op]
        candidates = np.flatnonzero(allowed)
        if ties is not None:
            return int(candidates[ties.draw(finish[candidates])])
        keys = [(finish[d], start[d], d) for d in candidates]
        return int(min(keys)[2])


@dataclass
class TieDraw:
    """DOPPLER's heuristic draws at random among tied choices (`ListSchedule.critical_op` and `earliest_device`
    take the lowest index instead): a choice is tied with the best when its key is within `within` (relative) of
    the best key; 0: exactly equal."""

    rng: np.random.Generator
    within: float = 0.0

    def draw(self, keys: np.ndarray) -> int:
        """The index of one key drawn among those tied with the smallest of `keys` (K,) (the smaller the better)."""
        best = float(keys.min())
        tied = np.flatnonzero(keys <= best + abs(best) * self.within)
        return int(self.rng.choice(tied))


def critical_path_schedule(edge_index: np.ndarray, costs: CostModel, constraints: Constraints | None = None,
                           ties: TieDraw | None = None) -> tuple[np.ndarray, float, list[int]]:
    """The heuristic of the module docstring: (placement (N,) int64, the makespan its own schedule predicts in
    seconds, the ops in the order it placed them); `ties`: drawn at random (`TieDraw`), else the lowest index."""
    levels = bottom_levels(edge_index, costs)
    schedule = ListSchedule(edge_index, costs, constraints)
    while not schedule.done:
        op = schedule.critical_op(levels, ties)
        schedule.place(op, schedule.earliest_device(op, ties))
    return schedule.placement, float(np.nanmax(schedule.finish_s)) if schedule.n_ops else 0.0, schedule.order


def planner_constraints(planner: CostPlanner, env) -> Constraints | None:
    """Memory and op support of the env's devices where a simulated cost model describes them (the env's simulator
    or ``cost_profile``'s); None on a published benchmark's own costs (no memory)."""
    base = env.unwrapped
    if planner.profile is None and not isinstance(base.backend, SimulatedBackend):
        return None
    return Constraints.of(planner.planning_backend(env), base.graph)


class CriticalPath(CostPlanner):
    """DOPPLER's critical-path list scheduling (module docstring) on the cost model (the env backend's, or
    `cost_profile`'s: `CostPlanner`); measures its placement, and the whole model on a device outside HETERO."""

    name = "critical-path"

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        costs = self.cost_model(env)
        placement, predicted, _ = critical_path_schedule(env.unwrapped.graph.edge_index, costs,
                                                         planner_constraints(self, env))
        self.plan_info = {"heuristic": "critical-path list scheduling (DOPPLER's)", "predicted_makespan_s": predicted,
                          "cost_model": costs.source}
        yield placement
