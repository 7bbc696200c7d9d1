"""Baechi's fast placement heuristics (Jeon et al., SoCC 2020), planned on the cost model.

* `GreedyETF` (m-ETF): list scheduling by Earliest Finish Time: repeatedly take the ready op and device whose
  earliest start (device free, inputs arrived, cross-device transfers paid) is smallest, and schedule it there.
* `TopoBalance` (m-TOPO): walk the ops in topological order and fill the devices one after another, each up
  to its share of the work (its speed's share of the total), which gives D contiguous pieces.

Baechi's memory constraints are left out (every model here fits on every device). Each planner proposes its
placement(s) from the cost model alone; `learn` then measures them on the env like any other placement.
"""
from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

from agents.search.heuristic_start import cheapest_devices

from .base import PlanningAgent
from .costs import CostModel, CostPlanner, op_times, standalone_devices


def etf_schedule(edge_index: np.ndarray, costs: CostModel) -> tuple[np.ndarray, float]:
    """m-ETF: (placement (N,) int64, the makespan the heuristic itself predicted, seconds).

    Args:
        edge_index: (2, E) producer -> consumer pairs (producers first in topological order).
        costs: the cost model (op times (N, D), edge transfer times (E, D, D)).
    """
    op_time, edge_time = costs.op_time_s, costs.edge_time_s
    n, d = op_time.shape
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # op -> [(producer, edge id)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for e, (u, v) in enumerate(edge_index.T.tolist()):
        preds[v].append((u, e))
        succs[u].append(v)
    waiting = np.array([len(p) for p in preds])
    ready = {i for i in range(n) if waiting[i] == 0}
    device_free = np.zeros(d)
    finish = np.zeros(n)
    placement = np.full(n, -1, dtype=np.int64)
    while ready:
        best = None  # (start, finish, op, device)
        for op in sorted(ready):
            # Earliest time the op's inputs are all on device `dev`, for every dev at once.
            arrival = np.zeros(d)
            for u, e in preds[op]:
                arrival = np.maximum(arrival, finish[u] + edge_time[e, placement[u], :])
            start = np.maximum(arrival, device_free)
            end = start + op_time[op]
            for dev in range(d):
                key = (start[dev], end[dev], op, dev)
                if best is None or key < best:
                    best = key
        start_s, end_s, op, dev = best
        placement[op], finish[op], device_free[dev] = dev, end_s, end_s
        ready.remove(op)
        for v in succs[op]:
            waiting[v] -= 1
            if waiting[v] == 0:
                ready.add(v)
    return placement, float(finish.max())


def topo_balance(costs: CostModel, device_order: "tuple[int, ...] | None" = None) -> np.ndarray:
    """m-TOPO: (N,) int64, contiguous pieces of the topological order, one per device in `device_order`.

    Device ``d`` takes ops until its busy time reaches the balanced makespan ``1 / sum_d(1 / T_d)`` (``T_d`` =
    the whole graph's time on ``d``), the last device takes the rest.
    """
    op_time = costs.op_time_s
    n, d = op_time.shape
    order = tuple(range(d)) if device_order is None else tuple(device_order)
    balanced = 1.0 / np.sum(1.0 / np.maximum(op_time.sum(axis=0), 1e-30))
    placement = np.empty(n, dtype=np.int64)
    position, busy = 0, 0.0
    for i in range(n):
        dev = order[position]
        # Move on when this op would take the device past its share (and it already has some work).
        if position < len(order) - 1 and busy > 0 and busy + op_time[i, dev] / 2 > balanced:
            position, busy = position + 1, 0.0
            dev = order[position]
        placement[i] = dev
        busy += op_time[i, dev]
    return placement


class GreedyETF(CostPlanner):
    """Baechi's m-ETF on the cost model (the env backend's, or `cost_profile`'s: `CostPlanner`); measures its one
    placement."""

    name = "greedy"

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        costs = self.cost_model(env)
        placement, predicted = etf_schedule(env.unwrapped.graph.edge_index, costs)
        self.plan_info = {"heuristic": "m-ETF", "predicted_makespan_s": predicted, "cost_model": costs.source}
        yield placement


class CheapestDevice(PlanningAgent):
    """Every op on the device where it alone runs fastest (the cost model's per-op times; transfers ignored).

    The simplest use of a cost model and the floor a learned agent that reads per-op costs should reach. Where
    transfers and submodel boundaries dominate it is worse than the best single device. Measures its one placement
    (and, on a simulated backend, the whole model on a device outside HETERO, cheapest first: `standalone_devices`).
    Needs per-op times only (`op_times`), so it plans on the real backend too, from its measured per-op profile."""

    name = "cheapest"

    def plan_candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        return standalone_devices(env, self.candidates(env, budget, rng))

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        seconds, source = op_times(env)  # devices that cannot run an op are priced out of it there
        self.plan_info = {"heuristic": "each op on its fastest device", "cost_model": source}
        yield cheapest_devices(seconds)


class TopoBalance(CostPlanner):
    """Baechi's m-TOPO on the cost model (the env backend's, or `cost_profile`'s: `CostPlanner`): one candidate
    per order of the devices (D! of them, measured within the budget, fastest kept)."""

    name = "topo"

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        costs = self.cost_model(env)
        self.plan_info = {"heuristic": "m-TOPO", "cost_model": costs.source}
        # Fastest device first: its piece comes first in topological order.
        speed_rank = tuple(np.argsort(-costs.device_speed(), kind="stable").tolist())
        orders = [speed_rank] + [o for o in itertools.permutations(range(costs.n_devices)) if o != speed_rank]
        for order in orders:
            yield topo_balance(costs, order)
