"""Tarnawski et al.'s dynamic program over contiguous splits (NeurIPS 2020), as the baseline ``dp``.

A *contiguous* placement cuts the ops, in their topological order, into consecutive segments and puts each
segment on one device. Tarnawski et al. show that the best such placement is found exactly by a dynamic program
over the cut positions; on layer chains (most CNNs) it is close to the unrestricted optimum, and it scales to
any graph size, which the MIP of `agents.baselines.optimal` does not.

The program plans on the simulated backend's own per-op and per-tensor costs (on the real backend, on those of the
device profile given as ``cost_profile``, `agents.baselines.costs.CostPlanner`):

* segment ``[j, i)`` on device ``d`` costs the sum of its ops' times on ``d``; it is allowed only if ``d``
  can run all its ops and holds their weights plus the largest working set among them (`Constraints`);
* a cut at position ``j`` between devices ``a`` and ``b`` moves every tensor produced before ``j`` and read at
  or after it, at the ``a -> b`` link's price, plus one submodel boundary, and every op at or after ``j`` that
  OpenVINO would fuse into a producer before ``j`` pays its price as a kernel of its own (the boundary prevents
  the fusion);
* ``objective="latency"``: the sum of segments and cuts (a device may hold several segments);
  ``objective="throughput"``: each device holds at most one segment (a pipeline stage) and the period is the
  largest segment or cut, plus the split overhead.

This is exact **for that contiguous cost model**. The simulator charges a tensor once per consumer submodel
rather than once per cut it passes, and counts memory per device over all its segments, so the returned
placement is then measured by the simulator itself, and ``plan_info`` reports both numbers. Where the latency
program's placement overflows a device that holds several of its segments, the baseline plans again with one
segment per device (then a segment's memory is its device's, checked exactly). Graphs with more
than `MAX_CUT_POSITIONS` ops restrict cuts to that many positions spread evenly over the work (recorded).

On Tarnawski et al.'s own inputs (`placement_gym.backends.published.TarnawskiBackend`) the baseline runs their
program instead: the max-load DP over ideals of `agents.baselines.tarnawski_dp` (under the latency objective its
split is then measured for latency, their "max-load DP" latency baseline).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from placement_gym.backends.published import TarnawskiBackend
from placement_gym.backends.simulated import SimulatedBackend

from .constraints import Constraints
from .costs import CostPlanner, describe_cost_model
from .tarnawski_dp import tarnawski_dp

#: Cut positions the program considers at most; larger graphs are cut only at that many evenly spread positions.
MAX_CUT_POSITIONS = 600


def _cut_positions(work: np.ndarray) -> np.ndarray:
    """(M + 1,) int64 positions 0 = p_0 < ... < p_M = N where segments may start and end."""
    n = work.size
    if n <= MAX_CUT_POSITIONS:
        return np.arange(n + 1)
    cumulative = np.concatenate(([0.0], np.cumsum(work)))
    targets = np.linspace(0.0, cumulative[-1], MAX_CUT_POSITIONS + 1)
    return np.unique(np.concatenate(([0], np.searchsorted(cumulative, targets[1:-1]), [n]))).astype(np.int64)


def contiguous_dp(backend: SimulatedBackend, graph, one_segment_per_device: bool = False,
                  cut_positions: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """The best contiguous placement of `graph` under `backend`'s costs and objective (module docstring).

    `one_segment_per_device` (always so for throughput, where every device is one pipeline stage) lets each
    device hold at most one segment, so a segment's memory is its device's: the latency program's fallback when
    several segments on one device together overflow its memory. `cut_positions` ((M + 1,) int64, 0 first and N
    last): where segments may start and end (default: every position, at most `MAX_CUT_POSITIONS`); given the
    boundaries of fixed groups of ops, the program places whole groups.

    Returns:
        placement: (N,) int64 device per op.
        info: ``dp_estimate_s`` (the program's own cost of it), ``segments`` ([start, end, device name]),
            ``cut_positions`` (how many positions were considered), ``objective``.
    """
    prepared = backend.prepare(graph)
    n, d = prepared.op_seconds.shape
    constraints = Constraints.of(backend, graph)
    profile = backend.profile
    positions = (_cut_positions(prepared.op_seconds.min(axis=1)) if cut_positions is None
                 else np.asarray(cut_positions, dtype=np.int64))
    m = positions.size - 1

    # Prefix sums at the cut positions: compute per device, unsupported ops per device, weights.
    def at_positions(values: np.ndarray) -> np.ndarray:
        return np.concatenate((np.zeros((1,) + values.shape[1:]), np.cumsum(values, axis=0)))[positions]

    compute = at_positions(prepared.op_seconds)  # (M+1, D)
    unsupported = at_positions((~constraints.supported).astype(float))  # (M+1, D)
    weights = at_positions(constraints.weights)  # (M+1,)
    # Largest working set of the ops in [p_j, p_i): a running maximum from each start position.
    working_max = np.full((m + 1, m + 1), np.inf)
    for j in range(m):
        block_max = np.maximum.reduceat(constraints.working, positions[j:-1]) if positions[j] < n else np.zeros(0)
        working_max[j, j + 1:] = np.maximum.accumulate(block_max)[: m - j]

    # Tensors crossing each cut position, priced per device pair: producer u's tensor crosses every cut in
    # (u, last consumer of u]; it is priced at u's first out-edge (the simulator's row a*D+b of edge_seconds).
    src, dst = graph.edge_index
    crossing = np.zeros((n + 1, d * d))
    if src.size:
        last = np.full(n, -1)
        np.maximum.at(last, src, dst)
        first_edge = np.full(n, -1)
        for k in range(src.size - 1, -1, -1):
            first_edge[src[k]] = k
        producers = np.flatnonzero(last >= 0)
        seconds = prepared.edge_seconds[:, first_edge[producers]].T  # (P, D*D)
        np.add.at(crossing, producers + 1, seconds)
        np.add.at(crossing, last[producers] + 1, -seconds)
        crossing = np.cumsum(crossing, axis=0)
    cut_s = crossing[positions]  # (M+1, D*D): cut at position index j

    # Fusions a segment's start breaks: an op fused into a producer's kernel (the simulator's `fused` ops) whose
    # producer lies before the segment pays its price as a kernel of its own there. unfuse[j, i, dev]: what the
    # ops of [p_j, p_i) pay on `dev` for it (the producer taken to be on another device).
    unfuse = np.zeros((m + 1, m + 1, d))
    fused, parent, extra = prepared.fused, prepared.fused_parent, prepared.unfused_s  # (F,), (F,), (F, D)
    ends = np.searchsorted(fused, positions)  # fused ops before each position
    for j in range(1, m):
        broken = (fused >= positions[j]) & (parent < positions[j])
        if broken.any():
            running = np.concatenate((np.zeros((1, d)), np.cumsum(np.where(broken[:, None], extra, 0.0), axis=0)))
            unfuse[j] = running[ends] - running[ends[j]]

    def segment(j: np.ndarray, i: int, dev: int) -> np.ndarray:
        """Cost of segments [p_j, p_i) on `dev` for an array of start indices j (inf where not allowed)."""
        seconds = compute[i, dev] - compute[j, dev] + unfuse[j, i, dev]
        allowed = (unsupported[i, dev] - unsupported[j, dev] == 0) & \
                  (weights[i] - weights[j] + working_max[j, i] <= constraints.capacity[dev])
        return np.where(allowed, seconds, np.inf)

    boundary = profile.boundary_overhead_s
    throughput = backend.objective == "throughput"
    starts = np.arange(m + 1)
    if throughput or one_segment_per_device:
        # best[i, S, last]: smallest cost of ops [0, p_i) on the device set S (bitmask), each device holding one
        # segment, the last one on `last`. Throughput: the period (largest segment or cut); latency: the sum.
        full = 1 << d
        best = np.full((m + 1, full, d), np.inf)
        choice = np.zeros((m + 1, full, d, 2), dtype=np.int64)  # (j, previous device) of the last segment
        for i in range(1, m + 1):
            j = starts[:i]
            for dev in range(d):
                cost = segment(j, i, dev)
                first = cost[0]
                best[i, 1 << dev, dev], choice[i, 1 << dev, dev] = first, (0, -1)
                for mask in range(full):
                    if not mask & (1 << dev) or mask == 1 << dev:
                        continue
                    rest = mask & ~(1 << dev)
                    for prev in range(d):
                        if not rest & (1 << prev):
                            continue
                        if throughput:  # one submodel per device: no dispatch cost beyond the first (the simulator's rule)
                            total = np.maximum(np.maximum(best[j, rest, prev], cost), cut_s[j, prev * d + dev])
                        else:
                            total = best[j, rest, prev] + cost + cut_s[j, prev * d + dev] + boundary
                        k = int(np.argmin(total[1:])) + 1 if i > 1 else 0
                        if k and total[k] < best[i, mask, dev]:
                            best[i, mask, dev], choice[i, mask, dev] = total[k], (k, prev)
        mask, dev = np.unravel_index(np.argmin(best[m]), best[m].shape)
        estimate = float(best[m, mask, dev])
        segments, i = [], m
        while i > 0:
            k, prev = choice[i, mask, dev]
            segments.append((int(positions[k]), int(positions[i]), int(dev)))
            mask, i, dev = mask & ~(1 << dev), int(k), int(prev)
        if len(segments) > 1:
            estimate += profile.split_overhead_s
    else:
        # best[i, last]: smallest latency of ops [0, p_i) with the last segment on `last`.
        best = np.full((m + 1, d), np.inf)
        choice = np.zeros((m + 1, d, 2), dtype=np.int64)
        for i in range(1, m + 1):
            j = starts[:i]
            for dev in range(d):
                cost = segment(j, i, dev)
                best[i, dev], choice[i, dev] = cost[0], (0, -1)
                for prev in range(d):
                    if prev == dev or i == 1:
                        continue
                    total = best[j, prev] + cost + cut_s[j, prev * d + dev] + boundary
                    k = int(np.argmin(total[1:])) + 1
                    if total[k] < best[i, dev]:
                        best[i, dev], choice[i, dev] = total[k], (k, prev)
        dev = int(np.argmin(best[m]))
        estimate, segments, i = float(best[m, dev]), [], m
        while i > 0:
            k, prev = choice[i, dev]
            segments.append((int(positions[k]), int(positions[i]), dev))
            i, dev = int(k), int(prev)
        if len(segments) > 1:
            estimate += profile.split_overhead_s
    placement = np.zeros(n, dtype=np.int64)
    for start, end, dev in segments:
        placement[start:end] = dev
    info = {"dp_estimate_s": estimate, "objective": backend.objective, "cut_positions": int(m),
            "one_segment_per_device": bool(throughput or one_segment_per_device),
            "segments": [[s, e, backend.device_names[dev]] for s, e, dev in reversed(segments)]}
    return placement, info


class ContiguousDP(CostPlanner):
    """Tarnawski et al.'s dynamic program over contiguous splits (module docstring) on the env backend's costs or
    on `cost_profile`'s (`CostPlanner`: how it plans on the real backend); measures its placement."""

    name = "dp"

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        backend = env.unwrapped.backend
        if isinstance(backend, TarnawskiBackend) and self.profile is None:  # their own program on their own inputs
            graph = env.unwrapped.graph
            placement, info = tarnawski_dp(graph, graph.costs)
            self.plan_info = {"method": "Tarnawski et al.'s max-load DP over ideals (throughput-dp/dp.cpp)", **info}
            yield placement
            return
        planner = self.planning_backend(env)  # the env's simulator, or one of cost_profile on the env's devices
        graph = env.unwrapped.graph
        placement, info = contiguous_dp(planner, graph)
        if planner.check_feasible(graph, placement) is not None:
            # Memory counts per device over all its segments, the program per segment: re-plan with one segment
            # per device, whose memory the program then checks exactly.
            placement, info = contiguous_dp(planner, graph, one_segment_per_device=True)
        # The program counts one submodel per segment; HETERO may cut a segment that is not one connected region
        # into several, each paying the boundary. The planner's own simulator prices its plan exactly (no env step):
        # where one device alone is cheaper by it, that comes first.
        singles = [np.full(graph.n_ops, dev, dtype=np.int64) for dev in range(len(planner.device_names))]
        ranked = sorted([placement, *singles], key=lambda p: planner.measure(graph, p).latency_s)
        self.plan_info = {"method": "dynamic program over contiguous splits (Tarnawski et al. 2020)",
                          "cost_model": describe_cost_model(env, planner), **info,
                          "single_device_cheaper": ranked[0] is not placement}
        yield from ranked
