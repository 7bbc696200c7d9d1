"""Run any agent on any placement env for a budget and seeds, and turn each run into a results record.

An *agent* meets the `Agent` protocol: ``learn(env, budget, seed, callback)`` measures at most `budget`
placements and leaves a `RunSummary` in ``agent.run_summary``; ``predict(obs)`` gives its own placement. Every
agent in `agents/` does, through the shared run loop (`agents.core.run.RunAgent`); subclass that for your
own (examples/custom_agent.py). A Stable-Baselines3 model plugs in through `agents.ppo.SB3Agent`.

A record (one agent, one env, one seed) is a flat dict (`RECORD_KEYS`; design.md names the first eight)::

    model, agent, backend, seed        what ran where (a model file is named by its stem; model_path keeps it)
    latency_s                          the run's best placement, measured afresh after learning
    speedup_vs_reference               reference latency / latency_s (reference: all ops on the first device)
    latency_corrected_s                latency_s at the machine speed of the first reference measurement (drift
                                       correction; reference_latency_latest_s is the latest re-measurement)
    latency_raw_s                      latency_s as timed, before the OpenVINO backend's paired-reference
                                       correction (`Measurement.raw_latency_s`; equal to latency_s without it)
    placements_measured, wall_s        placements the agent measured (env steps); seconds of the whole run
    curve                              best-so-far latency after each placement where it changed:
                                       [[placements, latency_s], ...] (latencies as measured during the run)
    placements_to_within               {"5": n, "2": n, "1": n}: placements needed to get within 5/2/1 % of the
                                       best known latency (see `add_placements_to_within`); null if never
    agent_ms_per_placement             the agent's own compute (everything but the env) per placement
    predict_latency_s                  the agent's deterministic policy (``predict``), measured afresh
    reference_latency_s, latency_reduction_pct (100 * (1 - latency / reference), the paper's "speedup %"),
    ok, error (the final placement compiled and ran), budget, placement_source ("best_placement", or "predict"
    when the run measured nothing), placement, device_counts, n_submodels, spread_s, predict_placement,
    predict_ok, best_step, devices, simulated, backend_settings, model_path,
    search                             the search components that ran around the agent's own method
                                       (``agent.search_components()``; [] for a pure agent); an agent label
                                       with components gets the prefix ``hybrid:``
    settings                           the agent's full settings (``agent.hyperparameters()``)
    extra                              the agent's hyperparameters, its run timings (``run``), a planner's plan
                                       (``plan``: e.g. the optimum's status and proven lower bound), the caller's

A failed final placement has ``ok=False`` and ``latency_s=None``. `results` writes records to files and tables.

>>> from placement_gym.evaluation import evaluate
>>> from placement_gym.results import summarize, format_table
>>> records = evaluate(MyAgent, env, budget=100, seeds=3)          # a class, a factory, or an instance
>>> print(format_table(summarize(records), reference_label="CPU-only"))
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from .backends.base import Measurement
from .backends.replicate import replicated_measurement
from .env import DevicePlacementEnv
from .results import REQUIRED_KEYS
from .schema import repeated

#: Keys every record has (the contract in design.md first).
RECORD_KEYS = REQUIRED_KEYS + (
    "curve", "placements_to_within", "agent_ms_per_placement", "predict_latency_s",
    "reference_latency_s", "latency_corrected_s", "latency_raw_s", "reference_latency_latest_s", "latency_reduction_pct", "ok",
    "error", "budget", "placement_source", "placement", "device_counts", "n_submodels", "spread_s",
    "predict_placement", "predict_ok", "best_step", "devices", "simulated", "backend_settings", "model_path",
    "search", "settings", "extra",
)
#: Thresholds of ``placements_to_within``: percent above the best known latency.
WITHIN_PCT = (5, 2, 1)


def check_budget(budget: Any) -> int:
    """`budget` as an int, or ``ValueError``: the number of placements an agent may measure, an int >= 0.

    Checked where a budget enters: ``agent.learn`` (`agents.core.run.RunAgent.learn`) for Python callers, the
    argument parser (`placement_gym.cli`) on the command line; the functions it is passed on to trust it."""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 0:
        raise ValueError(f"budget must be a number of placements to measure, an integer >= 0; got {budget!r}")
    return int(budget)


# ------------------------------------------------------------------------------------------- agents
@dataclass
class RunSummary:
    """What one ``learn`` did and found (built by the run loop, `agents.core.loop.RunLoop.finish`).

    Attributes:
        budget, seed: as given to ``learn``.
        steps: placements measured (env steps); updates: parameter updates the agent made.
        curve: ``[[steps, latency_s], ...]``: the best latency seen so far, each time it improved.
        best_step: the step that found the best placement (None if nothing was measured).
        best_latency_seen_s: its latency as measured during the run.
        placement: (N,) int64 the run's result: the best placement seen, or the policy's own if none was.
        placement_source: ``"best_placement"`` or ``"predict"``.
        final: `Measurement` of `placement` taken afresh after learning.
        predict_placement: (N,) int64 the agent's deterministic placement (``predict``) after learning.
        predict: its `Measurement`, taken afresh (the same one as `final` when the placements are equal).
        wall_s: seconds of the whole ``learn``; env_s: inside the env; finish_s: the final measurements;
            agent_s = wall_s - env_s - finish_s: the agent's own compute.
        details: what the agent reports about its run (a planner's plan), JSON-able.
    """

    budget: int
    seed: int | None
    steps: int
    updates: int
    curve: list
    best_step: int | None
    best_latency_seen_s: float | None
    placement: np.ndarray
    placement_source: str
    final: Measurement
    predict_placement: np.ndarray
    predict: Measurement
    wall_s: float
    env_s: float
    agent_s: float
    finish_s: float
    details: dict = field(default_factory=dict)

    @property
    def latency_s(self) -> float | None:
        """The result's latency measured afresh (None if it failed)."""
        return float(self.final.latency_s) if self.final.ok else None

    @property
    def predict_latency_s(self) -> float | None:
        return float(self.predict.latency_s) if self.predict.ok else None

    @property
    def agent_ms_per_placement(self) -> float | None:
        """Milliseconds of the agent's own compute per placement measured (None if it measured none)."""
        return 1e3 * self.agent_s / self.steps if self.steps else None

    def to_dict(self) -> dict[str, Any]:
        """Scalars for logs and results files (the placements and the curve stay out)."""
        return {
            "budget": self.budget, "seed": self.seed, "steps": self.steps, "updates": self.updates,
            "best_step": self.best_step, "best_latency_seen_s": self.best_latency_seen_s,
            "best_latency_s": self.latency_s, "predict_latency_s": self.predict_latency_s,
            "placement_source": self.placement_source, "wall_s": self.wall_s, "env_s": self.env_s,
            "agent_s": self.agent_s, "finish_s": self.finish_s,
            "agent_ms_per_placement": self.agent_ms_per_placement,
        }


@runtime_checkable
class Agent(Protocol):
    """What the harness, ``placement-gym evaluate|compare|train`` and the examples need of an agent.

    `agents.core.run.RunAgent` implements it for every agent shipped here; subclass it for your own.
    """

    name: str
    feature_families: tuple[str, ...] | None  # node-feature families its env must observe (None: default)
    best_placement: np.ndarray | None
    best_latency_s: float | None
    run_summary: RunSummary | None

    def learn(self, env, budget: int, seed: int | None = None, callback=None) -> "Agent":
        """Measure at most `budget` placements on `env`; set ``run_summary``, ``best_placement``/``best_latency_s``."""

    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """(N,) int64: the agent's own placement for a `DevicePlacement-v0` observation."""

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild the agent."""

    def search_components(self) -> list[str]:
        """The hand-written search components run around the agent's own method (`agents.search`): empty for a
        pure agent (and for a search baseline, whose search is its method)."""

    def save(self, path, overwrite: bool = False) -> Path:
        """Write the agent; refuse to replace a file unless `overwrite`."""

    @classmethod
    def load(cls, path) -> "Agent":
        """Rebuild a saved agent."""


@runtime_checkable
class TakesWarmStarts(Protocol):
    """An agent that can start from placements others found (the exact optimum: a solver's incumbents).

    `compare` hands such an agent, before each of its runs on a model, the best placement of every run that came
    before it on that model (table order puts `optimal` last), so a time-limited solver never reports a
    placement worse than one in its own table.
    """

    def warm_start(self, placements: Sequence[tuple[str, np.ndarray]]) -> None:
        """Take ``(row label, (N,) placement)`` pairs to consider besides the agent's own."""


def _agent_for_seed(agent: Any, copy_instance: bool) -> Agent:
    """The agent for one seed: a class or a factory is called; an instance is deep-copied when `copy_instance`
    (seeds must not share learned state), else used as it is."""
    if isinstance(agent, Agent) and not isinstance(agent, type):
        return copy.deepcopy(agent) if copy_instance else agent
    if not callable(agent):
        raise TypeError(_not_an_agent(agent))
    built = agent()
    if not isinstance(built, Agent):
        raise TypeError(_not_an_agent(built))
    return built


#: The members of `Agent`, for saying which ones an object lacks.
AGENT_MEMBERS = ("name", "feature_families", "best_placement", "best_latency_s", "run_summary", "learn", "predict",
                 "hyperparameters", "save", "load")


def _not_an_agent(obj: Any) -> str:
    missing = [m for m in AGENT_MEMBERS if not hasattr(obj, m)]
    return (f"{type(obj).__name__} is not an agent: it lacks {', '.join(missing) or 'nothing, but is not one'}. "
            "Subclass agents.core.run.RunAgent (implement train, predict, hyperparameters, save, load); wrap a "
            "Stable-Baselines3 model in agents.ppo.SB3Agent(model); or pass a class or a no-argument factory "
            "that builds such an agent")


def agent_name(agent: Any) -> str:
    """A display name: the agent's (or its class's) ``name`` if it is a non-empty string, else the class or
    factory's ``__name__``."""
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name:
        return name
    target = agent if isinstance(agent, type) or not isinstance(agent, Agent) else type(agent)
    return getattr(target, "__name__", type(target).__name__)


def seed_list(seeds: "int | Iterable[int]") -> list[int]:
    """A count n -> seeds 0..n-1; a list of seeds -> the list (as ints), each seed once (a seed given twice would
    run the same run twice, and its outputs, named by seed, would collide)."""
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("seeds is empty; give a count (3) or a list of seeds ([0, 1, 2])")
    twice = repeated(out)
    if twice is not None:
        raise ValueError(f"seed {out[twice[1]]} is given twice (seeds {out}); expected each seed once")
    return out


def model_label(model: Any) -> tuple[str | None, str | None]:
    """``(name for tables, path)`` of a model argument: a zoo name is its own name (no path); a model file is
    named by its stem and keeps its path; anything else (an ``ov.Model``, a graph) gives ``(None, None)``:
    the graph's own name is used."""
    if isinstance(model, (str, Path)):
        path = Path(model)
        if path.suffix.lower() in (".xml", ".onnx") or path.exists():
            return path.stem, str(path)
        return str(model), None
    return None, None


def single_device_latencies(env) -> dict[str, float | None]:
    """Latency (s) of every op on one device, for each device of `env`'s current graph (None where that fails:
    an op the device cannot run, too little memory): what a transferred placement is compared with. Measured
    afresh outside the episode (`DevicePlacementEnv.measure`), not counted as placements."""
    base = env.unwrapped
    out: dict[str, float | None] = {}
    for d, name in enumerate(base.device_names):
        m = base.measure(np.full(base.graph.n_ops, d, dtype=np.int64))
        out[name] = float(m.latency_s) if m.ok else None
    return out


def replicate_latency(env) -> float | None:
    """Seconds per inference of `env`'s current graph replicated whole on every device that runs it alone, requests
    spread over them (what the ``replicate`` baseline reports; `placement_gym.backends.replicate`), or None where
    no device runs it: the bar a placement is compared with under throughput. Measured afresh outside the episode,
    not counted as a placement."""
    base = env.unwrapped
    m = replicated_measurement(base.backend, base.graph)
    return float(m.latency_s) if m.ok else None


# ------------------------------------------------------------------------------------------ records
def make_record(env, summary: RunSummary, *, agent: str, model: str | None = None, model_path: str | None = None,
                extra: Mapping[str, Any] | None = None) -> dict:
    """One results record (module docstring) for the run `summary` of `agent` on `env`.

    ``placements_to_within`` is None until `add_placements_to_within` sees the records it is relative to.
    """
    base = env.unwrapped
    m = summary.final
    reference = float(base.reference.latency_s)
    latency = summary.latency_s
    placement = np.asarray(summary.placement, dtype=np.int64)
    return {
        "model": model or base.graph.name,
        "agent": agent,
        "backend": base.backend.name,
        "seed": summary.seed,
        "latency_s": latency,
        "speedup_vs_reference": reference / latency if latency else None,
        "placements_measured": summary.steps,
        "wall_s": summary.wall_s,
        "curve": [[int(s), float(v)] for s, v in summary.curve],
        "placements_to_within": None,
        "agent_ms_per_placement": summary.agent_ms_per_placement,
        "predict_latency_s": summary.predict_latency_s,
        "reference_latency_s": reference,
        # Drift correction (real backend): the final latency at the machine speed of the first reference.
        "latency_corrected_s": latency * reference / base.current_reference_s if latency else None,
        "latency_raw_s": m.raw_latency_s if m.ok else None,
        "reference_latency_latest_s": base.current_reference_s,
        "latency_reduction_pct": 100.0 * (1.0 - latency / reference) if latency else None,
        "ok": bool(m.ok),
        "error": m.error,
        "budget": summary.budget,
        "placement_source": summary.placement_source,
        "placement": placement.tolist(),
        "device_counts": np.bincount(placement, minlength=base.n_devices).tolist(),
        "n_submodels": int(m.n_submodels),
        "spread_s": float(m.spread_s),
        "predict_placement": np.asarray(summary.predict_placement).tolist(),
        "predict_ok": bool(summary.predict.ok),
        "best_step": summary.best_step,
        "devices": list(base.device_names),
        "simulated": bool(base.backend.simulated),
        "backend_settings": base.backend.describe(),
        "model_path": model_path,
        "search": [],  # `evaluate` fills these two from the agent
        "settings": {},
        "extra": {"run": summary.to_dict(), **({"plan": summary.details} if summary.details else {}),
                  **dict(extra or {})},
    }


def add_placements_to_within(records: Sequence[dict]) -> None:
    """Fill ``placements_to_within`` (and ``best_known_latency_s``) of `records`, in place.

    The best known latency of a model in one setting (backend, devices) is the lowest latency any record's
    curve reached: the proven optimum where the ``optimal`` agent ran (its placement is in its curve), else
    the best any agent measured in these records. ``placements_to_within[p]`` is the first placement count at
    which the record's best-so-far latency was within p % of it, or None if it never was.
    """
    def setting(r: Mapping[str, Any]) -> tuple:
        return r["model"], r["backend"], tuple(r["devices"])

    best: dict[tuple, float] = {}
    for r in records:
        if r["curve"]:
            lowest = min(v for _, v in r["curve"])
            best[setting(r)] = min(best.get(setting(r), np.inf), lowest)
    for r in records:
        known = best.get(setting(r))
        r["best_known_latency_s"] = known
        r["placements_to_within"] = {
            str(p): (next((s for s, v in r["curve"] if v <= known * (1 + p / 100) * (1 + 1e-12)), None)
                     if known is not None else None)
            for p in WITHIN_PCT
        }


def evaluate(
    agent: Any,
    env,
    budget: int,
    seeds: "int | Iterable[int]" = 1,
    *,
    name: str | None = None,
    model: str | None = None,
    model_path: str | None = None,
    callback: Any = None,
    on_record: Callable[[dict], None] | None = None,
    extra: Mapping[str, Any] | None = None,
    relative: bool = True,
) -> list[dict]:
    """Run `agent` on `env` with `budget` measured placements for each seed; one record per seed.

    Args:
        agent: an agent class, a factory ``f()`` returning an agent, or an instance. With several seeds an
            instance is deep-copied for each, so they share no learned state; with one seed it learns in
            place (a loaded checkpoint with ``budget=0`` is evaluated as it is: zero-shot).
        env: a `DevicePlacementEnv` (``gym.make("DevicePlacement-v0", ...)`` is fine). Shared by the seeds.
        budget: placements the agent may measure per seed, an int >= 0: passed to ``agent.learn``, which checks it
            (`check_budget`) before measuring anything.
        seeds: a count n (seeds 0..n-1) or the seeds themselves.
        name, model, model_path: the agent's and the model's names in the records (default: `agent_name`,
            the graph's name).
        callback: passed to ``agent.learn``.
        on_record: called with each record as soon as it is made (progress bars, incremental saving).
        extra: added to every record's ``extra``.
        relative: fill ``placements_to_within`` relative to these records (False: the caller does it over
            a larger set, as `compare` does).
    """
    if not isinstance(getattr(env, "unwrapped", None), DevicePlacementEnv):
        raise TypeError(f"env must be a DevicePlacementEnv (or wrap one), got {type(env).__name__}")
    seeds_ = seed_list(seeds)
    label = name or agent_name(agent)
    records = []
    for seed in seeds_:
        learner = _agent_for_seed(agent, copy_instance=len(seeds_) > 1)
        learner.learn(env, budget, seed, callback)
        settings, search = learner.hyperparameters(), list(learner.search_components())
        shown = f"hybrid:{label}" if search and not label.startswith("hybrid:") else label
        record = make_record(env, learner.run_summary, agent=shown, model=model, model_path=model_path,
                             extra={"hyperparameters": settings, **dict(extra or {})})
        record.update(search=search, settings=settings)
        records.append(record)
        if on_record is not None:
            on_record(record)
    if relative:
        add_placements_to_within(records)
    return records


#: Errors that make `compare` skip an agent on a model (and go on with the others), e.g. a planner that
#: needs a cost model on the real backend.
SKIPPABLE = (ValueError, NotImplementedError, ImportError)


def skip_entry(model: str, agent: str, seeds: Sequence[int], exc: BaseException) -> dict:
    """What `compare` reports for runs it skipped: ``{"model", "agent", "seeds", "reason"}``."""
    return {"model": model, "agent": agent, "seeds": list(seeds), "reason": f"{type(exc).__name__}: {exc}"}


def compare(
    models: Sequence[Any],
    agents: Mapping[str, Callable[[], Agent]],
    make_env: Callable[[Any, "tuple[str, ...] | None"], Any],
    budget: int,
    seeds: "int | Iterable[int]" = 1,
    *,
    on_record: Callable[[dict], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_skip: Callable[[dict], None] | None = None,
    done: Mapping[tuple[str, str, int], dict] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Evaluate every agent on every model: ``(records, skipped)``, ``placements_to_within`` filled over all.

    Args:
        models: zoo names or model files.
        agents: display name -> factory building a fresh agent (`placement_gym.registry.agent_factories`).
        budget: placements each agent may measure per seed, an int >= 0: passed to each agent's ``learn``, which
            checks it (a budget it refuses skips the agent as any `SKIPPABLE` error does).
        make_env: ``make_env(model, feature_families)`` -> env; `feature_families` is the agent's attribute
            (None = the env's default), so each agent observes what it expects. Envs are built once per (model,
            families). Give the envs of one model the same graph object and backend (as the CLI does), so
            that they share the real backend's measurement of the reference.
        on_plan: called with the number of (agent, seed) runs planned for each model once they are known.
        on_skip: called with ``{"model", "agent", "seeds", "reason"}`` when an agent cannot run on a model;
            the comparison goes on without it.
        done: records of runs finished before (a resumed ``compare``), by ``(row label, model label, seed)``:
            not run again, but taken in their place among the records, their best placements given as warm
            starts as if they had run here.

    The envs are not closed here: `make_env` may share one backend between them; the caller owns it.
    """
    seeds_ = seed_list(seeds)
    records: list[dict] = []
    skipped: list[dict] = []
    for model_ in models:
        label_, path = model_label(model_)
        # Build every run's agent first: its feature families decide which env it observes.
        runs = [(label, seed, factory()) for label, factory in agents.items() for seed in seeds_]
        envs: dict = {}
        for _, _, agent in runs:
            key = None if agent.feature_families is None else tuple(agent.feature_families)
            if key not in envs:
                envs[key] = make_env(model_, key)
        # Pin every env's reference placement now, before any agent runs: envs that share the graph and the
        # backend then share one reference measurement (the same "% vs CPU-only" denominator for all agents).
        for env in envs.values():
            env.unwrapped.reference
        if on_plan is not None:
            on_plan(len(runs))
        failed: set[str] = set()
        found: list[tuple[str, np.ndarray]] = []  # (row label, best placement) of every run so far on this model
        for label, seed, agent in runs:
            if label in failed:  # the same error would repeat for the other seeds
                continue
            kept = (done or {}).get((label, label_, seed))
            if kept is not None:
                records.append(kept)
                if kept.get("placement") is not None:  # as agent.best_placement is below
                    found.append((label, np.asarray(kept["placement"], dtype=np.int64)))
                continue
            env = envs[None if agent.feature_families is None else tuple(agent.feature_families)]
            if isinstance(agent, TakesWarmStarts):
                agent.warm_start(found)
            try:
                records += evaluate(agent, env, budget, [seed], name=label, model=label_, model_path=path,
                                    on_record=on_record, relative=False)
                if agent.best_placement is not None:
                    found.append((label, np.asarray(agent.best_placement, dtype=np.int64).copy()))
            except SKIPPABLE as exc:
                failed.add(label)
                skip = skip_entry(label_ or str(model_), label, seeds_[seeds_.index(seed):], exc)
                skipped.append(skip)
                if on_skip is not None:
                    on_skip(skip)
    add_placements_to_within(records)
    return records, skipped


__all__ = [
    "AGENT_MEMBERS", "Agent", "RECORD_KEYS", "RunSummary", "SKIPPABLE", "TakesWarmStarts", "WITHIN_PCT", "add_placements_to_within",
    "agent_name", "check_budget", "compare", "evaluate", "make_record", "model_label",
    "replicate_latency", "seed_list", "single_device_latencies", "skip_entry",
]
