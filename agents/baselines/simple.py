"""Baselines that need no cost model: one device, random search, and OpenVINO's own device choice."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from placement_gym.backends.openvino import OpenVINOBackend

from .base import PlanningAgent


def resolve_device(env, device: "int | str") -> int:
    """Index of `device` (an index or a device name such as ``"GPU"``) among the env's devices."""
    names = env.unwrapped.device_names
    if isinstance(device, (int, np.integer)):
        if not 0 <= device < len(names):
            raise ValueError(f"device index {device} is out of range; the env has devices {names}")
        return int(device)
    if device in names:
        return names.index(device)
    raise ValueError(f"unknown device {device!r}; the env has devices {names}")


class SingleDevice(PlanningAgent):
    """Every op on one device (the paper's CPU-only / GPU-only rows). Measures one placement.

    Args:
        device: the device's index or name (``0``, ``"CPU"``, ``"GPU"``).
    """

    name = "single-device"

    def __init__(self, device: "int | str" = 0) -> None:
        super().__init__()
        self.device = device

    def hyperparameters(self) -> dict:
        return {"device": self.device}

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        d = resolve_device(env, self.device)
        self.plan_info = {"device": env.unwrapped.device_names[d]}
        yield np.full(env.unwrapped.graph.n_ops, d, dtype=np.int64)


class RandomSearch(PlanningAgent):
    """`budget` placements drawn uniformly at random (each op on each device with equal chance); keeps the best.

    The honest floor for a learned agent with the same budget.
    """

    name = "random"

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        for _ in range(max(budget, 1)):
            # Read the graph at each draw: a multi-graph env draws another graph at each reset.
            n, d = env.unwrapped.graph.n_ops, env.unwrapped.n_devices
            yield rng.integers(0, d, size=n, dtype=np.int64)


#: OpenVINO AUTO's device preference when it is given no list (GPU, then NPU, then CPU), as documented for the
#: AUTO plugin; used where OpenVINO cannot be asked (the simulated backend's devices).
AUTO_PRIORITY = ("GPU", "NPU", "CPU")


class OpenVINOChoice(PlanningAgent):
    """What OpenVINO does without manual affinity (the paper's "OpenVINO-CPU/GPU" rows). Measures one placement.

    Args:
        policy: ``"hetero"``: the op-to-device map ``HETERO:<devices in env order>`` builds by itself
            (``query_model``: each op goes to the first listed device that supports it), measured as a
            placement; ``"auto"``: the one device the ``AUTO`` plugin picks, every op on it.

    On the real OpenVINO backend OpenVINO is asked (through the backend's ``core``). On the simulated backend
    there is no real device to ask, so the choice is derived from OpenVINO's documented rules: every simulated
    device supports every op, so HETERO puts the whole model on the first device, and AUTO picks by its
    priority list (`AUTO_PRIORITY`: a GPU before a CPU). The record says which way it was obtained
    (``plan_info["how"]``). Either way this equals one of the single-device rows: on a machine where
    all devices support all ops, OpenVINO never splits a model by itself.
    """

    name = "openvino"
    POLICIES = ("hetero", "auto")

    def __init__(self, policy: str = "auto") -> None:
        super().__init__()
        if policy not in self.POLICIES:
            raise ValueError(f"policy must be one of {self.POLICIES}, got {policy!r}")
        self.policy = policy

    def hyperparameters(self) -> dict:
        return {"policy": self.policy}

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        base = env.unwrapped
        backend, graph = base.backend, base.graph
        if isinstance(backend, OpenVINOBackend) and graph.model is not None:
            placement, how = self._ask_openvino(backend, graph)
        else:
            placement, how = self._by_rule(base), "derived from OpenVINO's documented rules (simulated devices)"
        counts = np.bincount(placement, minlength=base.n_devices)
        self.plan_info = {"policy": self.policy, "how": how,
                          "ops_per_device": dict(zip(base.device_names, counts.tolist()))}
        yield placement

    def _ask_openvino(self, backend, graph) -> tuple[np.ndarray, str]:
        ov_names = [d.ov_name for d in backend.devices]
        index_of_op = {name: i for i, name in enumerate(graph.op_names)}
        if self.policy == "hetero":
            target = "HETERO:" + ",".join(ov_names)
            assignment = backend.core.query_model(graph.model, target)
            placement = np.zeros(graph.n_ops, dtype=np.int64)
            for op_name, device in assignment.items():
                if op_name in index_of_op:
                    placement[index_of_op[op_name]] = ov_names.index(device)
            return placement, f"core.query_model(model, {target!r})"
        target = "AUTO:" + ",".join(ov_names)
        compiled = backend.core.compile_model(graph.model, target)
        chosen = list(compiled.get_property("EXECUTION_DEVICES"))
        del compiled
        device = next((ov_names.index(c) for c in chosen if c in ov_names), 0)
        return np.full(graph.n_ops, device, dtype=np.int64), f"compile_model(model, {target!r}) ran on {chosen}"

    def _by_rule(self, base) -> np.ndarray:
        names = base.device_names
        if self.policy == "hetero":
            device = 0
        else:
            def rank(name: str) -> int:
                return next((i for i, prefix in enumerate(AUTO_PRIORITY) if name.upper().startswith(prefix)), len(AUTO_PRIORITY))
            device = min(range(len(names)), key=lambda d: (rank(names[d]), d))
        return np.full(base.graph.n_ops, device, dtype=np.int64)
