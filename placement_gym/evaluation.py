"""Run any agent on any placement env for a budget and seeds, and turn the outcome into results records.

This module is the single place results records are built: `evaluate` (and `placement-gym evaluate|compare`)
and `placement-gym train` all call `make_record`, so every results file has the same schema.

An *agent* is anything with

    learn(env, budget, seed, callback=None) -> agent      budget = placements it may measure (env steps)
    predict(obs, deterministic=True) -> (N,) int         a device index per compute op

and optionally ``best_placement`` ((N,) int, the placement it would deploy after learning) and
``best_latency_s``. Our agents, a user's own class and a Stable-Baselines3 model (wrapped by `as_agent`,
whose ``predict`` returns ``(action, state)``) all fit. Nothing here imports the agents or torch.

A record (one agent, one env, one seed) is a flat dict::

    model, agent, backend, seed, latency_s, speedup_vs_reference, placements_measured, wall_s   (design.md)
    reference_latency_s      latency of the reference placement (all ops on device 0, e.g. CPU-only)
    latency_reduction_pct    100 * (1 - latency / reference): the paper's "speedup %" column
    ok, error                whether the final placement compiled and ran
    budget, learn_s          the budget given and the seconds spent in ``learn``
    placement_source         "best_placement" (the agent's best found) or "predict" (a deterministic predict)
    placement                the final placement, a device index per compute op
    device_counts            ops per device;  n_submodels, spread_s: from the final measurement
    devices, simulated, backend_settings   the env's devices and ``backend.describe()`` (profile, repeats...)
    agent_best_latency_s     what the agent itself reported, if it did
    extra                    anything the caller adds (e.g. the agent's hyper-parameters); ``extra["plan"]``
                             holds a planner's ``plan_info`` (the optimum's status and proven lower bound)

`latency_s` is always a fresh measurement of the final placement after learning (the real backend's cache is
bypassed), so a lucky noisy sample seen during the search is not what gets reported. A failed final
placement has ``ok=False`` and ``latency_s=None``.

`compare` runs many agents on many models (what ``placement-gym compare`` prints). `records_to_json` wraps
records with the versions, machine, and time of the run; `write_records`, `write_csv` and `plot_summary` write
them without overwriting an existing file; `summarize` and `format_table` give the paper's table layout (mean
± std over seeds per model and agent, the fastest marked, the gap to the exact optimum where it ran).

>>> from placement_gym.evaluation import evaluate, summarize, format_table
>>> records = evaluate(MyAgent, env, budget=100, seeds=3)          # a class, a factory, or an instance
>>> print(format_table(summarize(records), reference_label="CPU-only"))
"""
from __future__ import annotations

import copy
import datetime as _dt
import inspect
import math
import time
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .results import machine, versions, write_json

#: Keys every record has (the contract in design.md plus the ones this module adds).
RECORD_KEYS = (
    "model", "agent", "backend", "seed", "latency_s", "speedup_vs_reference", "placements_measured", "wall_s",
    "reference_latency_s", "latency_reduction_pct", "ok", "error", "budget", "learn_s", "placement_source",
    "placement", "device_counts", "n_submodels", "spread_s", "devices", "simulated", "backend_settings",
    "agent_best_latency_s", "extra",
)
SCHEMA_VERSION = 1
#: The agent name whose latency `summarize` measures every other agent's gap against.
OPTIMAL_AGENT = "optimal"


# ------------------------------------------------------------------------------------------- agents
class SB3Agent:
    """Adapts a Stable-Baselines3 model (``PPO("MultiInputPolicy", env)``) to ``learn(env, budget, seed)``.

    SB3 collects whole rollouts (``n_steps`` per update), so it may measure more placements than the budget;
    the records report what was actually measured. `predict` drops SB3's recurrent state.
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def learn(self, env, budget: int, seed: int, callback=None) -> "SB3Agent":
        self.model.set_random_seed(seed)
        if self.model.get_env() is None:
            self.model.set_env(env)
        self.model.learn(total_timesteps=budget, callback=callback)
        return self

    def predict(self, obs, deterministic: bool = True) -> np.ndarray:
        action, _state = self.model.predict(obs, deterministic=deterministic)
        return np.asarray(action)


def _is_sb3_model(obj: Any) -> bool:
    return all(hasattr(obj, attr) for attr in ("learn", "predict", "policy", "get_env", "set_random_seed"))


def as_agent(obj: Any) -> Any:
    """`obj` itself if it has ``learn``/``predict``; an SB3 model wrapped in `SB3Agent`; else a TypeError."""
    if _is_sb3_model(obj):
        return SB3Agent(obj)
    missing = [m for m in ("learn", "predict") if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{type(obj).__name__} is not an agent: it lacks {', '.join(missing)}; an agent needs "
            "learn(env, budget, seed, callback=None) and predict(obs, deterministic=True) -> placement "
            "(or pass a Stable-Baselines3 model, a class or a factory that builds one)"
        )
    return obj


def _fresh_agent(agent: Any, env, copy_instance: bool = True) -> Any:
    """The agent for one seed: call a class/factory (with the env if it needs an argument); an instance is
    deep-copied when `copy_instance` (seeds must not share learned state), else used as it is.
    """
    if inspect.isclass(agent) or (callable(agent) and not hasattr(agent, "learn")):
        try:
            required = [
                p for p in inspect.signature(agent).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):  # builtins without a signature
            required = []
        return as_agent(agent(env) if required else agent())
    if not copy_instance:
        return as_agent(agent)
    try:
        return as_agent(copy.deepcopy(agent))
    except TypeError:
        raise
    except Exception as exc:  # e.g. objects holding open handles
        raise TypeError(
            f"could not copy the {type(agent).__name__} instance for a new seed ({exc}); pass its class or a "
            "factory (lambda env: MyAgent(...)) instead"
        ) from exc


def agent_name(agent: Any) -> str:
    """A display name: the ``name`` attribute if it has one, else the class / function name."""
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name:
        return name
    target = agent if inspect.isclass(agent) or inspect.isfunction(agent) else type(agent)
    return getattr(target, "__name__", str(target))


def seed_list(seeds: "int | Iterable[int]") -> list[int]:
    """A count n -> seeds 0..n-1; a list of seeds -> the list (as ints)."""
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("seeds is empty; give a count (3) or a list of seeds ([0, 1, 2])")
    return out


# ------------------------------------------------------------------------------------------ records
def make_record(
    env,
    *,
    agent: str,
    seed: int,
    placement: np.ndarray,
    placements_measured: int,
    wall_s: float,
    model: str | None = None,
    budget: int | None = None,
    learn_s: float | None = None,
    placement_source: str = "best_placement",
    agent_best_latency_s: float | None = None,
    measurement=None,
    extra: Mapping[str, Any] | None = None,
) -> dict:
    """One results record for `placement` found by `agent` on `env` (see the module docstring for the keys).

    Args:
        env: the (possibly wrapped) `DevicePlacementEnv` the placement is for.
        agent: the agent's display name (``"hsdag"``, ``"greedy"``, ...).
        placement: (N,) int, a device index per compute op.
        placements_measured: placements the agent measured while learning (env steps).
        wall_s: seconds of the whole run (learning and the final measurement).
        model: the model's name; defaults to the graph's name.
        measurement: a `Measurement` of `placement` to use; by default it is measured afresh here.
        extra: JSON-able details to keep with the record (hyper-parameters, notes).
    """
    base = env.unwrapped
    placement = base.validate_action(placement)
    m = measurement if measurement is not None else env.unwrapped.measure(placement)
    reference = float(base.reference.latency_s)
    latency = float(m.latency_s) if m.ok else None
    return {
        "model": model or base.graph.name,
        "agent": agent,
        "backend": base.backend.name,
        "seed": int(seed),
        "latency_s": latency,
        "speedup_vs_reference": reference / latency if latency else None,
        "placements_measured": int(placements_measured),
        "wall_s": float(wall_s),
        "reference_latency_s": reference,
        "latency_reduction_pct": 100.0 * (1.0 - latency / reference) if latency else None,
        "ok": bool(m.ok),
        "error": m.error,
        "budget": None if budget is None else int(budget),
        "learn_s": None if learn_s is None else float(learn_s),
        "placement_source": placement_source,
        "placement": placement.tolist(),
        "device_counts": np.bincount(placement, minlength=base.n_devices).tolist(),
        "n_submodels": int(m.n_submodels),
        "spread_s": float(m.spread_s),
        "devices": list(base.device_names),
        "simulated": bool(base.backend.simulated),
        "backend_settings": base.backend.describe(),
        "agent_best_latency_s": None if agent_best_latency_s is None else float(agent_best_latency_s),
        "extra": dict(extra or {}),
    }


def evaluate(
    agent: Any,
    env,
    budget: int,
    seeds: "int | Iterable[int]" = 1,
    *,
    name: str | None = None,
    model: str | None = None,
    use: str = "best",
    train: bool = True,
    callback: Any = None,
    on_record: Callable[[dict], None] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> list[dict]:
    """Train `agent` on `env` with `budget` measured placements for each seed; one record per seed.

    Args:
        agent: an agent class, a factory ``f()`` or ``f(env)`` returning an agent (or an SB3 model), or an
            instance (an agent or an SB3 model). One seed trains an instance in place; several seeds train a
            deep copy each, so they share no learned state (pass a class or factory if it cannot be copied).
            See the module docstring for what an agent is.
        env: a `DevicePlacementEnv` (``gym.make("DevicePlacement-v0", ...)`` is fine). Shared by the seeds;
            its measurement cache is too, but the final placement is always measured afresh.
        budget: placements the agent may measure (>= 0; some agents, e.g. single-device, need none).
        seeds: a count n (seeds 0..n-1) or the seeds themselves.
        name: the agent's name in the records (default: `agent_name`).
        model: the model's name in the records (default: the graph's name).
        use: ``"best"``: report the agent's ``best_placement`` when it has one, else its deterministic
            ``predict``; ``"predict"``: always the deterministic ``predict`` from a reset observation.
        train: False evaluates the agent as it is (e.g. loaded from a checkpoint) without calling ``learn``;
            one agent instance is then used for every seed (only the final measurement differs).
        callback: passed to ``agent.learn``.
        on_record: called with each record as soon as it is made (progress bars, incremental saving).
        extra: added to every record's ``extra``.

    Returns:
        list of records, one per seed, in seed order.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0 placements, got {budget}")
    if use not in ("best", "predict"):
        raise ValueError(f"use must be 'best' or 'predict', got {use!r}")
    base = getattr(env, "unwrapped", env)
    if not hasattr(base, "backend") or not hasattr(base, "graph"):
        raise TypeError(f"env must be a DevicePlacementEnv (or wrap one), got {type(base).__name__}")
    label = name or agent_name(agent)
    records = []
    seeds_ = seed_list(seeds)
    for seed in seeds_:
        start = time.perf_counter()
        learner = _fresh_agent(agent, env, copy_instance=len(seeds_) > 1) if train else as_agent(agent)
        measured_before = base.placements_measured
        if train:
            learner.learn(env, budget, seed, callback)
        learn_s = time.perf_counter() - start
        placements = base.placements_measured - measured_before

        best = getattr(learner, "best_placement", None) if use == "best" else None
        if best is not None:
            placement, source = np.asarray(best), "best_placement"
        else:
            obs, _ = env.reset(seed=seed)
            placement, source = _predict(learner, obs), "predict"
        measurement = env.unwrapped.measure(placement)
        record = make_record(
            env,
            agent=label,
            seed=seed,
            placement=placement,
            placements_measured=placements,
            wall_s=time.perf_counter() - start,
            model=model,
            budget=budget if train else 0,
            learn_s=learn_s,
            placement_source=source,
            agent_best_latency_s=getattr(learner, "best_latency_s", None),
            measurement=measurement,
            extra=extra,
        )
        plan = getattr(learner, "plan_info", None)
        if isinstance(plan, dict) and plan:  # what a planner reports (e.g. the optimum's proven bound)
            record["extra"]["plan"] = dict(plan)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def expand_variants(name: str, agent: Any, env) -> list[tuple[str, Any]]:
    """The agents `name` stands for on `env`: ``[(name, agent)]``, or one per variant when the agent class has
    a ``variants(env)`` classmethod (single-device: one per device, named ``CPU-only``, ``GPU-only``)."""
    variants = getattr(agent, "variants", None)
    if inspect.isclass(agent) and callable(variants):
        return list(variants(env))
    return [(name, agent)]


def compare(
    models: Sequence[str],
    agents: Mapping[str, Any],
    make_env: Callable[[str, "tuple[str, ...] | None"], Any],
    budget: int,
    seeds: "int | Iterable[int]" = 1,
    *,
    on_record: Callable[[dict], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_skip: Callable[[dict], None] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Evaluate every agent on every model: ``(records, skipped)``.

    Args:
        models: model names (``"resnet"``, ...).
        agents: display name -> agent (class, factory or instance; see `evaluate`). Classes with
            ``variants(env)`` expand (``single-device`` -> ``CPU-only``, ``GPU-only``).
        make_env: ``make_env(model, feature_families)`` -> env; `feature_families` is the agent class's
            ``feature_families`` attribute (None = the env's default), so each agent observes what it expects.
            Envs are built once per (model, families). Give the envs of one model the same graph object and
            backend (as the CLI does), so that they share the real backend's measurement of the reference.
        on_plan: called with the number of (agent, seed) runs planned for each model once they are known.
        on_skip: called with ``{"model", "agent", "seeds", "reason"}`` when an agent cannot run on a model
            (e.g. a planner that needs a cost model on the real backend); the comparison goes on without it.

    The envs are not closed here: `make_env` may share one backend between them; the caller owns it.
    """
    seeds_ = seed_list(seeds)
    records: list[dict] = []
    skipped: list[dict] = []
    for model_ in models:
        envs: dict = {}

        def env_for(agent: Any):
            families = getattr(agent, "feature_families", None)
            key = None if families is None else tuple(families)
            if key not in envs:
                envs[key] = make_env(model_, key)
            return envs[key]

        runs = [(label, variant, env_for(agent))
                for name, agent in agents.items()
                for label, variant in expand_variants(name, agent, env_for(agent))]
        # Pin every env's reference placement now, before any agent runs: envs that share the graph and the
        # backend then share one reference measurement (the same "% vs CPU-only" denominator for all agents).
        for env in envs.values():
            env.unwrapped.reference
        if on_plan is not None:
            on_plan(len(runs) * len(seeds_))
        for label, variant, env in runs:
            for seed in seeds_:
                try:
                    records.extend(evaluate(variant, env, budget, [seed], name=label, model=model_, on_record=on_record))
                except (ValueError, NotImplementedError, ImportError) as exc:
                    skip = {"model": model_, "agent": label, "seeds": seeds_[seeds_.index(seed):],
                            "reason": f"{type(exc).__name__}: {exc}"}
                    skipped.append(skip)
                    if on_skip is not None:
                        on_skip(skip)
                    break  # the same error would repeat for the other seeds
    return records, skipped


def _predict(agent: Any, obs) -> np.ndarray:
    action = agent.predict(obs, deterministic=True)
    if isinstance(action, tuple):  # SB3's (action, state)
        action = action[0]
    return np.asarray(action)


# --------------------------------------------------------------------------------------- results files
def records_to_json(records: Sequence[Mapping[str, Any]], **metadata: Any) -> dict:
    """The results-file object: ``{"records": [...], "versions", "machine", "created", "schema", ...}``.

    `metadata` (e.g. ``command="placement-gym compare ..."``, ``budget=500``) is stored at the top level.
    """
    missing = [(i, k) for i, r in enumerate(records) for k in RECORD_KEYS[:8] if k not in r]
    if missing:
        i, key = missing[0]
        raise ValueError(f"record {i} lacks {key!r}; build records with placement_gym.evaluation.make_record")
    return {
        "schema": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "machine": machine(),
        **metadata,
        "records": [_jsonable_record(r) for r in records],
    }


def write_records(path, records: Sequence[Mapping[str, Any]], *, overwrite: bool = False, **metadata: Any):
    """Write `records_to_json(records, **metadata)` to `path` (refuses to replace a file unless `overwrite`)."""
    return write_json(path, records_to_json(records, **metadata), overwrite=overwrite)


def _jsonable_record(record: Mapping[str, Any]) -> dict:
    # Strict JSON has no inf/nan: a missing latency is null.
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}


# ------------------------------------------------------------------------------------------- tables
def summarize(records: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Mean and std over seeds per (model, agent), in first-seen order.

    Each row: model, agent, backend, simulated, n_seeds, n_failed, latency_mean_s, latency_std_s,
    reduction_mean_pct, reduction_std_pct (the paper's speedup % vs the reference placement),
    reference_latency_s, placements_measured (mean), wall_mean_s, best (True for the fastest agent(s) of its
    model), gap_to_optimal_pct (latency / the ``optimal`` agent's - 1, in %, where it ran on that model).
    Failed seeds are counted and left out of the means.
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["model"], r["agent"])].append(r)
    rows = []
    for (model_, agent_), rs in groups.items():
        ok = [r for r in rs if r.get("ok", r["latency_s"] is not None) and r["latency_s"] is not None]
        lat = np.array([r["latency_s"] for r in ok], dtype=float)
        ref = np.array([r.get("reference_latency_s") or np.nan for r in rs], dtype=float)
        red = 100.0 * (1.0 - lat / np.array([r["reference_latency_s"] for r in ok], dtype=float)) if ok else lat
        rows.append({
            "model": model_,
            "agent": agent_,
            "backend": rs[0]["backend"],
            "simulated": bool(rs[0].get("simulated", False)),
            "n_seeds": len(rs),
            "n_failed": len(rs) - len(ok),
            "latency_mean_s": float(lat.mean()) if ok else None,
            "latency_std_s": float(lat.std()) if ok else None,
            "reduction_mean_pct": float(red.mean()) if ok else None,
            "reduction_std_pct": float(red.std()) if ok else None,
            "reference_latency_s": float(np.nanmedian(ref)) if np.isfinite(ref).any() else None,
            "placements_measured": float(np.mean([r["placements_measured"] for r in rs])),
            "wall_mean_s": float(np.mean([r["wall_s"] for r in rs])),
            "best": False,
        })
    fastest: dict[str, float] = {}
    for row in rows:
        if row["latency_mean_s"] is not None:
            fastest[row["model"]] = min(fastest.get(row["model"], np.inf), row["latency_mean_s"])
    for row in rows:  # ties (e.g. GPU-only and the optimum being the same placement) are all marked
        best = fastest.get(row["model"])
        row["best"] = row["latency_mean_s"] is not None and row["latency_mean_s"] <= best * (1 + 1e-9)
    # The exact optimum on the cost model, where it was run: how far each agent is from it.
    optimum = {r["model"]: r["latency_mean_s"] for r in rows if r["agent"] == OPTIMAL_AGENT and r["latency_mean_s"]}
    for row in rows:
        opt = optimum.get(row["model"])
        row["gap_to_optimal_pct"] = (
            100.0 * (row["latency_mean_s"] / opt - 1.0) if opt and row["latency_mean_s"] is not None else None
        )
    return rows


def format_table(rows: Sequence[Mapping[str, Any]], *, reference_label: str = "reference") -> str:
    """The paper's Table 2 layout: one line per agent; per model the latency (ms) and the speedup % vs the
    reference placement (``100 * (1 - latency / reference)``, the paper's definition), plus, when the exact
    optimum was run, each agent's gap to it (``latency / optimum - 1``, %).

    Cells read ``mean±std`` over seeds (no std for a single seed); ``*`` marks the fastest agent per model.
    """
    models = list(dict.fromkeys(r["model"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    by_cell = {(r["model"], r["agent"]): r for r in rows}
    with_gap = {m: any(r.get("gap_to_optimal_pct") is not None for r in rows if r["model"] == m) for m in models}
    headers = {m: ["latency ms", f"% vs {reference_label}"] + (["gap to opt %"] if with_gap[m] else []) for m in models}

    def cells(row: Mapping[str, Any] | None, model_: str) -> list[str]:
        n = len(headers[model_])
        if row is None:
            return ["-"] * n
        if row["latency_mean_s"] is None:
            return ["failed"] + ["-"] * (n - 1)
        several = row["n_seeds"] - row["n_failed"] > 1
        lat = f"{row['latency_mean_s'] * 1e3:.3f}" + (f"±{row['latency_std_s'] * 1e3:.3f}" if several else "")
        red = f"{row['reduction_mean_pct']:+.1f}" + (f"±{row['reduction_std_pct']:.1f}" if several else "")
        if row["best"]:
            lat = "*" + lat
        if row["n_failed"]:
            lat += f" ({row['n_failed']} failed)"
        out = [lat, red]
        if with_gap[model_]:
            gap = row.get("gap_to_optimal_pct")
            out.append("-" if gap is None else f"{gap:+.1f}")
        return out

    table = {(m, a): cells(by_cell.get((m, a)), m) for m in models for a in agents}
    widths = {m: [max([len(headers[m][k])] + [len(table[m, a][k]) for a in agents]) for k in range(len(headers[m]))]
              for m in models}
    agent_w = max([len("agent")] + [len(a) for a in agents])

    def join(model_: str, values: Sequence[str]) -> str:
        return "  ".join(f"{v:>{w}}" for v, w in zip(values, widths[model_]))

    block_w = {m: sum(widths[m]) + 2 * (len(widths[m]) - 1) for m in models}
    lines = [" " * agent_w + "".join(f" | {m:^{block_w[m]}}" for m in models),
             f"{'agent':<{agent_w}}" + "".join(f" | {join(m, headers[m])}" for m in models)]
    lines.append("-" * len(lines[1]))
    for a in agents:
        lines.append(f"{a:<{agent_w}}" + "".join(f" | {join(m, table[m, a])}" for m in models))
    return "\n".join(lines)


#: Record keys written to CSV (the per-op placement and nested settings stay in the JSON).
CSV_KEYS = (
    "model", "agent", "backend", "seed", "latency_s", "speedup_vs_reference", "latency_reduction_pct",
    "reference_latency_s", "placements_measured", "budget", "wall_s", "learn_s", "ok", "n_submodels",
    "device_counts", "devices", "simulated", "placement_source", "error",
)


def write_csv(path, records: Sequence[Mapping[str, Any]], *, overwrite: bool = False):
    """One CSV row per record (`CSV_KEYS`); refuses to replace a file unless `overwrite`."""
    import csv
    import io
    from pathlib import Path

    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; choose another path or pass overwrite=True (--overwrite)")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_KEYS, extrasaction="ignore")
    writer.writeheader()
    for r in records:
        writer.writerow({k: (" ".join(map(str, r.get(k))) if isinstance(r.get(k), list) else r.get(k)) for k in CSV_KEYS})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buffer.getvalue())
    return path


def plot_summary(path, rows: Sequence[Mapping[str, Any]], *, reference_label: str = "reference",
                 title: str | None = None, overwrite: bool = False):
    """A grouped bar chart (PNG): speedup % vs the reference per model and agent, std over seeds as error bars."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; choose another path or pass overwrite=True (--overwrite)")
    models = list(dict.fromkeys(r["model"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    by_cell = {(r["model"], r["agent"]): r for r in rows}
    width = 0.8 / max(len(agents), 1)
    fig, ax = plt.subplots(figsize=(max(7.0, 2.8 + len(models) * len(agents) * 0.3), 4.0))
    for k, a in enumerate(agents):
        means = [by_cell.get((m, a), {}).get("reduction_mean_pct") for m in models]
        stds = [by_cell.get((m, a), {}).get("reduction_std_pct") for m in models]
        xs = [i + (k - (len(agents) - 1) / 2) * width for i in range(len(models))]
        ax.bar(xs, [v if v is not None else 0.0 for v in means], width,
               yerr=[v if v is not None else 0.0 for v in stds], label=a, capsize=2)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel(f"speedup % vs {reference_label}")
    simulated = any(r.get("simulated") for r in rows)
    backend = ", ".join(sorted({str(r.get("backend")) for r in rows}))
    kind = "simulated latencies" if simulated else "measured latencies"
    ax.set_title(title or f"latency reduction vs {reference_label} ({backend} backend, {kind})")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = [
    "CSV_KEYS", "OPTIMAL_AGENT", "RECORD_KEYS", "SB3Agent", "agent_name", "as_agent", "compare", "evaluate",
    "expand_variants", "format_table", "make_record", "measure_final", "plot_summary", "records_to_json",
    "seed_list", "summarize", "write_csv", "write_records",
]
