"""What every classical baseline shares: plan candidate placements, measure them within the budget, keep the best.

A baseline is a *planner*: it proposes candidate placements (one for single-device, greedy, METIS and the optimum;
``budget`` for random search) from the graph and, where it needs one, a cost model. `learn` measures the
candidates with ``env.step`` (each one counts against the budget, like any agent's placements) and keeps the
fastest as ``best_placement``. `predict` returns it. Nothing is learned in the RL sense.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from placement_gym.results import write_json


class PlanningAgent:
    """Base class of the baselines (see the module docstring). Subclasses implement `candidates`.

    After `learn`:
        best_placement: (N,) int64, the fastest measured candidate (the first candidate if the budget was 0).
        best_latency_s: its latency as measured during `learn` (None if nothing was measured).
        history: one dict per measured candidate: ``latency_s``, ``ok``.
        plan_info: what the planner reports about its plan (e.g. the optimum's bound), JSON-able.
    """

    #: Name used in results tables; subclasses override.
    name = "baseline"

    def __init__(self) -> None:
        self.best_placement: np.ndarray | None = None
        self.best_latency_s: float | None = None
        self.history: list[dict] = []
        self.plan_info: dict[str, Any] = {}
        self._n_ops: int | None = None

    # ------------------------------------------------------------------------------ to implement
    def candidates(self, env, budget: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
        """Yield (N,) int placements to measure, best guess first; `learn` stops after `budget` of them."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------ agent API
    def learn(self, env, budget: int, seed: int = 0, callback=None) -> "PlanningAgent":
        """Measure up to `budget` candidates on `env` (``env.step``) and keep the fastest.

        `callback`: an `agents.common.callbacks.Callback` (progress bar, TensorBoard, your own), called as the
        REINFORCE trainer calls it: ``on_training_start``, ``on_step`` after each measured placement (False
        stops early), ``on_training_end``.
        """
        if budget < 0:
            raise ValueError(f"budget must be >= 0 placements, got {budget}")
        rng = np.random.default_rng(seed)
        base = env.unwrapped
        self._n_ops = base.graph.n_ops
        self.best_placement, self.best_latency_s, self.history, self.plan_info = None, None, [], {}
        env.reset(seed=seed)
        if callback is not None:
            callback.on_training_start(budget, {"agent": self.name, **self.get_params()})
        for step, placement in enumerate(self.candidates(env, budget, rng)):
            placement = base.validate_action(placement)
            if step >= budget:  # no budget left to measure it: keep the planner's first choice unmeasured
                if self.best_placement is None:
                    self.best_placement = placement
                break
            _, reward, terminated, truncated, info = env.step(placement)
            latency = float(info["latency_s"]) if info["ok"] else float("inf")
            self.history.append({"latency_s": latency, "ok": bool(info["ok"])})
            if self.best_latency_s is None or latency < self.best_latency_s:
                self.best_placement, self.best_latency_s = placement, latency
            if terminated or truncated:
                env.reset()
            if callback is not None and callback.on_step(step + 1, float(reward), info) is False:
                break
        if self.best_placement is None:
            raise RuntimeError(f"{type(self).__name__} proposed no placement for {base.graph.name!r}")
        if callback is not None:
            callback.on_training_end({"best_latency_s": self.best_latency_s, "steps": len(self.history), **self.plan_info})
        return self

    def predict(self, obs: dict, deterministic: bool = True) -> np.ndarray:
        """The best placement found by `learn` ((N,) int64); the observation only has to match its size."""
        if self.best_placement is None:
            raise RuntimeError(f"{type(self).__name__}.predict called before learn(); it has no placement yet")
        n = np.asarray(obs["placement"]).shape[0] if isinstance(obs, dict) else None
        if n is not None and n != self.best_placement.shape[0]:
            raise ValueError(
                f"{type(self).__name__} planned a placement for {self.best_placement.shape[0]} ops but the "
                f"observation has {n}; a planner's placement belongs to the graph it was learned on"
            )
        return self.best_placement.copy()

    # ------------------------------------------------------------------------------ save / load
    def get_params(self) -> dict[str, Any]:
        """The constructor arguments (read back from attributes of the same name)."""
        params = inspect.signature(type(self).__init__).parameters
        return {k: getattr(self, k) for k in params if k != "self" and hasattr(self, k)}

    def save(self, path, overwrite: bool = False) -> Path:
        """Write the settings and the best placement as JSON (refuses to overwrite unless `overwrite`)."""
        return write_json(path, {
            "agent": f"{type(self).__module__}:{type(self).__qualname__}",
            "params": self.get_params(),
            "best_placement": None if self.best_placement is None else self.best_placement.tolist(),
            "best_latency_s": self.best_latency_s,
            "plan_info": self.plan_info,
        }, overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "PlanningAgent":
        data = json.loads(Path(path).read_text())
        expected = f"{cls.__module__}:{cls.__qualname__}"
        if data.get("agent") != expected:
            raise ValueError(f"{path} holds a {data.get('agent')!r} agent, not {expected!r}")
        agent = cls(**data["params"])
        if data["best_placement"] is not None:
            agent.best_placement = np.asarray(data["best_placement"], dtype=np.int64)
        agent.best_latency_s, agent.plan_info = data["best_latency_s"], data.get("plan_info", {})
        return agent

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
