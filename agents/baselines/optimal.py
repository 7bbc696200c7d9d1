"""The exact optimum on the simulated backend's cost model (Tarnawski et al., NeurIPS 2020, style), with a proof.

What is optimal: the placement with the lowest latency **the simulated backend computes** (its profile, its
HETERO submodel cut, its schedule), over all D^N placements. Not the real hardware's optimum.

How (an exact method with a certificate, not a heuristic):

1. A mixed-integer program (SciPy's ``milp``, i.e. the HiGHS solver) whose objective ``L(p)`` is a *lower bound*
   of the simulated latency ``sim(p)`` for every placement ``p``, and equal to it in the common case:

   * compute: ``sum_i t[i, p_i]`` (exact);
   * transfers: one tensor per (producer, other device its consumers use), priced at the cheapest of the
     producer's out-edges (the simulator charges one per (producer, consumer *submodel*): at least that);
   * submodels: the number of connected same-device regions, counted exactly with a single-commodity flow
     (one root per region); the simulator's HETERO cut only ever splits regions further;
   * ``schedule="parallel"``: start times per op, precedence with transfer delays, each device running its ops
     in topological order as the simulator's list scheduler does (big-M on pairs of ops with no path between
     them); the simulator's channel queueing only delays, so the makespan is a lower bound too.

2. Certificate loop: solve, simulate the MIP's placement with the backend itself (``backend.measure``), keep the
   best simulated placement (upper bound ``U``), exclude the placement with a no-good cut and re-solve, until
   the MIP's bound over all remaining placements reaches ``U`` (then ``U`` is the optimum: every other
   placement has ``sim >= L >= U``) or the time limit passes (then the optimum lies in ``[lower_bound, U]``).
   A cutoff ``L(p) <= U`` prunes the search; an infeasible MIP proves optimality.

The agent records ``plan_info``: ``status`` ("optimal", "time_limit", "size_limit" above `MAX_OPS_FOR_MIP`
ops, where no MIP is built and the bound is closed-form, or "solver_error" where HiGHS itself failed: the best
placement and bound found before it), ``latency_s`` (U), ``lower_bound_s``,
``gap`` ((U - bound) / U), ``iterations``, ``solve_s`` and ``simulator_calls`` (simulator evaluations the
certificate used; they are not env steps and do not count against the budget).
Verified against brute-force enumeration of all placements on small graphs (tests/test_baselines_optimal.py).
"""
from __future__ import annotations

import json
import time
import weakref
from dataclasses import replace
from typing import Callable, Iterator

import numpy as np

from placement_gym.backends.published import TarnawskiBackend

from .base import ConstraintRows, OptimumResult, milp_or_failure
from .constraints import Constraints
from .costs import CostPlanner, describe_cost_model

#: Relative tolerance for "the bound reached the best latency" (and HiGHS's MIP gap).
REL_TOL = 1e-6


#: Above this many ops the schedule's pairwise ordering rows (N^2 of them) are left out of the MIP: the bound
#: stays valid (fewer constraints, a lower minimum) but is weaker.
MAX_OPS_FOR_PAIR_ROWS = 400
#: Above this many ops no MIP is built at all (building it alone would take longer than a planner's time limit): the
#: result is the best start placement with a closed-form lower bound (`_quick_bound`).
MAX_OPS_FOR_MIP = 3000


def _lower_bound_model(op_time: np.ndarray, edge_time: np.ndarray, edge_index: np.ndarray, boundary_s: float,
                       schedule: str, horizon_s: float, constraints: "Constraints | None" = None,
                       objective: str = "latency"):
    """The MIP of ``L(p)`` (see the module docstring): (objective c, constant, rows, integrality, bounds, x_of).

    Args:
        op_time: (N, D) seconds; edge_time: (D*D, E) seconds of edge e from device a to b in row a*D+b.
        horizon_s: an upper bound on any useful latency (big-M of the parallel schedule).
        constraints: op support (fixes ``x[i, d] = 0``) and device memory (weights + largest working set).
        objective: ``"latency"`` (`schedule` applies) or ``"throughput"`` (the busiest device or link).
    """
    n, d = op_time.shape
    constraints = constraints or Constraints.none(n, d)
    src, dst = edge_index
    e_count = src.size
    pairs = [(a, b) for a in range(d) for b in range(d) if a != b]
    # Cheapest transfer out of each producer per device pair (a valid lower bound of what is charged).
    producers = sorted(set(src.tolist()))
    cmin = {}
    for u in producers:
        out = np.flatnonzero(src == u)
        for a, b in pairs:
            cmin[u, a, b] = float(edge_time[a * d + b, out].min())

    count = 0

    def block(size: int) -> int:
        nonlocal count
        start, count = count, count + size
        return start

    x0 = block(n * d)
    r0 = block(n)
    k0 = block(e_count)
    f0 = block(2 * e_count)
    x = lambda i, dev: x0 + i * d + dev  # noqa: E731
    cost: dict[int, float] = {}
    rows = ConstraintRows()
    integer = [(x0, n * d), (r0, n)]

    for i in range(n):
        rows.add({x(i, dev): 1.0 for dev in range(d)}, 1.0, 1.0)

    # Memory: a device holds the weights of its ops plus its largest working set (m_dev >= working_i x[i, dev]).
    for dev in np.flatnonzero(np.isfinite(constraints.capacity)):
        m = block(1)
        rows.add({m: 1.0, **{x(i, int(dev)): float(constraints.weights[i]) for i in range(n)}},
                 upper=float(constraints.capacity[dev]))
        for i in range(n):
            if constraints.working[i] > 0:
                rows.add({m: 1.0, x(i, int(dev)): -float(constraints.working[i])}, lower=0.0)

    if objective == "throughput":
        # Period T >= each device's compute and each directed link's traffic (one tensor per producer and
        # device pair at its cheapest out-edge: the simulator charges at least that); submodel dispatch and the
        # split overhead only add, so T is a lower bound of the simulated period.
        t_var = block(1)
        cost[t_var] = 1.0
        for dev in range(d):
            rows.add({t_var: 1.0, **{x(i, dev): -float(op_time[i, dev]) for i in range(n)}}, lower=0.0)
        w_index = {}
        for u in producers:
            for a, b in pairs:
                w_index[u, a, b] = block(1)
        for e in range(e_count):
            u, v = int(src[e]), int(dst[e])
            for a, b in pairs:
                rows.add({w_index[u, a, b]: 1.0, x(u, a): -1.0, x(v, b): -1.0}, lower=-1.0)
        for a, b in pairs:
            link = {w_index[u, a, b]: -cmin[u, a, b] for u in producers}
            if link:
                rows.add({t_var: 1.0, **link}, lower=0.0)
        return _finish_model(count, cost, 0.0, rows, [(x0, n * d)], {w: 1.0 for w in w_index.values()},
                             x0, n, d, constraints)

    # Submodels: a root per connected same-device region; flow from roots along kept edges reaches every op.
    for e in range(e_count):
        u, v = int(src[e]), int(dst[e])
        for dev in range(d):  # kept only when both ends are on the same device
            rows.add({k0 + e: 1.0, x(u, dev): 1.0, x(v, dev): -1.0}, upper=1.0)
            rows.add({k0 + e: 1.0, x(u, dev): -1.0, x(v, dev): 1.0}, upper=1.0)
        rows.add({f0 + 2 * e: 1.0, k0 + e: -float(n)}, upper=0.0)
        rows.add({f0 + 2 * e + 1: 1.0, k0 + e: -float(n)}, upper=0.0)
    balance: list[dict[int, float]] = [{r0 + i: float(n)} for i in range(n)]
    for e in range(e_count):
        u, v = int(src[e]), int(dst[e])
        forward, backward = f0 + 2 * e, f0 + 2 * e + 1  # u -> v and v -> u
        balance[v][forward] = balance[v].get(forward, 0.0) + 1.0
        balance[u][forward] = balance[u].get(forward, 0.0) - 1.0
        balance[u][backward] = balance[u].get(backward, 0.0) + 1.0
        balance[v][backward] = balance[v].get(backward, 0.0) - 1.0
    for i in range(n):
        rows.add(balance[i], lower=1.0)  # inflow - outflow + n * root_i >= 1
    for i in range(n):
        cost[r0 + i] = boundary_s
    constant = -boundary_s

    if schedule == "sequential":
        for i in range(n):
            for dev in range(d):
                cost[x(i, dev)] = float(op_time[i, dev])
        w_index = {}
        for u in producers:
            for a, b in pairs:
                w_index[u, a, b] = block(1)
                cost[w_index[u, a, b]] = cmin[u, a, b]
        for e in range(e_count):
            u, v = int(src[e]), int(dst[e])
            for a, b in pairs:  # w >= x[u,a] + x[v,b] - 1: a consumer of u sits on b while u is on a
                rows.add({w_index[u, a, b]: 1.0, x(u, a): -1.0, x(v, b): -1.0}, lower=-1.0)
        bounds_upper = {w: 1.0 for w in w_index.values()}
        bounds_upper_s: dict[int, float] = {}
    else:
        s0 = block(n)
        c_var = block(1)
        y0 = block(e_count * len(pairs))
        cost[c_var] = 1.0
        big_m = horizon_s
        for i in range(n):  # C >= finish of every op
            rows.add({c_var: 1.0, s0 + i: -1.0, **{x(i, dev): -float(op_time[i, dev]) for dev in range(d)}}, lower=0.0)
        for dev in range(d):  # C >= the busy time of each device (implied, but tightens the LP relaxation a lot)
            rows.add({c_var: 1.0, **{x(i, dev): -float(op_time[i, dev]) for i in range(n)}}, lower=0.0)
        for e in range(e_count):
            u, v = int(src[e]), int(dst[e])
            coefficients = {s0 + v: 1.0, s0 + u: -1.0, **{x(u, dev): -float(op_time[u, dev]) for dev in range(d)}}
            for p, (a, b) in enumerate(pairs):
                y = y0 + e * len(pairs) + p
                coefficients[y] = -cmin[u, a, b]
                rows.add({y: 1.0, x(u, a): -1.0, x(v, b): -1.0}, lower=-1.0)
            rows.add(coefficients, lower=0.0)  # S_v >= S_u + t_u + transfer
        # Each device runs its ops in topological order: for ops j < i with no path between them, on the same
        # device, S_i >= S_j + t[j]. (With a path, the precedence rows imply it.)
        descendants = _descendant_sets(n, src, dst) if n <= MAX_OPS_FOR_PAIR_ROWS else []
        for i in range(n if descendants else 0):
            for j in range(i):
                if not (descendants[j] >> i) & 1:
                    for dev in range(d):
                        rows.add({s0 + i: 1.0, s0 + j: -1.0, x(i, dev): -big_m, x(j, dev): -big_m},
                                 lower=float(op_time[j, dev]) - 2 * big_m)
        bounds_upper = {y0 + k: 1.0 for k in range(e_count * len(pairs))}
        bounds_upper_s = {s0 + i: horizon_s for i in range(n)}
        bounds_upper_s[c_var] = horizon_s

    upper = {**bounds_upper, **bounds_upper_s, **{r0 + i: 1.0 for i in range(n)}, **{k0 + e: 1.0 for e in range(e_count)}}
    return _finish_model(count, cost, constant, rows, integer, upper, x0, n, d, constraints)


def _finish_model(count: int, cost: dict, constant: float, rows: "ConstraintRows", integer: list, upper_of: dict,
                  x0: int, n: int, d: int, constraints: "Constraints"):
    """Objective vector, integrality and upper bounds of the MIP (``x[i, d]`` fixed to 0 where unsupported)."""
    c = np.zeros(count)
    for index, value in cost.items():
        c[index] = value
    upper = np.full(count, np.inf)
    upper[x0:x0 + n * d] = constraints.supported.reshape(-1).astype(float)
    for index, value in upper_of.items():
        upper[index] = value
    integrality = np.zeros(count)
    for start, size in integer:
        integrality[start:start + size] = 1
    return c, constant, rows, integrality, upper, (x0, n, d)


def _quick_bound(op_time: np.ndarray, edge_index: np.ndarray, schedule: str, objective: str,
                 supported: np.ndarray) -> float:
    """A closed-form lower bound, for graphs too big for the MIP: every op at its fastest supported device
    (sum of those for a sequential latency; the longest such path or the work spread over all devices for a
    parallel one; the work spread over all devices, or the slowest single op, for throughput)."""
    fastest = np.where(supported, op_time, np.inf).min(axis=1)
    spread = float(fastest.sum()) / op_time.shape[1]
    if objective == "latency" and schedule == "sequential":
        return float(fastest.sum())
    if objective == "throughput":
        return max(spread, float(fastest.max(initial=0.0)))
    longest = fastest.copy()  # longest path with the fastest times (ops are in topological order)
    for u, v in zip(edge_index[0].tolist(), edge_index[1].tolist()):
        longest[v] = max(longest[v], longest[u] + fastest[v])
    return max(spread, float(longest.max(initial=0.0)))


def _descendant_sets(n: int, src: np.ndarray, dst: np.ndarray) -> list[int]:
    """Python-int bitsets: bit v of entry u is set when v is reachable from u (u included)."""
    children: list[list[int]] = [[] for _ in range(n)]
    for s, t in zip(src.tolist(), dst.tolist()):
        children[s].append(t)
    descendants = [0] * n
    for u in range(n - 1, -1, -1):
        bits = 1 << u
        for c in children[u]:
            bits |= descendants[c]
        descendants[u] = bits
    return descendants


def solve_optimum(
    op_time: np.ndarray,
    edge_time: np.ndarray,
    edge_index: np.ndarray,
    boundary_s: float,
    schedule: str,
    simulate: Callable[[np.ndarray], float],
    *,
    start: "list[np.ndarray] | tuple" = (),
    time_limit_s: float = 60.0,
    constraints: "Constraints | None" = None,
    objective: str = "latency",
) -> OptimumResult:
    """The placement minimising ``simulate(p)`` with a proven lower bound (see the module docstring).

    Args:
        op_time: (N, D) seconds per op per device; edge_time: (D*D, E) transfer seconds (row ``a*D+b``).
        edge_index: (2, E) producer -> consumer (topological).
        boundary_s: seconds per submodel beyond the first; schedule: ``"sequential"`` or ``"parallel"``.
        simulate: the simulated seconds per inference of a placement (the backend itself; ``inf`` if it fails).
        start: placements to simulate first (an initial upper bound: single-device, greedy...).
        time_limit_s: wall-time budget for everything (building the MIP included): the result comes back
            within it, proven or labelled with its bound.
        constraints: op support and device memory (`Constraints`); objective: ``"latency"`` or ``"throughput"``.
    """
    from scipy.optimize import Bounds

    began = time.perf_counter()
    n, d = op_time.shape
    result = OptimumResult(placement=np.zeros(n, dtype=np.int64), latency_s=np.inf, lower_bound_s=0.0,
                           status="time_limit")
    tried: set[bytes] = set()

    def consider(p: np.ndarray) -> None:
        key = p.astype(np.int64).tobytes()
        if key in tried:
            return
        tried.add(key)
        latency = float(simulate(p))
        result.simulator_calls += 1
        if latency < result.latency_s:
            result.placement, result.latency_s = p.astype(np.int64).copy(), latency

    constraints = constraints or Constraints.none(n, d)
    for dev in range(d):
        consider(np.full(n, dev, dtype=np.int64))
    for p in start:
        consider(np.asarray(p, dtype=np.int64))
    result.lower_bound_s = min(result.latency_s, _quick_bound(op_time, edge_index, schedule, objective,
                                                              constraints.supported))
    if n > MAX_OPS_FOR_MIP or not np.isfinite(result.latency_s):
        result.notes.append(f"{n} ops: above {MAX_OPS_FOR_MIP} no MIP is built; best start placement, closed-form bound"
                            if n > MAX_OPS_FOR_MIP else "no start placement is feasible; no MIP horizon")
        if n > MAX_OPS_FOR_MIP:  # it stopped for the size, not the clock; a start that meets the bound is optimal
            proven = result.latency_s <= result.lower_bound_s * (1 + REL_TOL) + 1e-15
            result.status = "optimal" if proven else "size_limit"
        result.solve_s = time.perf_counter() - began
        return result

    c, constant, rows, integrality, upper, (x0, _, _) = _lower_bound_model(
        op_time, edge_time, edge_index, boundary_s, schedule, horizon_s=result.latency_s, constraints=constraints,
        objective=objective)
    n_vars = c.size
    # The LP relaxation's optimum is a valid lower bound even if the MIP finds nothing within the time limit.
    left = time_limit_s - (time.perf_counter() - began)
    relaxed = _milp(result, c, constraints=[rows.constraint(n_vars)], integrality=np.zeros(n_vars),
                    bounds=Bounds(0, upper), options={"time_limit": max(0.1, min(0.1 * time_limit_s, left))})
    if relaxed is not None and relaxed.status == 0:
        result.lower_bound_s = max(result.lower_bound_s, min(result.latency_s, float(relaxed.fun) + constant))
    cuts = ConstraintRows()
    while True:
        remaining = time_limit_s - (time.perf_counter() - began)
        if remaining <= 0:
            result.notes.append("time limit reached before the bound met the best latency")
            break
        # Cutoff: only placements that could beat the best one found (L(p) <= sim(p) < U) are of interest.
        cutoff = ConstraintRows()
        cutoff.add({i: v for i, v in enumerate(c) if v != 0.0}, upper=result.latency_s - constant)
        constraints = [rows.constraint(n_vars), cutoff.constraint(n_vars)]
        if cuts.lower:
            constraints.append(cuts.constraint(n_vars))
        solution = _milp(result, c, constraints=constraints, integrality=integrality, bounds=Bounds(0, upper),
                         options={"time_limit": max(remaining, 0.1), "mip_rel_gap": REL_TOL, "presolve": True})
        if solution is None:  # the solver failed: keep the best placement and the bound found so far
            break
        result.iterations += 1
        if solution.status == 2:  # infeasible: no placement has L(p) <= U, so U is optimal
            result.lower_bound_s, result.status = result.latency_s, "optimal"
            break
        bound = getattr(solution, "mip_dual_bound", None)
        bound = (solution.fun if bound is None or not np.isfinite(bound) else bound) if solution.x is not None else bound
        if bound is not None and np.isfinite(bound):
            result.lower_bound_s = max(result.lower_bound_s, min(result.latency_s, float(bound) + constant))
        if solution.x is None:
            result.notes.append(f"solver stopped without a solution: {solution.message}")
            break
        placement = solution.x[x0:x0 + n * d].reshape(n, d).argmax(axis=1).astype(np.int64)
        consider(placement)
        if result.latency_s <= result.lower_bound_s * (1 + REL_TOL) + 1e-15:
            result.lower_bound_s, result.status = min(result.lower_bound_s, result.latency_s), "optimal"
            break
        if solution.status != 0:  # time limit inside the solve
            result.notes.append(f"solver: {solution.message}")
            break
        # No-good cut: exclude this placement and look for the next one below the best latency.
        cuts.add({x0 + i * d + int(dev): 1.0 for i, dev in enumerate(placement)}, upper=n - 1)
    result.solve_s = time.perf_counter() - began
    return result


def _milp(result: OptimumResult, c: np.ndarray, **problem):
    """`milp_or_failure`'s solution, or None when HiGHS failed: `result` then takes status ``"solver_error"`` and
    the failure's note, and keeps the best placement and bound found so far, as a time limit would."""
    solution, failure = milp_or_failure(c, **problem)
    if failure:
        result.status = "solver_error"
        result.notes.append(failure)
    return solution


#: Solved optima per graph (weakly) and (profile, time limit): seeds of a comparison ask the same question.
_SOLVED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class ExactOptimum(CostPlanner):
    """The exact optimum on the simulated backend's cost model (see the module docstring); measures its placement.

    Args:
        time_limit_s: seconds for the solver; past it the record reports the best placement and the bound.
        cost_profile: the device profile whose cost model is solved (`CostPlanner`); on the real backend the
            placement is then the proven optimum of that model, measured on the real devices (not a real optimum).
    """

    name = "optimal"

    def __init__(self, time_limit_s: float = 60.0, cost_profile: "str | None" = None) -> None:
        super().__init__(cost_profile)
        self.time_limit_s = time_limit_s
        self.warm_starts: list[tuple[str, np.ndarray]] = []

    def warm_start(self, placements) -> None:
        """Placements found by others (``(label, placement)`` pairs; `placement_gym.evaluation.TakesWarmStarts`):
        when the time limit stops the solver, the best of its own and these is returned (and said so), so the
        optimum never reports a placement slower than one it was shown. They do not change a proven optimum."""
        self.warm_starts = [(str(label), np.asarray(p, dtype=np.int64).copy()) for label, p in placements]

    def hyperparameters(self) -> dict:
        return {"time_limit_s": self.time_limit_s, **super().hyperparameters()}

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        from .greedy import etf_schedule, topo_balance

        base = env.unwrapped
        backend, graph = base.backend, base.graph
        if isinstance(backend, TarnawskiBackend) and self.profile is None:
            yield self._tarnawski(backend, graph)
            return
        # On real hardware no solver certifies an optimum: with cost_profile it is the optimum of that cost model.
        backend = self.planning_backend(env)
        from .dp import contiguous_dp

        costs = self.cost_model(env)
        schedule, objective = backend.profile.schedule, backend.objective
        key = (json.dumps(backend.profile.to_dict(), sort_keys=True, default=str), objective, self.time_limit_s)

        def solve() -> OptimumResult:
            began = time.perf_counter()
            start = [topo_balance(costs), contiguous_dp(backend, graph)[0]]
            if graph.n_ops <= MAX_OPS_FOR_MIP:  # m-ETF's list scheduling is slow on bigger graphs
                start.append(etf_schedule(graph.edge_index, costs)[0])
            return solve_optimum(
                backend.prepare(graph).op_seconds, backend.prepare(graph).edge_seconds, graph.edge_index,
                costs.submodel_overhead_s, schedule, lambda p: backend.measure(graph, p).latency_s, start=start,
                time_limit_s=self.time_limit_s - (time.perf_counter() - began),
                constraints=Constraints.of(backend, graph), objective=objective,
            )

        yield self._plan(backend, graph, key, solve, lambda result: "solver",
                         {"method": "MIP lower bound (HiGHS) + no-good certificate loop", "schedule": schedule,
                          "objective": objective, "cost_model": describe_cost_model(env, backend)})

    def _tarnawski(self, backend: TarnawskiBackend, graph) -> np.ndarray:
        """Their max-load optimum over all placements (`agents.baselines.tarnawski_optimum`), started from their
        DP's split (solved once per graph, `agents.baselines.tarnawski_dp`), so it is never worse than the DP."""
        from .tarnawski_dp import tarnawski_dp
        from .tarnawski_optimum import tarnawski_optimum

        if backend.objective != "throughput":
            raise ValueError("on Tarnawski et al.'s inputs the exact optimum is solved for their max-load "
                             "(objective='throughput'); for their latency model use the dp baseline")

        def solve() -> OptimumResult:
            return tarnawski_optimum(graph, graph.costs, self.time_limit_s, start=tarnawski_dp(graph, graph.costs)[0],
                                     backend=backend)

        return self._plan(backend, graph, ("tarnawski", self.time_limit_s), solve,
                          lambda result: "dp" if result.notes else "solver",
                          {"method": "MIP of their max-load over all placements (HiGHS), started from their DP",
                           "schedule": "max-load", "objective": "throughput"})

    def _plan(self, backend, graph, key: tuple, solve: Callable[[], OptimumResult],
              solver_source: Callable[[OptimumResult], str], method: dict) -> np.ndarray:
        """The placement of `solve()` (run once per graph and `key`: `_SOLVED`) or, when the solver did not prove
        it optimal, of a faster warm start (`warm_start`); records `plan_info`: `method`, the result, whether the
        solve was reused, how many warm starts were given and where the placement came from (a warm start's
        label, else `solver_source` of the result)."""
        solved = _SOLVED.setdefault(graph, {})
        cached = key in solved
        if not cached:
            solved[key] = solve()
        result, source = solved[key], None
        if result.status != "optimal":
            for label, placement in self.warm_starts:
                m = backend.measure(graph, placement)
                if m.ok and m.latency_s < result.latency_s * (1 - REL_TOL):
                    result, source = replace(result, placement=placement.copy(), latency_s=m.latency_s), label
        self.plan_info = {**method, **result.info(), "reused_earlier_solve": cached,
                          "warm_starts": len(self.warm_starts), "best_from": source or solver_source(result)}
        return result.placement.copy()
