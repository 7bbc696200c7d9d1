"""The learning sanity suite: does an agent reach an optimum that is known for certain?

The ``sanity`` suite (``placement_gym/suites/sanity.json``) runs small graphs (12-32 ops) under four presets and
both objectives, 500 placements, 3 seeds. For each of its (case, model) pairs the exact solver (``optimal``,
`agents.baselines.optimal`) proves the optimum of the cost model in seconds; the proven optima ship as data
(``placement_gym/suites/reference/sanity_optima.json``, written and checked by
``benchmarks/leaderboard/sanity_optima.py``), so a check needs no solver.

`sanity_check` gives the verdict of each (agent, case, model): it **passes** iff

* at least two thirds of the seeds (2 of 3) found a placement within `SANITY_TOLERANCE_PCT` (2%) of the proven
  optimum within the suite's budget, and
* the agent's median over seeds of its best latency is no worse than the median of the ``random`` agent's runs
  at the same budget (``random`` runs the same suite: ``benchmark.run_suite("random", suite)``).

A learning regression test in the spirit of the published learning curves of SB3's zoo and CleanRL:
tests/test_sanity.py reruns in CI every row a pure learned agent passes in its published results, and asks every
row of every agent, of ``sanity`` and of ``sanity-holdout`` (graphs no default was chosen on), under the opt-in
marker ``sanity``; ``placement-gym benchmark --suite sanity --agent NAME --check`` exits 1 when a row of NAME
fails. All figures are SIMULATED (the cost model).

>>> from placement_gym import benchmark, sanity
>>> suite = benchmark.load_suite("sanity")
>>> records = benchmark.run_suite("hsdag", suite) + benchmark.run_suite("random", suite)
>>> print(sanity.sanity_markdown(sanity.sanity_check(records, suite)))
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import registry
from .benchmark import MAX_LATENCY_S, MIN_LATENCY_S, SUITES_DIR, Suite, best_within, check_same_versions, load_suite
from .results import OPTIMAL_AGENT, markdown_table
from .files import safe_name, write_json
from .schema import MAX_DEVICES, MAX_OPS, Integer, ListOf, Number, Record, Text, mismatch, read_json

__all__ = ["RANDOM_AGENT", "SANITY_TOLERANCE_PCT", "Optimum", "load_optima", "optima_path", "optima_records",
           "prove_optimum", "sanity_check", "sanity_markdown", "sanity_summary", "seeds_needed", "write_optima"]

#: A seed "reaches the optimum" when its best latency is within this % of the proven optimum.
SANITY_TOLERANCE_PCT = 2.0
#: The agent every row is compared with (its median over seeds at the same budget).
RANDOM_AGENT = "random"
#: Bounds on an optima file: checked before anything is built from it.
MAX_OPTIMA_BYTES = 1 << 20
MAX_OPTIMA = 256
#: Relative slack of "no worse than random" (float noise only: the simulated backend is deterministic).
_SAME = 1e-9


# ------------------------------------------------------------------------------------------------ optima
@dataclass(frozen=True)
class Optimum:
    """The proven optimum of one (case, model) pair of a suite (SIMULATED: the cost model's).

    Attributes:
        case: ``"preset:objective"``; model: the graph's name.
        latency_s: the optimum, seconds (under ``throughput``: seconds per inference at steady state).
        lower_bound_s: the solver's lower bound, seconds (equal to `latency_s` within its tolerance when proven).
        status: ``"optimal"`` (proven; anything else is refused by `load_optima`).
        placement: (N,) device indices of an optimal placement, in the graph's op order.
        devices: the preset's device names, in the order `placement` indexes.
        best_single_device_s: the best placement of every op on one device, seconds (how much mixing pays).
        time_limit_s: the solver's time limit; solve_s: how long the proof took (informational).
    """

    case: str
    model: str
    latency_s: float
    lower_bound_s: float
    status: str
    placement: tuple[int, ...]
    devices: tuple[str, ...]
    best_single_device_s: float
    time_limit_s: float
    solve_s: float

    @property
    def mixed(self) -> bool:
        """Whether the optimal placement uses more than one device."""
        return len(set(self.placement)) > 1


def optima_path(suite: Suite) -> Path:
    """Where the proven optima of `suite` ship: ``placement_gym/suites/reference/<suite>_optima.json``."""
    return SUITES_DIR / "reference" / f"{safe_name(suite.name)}_optima.json"


_SECONDS = Number(positive=True)
#: An optimum becomes the leaderboard's best known: bounded as a run record's latencies are.
_LATENCY = Number(MIN_LATENCY_S, MAX_LATENCY_S)
#: An optima file (`write_optima`): the versions it was proven with and one entry per (case, model).
OPTIMA_FILE = Record({
    "suite": Text(min_len=1, max_len=64), "suite_version": Integer(1, 1 << 30), "cost_model_version": Integer(0),
    "package_version": Text(max_len=100),
    "optima": ListOf(Record({
        "case": Text(min_len=1, max_len=100), "model": Text(min_len=1, max_len=200), "latency_s": _LATENCY,
        "lower_bound_s": _LATENCY, "status": Text(choices=("optimal",)),
        "placement": ListOf(Integer(0, MAX_DEVICES - 1), min_len=1, max_len=MAX_OPS),
        "devices": ListOf(Text(min_len=1, max_len=100), min_len=1, max_len=MAX_DEVICES),
        "best_single_device_s": _LATENCY, "time_limit_s": _SECONDS, "solve_s": Number(low=0),
    }, others=None), min_len=1, max_len=MAX_OPTIMA),
}, others=None)


def load_optima(suite: "Suite | str | Path", path: "str | Path | None" = None) -> dict[tuple[str, str], Optimum]:
    """The proven optima of `suite` by (case, model), read from `path` (default `optima_path`) and checked
    (`placement_gym.schema`; nothing in the file is run). Refused (ValueError naming the file and the field)
    when malformed, of another suite, suite version or cost-model version, or missing a pair of the suite."""
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    path = Path(path) if path is not None else optima_path(suite)
    if not path.is_file():
        raise ValueError(f"suite {suite.name!r} ships no proven optima ({path}): `python "
                         "benchmarks/leaderboard/sanity_optima.py --suite SUITE_FILE --out FILE` proves them")
    data = read_json(path, OPTIMA_FILE, max_bytes=MAX_OPTIMA_BYTES, what="optima file")
    check_same_versions(suite.versions(), data, path)
    optima: dict[tuple[str, str], Optimum] = {}
    for i, entry in enumerate(data["optima"]):
        if max(entry["placement"]) >= len(entry["devices"]):
            raise mismatch(path, f"optima[{i}].placement", max(entry["placement"]),
                           f"device indices below {len(entry['devices'])} (the entry's devices)")
        key = (entry["case"], entry["model"])
        if key in optima:
            raise mismatch(path, f"optima[{i}]", f"{key[0]} {key[1]}", "each (case, model) pair once")
        optima[key] = Optimum(**{**entry, "placement": tuple(entry["placement"]), "devices": tuple(entry["devices"])})
    missing = [pair for pair in suite.pairs() if pair not in optima]
    if missing:
        raise mismatch(path, "optima", f"no entry for {missing[0][0]} {missing[0][1]}", "an optimum for every (case, "
                       "model) pair of the suite: prove them again with python benchmarks/leaderboard/sanity_optima.py")
    return optima


def write_optima(path: "str | Path", suite: Suite, optima: Sequence[Optimum], *, overwrite: bool = False) -> Path:
    """Write `optima` of `suite` with its versions (the file `load_optima` reads)."""
    return write_json(path, {**suite.versions(), "optima": [asdict(o) for o in optima]}, overwrite=overwrite)


def prove_optimum(case: str, model: str, time_limit_s: float = 30.0) -> Optimum:
    """Solve (case, model) with the registered ``optimal`` agent on a fresh graph and env (simulated backend,
    ``unsupported="repair"``, as the suites run); its result whether proven or not (`Optimum.status`)."""
    from .backends import make_backend
    from .env import DevicePlacementEnv
    from .models import load_graph

    preset, objective = case.split(":")
    env = DevicePlacementEnv(load_graph(model), backend=make_backend("simulated", profile=preset, objective=objective),
                             unsupported="repair")
    try:
        agent = registry.make_agent(OPTIMAL_AGENT, {"time_limit_s": time_limit_s})
        began = time.perf_counter()
        agent.learn(env, budget=1)
        solve_s = time.perf_counter() - began
        info, placement = agent.plan_info, np.asarray(agent.best_placement, dtype=np.int64)
        singles = [env.measure(np.full(env.graph.n_ops, d)) for d in range(env.n_devices)]
        return Optimum(case=case, model=model, latency_s=float(info["latency_s"]),
                       lower_bound_s=float(info["lower_bound_s"]), status=str(info["status"]),
                       placement=tuple(int(d) for d in placement), devices=tuple(env.device_names),
                       best_single_device_s=min(m.latency_s for m in singles if m.ok), time_limit_s=time_limit_s,
                       solve_s=round(solve_s, 3))
    finally:
        env.close()


def optima_records(optima: Mapping[tuple[str, str], Optimum]) -> list[dict]:
    """The optima as records of the ``optimal`` agent (seed 0, one placement, the proof in ``plan``), so that
    `placement_gym.benchmark.leaderboard` ranks every row against the proven optimum."""
    return [{"case": o.case, "model": o.model, "agent": OPTIMAL_AGENT, "seed": 0, "ok": True, "error": None,
             "latency_s": o.latency_s, "predict_latency_s": o.latency_s, "curve": [[1, o.latency_s]],
             "placements_measured": 1, "agent_ms_per_placement": None, "wall_s": o.solve_s, "search": [],
             "simulated": True, "plan": {"status": o.status, "lower_bound_s": o.lower_bound_s}}
            for o in optima.values()]


# ------------------------------------------------------------------------------------------------ the check
def seeds_needed(n_seeds: int) -> int:
    """Seeds that must reach the optimum for a row to pass: two thirds of `n_seeds`, rounded up (2 of 3)."""
    return -(-2 * n_seeds // 3)


def _median(values: Sequence[float | None]) -> float | None:
    """The median of `values`, a missing or failed value (None) counted as the worst; None if that is the median."""
    found = float(np.median([math.inf if v is None else v for v in values])) if values else math.inf
    return None if math.isinf(found) else found


def _first_within(record: Mapping[str, Any], target_s: float, budget: int) -> int | None:
    """Placements `record`'s run needed to get to `target_s` or below (its curve), None if it never did."""
    return next((int(s) for s, v in record.get("curve") or [] if s <= budget and v <= target_s), None)


def sanity_check(records: Sequence[Mapping[str, Any]], suite: "Suite | str | Path",
                 optima: Mapping[tuple[str, str], Optimum] | None = None) -> list[dict]:
    """The sanity verdict of every (agent, case, model) of `records` (runs of `suite`: `run_suite`'s records,
    ``random``'s among them), in the order of the records.

    Args:
        records: run records with ``agent, case, model, seed, ok, curve``; a pair's missing or failed seed counts
            as not reaching the optimum (and as the worst value in medians).
        suite: the suite they ran (its seeds and budget).
        optima: (case, model) -> proven optimum (default: the suite's shipped ones, `load_optima`).

    Returns one dict per row: ``agent, case, model, optimum_s, seeds`` (the suite's), ``best_s`` and ``gap_pct``
    (per seed: best latency within the budget, seconds, and its gap to the optimum, %; None where the seed has no
    result), ``within`` (seeds within `SANITY_TOLERANCE_PCT`), ``needed`` (`seeds_needed`), ``median_s``,
    ``random_median_s`` (medians over seeds, seconds; None where most seeds failed), ``placements_to_within``
    (per seed: placements to get within the tolerance, None if never) and its median over seeds
    (``placements_to_within_median``; never-reached seeds count as the worst), ``passed`` and ``why`` (the
    failed criteria in words, "" when passed). ValueError when a pair has no optimum or no ``random`` runs.
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    optima = load_optima(suite) if optima is None else optima
    groups: dict[tuple[str, str, str], dict[int, Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["agent"], r["case"], r["model"]), {})[int(r["seed"])] = r
    rows = []
    for (agent, case, model), by_seed in groups.items():
        if (case, model) not in optima:
            raise ValueError(f"no proven optimum of {case} {model}: sanity_check takes runs of the suite "
                             f"{suite.name!r} only ({', '.join(f'{c} {m}' for c, m in suite.pairs())})")
        randoms = groups.get((RANDOM_AGENT, case, model))
        if randoms is None:
            raise ValueError(f"sanity_check needs the {RANDOM_AGENT!r} agent's runs of {case} {model}: add "
                             f"benchmark.run_suite({RANDOM_AGENT!r}, suite) to the records")
        rows.append(_row(agent, case, model, by_seed, randoms, optima[case, model], suite))
    return rows


def _row(agent: str, case: str, model: str, by_seed: Mapping[int, Mapping[str, Any]],
         randoms: Mapping[int, Mapping[str, Any]], optimum: Optimum, suite: Suite) -> dict:
    """One row of `sanity_check`."""
    def best(record: Mapping[str, Any] | None) -> float | None:
        return None if record is None or not record.get("ok", True) else best_within(record, suite.budget)

    target = optimum.latency_s * (1 + SANITY_TOLERANCE_PCT / 100) * (1 + 1e-12)
    bests = [best(by_seed.get(s)) for s in suite.seeds]
    gaps = [None if b is None else max(0.0, 100 * (b / optimum.latency_s - 1)) for b in bests]
    reach = [None if b is None else _first_within(by_seed[s], target, suite.budget) for s, b in zip(suite.seeds, bests)]
    within, needed = sum(n is not None for n in reach), seeds_needed(len(suite.seeds))
    median, random_median = _median(bests), _median([best(randoms.get(s)) for s in suite.seeds])
    reach_median = _median([None if n is None else float(n) for n in reach])
    why = []
    if within < needed:
        why.append(f"{within} of {len(suite.seeds)} seeds within {SANITY_TOLERANCE_PCT:g}% (needs {needed})")
    if median is None or (random_median is not None and median > random_median * (1 + _SAME)):
        why.append("median worse than random's")
    return {"agent": agent, "case": case, "model": model, "optimum_s": optimum.latency_s, "seeds": list(suite.seeds),
            "best_s": bests, "gap_pct": gaps, "within": within, "needed": needed, "median_s": median,
            "random_median_s": random_median, "placements_to_within": reach,
            "placements_to_within_median": reach_median, "passed": not why, "why": "; ".join(why)}


def sanity_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Per agent (in the order of `rows`): ``agent``, ``rows``, ``passed`` (rows that passed), ``verdict``
    ("PASS" when every row passed, else "FAIL")."""
    agents: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        agents.setdefault(row["agent"], []).append(row)
    return [{"agent": agent, "rows": len(rs), "passed": sum(r["passed"] for r in rs),
             "verdict": "PASS" if all(r["passed"] for r in rs) else "FAIL"} for agent, rs in agents.items()]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4f}"


def _gaps(gaps: Sequence[float | None]) -> str:
    return " / ".join("failed" if g is None else f"+{g:.1f}" for g in gaps)


def sanity_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """`sanity_check` rows as a markdown table, one line per (agent, case, model)."""
    header = ["agent", "case", "model", "optimum ms", "gap % per seed", f"seeds within {SANITY_TOLERANCE_PCT:g}%",
              "median ms", "random's median ms", f"placements to {SANITY_TOLERANCE_PCT:g}% (median)", "verdict"]
    table = [[r["agent"], r["case"], r["model"], _ms(r["optimum_s"]), _gaps(r["gap_pct"]),
              f"{r['within']}/{len(r['seeds'])}", _ms(r["median_s"]), _ms(r["random_median_s"]),
              "never" if r["placements_to_within_median"] is None else f"{r['placements_to_within_median']:.0f}",
              "pass" if r["passed"] else f"**FAIL**: {r['why']}"] for r in rows]
    return (f"**sanity** (SIMULATED; gap % of each seed's best to the proven optimum; pass: >= 2/3 of the seeds "
            f"within {SANITY_TOLERANCE_PCT:g}% and the median no worse than random's)\n\n"
            + markdown_table(header, table))
