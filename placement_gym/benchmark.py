"""Benchmark suites: the same graphs, presets, objectives, budgets and seeds for everyone, versioned as data.

A suite (``placement_gym/suites/<name>.json``: ``quick``, ``standard``, ``full``, ``sanity``, or a file of the same
form) names what is run (every case with every model, or the (case, model) pairs its ``items`` list); `run_suite`
runs one agent on every (case, model, seed) of it, writing each finished run at once so that a killed benchmark
resumes where it stopped; `leaderboard` puts the agent's records among the reference
results shipped for the suite (``placement_gym/suites/reference/<name>.json``, the built-in agents and
baselines) and scores every row against the best known placement. All figures are SIMULATED (the suites run on
the cost model, `placement_gym.backends.simulated`).

>>> from placement_gym import benchmark
>>> suite = benchmark.load_suite("quick")
>>> records = benchmark.run_suite("examples/custom_agent.py:BlockHillClimb", suite, out="bench-quick")
>>> board = benchmark.leaderboard(records + benchmark.reference_records(suite), suite)
>>> print(benchmark.leaderboard_markdown(board))

Versions: results record the suite's ``version``, the cost model's (`COST_MODEL_VERSION`) and the package's;
records of another suite version or cost-model version are refused when put on one leaderboard (the package
version is recorded only: a release that changes neither measures the same thing).

`score` is the `Evaluator` of the suites: placements of your own, one per graph, scored against the best known.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from . import evaluation, registry
from ._version import __version__
from .backends.simulated import COST_MODEL_VERSION
from .results import REPLICATE_AGENT, markdown_table
from .files import MAX_RESULTS_BYTES, folder_lock, safe_name, write_json
from .schema import (
    MAX_OPS, Boolean, Integer, ListOf, Number, Optional, Plain, Record, Spec, Text, Where, mismatch, read_json,
    repeated,
)

__all__ = ["COST_MODEL_VERSION", "SUITES", "BenchmarkRun", "Suite", "best_known", "best_within", "check_same_versions",
           "estimate_seconds", "format_gap", "has_own_predict", "leaderboard", "leaderboard_markdown", "load_suite",
           "read_results", "reference_path", "reference_records", "run_suite", "score", "write_results"]

SUITES_DIR = Path(__file__).parent / "suites"
#: The suites shipped with the package (``placement_gym/suites/<name>.json``).
SUITES = ("quick", "standard", "full", "sanity", "sanity-holdout")
#: The format of a suite file this code reads (a suite's own ``version`` is what it measures).
SUITE_FORMAT = 1
#: The metrics a suite may name (`leaderboard`).
METRICS = ("gap_pct", "predict_gap_pct", "placements_to_within", "agent_ms_per_placement")
#: Bounds on a suite file: checked before anything is built from it.
MAX_SUITE_BYTES = 64_000
MAX_ITEMS = 64
MAX_BUDGET = 1_000_000
#: Thresholds (%) of ``placements_to_within`` (`placement_gym.evaluation.WITHIN_PCT`).
WITHIN = tuple(str(p) for p in evaluation.WITHIN_PCT)
#: Fields of a run's record kept in the shipped reference results (placements are left out: they are large and
#: not needed to rank a row).
REFERENCE_KEYS = ("case", "model", "agent", "seed", "ok", "error", "latency_s", "predict_latency_s", "curve",
                  "placements_measured", "agent_ms_per_placement", "wall_s", "search", "budget", "devices",
                  "simulated")


# ------------------------------------------------------------------------------------------------ suites
@dataclass(frozen=True)
class Suite:
    """A benchmark suite (module docstring).

    Attributes:
        name, version: what is measured (a new version whenever any field below changes).
        description: one line.
        models: graph names `placement_gym.models.load_graph` takes (zoo, ``dataset:NAME``, ``synthetic:N:SEED``).
        cases: ``(preset, objective)`` pairs: the simulator's profile preset and what it prices.
        budgets: placements at which rows are compared; one run per (case, model, seed) at the largest, the
            smaller read from its best-so-far curve.
        seeds: the runs' seeds.
        metrics: the leaderboard's columns (`METRICS`).
        items: the ``(case, model)`` pairs run (``case`` as ``"preset:objective"``), where the suite runs each
            case on some of its models only (the ``sanity`` suite); empty: every case with every model.
    """

    name: str
    version: int
    description: str
    models: tuple[str, ...]
    cases: tuple[tuple[str, str], ...]
    budgets: tuple[int, ...]
    seeds: tuple[int, ...]
    metrics: tuple[str, ...]
    items: tuple[tuple[str, str], ...] = ()

    @property
    def budget(self) -> int:
        """Placements of each run: the largest budget."""
        return max(self.budgets)

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """The ``(case, model)`` pairs run, case by case in the order of `cases`: `items` where the suite lists
        them, else every case with every model."""
        everything = tuple((f"{p}:{o}", m) for p, o in self.cases for m in self.models)
        return tuple(pair for pair in everything if pair in self.items) if self.items else everything

    def versions(self) -> dict[str, Any]:
        """What a result of this suite was measured with (recorded in every results file)."""
        return {"suite": self.name, "suite_version": self.version, "cost_model_version": COST_MODEL_VERSION,
                "package_version": __version__}


@dataclass(frozen=True)
class BenchmarkRun:
    """One run: a row label (agent), a case (``preset:objective``), a model and a seed."""

    agent: str
    case: str
    model: str
    seed: int

    def path(self, out: Path) -> Path:
        """Where this run's record lives under a benchmark's output folder (one JSON file per run)."""
        return out / "runs" / safe_name(self.case) / safe_name(self.model) / safe_name(self.agent) / \
            f"seed{self.seed}.json"


def _suite_file() -> Record:
    """The schema of a suite file (`load_suite`)."""
    from .backends.profiles import PRESETS

    def items(item: Spec) -> ListOf:
        return ListOf(item, min_len=1, max_len=MAX_ITEMS)

    return Record({
        "format": Integer(SUITE_FORMAT, SUITE_FORMAT), "suite": Text(min_len=1, max_len=64),
        "version": Integer(1, 1 << 30), "description": Text(max_len=1000), "backend": Text(choices=("simulated",)),
        "models": items(Text(min_len=1, max_len=200)),
        "cases": items(Text(choices=tuple(f"{p}:{o}" for p in PRESETS for o in ("latency", "throughput")))),
        "budgets": items(Integer(1, MAX_BUDGET)), "seeds": items(Integer(0, (1 << 32) - 1)),
        "metrics": items(Text(choices=METRICS)),
    }, {"items": items(ListOf(Text(min_len=1, max_len=200), min_len=2, max_len=2))}, others=None)


def load_suite(suite: "str | Path") -> Suite:
    """A shipped suite by name (`SUITES`) or a suite file, checked (`placement_gym.schema`) before anything is
    built from it: a malformed file is one ValueError naming the file, the field and what is accepted."""
    path = SUITES_DIR / f"{suite}.json" if str(suite) in SUITES else Path(suite)
    if not path.is_file():
        raise ValueError(f"unknown suite {str(suite)!r}: give one of {', '.join(SUITES)} or a suite .json file")
    data = read_json(path, _suite_file(), max_bytes=MAX_SUITE_BYTES, what="suite file")
    from .models import dataset_names, zoo_names
    from .models.synthetic import is_synthetic

    known = set(zoo_names()) | set(dataset_names())
    for i, model in enumerate(data["models"]):  # a wrong name would fail every one of its runs, at the end
        if model not in known and not is_synthetic(model) and not Path(model).is_file():
            raise mismatch(path, f"models[{i}]", model, "a zoo name (" + ", ".join(zoo_names()) + "), a dataset "
                           "entry (`placement-gym info --dataset`), 'synthetic:N[:SEED]' or a model file")
    for field in ("models", "seeds"):  # two runs would be one run (the same file, runs/.../seedN.json), counted twice
        twice = repeated(data[field])
        if twice is not None:
            raise mismatch(path, f"{field}[{twice[1]}]", data[field][twice[1]],
                           f"each {field[:-1]} once ({field}[{twice[0]}] is the same)")
    items = _check_items(path, data)
    return Suite(name=data["suite"], version=data["version"], description=data["description"],
                 models=tuple(data["models"]), cases=tuple(tuple(c.split(":")) for c in data["cases"]),
                 budgets=tuple(data["budgets"]), seeds=tuple(data["seeds"]), metrics=tuple(data["metrics"]),
                 items=items)


def _check_items(path: Path, data: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The ``items`` of suite file `path` (``[[case, model], ...]``; () where it has none), each a case and a model
    the file lists, none twice, and every case and model of the file in one of them."""
    items = tuple(tuple(item) for item in data.get("items", ()))
    for i, (case, model) in enumerate(items):
        if case not in data["cases"]:
            raise mismatch(path, f"items[{i}][0]", case, "one of the suite's cases (" + ", ".join(data["cases"]) + ")")
        if model not in data["models"]:
            raise mismatch(path, f"items[{i}][1]", model, "one of the suite's models (" + ", ".join(data["models"])
                           + ")")
        if items.index((case, model)) != i:
            raise mismatch(path, f"items[{i}]", list(items[i]), "each (case, model) pair once")
    for field, names, column in (("cases", data["cases"], 0), ("models", data["models"], 1)):
        unused = [name for name in names if items and name not in {item[column] for item in items}]
        if unused:
            raise mismatch(path, f"{field}[{names.index(unused[0])}]", unused[0], "a name that some item runs "
                           "(the suite lists items: a case or model in none of them would never run)")
    return items


# ------------------------------------------------------------------------------------------------ running
def run_suite(agent: "str | type | Callable[[], Any]", suite: "Suite | str | Path", *, out: "str | Path | None" = None,
              resume: bool = False, options: Mapping[str, Any] | None = None, ray: str | None = None,
              name: str | None = None, on_plan: Callable[[int, list[BenchmarkRun]], None] | None = None,
              on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Run `agent` on every (case, model, seed) of `suite`; its records, in the suite's order.

    Args:
        agent: a registered name (``hsdag``, ``hybrid:hsdag``), ``"module:Class"``, ``"path/to/file.py:Class"``,
            an agent class or a factory returning a fresh agent. A registered agent that stands for several rows
            (``single-device``) runs each of them.
        suite: a `Suite`, or a name / file for `load_suite`.
        out: a folder to write each finished run to at once (``runs/CASE/MODEL/AGENT/seedN.json``) beside
            ``benchmark.json`` (the suite, its versions and the agent). An existing benchmark folder is refused
            unless `resume`.
        resume: go on with the benchmark in `out`: runs already written are read back, not run again (the
            folder must hold the same suite, versions and agent).
        options: constructor keyword arguments for the agent (``--agent-option``).
        ray: a Ray address (``local:2``): the runs in parallel on a Ray cluster (`placement_gym.distributed`);
            needs `agent` by name (workers build it from the name).
        name: the agent's row label (default: its registry name or class name).
        on_plan: called once the runs are known, before any run, with ``(runs in all, the runs still to do)``.
        on_record: called with each record as soon as its run is done (progress bars).
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    plan = _plan(agent, options, name, suite)  # an unknown agent fails here, before any run
    if out is None:
        return _run_plan(plan, agent, suite, None, {}, options, ray, name, on_plan, on_record)
    out = Path(out)
    label = agent if isinstance(agent, str) else evaluation.agent_name(agent)
    manifest = {**suite.versions(), "agent": name or label, "options": dict(options or {})}
    # Held from before the folder is read until the last run is written: a second benchmark on the same folder
    # (two --resume) is refused at once, naming this process, instead of computing every run again.
    with folder_lock(out):
        done = _open_folder(out, manifest, resume)
        return _run_plan(plan, agent, suite, out, done, options, ray, name, on_plan, on_record)


def _run_plan(plan: list[tuple["BenchmarkRun", Callable[[], Any]]], agent: Any, suite: "Suite", out: Path | None,
              done: dict["BenchmarkRun", dict], options: Mapping[str, Any] | None, ray: str | None,
              name: str | None, on_plan: Callable[[int, list["BenchmarkRun"]], None] | None,
              on_record: Callable[[dict], None] | None) -> list[dict]:
    """`run_suite`'s runs: those of `plan` not `done` already, each written to `out` (where given) as it ends."""
    records: dict[BenchmarkRun, dict] = {run: done[run] for run, _ in plan if run in done}

    def finished(run: BenchmarkRun, record: dict) -> None:
        records[run] = record
        if out is not None:
            write_json(run.path(out), record, overwrite=True)  # atomic: a kill leaves the old file or the new one
        if on_record is not None:
            on_record(record)

    todo = [(run, factory) for run, factory in plan if run not in done]
    if on_plan is not None:
        on_plan(len(plan), [run for run, _ in todo])
    if ray is not None and todo:
        if not isinstance(agent, str):
            raise ValueError("run_suite(ray=...) needs the agent by name ('hsdag', 'module:Class' or "
                             "'path/to/file.py:Class'): Ray workers build it from the name")
        _run_on_ray([run for run, _ in todo], agent, dict(options or {}), name, suite, ray, finished)
    else:
        for run, factory in todo:
            finished(run, _run_one(factory, run, suite))
    return [records[run] for run, _ in plan if run in records]


def _plan(agent: Any, options: Mapping[str, Any] | None, name: str | None,
          suite: Suite) -> list[tuple[BenchmarkRun, Callable[[], Any]]]:
    """Every run of `agent` on `suite` with the factory of its fresh agent, in order: case, row, model, seed."""
    pairs = suite.pairs()
    return [(BenchmarkRun(label, f"{preset}:{objective}", model, seed), factory)
            for preset, objective in suite.cases
            for label, factory in _factories(agent, options, name, preset).items()
            for case, model in pairs if case == f"{preset}:{objective}" for seed in suite.seeds]


def _factories(agent: Any, options: Mapping[str, Any] | None, name: str | None,
               preset: str) -> dict[str, Callable[[], Any]]:
    """Row label -> factory of a fresh agent on `preset`'s devices (``single-device`` is a row per device). A
    name is resolved now, so that an unknown agent fails before any run (ValueError)."""
    if isinstance(agent, str):
        from .backends.profiles import PRESETS

        factories = registry.agent_factories([agent], PRESETS[preset]().device_names, options)
        return {name: next(iter(factories.values()))} if name and len(factories) == 1 else factories
    label = name or evaluation.agent_name(agent)
    if isinstance(agent, type) and options:
        registry.check_options(agent, options)  # before the benchmark's folder is made (`registry.OptionError`)
        return {label: lambda: registry.make_agent(agent, options)}
    return {label: agent}


#: A benchmark folder's manifest (``benchmark.json``), as `_open_folder` reads it back: plain data, the agent's
#: options as ``--agent-option`` takes them (`registry.AGENT_OPTIONS`, so that every benchmark started resumes).
MANIFEST = Record({"options": registry.AGENT_OPTIONS}, others=Plain(max_depth=3, max_len=10_000))


def _open_folder(out: Path, manifest: dict, resume: bool) -> dict[BenchmarkRun, dict]:
    """Prepare benchmark folder `out` (`run_suite`): write its manifest, or on `resume` check it and read back
    the runs already written."""
    path = out / "benchmark.json"
    if not path.exists():
        if any(out.glob("runs/**/*.json")):
            raise FileExistsError(f"{out} holds runs but no benchmark.json: choose an empty folder")
        write_json(path, manifest)
        return {}
    if not resume:
        raise FileExistsError(f"{out} holds a benchmark already: --resume to finish it, or choose another folder")
    found = read_json(path, MANIFEST, max_bytes=1 << 20, what="benchmark manifest")
    for key in ("suite", "suite_version", "cost_model_version", "agent", "options"):
        if not isinstance(found, dict) or found.get(key) != manifest[key]:
            raise mismatch(path, key, found.get(key) if isinstance(found, dict) else found,
                           f"{manifest[key]!r}, this benchmark's: --resume continues the same benchmark only")
    done = {}
    for run_path in sorted(out.glob("runs/*/*/*/seed*.json")):
        record = read_json(run_path, RUN_RECORD, max_bytes=MAX_RESULTS_BYTES, what="run record")
        key = BenchmarkRun(record["agent"], record["case"], record["model"], record["seed"])
        if key.path(out) != run_path:
            raise ValueError(f"{run_path}: holds the run {key}, which belongs elsewhere; delete it to run it again")
        done[key] = record
    return done


_GRAPHS: dict = {}  # graphs built in this process, by name (a benchmark runs each model once per case and seed)


def _make_env(run: BenchmarkRun, families: "tuple[str, ...] | None"):
    """A fresh simulated env for `run` (a backend of its own, so that no run's measurements depend on
    another's: a resumed benchmark gives the records an uninterrupted one gives)."""
    from .backends import make_backend
    from .env import DevicePlacementEnv
    from .models import load_graph

    preset, objective = run.case.split(":")
    if run.model not in _GRAPHS:
        _GRAPHS[run.model] = load_graph(run.model)
    backend = make_backend("simulated", profile=preset, objective=objective)
    features = {} if families is None else {"features": tuple(families)}
    return DevicePlacementEnv(_GRAPHS[run.model], backend=backend, unsupported="repair", **features)


def _run_one(factory: Callable[[], Any], run: BenchmarkRun, suite: Suite) -> dict:
    """One run: a fresh agent on a fresh env; its record (a failed run is a record with ``ok`` false)."""
    agent = factory()
    env = _make_env(run, agent.feature_families)
    try:
        record = evaluation.evaluate(agent, env, suite.budget, [run.seed], name=run.agent, model=run.model,
                                     relative=False)[0]
    except evaluation.SKIPPABLE as exc:  # the agent cannot run here: a failed run, measured as such
        record = _failed_record(run, suite, f"{type(exc).__name__}: {exc}")
    finally:
        env.close()
    # The run's key is its row label; a search layer an option switched on shows as ``hybrid`` (`leaderboard`).
    record.update(case=run.case, agent=run.agent)
    return record


def _failed_record(run: BenchmarkRun, suite: Suite, error: str) -> dict:
    """The record of a run that produced no result (the agent raised, its Ray worker died for good)."""
    return {"case": run.case, "model": run.model, "agent": run.agent, "seed": run.seed, "ok": False, "error": error,
            "latency_s": None, "predict_latency_s": None, "curve": [], "placements_measured": 0,
            "agent_ms_per_placement": None, "wall_s": None, "search": [], "budget": suite.budget,
            "simulated": True}


def _ray_job(job: dict, warm_starts: list) -> dict:
    """One benchmark run in a Ray worker (`placement_gym.distributed.compare`'s ``run_job``)."""
    run = BenchmarkRun(**job["run"])
    suite = Suite(**{**job["suite"], "cases": tuple(map(tuple, job["suite"]["cases"])),
                     "items": tuple(map(tuple, job["suite"].get("items", ())))})
    factories = _factories(job["agent"], job["options"], job["name"], run.case.split(":")[0])
    return {"records": [_run_one(factories[run.agent], run, suite)], "skipped": None}


def _run_on_ray(todo: list[BenchmarkRun], agent: str, options: dict, name: str | None, suite: Suite, address: str,
                finished: Callable[[BenchmarkRun, dict], None]) -> None:
    """`todo` as Ray tasks (`placement_gym.distributed.compare`), each record handed to `finished` on the driver
    as its task ends; a run whose worker failed for good is a failed record."""
    from dataclasses import asdict

    from . import distributed

    jobs = [{"index": i, "model": f"{run.case}/{run.model}", "label": run.agent, "real": False,
             "run": asdict(run), "suite": asdict(suite), "agent": agent, "options": options, "name": name}
            for i, run in enumerate(todo)]
    keys = {(run.agent, run.case, run.model, run.seed): run for run in todo}

    def on_record(record: dict) -> None:
        finished(keys[record["agent"], record["case"], record["model"], record["seed"]], record)

    def failed(job: dict, exc: Exception) -> dict:  # its worker died for good: a failed run, measured as such
        run = BenchmarkRun(**job["run"])
        return {"records": [_failed_record(run, suite, f"{type(exc).__name__}: {exc}")], "skipped": None}

    distributed.compare(jobs, _ray_job, address, warm_started=lambda job: False, failed=failed, on_record=on_record)


# ------------------------------------------------------------------------------------------------ reference
def reference_path(suite: Suite) -> Path:
    """Where the suite's shipped reference results live."""
    return SUITES_DIR / "reference" / f"{safe_name(suite.name)}.json"


def reference_records(suite: "Suite | str | Path", path: "str | Path | None" = None) -> list[dict]:
    """The reference results of `suite` (the built-in agents and baselines): [] where none are shipped.
    Refused (ValueError) when they were measured with another suite or cost-model version."""
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    path = Path(path) if path is not None else reference_path(suite)
    if not path.is_file():
        return []
    data = read_results(path)
    check_same_versions(suite.versions(), data, path)
    return data["records"]


#: The latencies (seconds) a run record read back may give: a simulated latency is microseconds at the least
#: (one op's launch overhead) and far below a day; a value outside this range is a crafted or damaged file, which
#: would otherwise become every row's best known (a 1e-30 s run puts every other agent at a huge gap).
MIN_LATENCY_S, MAX_LATENCY_S = 1e-9, 1e6
_LATENCY = Optional(Number(MIN_LATENCY_S, MAX_LATENCY_S))
_SECONDS = Optional(Number(0, 1e9))  # wall time, agent time per placement (ms): not compared, only bounded
_NAMES = ListOf(Text(max_len=200), max_len=1000)
_CURVE_POINT = Where(
    ListOf(Number(0, max(MAX_BUDGET, MAX_LATENCY_S)), min_len=2, max_len=2),
    lambda point: isinstance(point[0], int) and MIN_LATENCY_S <= point[1] <= MAX_LATENCY_S,
    f"[placements, latency_s]: an integer from 0 to {MAX_BUDGET}, then seconds from {MIN_LATENCY_S:g} to "
    f"{MAX_LATENCY_S:g}")
#: The proof the exact optimum leaves in a record (``plan``, or ``extra.plan``: `leaderboard`'s ``bound``).
_PLAN = Record({}, {"status": Optional(Text(max_len=100)), "lower_bound_s": Optional(Number(0, MAX_LATENCY_S))},
               others=Plain(max_depth=4, max_len=MAX_OPS), what="an object (the optimum's status, lower_bound_s)")
#: One run's record as `run_suite` writes it and a results file (`write_results`) keeps it: every field that
#: `leaderboard`, `estimate_seconds`, the sanity verdict or a resumed benchmark reads is typed and bounded
#: (``ok`` is true or false, never "no"); the rest is plain data, bounded in size.
RUN_RECORD = Record({
    "case": Text(max_len=100), "model": Text(max_len=200), "agent": Text(max_len=500),
    "seed": Integer(0, (1 << 32) - 1),
    "curve": ListOf(_CURVE_POINT, max_len=MAX_BUDGET),
    "latency_s": _LATENCY, "predict_latency_s": _LATENCY,
}, {
    "ok": Boolean(), "error": Optional(Text(max_len=100_000)), "agent_ms_per_placement": _SECONDS,
    "wall_s": _SECONDS, "placements_measured": Integer(0, MAX_BUDGET), "budget": Integer(0, MAX_BUDGET),
    "search": _NAMES, "devices": _NAMES, "simulated": Boolean(), "plan": Optional(_PLAN),
    "extra": Record({}, {"plan": Optional(_PLAN), "run": Optional(Record({}, {"updates": Integer(0)},
                                                                       others=Plain(max_depth=4, max_len=MAX_OPS),
                                                                       what="an object (the run's summary)"))},
                    others=Plain(max_depth=6, max_len=MAX_OPS), what="an object (the run's extra fields)"),
}, others=Plain(max_depth=6, max_len=MAX_OPS), what="a run's record (case, model, agent, seed, curve, latency_s, ...)")
#: A benchmark results file (`write_results`): the versions and the runs' records (`RUN_RECORD`).
BENCHMARK_RESULTS = Record({
    "suite": Text(min_len=1, max_len=64), "suite_version": Integer(1, 1 << 30), "cost_model_version": Integer(0),
    "records": ListOf(RUN_RECORD, max_len=1_000_000),
})


def read_results(path: "str | Path") -> dict:
    """A benchmark results file (`write_results`): ``{"suite", "suite_version", "cost_model_version",
    "package_version", "records": [...]}``, checked against `BENCHMARK_RESULTS` (ValueError naming the file and field)."""
    return read_json(path, BENCHMARK_RESULTS, max_bytes=MAX_RESULTS_BYTES, what="benchmark results file")


def write_results(path: "str | Path", suite: Suite, records: Sequence[dict], *, overwrite: bool = False,
                  **extra: Any) -> Path:
    """Write `records` of `suite` with its versions, slimmed to `REFERENCE_KEYS` (placements left out), and the
    top-level fields `extra` (``placement-gym benchmark --json``: the sanity verdict's rows)."""
    slim = []
    for r in records:
        row = {k: r.get(k) for k in REFERENCE_KEYS}
        plan = (r.get("extra") or {}).get("plan") or r.get("plan") or {}  # a run's, or a slim record's
        if "lower_bound_s" in plan or "status" in plan:  # the exact optimum's proof (or its bound)
            row["plan"] = {"status": plan.get("status"), "lower_bound_s": plan.get("lower_bound_s")}
        slim.append(row)
    return write_json(path, {**suite.versions(), **extra, "records": slim}, overwrite=overwrite)


def check_same_versions(expected: Mapping[str, Any], found: Mapping[str, Any], where: "str | Path") -> None:
    """Refuse (ValueError) results of another suite, suite version or cost-model version than `expected`."""
    for key in ("suite", "suite_version", "cost_model_version"):
        if found.get(key) != expected.get(key):
            raise mismatch(where, key, found.get(key), f"{expected.get(key)!r}, this benchmark's: results of "
                           "different suites or cost-model versions are not comparable (re-run them with this one)")


# ------------------------------------------------------------------------------------------------ scoring
def best_within(record: Mapping[str, Any], budget: int) -> float | None:
    """The best latency `record`'s run had found after `budget` placements (its curve); None before any."""
    found = [v for s, v in record.get("curve") or [] if s <= budget]
    return min(found) if found else None


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(present)) if present else None


def best_known(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(case, model) -> the lowest latency any placement reached (a record's best, a point of its curve or its
    predict); `REPLICATE_AGENT`'s records are no placement, so never the best known."""
    best: dict[tuple[str, str], float] = {}
    for r in records:
        if r["agent"] == REPLICATE_AGENT:
            continue
        values = [v for _, v in r.get("curve") or []] + [r.get("latency_s"), r.get("predict_latency_s")]
        values = [v for v in values if v is not None and r.get("ok", True)]
        if values:
            key = (r["case"], r["model"])
            best[key] = min(best.get(key, math.inf), min(values))
    return best


def has_own_predict(record: Mapping[str, Any]) -> bool:
    """Whether `record`'s ``predict`` is a learned policy's own placement, a figure of another kind than the run's
    best: its run made parameter updates (``extra["run"]["updates"]``). A planner's ``predict`` is its plan and a
    search's its best (they learn nothing), and an agent without a ``predict`` has ``predict_latency_s`` None. A
    record without its run's summary (the suites' reference results keep no ``extra``) tells by the value: a
    predict that differs from the best (a planner's is the same measurement)."""
    if record.get("predict_latency_s") is None:
        return False
    run = (record.get("extra") or {}).get("run") or {}
    if "updates" in run:
        return bool(run["updates"])
    return record["predict_latency_s"] != record.get("latency_s")


def leaderboard(records: Sequence[Mapping[str, Any]], suite: "Suite | Sequence[int]") -> list[dict]:
    """One row per (case, model, agent): its gaps (%) to the best known latency of that (case, model), mean
    over seeds, at each budget of `suite` (or at the budgets given instead of a suite: records of any
    ``placement-gym compare`` file with a ``case`` key added rank the same way).

    Row keys: case, model, agent, hybrid (the search layer ran), seeds, failed (seeds without a result),
    ``gap_pct`` ({budget: gap of the best found within that budget}; `REPLICATE_AGENT`'s row, no placement: its
    replicated figure against the best placement, below 0 where replicating the whole model is faster), ``predict_gap_pct`` (the agent's own
    deterministic placement; None without a policy of its own: where none of the agent's records in the case
    `has_own_predict`), ``placements_to_within`` ({"5"|"2"|"1": median placements over the seeds that got within
    that % of the best known, None if none did}), ``agent_ms_per_placement``, ``best_known_s`` and ``bound``
    ("proven" where the exact optimum proved it, else the optimum's lower bound in seconds or None).
    """
    budgets = suite.budgets if isinstance(suite, Suite) else tuple(suite)
    best = best_known(records)
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["case"], r["model"], r["agent"]), []).append(r)
    policies = {(r["case"], r["agent"]) for r in records if has_own_predict(r)}
    plans = {(r["case"], r["model"]): r["plan"] for r in records if r.get("plan")}
    for r in records:
        plan = (r.get("extra") or {}).get("plan")
        if plan and ("status" in plan or "lower_bound_s" in plan):
            plans[r["case"], r["model"]] = plan
    rows = []
    for (case, model, agent), rs in groups.items():
        known = best.get((case, model))
        ok = [r for r in rs if r.get("ok", True) and r.get("latency_s") is not None]

        def gap(value: float | None) -> float | None:
            return None if value is None or not known else max(0.0, 100.0 * (value / known - 1.0))

        replicate = agent == REPLICATE_AGENT  # no placement: its replicated figure, signed, against the best one
        figure = _mean(r["latency_s"] for r in ok) if replicate else None
        within = {}
        for pct in WITHIN:
            reached = [next((s for s, v in r.get("curve") or [] if v <= known * (1 + float(pct) / 100) * (1 + 1e-12)),
                            None) for r in ok] if known and not replicate else []
            reached = [n for n in reached if n is not None]
            within[pct] = float(np.median(reached)) if reached else None
        plan = plans.get((case, model)) or {}
        hybrid = any(r.get("search") for r in rs)
        rows.append({
            "case": case, "model": model, "hybrid": hybrid,
            "agent": agent if not hybrid or registry.is_hybrid(agent) else registry.HYBRID_PREFIX + agent,
            "seeds": len(rs), "failed": len(rs) - len(ok),
            "gap_pct": {b: (None if figure is None or not known else 100.0 * (figure / known - 1.0)) if replicate
                        else gap(_mean(best_within(r, b) for r in ok)) for b in budgets},
            "predict_gap_pct": (gap(_mean(r.get("predict_latency_s") for r in ok)) if (case, agent) in policies
                                else None),
            "placements_to_within": within,
            "agent_ms_per_placement": _mean(r.get("agent_ms_per_placement") for r in ok),
            "best_known_s": known,
            "bound": None if replicate else "proven" if plan.get("status") == "optimal" else plan.get("lower_bound_s"),
        })
    return rows


def score(placements: Mapping[str, Any], suite: "Suite | str | Path", case: str | None = None, *,
          reference: Sequence[Mapping[str, Any]] | None = None) -> list[dict]:
    """The suites' evaluator: measure your own placements, one per graph, and score each against the best
    known latency of the reference results.

    Args:
        placements: model name -> (N,) device indices for that graph (the model's own op order, as an env's
            action), for models of `suite`.
        suite: the suite whose graphs, presets and reference results are used.
        case: ``"preset:objective"``; default: every case of the suite.
        reference: records to score against (default: the suite's shipped reference results).

    Returns one dict per (case, model): ``case, model, latency_s, ok, error, best_known_s, gap_pct`` (None where
    the placement failed or no reference result exists).
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    cases = [case] if case is not None else [f"{p}:{o}" for p, o in suite.cases]
    unknown = [m for m in placements if m not in suite.models]
    if unknown:
        raise ValueError(f"models {unknown} are not in suite {suite.name!r} (its models: {', '.join(suite.models)})")
    best = best_known(reference_records(suite) if reference is None else reference)
    scores = []
    pairs = suite.pairs()
    for case_ in cases:
        for model, placement in placements.items():
            if (case_, model) not in pairs:  # a suite of items runs this model on other cases only
                continue
            env = _make_env(BenchmarkRun("score", case_, model, 0), None)
            try:
                m = env.unwrapped.measure(env.unwrapped.validate_action(placement))
            finally:
                env.close()
            known = best.get((case_, model))
            latency = float(m.latency_s) if m.ok else None
            scores.append({"case": case_, "model": model, "latency_s": latency, "ok": bool(m.ok), "error": m.error,
                           "best_known_s": known,
                           "gap_pct": 100.0 * (latency / known - 1.0) if latency is not None and known else None})
    return scores


def format_gap(value: float | None) -> str:
    """A gap (%) as the leaderboard tables show it: ``+1.2``, ``-45.3`` (only `REPLICATE_AGENT`'s, which is no
    placement, can be below the best placement), or ``-`` where there is none."""
    return "-" if value is None else f"{value:+.1f}"


def leaderboard_markdown(rows: Sequence[Mapping[str, Any]], *, highlight: Sequence[str] = ()) -> str:
    """`leaderboard` rows as markdown: one table per case, a row per agent, a column per model; each cell the
    gaps at the suite's budgets, ``(predict)`` where the agent has a policy (``predict_gap_pct`` not None),
    ``[n failed]``; `highlight` rows (your own agents) in bold. Then placements to within 5 / 2 / 1% and agent ms
    per placement."""
    lines: list[str] = []
    for case in dict.fromkeys(r["case"] for r in rows):
        in_case = [r for r in rows if r["case"] == case]
        models = list(dict.fromkeys(r["model"] for r in in_case))
        agents = list(dict.fromkeys(r["agent"] for r in in_case))
        cell = {(r["model"], r["agent"]): r for r in in_case}
        budgets = list(in_case[0]["gap_pct"])

        def grid(title: str, text: Callable[[Mapping[str, Any]], str]) -> None:
            """One markdown table under `title`: a row per agent, a column per model, ``text(row)`` in each cell."""
            table = [[f"**{agent}**" if agent in highlight else agent]
                     + ["" if (model, agent) not in cell else text(cell[model, agent]) for model in models]
                     for agent in agents]
            lines.extend([title, "", markdown_table(["agent"] + models, table), ""])

        def gaps(r: Mapping[str, Any]) -> str:
            if r["failed"] == r["seeds"]:
                return "failed"
            text = " / ".join(format_gap(r["gap_pct"][b]) for b in budgets)
            if r["predict_gap_pct"] is not None:
                text += f" ({format_gap(r['predict_gap_pct'])})"
            return text + (f" [{r['failed']} failed]" if r["failed"] else "")

        def reach(r: Mapping[str, Any]) -> str:
            text = " / ".join("never" if r["placements_to_within"][p] is None
                              else f"{r['placements_to_within'][p]:.0f}" for p in WITHIN)
            ms = r["agent_ms_per_placement"]
            return text + ("" if ms is None else f"; {ms:.1f} ms")

        grid(f"**{case}** (SIMULATED; gap % to the best known at {' / '.join(map(str, budgets))} placements, "
             "(own predict), mean over seeds)", gaps)
        grid("placements to within 5 / 2 / 1% of the best known (median over seeds; never: no seed got there); "
             "agent ms per placement", reach)
    return "\n".join(lines)


def estimate_seconds(runs: Sequence[BenchmarkRun],
                     reference: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """How long `runs` would take, as the range the reference agents span: ``(fastest, slowest)`` over the
    reference agents of the summed wall time of their own runs of the same (case, model) pairs (a new agent's
    time is unknown; a planner takes seconds, a learned agent minutes). None without reference results."""
    walls: dict[str, dict[tuple[str, str], list[float]]] = {}
    for r in reference:
        if r.get("wall_s"):
            walls.setdefault(r["agent"], {}).setdefault((r["case"], r["model"]), []).append(float(r["wall_s"]))
    totals = [sum(float(np.mean(by_pair[run.case, run.model])) for run in runs if (run.case, run.model) in by_pair)
              for by_pair in walls.values()]
    return (min(totals), max(totals)) if totals else None
