"""What every classical baseline shares: plan candidate placements, measure them within the budget, keep the best.

A baseline is a *planner*: it proposes candidate placements (one for single-device, greedy, METIS and the optimum;
``budget`` for random search) from the graph and, where it needs one, a cost model. Its `train` measures the
candidates through the shared run loop (each one counts against the budget, like any agent's placements), which
keeps the fastest; `predict` returns the plan: the fastest measured candidate, or the first candidate if the
budget allowed none. Nothing is learned in the RL sense.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from agents.core.checkpoint import CheckpointError
from agents.core.run import RunAgent, RunLoop
from placement_gym.results import write_json


class PlanningAgent(RunAgent):
    """Base class of the baselines (see the module docstring). Subclasses implement `candidates` and, when
    their constructor takes arguments, `hyperparameters`.

    After `learn`:
        plan: (N,) int64, the fastest measured candidate (the first candidate if the budget was 0).
        plan_info: what the planner reports about its plan (e.g. the optimum's bound), JSON-able; also in the
            run summary's ``details`` and in results records as ``extra["plan"]``.
    """

    name = "baseline"
    #: Planners take no search settings (`agents.search`); ``hybrid:NAME`` wraps one in the generic layer.
    HYBRID = None
    SEARCH_OPTIONS = frozenset()

    def __init__(self) -> None:
        super().__init__(seed=0, torch_threads=None)  # planners use no torch
        self.plan: np.ndarray | None = None
        self.plan_info: dict[str, Any] = {}

    # ------------------------------------------------------------------------------ to implement
    def candidates(self, env, budget: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
        """Yield (N,) int placements to measure, best guess first; measuring stops when the budget is spent."""
        raise NotImplementedError

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------------------------ the run
    def train(self, run: RunLoop, seed: int | None) -> None:
        """Measure the candidates through ``run.env`` until the budget is spent; the plan is the fastest."""
        rng = np.random.default_rng(seed)
        self.plan, self.plan_info = None, {}
        run.env.reset(seed=seed)
        for placement in self.candidates(run.env, run.budget, rng):
            placement = run.base.validate_action(placement)
            if self.plan is None:
                self.plan = placement  # the planner's best guess, kept even if the budget allows no measurement
            if run.done:
                break
            _, _, terminated, truncated, _ = run.env.step(placement)
            if terminated or truncated:
                run.env.reset()
        if self.plan is None:
            raise RuntimeError(f"{type(self).__name__} proposed no placement for {run.base.graph.name!r}")
        if run.best_placement is not None:
            self.plan = run.best_placement.copy()
        run.details.update(self.plan_info)

    def predict(self, obs: dict, deterministic: bool = True) -> np.ndarray:
        """The plan ((N,) int64); the observation only has to match its size."""
        if self.plan is None:
            raise RuntimeError(f"{type(self).__name__}.predict called before learn(); it has no placement yet")
        n = np.asarray(obs["placement"]).shape[0]
        if n != self.plan.shape[0]:
            raise ValueError(
                f"{type(self).__name__} planned a placement for {self.plan.shape[0]} ops but the observation has "
                f"{n}; a planner's placement belongs to the graph it was learned on"
            )
        return self.plan.copy()

    # ------------------------------------------------------------------------------ save / load
    def save(self, path, overwrite: bool = False) -> Path:
        """Write the settings and the plan as JSON (refuses to overwrite unless `overwrite`)."""
        return write_json(path, {
            "agent": f"{type(self).__module__}:{type(self).__qualname__}",
            "params": self.hyperparameters(),
            "plan": None if self.plan is None else self.plan.tolist(),
            "best_latency_s": self.best_latency_s,
            "plan_info": self.plan_info,
        }, overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "PlanningAgent":
        """Rebuild a planner saved with `save` (plain JSON: nothing in it is executed or imported)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no saved planner at {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            expected = f"{cls.__module__}:{cls.__qualname__}"
            if data.get("agent") != expected:
                raise CheckpointError(f"{path} holds a {data.get('agent')!r} agent, not {expected!r}")
            agent = cls(**data["params"])
            if data["plan"] is not None:
                agent.plan = agent.best_placement = np.asarray(data["plan"], dtype=np.int64)
            agent.best_latency_s, agent.plan_info = data["best_latency_s"], data.get("plan_info", {})
        except CheckpointError:
            raise
        except (ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise CheckpointError(f"{path} is not a planner saved by {cls.__name__}.save ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
        return agent

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyperparameters().items())
        return f"{type(self).__name__}({args})"
