"""``compare``: several agents on several models, the paper's table; in this process, or as Ray tasks
(``--ray``: the jobs and their plan are here, the farm that runs them is `placement_gym.distributed`).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Mapping, Sequence

from .. import evaluation, registry
from ..benchmark import _CURVE_POINT, MAX_LATENCY_S, MIN_LATENCY_S
from ..files import MAX_RESULTS_BYTES, versions
from ..models import load_graph
from ..schema import MAX_DEVICES, MAX_OPS, NAME, Integer, ListOf, Number, Optional, Plain, Record, Text, read_json
from .report import check_outputs, interrupted, output_paths, report_results
from .settings import agent_rows, compare_agent_options, env_factory, seeds_of
from .signals import signal_handlers_kept


def cmd_compare(args: argparse.Namespace) -> int:
    """Run several agents on several models and print the paper's table."""
    from tqdm.auto import tqdm

    paths = output_paths(args)
    done = resumed_runs(args, paths)  # --resume: the runs the --json file holds, which its outputs then replace
    check_outputs(args, paths)
    names = args.agents or list(registry.AGENTS)
    _check_agent_names(names)
    options = compare_agent_options(args.agent_option, names)  # bad options: an error before any run
    make_env, backend = env_factory(args)
    finished: list = list(done.values())  # what an interruption keeps: the resumed runs too
    seeds = seeds_of(args)
    try:  # around the bar: it is closed, its line ended, before an interruption is reported
        with tqdm(total=0, desc="compare", unit="run", disable=args.no_progress) as bar:
            def planned(n: int) -> None:
                bar.total += n
                bar.refresh()

            bar.update(len(done))

            def ran(record: dict) -> None:
                finished.append(record)
                bar.set_postfix_str(f"{record['model']}/{record['agent']}")
                bar.update(1)

            def skipped_run(skip: dict) -> None:
                bar.update(len(skip["seeds"]))
                tqdm.write(f"note: {skip['agent']} on {skip['model']} skipped: {skip['reason']}")

            def rows_known(rows: Sequence[str], missing: list[dict]) -> None:
                if missing:  # before any run: an agent asked for and not compared would go unnoticed
                    raise ValueError("; ".join(f"agent {skip['agent']!r}: {skip['reason']}" for skip in missing))
                args.planned_runs = len(args.models) * len(rows) * len(seeds)

            if args.ray:  # the driver never imports the agents: the Ray workers do, each in parallel
                records, skipped, missing = _compare_on_ray(args, names, backend, seeds, rows_known, planned, ran,
                                                            done)
            else:
                agents, rows, missing = agent_rows(names, backend.device_names, options)
                rows_known(list(rows), missing)
                records, skipped = evaluation.compare(args.models, agents, make_env, args.budget, seeds,
                                                      on_record=ran, on_plan=planned, on_skip=skipped_run, done=done)
    except KeyboardInterrupt:
        return interrupted(args, finished, paths)
    return report_results(args, records, missing + skipped, paths)


def _check_agent_names(names: Sequence[str]) -> None:
    """Refuse (ValueError, exit 2) an agent name that is neither registered nor a class that imports, before any
    work. A user's own class is imported here to check it; registered agents are not (``compare --ray``'s driver
    leaves importing them to the workers)."""
    for name in names:
        if name.removeprefix(registry.HYBRID_PREFIX) not in registry.AGENTS:
            registry.load_agent_class(name)


def _compare_on_ray(args: argparse.Namespace, names: Sequence[str], backend, seeds: list[int], rows_known,
                    on_plan, on_record, done: Mapping[tuple, dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """compare's runs as Ray tasks (`placement_gym.distributed.compare`), records in the serial order:
    ``(records, skipped, missing)``. The table's rows come from `compare_plan` on the workers; the jobs are
    `compare_jobs`, each run by `compare_job`; those `done` holds (`resumed_runs`) are not run again."""
    from .. import distributed

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    real = not backend.simulated
    with signal_handlers_kept():  # Ray's start replaces this process's SIGTERM handling with its own
        plan = distributed.warm_up(args.ray, compare_plan, settings, names, real=real)
    rows_known(list(plan["rows"]), plan["missing"])
    on_plan(args.planned_runs)
    jobs = compare_jobs(settings, plan["rows"], seeds, real=real)
    warm = set(plan["warm"])
    kept = {job["index"]: {"records": [done[key]], "skipped": None} for job in jobs
            if (key := (job["label"], evaluation.model_label(job["model"])[0], job["seed"])) in done}
    records, skipped = distributed.compare(jobs, compare_job, args.ray,
                                           warm_started=lambda j: j["label"] in warm,
                                           failed=failed_compare_job, on_record=on_record, done=kept)
    evaluation.add_placements_to_within(records)
    return records, skipped, plan["missing"]


# ----------------------------------------------------------------------- compare --ray's jobs and plan
# What ``placement-gym compare --ray`` sends (`compare_jobs`) and what its workers run (`compare_plan`,
# `compare_job`) on the farm (`placement_gym.distributed`). A job carries the command's settings (its parsed
# arguments, as plain data) and the worker rebuilds the command's env factory and agents from them
# (`placement_gym.commands.settings`), so the driver never imports the agents.

#: Per worker process: the env factory of each command's settings, so the jobs of one (model, row) share a
#: graph and backend as the serial compare does (the exact optimum reuses its solve across seeds).
_JOB_ENVS: dict[str, tuple] = {}


def _job_env(settings: dict) -> tuple:
    """In a Ray worker: ``(make_env, backend)`` of compare's `settings`, built once per worker."""
    key = json.dumps(settings, sort_keys=True, default=str)
    if key not in _JOB_ENVS:
        _JOB_ENVS[key] = env_factory(argparse.Namespace(**settings))
    return _JOB_ENVS[key]


def compare_jobs(settings: dict, rows: Mapping[str, str], seeds: Sequence[int], *, real: bool) -> list[dict]:
    """compare's (model, table row, seed) runs as `compare`'s jobs, in the serial order (model, then row, then
    seed): `settings` are the command's arguments, `rows` table row -> registry name (`compare_plan`'s
    ``"rows"``); each job weighs its graph's size (bigger graphs take longer)."""
    models = settings["models"]
    order = [(model, label, name, seed) for model in models for label, name in rows.items() for seed in seeds]
    size = {model: load_graph(model).n_ops for model in models}
    return [{"index": index, "model": model, "label": label, "agent": name, "seed": seed, "weight": size[model],
             "real": real, "args": settings} for index, (model, label, name, seed) in enumerate(order)]


def compare_plan(settings: dict, names: Sequence[str]) -> dict:
    """In every Ray worker before compare --ray's runs (`warm_up`): import the agents and build the backend and
    graphs the runs will use (seconds, the workers in parallel, instead of on each worker's first run), and say
    what the table's rows are: ``{"rows": {row label: registry name}, "warm": [row labels whose agent takes warm
    starts], "missing": [agents that cannot be built]}``."""
    make_env, backend = _job_env(settings)
    factories, rows, missing = agent_rows(names, backend.device_names,
                                          compare_agent_options(settings.get("agent_option"), names))
    for model in settings["models"]:
        make_env(model)  # loads the graph once for this worker's runs (the env factory keeps it)
    warm = [label for label, factory in factories.items() if isinstance(factory(), evaluation.TakesWarmStarts)]
    return {"rows": rows, "warm": warm, "missing": missing}


def compare_job(job: dict, warm_starts: list) -> dict:
    """One (agent, model, seed) run of ``compare --ray``, in a Ray worker: ``{"records", "skipped"}``."""
    make_env, backend = _job_env(job["args"])
    names = job["args"].get("agents") or list(registry.AGENTS)
    options = compare_agent_options(job["args"].get("agent_option"), names)[job["agent"]]
    agent = registry.agent_factories([job["agent"]], backend.device_names, options)[job["label"]]()
    label, path = evaluation.model_label(job["model"])
    try:
        env = make_env(job["model"], None if agent.feature_families is None else tuple(agent.feature_families))
        env.unwrapped.reference  # the reference first, as the serial compare pins it before any agent runs
        if isinstance(agent, evaluation.TakesWarmStarts):
            agent.warm_start(warm_starts)
        records = evaluation.evaluate(agent, env, job["args"]["budget"], [job["seed"]], name=job["label"],
                                      model=label, model_path=path, relative=False)
    except evaluation.SKIPPABLE as exc:
        return failed_compare_job(job, exc)
    return {"records": records, "skipped": None}


def failed_compare_job(job: dict, exc: Exception) -> dict:
    """The outcome of a ``compare --ray`` run that gave no record: skipped, with why (`exc`), as the serial compare
    reports a run it skipped. For an error the run raised (in its worker), and for a run whose Ray task failed for
    good (its worker died on every retry: on the driver)."""
    label, _ = evaluation.model_label(job["model"])
    return {"records": [], "skipped": evaluation.skip_entry(label or str(job["model"]), job["label"], [job["seed"]],
                                                            exc)}


# ----------------------------------------------------------------------- compare --resume
#: The arguments that say where the results go or how the runs are spread, not what is measured: a resumed
#: compare may change them (``planned_runs`` is the count compare itself adds).
RESUME_FREE = frozenset({"command", "func", "json", "csv", "plot", "overwrite", "no_progress", "resume", "ray",
                         "planned_runs"})
#: A compare results file as far as --resume reads it before taking its runs: its settings, and each run's key,
#: best placement, latencies and curve, bounded as a resumed benchmark's are (`placement_gym.benchmark.RUN_RECORD`:
#: a crafted 1e-30 s would become every row's best known); the rest is plain data, written back as it is.
_RESUMED_LATENCY = Optional(Number(MIN_LATENCY_S, MAX_LATENCY_S))
_RESUMED_RUN = Record(
    {"model": NAME, "agent": NAME, "seed": Integer(0, 2**64 - 1), "curve": ListOf(_CURVE_POINT, max_len=10**7)},
    {"latency_s": _RESUMED_LATENCY, "predict_latency_s": _RESUMED_LATENCY,
     "placement": Optional(ListOf(Integer(0, MAX_DEVICES - 1), max_len=MAX_OPS)),
     "backend_settings": Optional(Record({}, {"cost_model_version": Optional(Integer(0))}, others=Plain()))},
    others=Plain(max_len=10**7), what="a compare run's record (model, agent, seed, curve, ...)")
_RESUMED_FILE = Record({"command": Text(max_len=50), "arguments": Record({}, others=Plain()),
                        "versions": Record({}, others=Optional(Text(max_len=500))),
                        "records": ListOf(_RESUMED_RUN, max_len=1_000_000)},
                       {"resumed_from": ListOf(Record({}, others=Plain()), max_len=10_000)})


def resumed_runs(args: argparse.Namespace, paths: Mapping[str, Path]) -> dict[tuple[str, str, int], dict]:
    """``compare --resume``: the records of the --json file (an interrupted compare's, marked incomplete, or a
    finished one), by ``(row label, model label, seed)``, for `evaluation.compare`'s ``done``; {} without
    --resume. The file must be a compare of the same settings (every argument but `RESUME_FREE`'s), package
    versions and cost model; it is read and checked (`placement_gym.schema`) before anything is built, and its
    outputs (the file itself, the CSV and pictures beside it) are then replaced by the resumed run's
    (``args.overwrite``), which holds every run they held. ``args.resumed_from`` says where the kept runs come
    from (the file's creation, command line, machine and runs, after those it was itself resumed from), which
    the results file records as ``resumed_from``.

    Raises:
        ValueError: no --json, no file there, or a file of another command, setting or version (one line naming
            the first difference)."""
    if not getattr(args, "resume", False):
        return {}
    from ..backends.simulated import COST_MODEL_VERSION

    if "json" not in paths:
        raise ValueError("--resume goes on with the results file of --json: give --json the interrupted run's file")
    path = paths["json"]
    if not Path(path).is_file():
        raise ValueError(f"--resume: no results file at {path} to go on with (without --resume, compare starts "
                         "afresh)")
    data = read_json(path, _RESUMED_FILE, max_bytes=MAX_RESULTS_BYTES, what="compare results file")
    if data["command"] != "compare":
        raise ValueError(f"--resume: {path} holds the results of {data['command']!r}, not of compare")
    ours = json.loads(json.dumps({k: v for k, v in vars(args).items() if k not in RESUME_FREE}, default=str))
    theirs = {k: v for k, v in data["arguments"].items() if k not in RESUME_FREE}
    for key in sorted(set(ours) | set(theirs)):
        if ours.get(key, "(not given)") != theirs.get(key, "(not given)"):
            flag = "--" + key.replace("_", "-")
            raise ValueError(f"--resume: {path} was run with {flag} {_shown(theirs.get(key))}, this command has "
                             f"{flag} {_shown(ours.get(key))}; resume with the same settings")
    now = versions()
    for package in sorted(set(now) | set(data["versions"])):
        if package != "platform" and now.get(package) != data["versions"].get(package):
            raise ValueError(f"--resume: {path} was run with {package} {data['versions'].get(package)}, this is "
                             f"{now.get(package)}; runs of different versions are not put in one file")
    runs: dict[tuple[str, str, int], dict] = {}
    for record in data["records"]:
        version = (record.get("backend_settings") or {}).get("cost_model_version")
        if version is not None and version != COST_MODEL_VERSION:
            raise ValueError(f"--resume: {path} holds runs priced by cost model version {version}, this is version "
                             f"{COST_MODEL_VERSION}; start afresh")
        runs[(record["agent"], record["model"], record["seed"])] = record
    for flag, given in (("--csv", args.csv), ("--plot", args.plot)):  # not beside --json: not the file's own outputs
        if given and Path(given).exists() and not args.overwrite:
            raise ValueError(f"--resume replaces only the files beside --json; {flag} {given} exists (add "
                             "--overwrite to replace it too)")
    args.overwrite = True  # the resumed run's outputs replace the file's, holding every run it held
    args.resumed_from = [*data.get("resumed_from", []),
                         {"created": data.get("created"), "command_line": data.get("command_line"),
                          "machine": data.get("machine"), "runs": len(data["records"]),
                          "incomplete": bool(data.get("incomplete", False))}]
    return runs


def _shown(value) -> str:
    """An argument's value as a command line shows it: ``--seed 0 1``, ``--profile server``."""
    if value is None:
        return "(not given)"
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)
