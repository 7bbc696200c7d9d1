"""The exact max-load optimum of a Tarnawski et al. input over all placements, contiguous or not (their
``throughput-ip/ip.py noncontig``, solved here with SciPy's HiGHS instead of Gurobi).

Variables: ``x[c, d]`` = colour class c on device d (binary; a class shares one device), the max-load ``L``, and for
each op u whose output has a cost and each accelerator d: ``send[u, d]`` (u is on d and some consumer is not) and
``recv[u, d]`` (u is not on d and some consumer is). Minimise ``L`` subject to::

    sum_d x[c, d] = 1;  x[c, d] = 0 where an op of c cannot run on accelerator d
    send[u, d] >= x[u, d] - x[v, d],  recv[u, d] >= x[v, d] - x[u, d]      for every edge u -> v
    accelerator d: sum_i fpga_i x[i, d] + sum_u cost_u (send[u, d] + recv[u, d]) <= L;  sum_i size_i x[i, d] <= M
    CPU d:         sum_i cpu_i x[i, d] <= L

Minimising ``L`` drives ``send``/``recv`` to exactly the indicator they stand for where it matters, so the optimum of
the program is the optimum of `placement_gym.backends.published.TarnawskiBackend`'s max-load. Accelerators are
interchangeable, so the classes are assigned to them in order of first use (a symmetry cut). A time limit leaves the
best placement found and HiGHS's bound.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.optimize import Bounds

from placement_gym.backends.published import TarnawskiBackend
from placement_gym.models.published import TarnawskiCosts

from .base import ConstraintRows, OptimumResult, milp_or_failure


def tarnawski_optimum(graph, costs: TarnawskiCosts, time_limit_s: float = 60.0,
                      start: np.ndarray | None = None, backend: "TarnawskiBackend | None" = None) -> OptimumResult:
    """The max-load optimum (ms converted to seconds in the result) of `graph`; `start` ((N,) placement, e.g. the
    DP's) is returned instead when the solver stops with nothing better. Placements are priced by `backend` (the
    caller's max-load backend of `costs`' devices; None: one is built)."""
    devices = (costs.n_accelerators, costs.n_cpus)
    if backend is None:
        backend = TarnawskiBackend(*devices, "throughput")
    elif backend.objective != "throughput" or (backend.n_accelerators, backend.n_cpus) != devices:
        raise ValueError(f"backend prices {backend.objective!r} on {backend.n_accelerators} accelerators and "
                         f"{backend.n_cpus} CPUs; expected the max-load ('throughput') backend of {devices[0]} and "
                         f"{devices[1]}, the input's devices")
    began = time.perf_counter()
    n, a, c_cpu = graph.n_ops, costs.n_accelerators, costs.n_cpus
    d = a + c_cpu
    _, cls = np.unique(costs.color_class, return_inverse=True)
    k = int(cls.max()) + 1
    src, dst = graph.edge_index
    producers = np.unique(src[costs.out_cost_ms[src] > 0])
    p_index = {int(u): i for i, u in enumerate(producers)}
    n_x, n_p = k * d, producers.size * a
    n_var = n_x + 2 * n_p + 1  # x, send, recv, L
    L = n_var - 1

    def x(c: int, dev: int) -> int:
        return c * d + dev

    rows = ConstraintRows()
    for c in range(k):
        rows.add({x(c, dev): 1.0 for dev in range(d)}, 1.0, 1.0)
    acc_work = np.bincount(cls, weights=costs.accelerator_ms, minlength=k)
    cpu_work = np.bincount(cls, weights=costs.cpu_ms, minlength=k)
    size = np.bincount(cls, weights=costs.size_bytes, minlength=k)
    forbidden = np.bincount(cls, weights=~costs.on_accelerator, minlength=k) > 0
    for u, v in zip(src.tolist(), dst.tolist()):
        if u not in p_index or cls[u] == cls[v]:
            continue
        for dev in range(a):
            send = n_x + p_index[u] * a + dev
            recv = n_x + n_p + p_index[u] * a + dev
            rows.add({send: 1.0, x(cls[u], dev): -1.0, x(cls[v], dev): 1.0}, 0.0, np.inf)
            rows.add({recv: 1.0, x(cls[v], dev): -1.0, x(cls[u], dev): 1.0}, 0.0, np.inf)
    cost = costs.out_cost_ms[producers]
    for dev in range(a):
        load = {x(c, dev): float(acc_work[c]) for c in range(k)}
        load.update({n_x + i * a + dev: float(cost[i]) for i in range(producers.size)})
        load.update({n_x + n_p + i * a + dev: float(cost[i]) for i in range(producers.size)})
        rows.add({**load, L: -1.0}, -np.inf, 0.0)
        if np.isfinite(costs.memory_bytes):
            rows.add({x(c, dev): float(size[c]) for c in range(k)}, -np.inf, costs.memory_bytes)
    for dev in range(a, d):
        rows.add({**{x(c, dev): float(cpu_work[c]) for c in range(k)}, L: -1.0}, -np.inf, 0.0)
    # Symmetry: class c may open accelerator j only if some earlier class uses accelerator j - 1.
    for c in range(k):
        for dev in range(1, a):
            rows.add({x(c, dev): 1.0, **{x(e, dev - 1): -1.0 for e in range(c)}}, -np.inf, 0.0)
    upper = np.ones(n_var)
    upper[L] = np.inf
    for c in np.flatnonzero(forbidden):
        for dev in range(a):
            upper[x(c, dev)] = 0.0
    integrality = np.zeros(n_var)
    integrality[:n_x] = 1
    objective = np.zeros(n_var)
    objective[L] = 1.0
    result, failure = milp_or_failure(objective, integrality=integrality, bounds=Bounds(np.zeros(n_var), upper),
                                      constraints=rows.constraint(n_var),
                                      options={"time_limit": max(1.0, time_limit_s), "mip_rel_gap": 1e-9})
    bound = getattr(result, "mip_dual_bound", None)  # none, or nan, when the solver stopped without one
    bound_ms = float(bound) if bound is not None and np.isfinite(bound) else 0.0
    placement = None
    if result is not None and result.x is not None:
        chosen = result.x[:n_x].reshape(k, d).argmax(axis=1)
        placement = chosen[cls].astype(np.int64)
    return _result(graph, backend, placement, start, result, bound_ms, time.perf_counter() - began, failure)


def _result(graph, backend: TarnawskiBackend, placement, start, result, bound_ms: float,
            solve_s: float, failure: str | None = None) -> OptimumResult:
    """The `OptimumResult` of the solve: the better of its placement and `start`, priced by `backend`
    (`result`: SciPy's, None where the solver failed, `failure` saying how)."""

    def price(p):
        m = backend.measure(graph, p) if p is not None else None
        return m.latency_s if m is not None and m.ok else np.inf

    found, shown = price(placement), price(start)
    calls = (placement is not None) + (start is not None)
    notes = [failure] if failure else []
    if shown < found:
        placement, found = start.copy(), shown
        notes.append("the solver found nothing better than the start placement")
    proven = result is not None and result.status == 0
    lower = found if proven else max(0.0, bound_ms / 1e3)
    status = "solver_error" if failure else "optimal" if proven else "time_limit"
    return OptimumResult(placement=placement, latency_s=found, lower_bound_s=min(lower, found), status=status,
                         iterations=int(result is not None), simulator_calls=calls, solve_s=solve_s, notes=notes)
