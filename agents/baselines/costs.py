"""The per-op cost model the planning baselines (greedy, topo, dp, METIS, optimum) plan with, and where it comes from.

Tarnawski et al. and Baechi plan on the same abstraction the simulated backend runs: a time per op per device,
a transfer time per edge that crosses devices, and (the simulator's HETERO term) a fixed cost per extra
submodel. `cost_model(env)` reads it off the env's backend: the simulated backend's own precomputed tables, so
planners and simulator agree exactly. On a published benchmark (`placement_gym.backends.published`) it is the
file's per-op times and per-edge transfer costs (an estimate for these planners: their objectives are not sums).
The real OpenVINO backend has no cost model of its own: a planner on it plans on a device profile given as its
``cost_profile`` setting (`CostPlanner`: a preset name or a profile JSON, typically one measured on these very
devices with ``placement-gym calibrate``), whose simulated tables `cost_model` builds for the env's graph; the
planned placement is then measured on the real devices like any other (results say which cost model planned it).
The real backend does measure each op on each device alone (its per-op profile, ``node_device_cost``), which is
all `op_times` (what `cheapest` plans with) needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from placement_gym.backends.base import describe_devices, shareable_devices
from placement_gym.backends.profiles import Profile
from placement_gym.backends.published import planning_tables
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.env import UNSUPPORTED_COST_S

from .base import PlanningAgent

#: The planner setting that names the device profile a planner plans on (`CostPlanner`).
COST_PROFILE = "cost_profile"


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


def planning_backend(env, profile: "Profile | None" = None) -> SimulatedBackend:
    """The simulated backend whose tables a planner plans on for `env`: one built from `profile` (on any env; the
    env's objective), else the env's own backend when it is simulated.

    The profile's devices stand for the env's: by name where they are the same devices (a profile calibrated on
    them, in any order), else in order. Its device count must equal the env's.

    Raises:
        ValueError: no profile and a backend with no cost model (the real OpenVINO backend), naming the
            ``cost_profile`` setting; or a profile with another number of devices.
    """
    base = env.unwrapped
    backend = base.backend
    if profile is None:
        if isinstance(backend, SimulatedBackend):
            return backend
        raise ValueError(
            f"the {backend.name!r} backend has no cost model to plan with; give the planner a device profile to plan "
            f"on, {COST_PROFILE}=FILE.json (measured on these devices with `placement-gym calibrate`) or a preset "
            f"name (--agent-option {COST_PROFILE}=...), and its placement is measured on the real devices; or use "
            "backend='simulated'"
        )
    names = list(base.device_names)
    if len(profile.devices) != len(names):
        raise ValueError(
            f"{COST_PROFILE} {profile.name!r} describes {len(profile.devices)} device(s) {profile.device_names} but "
            f"the env has {len(names)} {names}; give a profile of the env's devices (`placement-gym calibrate "
            "--devices ...`)"
        )
    if sorted(profile.device_names) == sorted(names):
        profile = profile.select(names)
    return SimulatedBackend(profile, objective=base.objective)


def cost_model(env, profile: "Profile | None" = None) -> CostModel:
    """The cost model of `env`'s graph on its devices: from `profile` where given (`planning_backend`), else read
    from the env's backend.

    The simulated backend precomputes exactly these tables per graph (``backend.prepare(graph)``: per-op seconds
    per device, per-edge transfer seconds per device pair) and its profile holds the submodel overhead; the
    planners use them as they are, so they plan on the very numbers the simulator charges.

    Raises:
        ValueError: no profile and a backend with no cost model (the real OpenVINO backend), saying what to give
            (`planning_backend`).
    """
    base = env.unwrapped
    backend, graph = base.backend, base.graph
    published = planning_tables(backend, graph) if profile is None else None
    if published is not None:  # a published benchmark's own cost model (Tarnawski et al., DOPPLER)
        op_seconds, edge_seconds = published
        return CostModel(op_time_s=np.where(np.isfinite(op_seconds), op_seconds, UNSUPPORTED_COST_S),
                         edge_time_s=edge_seconds, source=backend.describe()["profile"])
    planner = planning_backend(env, profile)
    prepared = planner.prepare(graph)
    d = prepared.op_seconds.shape[1]
    edge_time = prepared.edge_seconds.T.reshape(graph.n_edges, d, d).copy()  # row a*D+b -> [e, a, b]
    edge_time[:, np.arange(d), np.arange(d)] = 0.0  # an edge inside one device's region costs nothing
    return CostModel(
        # A device that cannot run an op is priced out of it (1 s per op), so planners keep ops where they run; so
        # is a device outside HETERO (`shareable_devices`): its whole-model candidate is measured apart (`standalone_devices`).
        op_time_s=np.where(prepared.supported & shareable_devices(planner), prepared.op_seconds,
                           UNSUPPORTED_COST_S).astype(np.float64),
        edge_time_s=edge_time,
        submodel_overhead_s=float(planner.profile.boundary_overhead_s),
        source=describe_cost_model(env, planner),
    )


def describe_cost_model(env, planner: SimulatedBackend) -> str:
    """What a planner planned on, for results files: the profile, and, where the env measures elsewhere, that the
    plan is the profile's and the latency the env's backend's."""
    profile = planner.profile
    text = f"simulated profile {profile.name!r} ({profile.schedule} schedule)"
    backend = env.unwrapped.backend
    if planner is not backend:
        names = list(env.unwrapped.device_names)
        stand_in = "" if profile.device_names == names else f", its devices {profile.device_names} standing for {names}"
        text += (f", given as {COST_PROFILE}{stand_in}; planned on the profile, measured on the {backend.name!r} "
                 "backend")
    return text


class CostPlanner(PlanningAgent):
    """A planner that plans on a cost model (`cost_model`, `planning_backend`).

    Args:
        cost_profile: the device profile to plan on, a preset name or a profile JSON path (checked and read when the
            planner is built); ``None``: the env's own cost model (the simulated backend, a published benchmark).
            On the real OpenVINO backend it is required: the plan comes from the profile, its latency from the
            real devices.
    """

    def __init__(self, cost_profile: "str | Path | None" = None) -> None:
        super().__init__()
        if cost_profile is not None and not isinstance(cost_profile, (str, Path)):
            raise TypeError(f"{COST_PROFILE} must be a preset name or a profile JSON path, got "
                            f"{type(cost_profile).__name__}")
        self.cost_profile = None if cost_profile is None else str(cost_profile)
        self.profile = None if cost_profile is None else Profile.resolve(self.cost_profile)

    def hyperparameters(self) -> dict[str, Any]:
        return {} if self.cost_profile is None else {COST_PROFILE: self.cost_profile}

    def planning_backend(self, env) -> SimulatedBackend:
        return planning_backend(env, self.profile)

    def cost_model(self, env) -> CostModel:
        return cost_model(env, self.profile)

    def plan_candidates(self, env, budget: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
        return standalone_devices(env, self.candidates(env, budget, rng))


def standalone_devices(env, candidates: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    """`candidates` of a planner that mixes devices, with the whole model on each device outside HETERO (the NPU,
    `SimulatedBackend.hetero_devices`) as a candidate of its own: the planner's first candidate and those, cheapest
    first where the env's backend is simulated (it prices them; elsewhere the planner's comes first), then the
    planner's others. Nothing changes where every device is a HETERO device."""
    backend, graph = env.unwrapped.backend, env.unwrapped.graph
    alone = np.flatnonzero(~shareable_devices(backend)).tolist()
    if not alone:
        yield from candidates
        return
    first = next(iter(candidates), None)
    wholes = [np.full(graph.n_ops, j, dtype=np.int64) for j in alone]
    ranked = ([] if first is None else [np.asarray(first, dtype=np.int64)]) + wholes
    if isinstance(backend, SimulatedBackend):  # the cost model prices them for free; a real backend measures in order
        ranked.sort(key=lambda p: backend.measure(graph, p).latency_s)
    yield from ranked
    yield from candidates


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
