"""What every classical baseline shares: plan candidate placements, measure them within the budget, keep the best.

A baseline is a *planner*: it proposes candidate placements (one for single-device, greedy, METIS and the optimum;
``budget`` for random search) from the graph and, where it needs one, a cost model. Its `train` measures the
candidates through the shared run loop (each one counts against the budget, like any agent's placements), which
keeps the fastest; `predict` returns the plan: the fastest measured candidate, or the first candidate if the
budget allowed none. Nothing is learned in the RL sense.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from agents.core.checkpoint import SETTINGS, CheckpointError
from agents.core.loop import RunLoop
from agents.core.run import RunAgent
from placement_gym.files import write_json
from placement_gym.schema import MAX_DEVICES, MAX_OPS, Integer, ListOf, Number, Optional, Plain, Record, Text, read_json

#: What `PlanningAgent.save` writes, as `PlanningAgent.load` checks it before building anything.
PLANNER_FILE = Record({
    "agent": Text(max_len=500), "params": SETTINGS,
    "plan": Optional(ListOf(Integer(0, MAX_DEVICES - 1), max_len=MAX_OPS)),
    "best_latency_s": Optional(Number(positive=True)),
}, {"plan_info": Plain(max_depth=6, max_len=MAX_OPS)})
#: The largest saved planner read (a plan of the biggest graph and what the planner reports about it).
MAX_PLANNER_BYTES = 64 << 20


class PlanningAgent(RunAgent):
    """Base class of the baselines (see the module docstring). Subclasses implement `candidates` and, when
    their constructor takes arguments, `hyperparameters`.

    After `learn`::

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

    def plan_candidates(self, env, budget: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
        """What `train` measures: `candidates`, or what a kind of planner adds around them (`CostPlanner`: the
        whole model on a device outside HETERO)."""
        return self.candidates(env, budget, rng)

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------------------------ the run
    def train(self, run: RunLoop, seed: int | None) -> None:
        """Measure the candidates through ``run.env`` until the budget is spent; the plan is the fastest."""
        rng = np.random.default_rng(seed)
        self.plan, self.plan_info = None, {}
        run.env.reset(seed=seed)
        for placement in self.plan_candidates(run.env, run.budget, rng):
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
        """Rebuild a planner saved with `save` (plain JSON, checked against `PLANNER_FILE` first: nothing in it is
        executed or imported)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no saved planner at {path}")
        data = read_json(path, PLANNER_FILE, max_bytes=MAX_PLANNER_BYTES, what=f"planner saved by {cls.__name__}.save",
                         error=CheckpointError)
        expected = f"{cls.__module__}:{cls.__qualname__}"
        if data["agent"] != expected:
            raise CheckpointError(f"{path} holds a {data['agent']!r} agent, not {expected!r}")
        try:
            agent = cls(**data["params"])
        except (TypeError, ValueError) as exc:  # settings this planner does not take, or refuses
            raise CheckpointError(f"{path}: field params: {str(exc).splitlines()[0][:200]}; expected the settings "
                                  f"{cls.__name__} takes") from None
        if data["plan"] is not None:
            agent.plan = agent.best_placement = np.asarray(data["plan"], dtype=np.int64)
        agent.best_latency_s, agent.plan_info = data["best_latency_s"], data.get("plan_info", {})
        return agent

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyperparameters().items())
        return f"{type(self).__name__}({args})"


class ConstraintRows:
    """Sparse constraint rows ``lower <= A x <= upper`` of a MIP, collected one at a time (the exact optima,
    `agents.baselines.optimal` and `agents.baselines.tarnawski_optimum`)."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []

    def add(self, coefficients: dict[int, float], lower: float = -np.inf, upper: float = np.inf) -> None:
        r = len(self.lower)
        for c, v in coefficients.items():
            if v != 0.0:
                self.rows.append(r)
                self.cols.append(c)
                self.vals.append(float(v))
        self.lower.append(lower)
        self.upper.append(upper)

    def constraint(self, n_vars: int):
        from scipy.optimize import LinearConstraint
        from scipy.sparse import csr_array

        matrix = csr_array((self.vals, (self.rows, self.cols)), shape=(len(self.lower), n_vars))
        return LinearConstraint(matrix, np.array(self.lower), np.array(self.upper))


def milp_or_failure(c: np.ndarray, **problem) -> tuple[Any, str | None]:
    """SciPy's ``milp(c, **problem)`` and None, or None and a note saying how it failed when HiGHS itself raises
    (seen: ``ValueError: vector::reserve`` from inside its branch and bound): the exact solvers then keep the best
    placement and bound they have, with status ``"solver_error"``, instead of crashing the run."""
    from scipy.optimize import milp

    try:
        return milp(c, **problem), None
    except (ValueError, RuntimeError, MemoryError) as error:
        return None, f"the MIP solver failed ({type(error).__name__}: {error}); best placement found so far"


@dataclass
class OptimumResult:
    """Outcome of an exact solve (`agents.baselines.optimal.solve_optimum`, `agents.baselines.tarnawski_optimum`).

    Attributes:
        placement: (N,) int64, the best placement found (optimal when ``status == "optimal"``).
        latency_s: its simulated latency (an upper bound on the optimum).
        lower_bound_s: a proven lower bound on the optimum (equal to ``latency_s`` within `agents.baselines.optimal.REL_TOL` when optimal).
        status: ``"optimal"``, ``"time_limit"``, ``"size_limit"`` (too many ops for the MIP: the best start
            placement and a closed-form bound, well within the time limit) or ``"solver_error"`` (the MIP solver
            raised: the best placement and bound found before it).
        iterations: MIP solves; simulator_calls: placements simulated; solve_s: wall time.
    """

    placement: np.ndarray
    latency_s: float
    lower_bound_s: float
    status: str
    iterations: int = 0
    simulator_calls: int = 0
    solve_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float:
        return max(0.0, (self.latency_s - self.lower_bound_s) / self.latency_s) if self.latency_s > 0 else 0.0

    @property
    def label(self) -> str:
        """``"proven"`` or ``"best found, bound B ms, gap G%"``: what a table prints beside the placement."""
        if self.status == "optimal":
            return "proven"
        return f"best found, bound {self.lower_bound_s * 1e3:.3f} ms, gap {100 * self.gap:.1f}%"

    def info(self) -> dict:
        return {"status": self.status, "label": self.label, "latency_s": self.latency_s,
                "lower_bound_s": self.lower_bound_s,
                "gap": self.gap, "iterations": self.iterations, "simulator_calls": self.simulator_calls,
                "solve_s": round(self.solve_s, 3), "notes": list(self.notes)}
