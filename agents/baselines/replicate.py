"""Replicate: the whole model on every device, requests spread over them: what a user runs for throughput instead
of a pipeline placement (OpenVINO's ``AUTO`` with ``PERFORMANCE_HINT=CUMULATIVE_THROUGHPUT``;
`placement_gym.backends.replicate`).

Replicate is not a placement (every device holds the whole model), so its record says what it is:

* ``latency_s`` (and ``speedup_vs_reference``, ``latency_reduction_pct``): the replicated seconds per inference
  (`replicated_measurement`, measured after the run like any agent's final placement, outside the budget);
  under the latency objective one request runs at a time, so that is the best single device;
* ``placements_measured``: the single-device placements it measured through the env (each device alone, in
  device order, within the budget): the candidates for a replica;
* ``placement`` / ``predict_placement``: its plan, the fastest single device it measured (what one replica runs;
  ``predict_latency_s`` is that device alone);
* ``extra["plan"]``: ``replicate`` (one line: the devices holding a replica, requests spread over them),
  ``how`` (timed by the backend or priced from the single devices), ``replicas`` (device -> seconds per inference
  of its replica), ``left_out`` (device -> why it holds none), ``best_single_device`` (the plan's device) and
  ``objective``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np

from placement_gym.backends.replicate import HOW, how_measured, replicas, replicated_measurement
from placement_gym.vector_env import DevicePlacementVectorEnv

from .base import PlanningAgent

__all__ = ["Replicate"]


class Replicate(PlanningAgent):
    """The whole model on every device that runs it alone, requests spread over them (module docstring).
    Measures each device alone (at most one placement per device); its result is the replicated figure."""

    name = "replicate"

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        base = env.unwrapped
        for d in range(base.n_devices):
            yield np.full(base.graph.n_ops, d, dtype=np.int64)

    def train(self, run, seed) -> None:
        if run.many_graphs:
            raise ValueError("replicate measures one model at a time (its figure is the model's own); give the env "
                             "one model")
        super().train(run, seed)

    def learn(self, env, budget: int, seed: int | None = None, callback=None) -> "Replicate":
        """The run loop's `learn` (each device alone, within `budget`), then the replicated measurement in place
        of the final one (module docstring)."""
        super().learn(env, budget, seed, callback)
        base = (env.envs[0] if isinstance(env, DevicePlacementVectorEnv) else env).unwrapped
        measured = replicated_measurement(base.backend, base.graph)
        objective = getattr(base.backend, "objective", "latency")
        held = replicas(measured)
        if not held:
            what = "replicate: no device runs the whole model alone"
        elif objective == "throughput":
            what = (f"replicate: whole model on {len(held)} device(s) ({', '.join(held)}), requests spread over them "
                    f"(as {HOW})")
        else:
            what = (f"replicate under the latency objective: one request at a time, so the best single device "
                    f"({min(held, key=held.get)}-only)")
        left_out = {name: _why(base, d) for d, name in enumerate(base.device_names) if name not in held}
        self.plan_info = {"replicate": what, "how": how_measured(base.backend), "objective": objective,
                          "replicas": held, "left_out": left_out,
                          "best_single_device": base.device_names[int(np.bincount(self.plan).argmax())]}
        if not measured.ok:
            self.plan_info["error"] = measured.error
        summary = self.run_summary
        self.run_summary = replace(summary, final=measured, details={**summary.details, **self.plan_info})
        self.best_latency_s = self.run_summary.latency_s
        return self


def _why(base, device: int) -> str:
    """Why `device` holds no replica: its all-on-d placement's error (the backend's measurement cache, where it
    keeps one, has it from the run)."""
    m = base.backend.measure(base.graph, np.full(base.graph.n_ops, device, dtype=np.int64))
    return m.error or "its replica completed no inference while timed"
