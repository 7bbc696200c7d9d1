"""The per-op cost model the planning baselines (greedy, METIS, optimum) plan with.

Tarnawski et al. and Baechi plan on the same abstraction the simulated backend runs: a time per op per device,
a transfer time per edge that crosses devices, and (the simulator's HETERO term) a fixed cost per extra
submodel. `cost_model(env)` reads it off the env's backend: the simulated backend's own precomputed tables, so
planners and simulator agree exactly. On a published benchmark (`placement_gym.backends.published`) it is the
file's per-op times and per-edge transfer costs (an estimate for these planners: their objectives are not sums).
The real OpenVINO backend has no cost model; planning on it needs one
built from a device profile (see `cost_model`). It does measure each op on each device alone (its per-op profile,
``node_device_cost``), which is all `op_times` (what `cheapest` plans with) needs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_gym.backends.base import describe_devices
from placement_gym.backends.published import planning_tables
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.env import UNSUPPORTED_COST_S


@dataclass(frozen=True)
class CostModel:
    """Costs of one graph on D devices.

    Attributes:
        op_time_s: (N, D) seconds op ``i`` takes on device ``d``.
        edge_time_s: (E, D, D) seconds to move edge ``e``'s tensor from device ``a`` to device ``b``
            (zero on the diagonal).
        submodel_overhead_s: seconds each submodel beyond the first adds.
        source: where the numbers come from (for results files).
    """

    op_time_s: np.ndarray
    edge_time_s: np.ndarray
    submodel_overhead_s: float = 0.0
    source: str = ""

    @property
    def n_devices(self) -> int:
        return int(self.op_time_s.shape[1])

    def device_speed(self) -> np.ndarray:
        """(D,) relative throughput: 1 / (time of the whole graph on device d), normalised to sum to 1."""
        inverse = 1.0 / np.maximum(self.op_time_s.sum(axis=0), 1e-30)
        return inverse / inverse.sum()


def cost_model(env) -> CostModel:
    """The cost model of `env`'s graph on its devices, read from its backend.

    The simulated backend precomputes exactly these tables per graph (``backend.prepare(graph)``: per-op seconds
    per device, per-edge transfer seconds per device pair) and its profile holds the submodel overhead; the
    planners use them as they are, so they plan on the very numbers the simulator charges.

    Raises:
        ValueError: the backend has no cost model (the real OpenVINO backend), saying what to use instead.
    """
    base = env.unwrapped
    backend, graph = base.backend, base.graph
    published = planning_tables(backend, graph)
    if published is not None:  # a published benchmark's own cost model (Tarnawski et al., DOPPLER)
        op_seconds, edge_seconds = published
        return CostModel(op_time_s=np.where(np.isfinite(op_seconds), op_seconds, UNSUPPORTED_COST_S),
                         edge_time_s=edge_seconds, source=backend.describe()["profile"])
    if not isinstance(backend, SimulatedBackend):
        raise ValueError(
            f"the {backend.name!r} backend has no cost model to plan with; the greedy, topo and optimal baselines "
            "plan on the simulated backend's cost model (backend='simulated', or a profile calibrated on your "
            "devices with `placement-gym calibrate`)"
        )
    prepared = backend.prepare(graph)
    d = prepared.op_seconds.shape[1]
    edge_time = prepared.edge_seconds.T.reshape(graph.n_edges, d, d).copy()  # row a*D+b -> [e, a, b]
    edge_time[:, np.arange(d), np.arange(d)] = 0.0  # an edge inside one device's region costs nothing
    profile = backend.profile
    return CostModel(
        # A device that cannot run an op is priced out of it (1 s per op), so planners keep ops where they run.
        op_time_s=np.where(prepared.supported, prepared.op_seconds, UNSUPPORTED_COST_S).astype(np.float64),
        edge_time_s=edge_time,
        submodel_overhead_s=float(profile.boundary_overhead_s),
        source=f"simulated profile {profile.name!r} ({profile.schedule} schedule)",
    )


def op_times(env) -> tuple[np.ndarray, str]:
    """``(seconds (N, D), source)``: op ``i`` alone on device ``d``, `UNSUPPORTED_COST_S` where ``d`` cannot run
    it. From `cost_model` where the backend has one; else (the real OpenVINO backend) the backend's own per-op
    costs (``node_device_cost``: measured by profiling each op on each device alone), which is all a planner that
    ignores transfers needs."""
    base = env.unwrapped
    backend = base.backend
    if isinstance(backend, SimulatedBackend) or planning_tables(backend, base.graph) is not None:
        costs = cost_model(env)
        return costs.op_time_s, costs.source
    cost = describe_devices(backend, base.graph)[2]
    return np.where(np.isfinite(cost), cost, UNSUPPORTED_COST_S), f"the {backend.name!r} backend's per-op costs"
