"""Replicate: OpenVINO's own way to use every device for throughput, beside which a pipeline placement is judged.

With ``AUTO`` and ``PERFORMANCE_HINT=CUMULATIVE_THROUGHPUT`` OpenVINO compiles the *whole* model on every device
(each with the ``THROUGHPUT`` hint) and spreads the inference requests over them. Nothing is placed: every device
holds a replica. That is what a user would do instead of cutting the model into a pipeline, so a throughput table
shows it beside the placements (the ``replicate`` baseline, `agents.baselines.replicate`).

`replicated_measurement(backend, graph)` gives its seconds per inference under the backend's objective:

* ``"throughput"``: the requests of all replicas in flight at once. The real OpenVINO backend times exactly that
  (`placement_gym.backends.openvino.OpenVINOBackend.measure_replicated`: each device compiled alone, requests kept
  in flight on every one, wall time / inferences completed). Any other backend (the simulated one, a published
  cost model, a user's own) has no replicas to run, so it prices them: ``1 / sum_d (1 / T_d)``, T_d the price of
  the all-on-d placement (``backend.measure(graph, np.full(n, d))``) under the throughput objective: devices
  working side by side on different requests add their throughputs.
* ``"latency"``: one request at a time runs on one replica, so replicate is the best single device (the fastest
  all-on-d placement); the same rule for every backend.

A device that cannot run the whole graph alone (an op it does not support, a model bigger than its memory: the
all-on-d placement fails) holds no replica and is left out; when no device can, the measurement fails.

The measurement's ``breakdown`` names the replicas: ``"replica_s:<device>"`` per device holding one (throughput,
priced: its T_d; timed: the wall time over the inferences that device completed; latency: its own latency) and
``"replicas"``, their count; `replicas` reads them back.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..graph import ComputationGraph
from .base import Backend, Measurement

__all__ = ["HOW", "REPLICA_KEY", "combine", "how_measured", "replicas", "replicated_measurement",
           "single_device_measurements"]

#: What replicate stands for (records, tables, docs).
HOW = "OpenVINO's AUTO with PERFORMANCE_HINT=CUMULATIVE_THROUGHPUT"
#: Breakdown key prefix of one replica's seconds per inference.
REPLICA_KEY = "replica_s:"


def replicated_measurement(backend: Backend, graph: ComputationGraph) -> Measurement:
    """Seconds per inference of `graph` replicated on every device of `backend` that runs it alone, under the
    backend's objective (module docstring): timed by the backend where it can run replicas (the OpenVINO
    backend's ``measure_replicated``), else priced from its single-device measurements (`combine`)."""
    measure_replicated = getattr(backend, "measure_replicated", None)
    if measure_replicated is not None:
        return measure_replicated(graph)
    names = list(backend.device_names)
    return combine(names, single_device_measurements(backend, graph), getattr(backend, "objective", "latency"),
                   simulated=bool(backend.simulated))


def how_measured(backend: Backend) -> str:
    """How `replicated_measurement` gets its figure on `backend` under its objective, in one line."""
    if getattr(backend, "objective", "latency") == "latency":
        return "the fastest all-on-d placement (one request at a time runs on one replica)"
    if getattr(backend, "measure_replicated", None) is not None:
        return ("timed: each replica compiled alone, requests kept in flight on all of them at once, wall time / "
                "inferences completed")
    return "priced: 1 / sum_d (1 / T_d), T_d the all-on-d placement's seconds per inference"


def single_device_measurements(backend: Backend, graph: ComputationGraph) -> list[Measurement]:
    """``backend.measure`` of each all-on-d placement of `graph`, in device order (a device that cannot run the
    graph alone gives a failed measurement)."""
    return [backend.measure(graph, np.full(graph.n_ops, d, dtype=np.int64)) for d in range(len(backend.device_names))]


def combine(device_names: Sequence[str], singles: Sequence[Measurement], objective: str, *,
            simulated: bool) -> Measurement:
    """Replicate from the single-device measurements `singles` (one per device of `device_names`): throughput
    ``1 / sum_d (1 / T_d)``, latency ``min_d T_d``, over the devices whose all-on-d placement worked; a failed
    measurement naming each device's error when none did."""
    ok = [(name, m) for name, m in zip(device_names, singles) if m.ok and np.isfinite(m.latency_s) and m.latency_s > 0]
    if not ok:
        reasons = "; ".join(f"{name}: {m.error}" for name, m in zip(device_names, singles))
        return Measurement.failure(f"replicate: no device runs the whole graph alone ({reasons})",
                                   simulated=simulated, objective=objective)
    seconds = np.array([m.latency_s for _, m in ok], dtype=np.float64)
    per_inference = float(1.0 / np.sum(1.0 / seconds)) if objective == "throughput" else float(seconds.min())
    breakdown = {f"{REPLICA_KEY}{name}": float(m.latency_s) for name, m in ok}
    return Measurement(latency_s=per_inference, simulated=simulated, objective=objective, n_submodels=1,
                       compile_s=float(sum(m.compile_s for _, m in ok)),
                       breakdown={**breakdown, "replicas": float(len(ok))})


def replicas(measurement: Measurement) -> dict[str, float]:
    """Device name -> seconds per inference of its replica, from a replicated measurement's breakdown (empty for
    a failed one)."""
    breakdown: Mapping[str, float] = measurement.breakdown
    return {key[len(REPLICA_KEY):]: float(value) for key, value in breakdown.items() if key.startswith(REPLICA_KEY)}
