"""``compare``: several agents on several models, the paper's table; in this process, or as Ray tasks
(``--ray``: the jobs and their plan are here, the farm that runs them is `placement_gym.distributed`).
"""
from __future__ import annotations

import argparse
import json
from typing import Mapping, Sequence

from .. import evaluation, registry
from ..models import load_graph
from .report import check_outputs, interrupted, output_paths, report_results
from .settings import agent_rows, compare_agent_options, env_factory, seeds_of
from .signals import signal_handlers_kept


def cmd_compare(args: argparse.Namespace) -> int:
    """Run several agents on several models and print the paper's table."""
    from tqdm.auto import tqdm

    paths = output_paths(args)
    check_outputs(args, paths)
    names = args.agents or list(registry.AGENTS)
    _check_agent_names(names)
    options = compare_agent_options(args.agent_option, names)  # bad options: an error before any run
    make_env, backend = env_factory(args)
    finished: list = []
    seeds = seeds_of(args)
    try:  # around the bar: it is closed, its line ended, before an interruption is reported
        with tqdm(total=0, desc="compare", unit="run", disable=args.no_progress) as bar:
            def planned(n: int) -> None:
                bar.total += n
                bar.refresh()

            def done(record: dict) -> None:
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
                records, skipped, missing = _compare_on_ray(args, names, backend, seeds, rows_known, planned, done)
            else:
                agents, rows, missing = agent_rows(names, backend.device_names, options)
                rows_known(list(rows), missing)
                records, skipped = evaluation.compare(args.models, agents, make_env, args.budget, seeds,
                                                      on_record=done, on_plan=planned, on_skip=skipped_run)
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
                    on_plan, on_record) -> tuple[list[dict], list[dict], list[dict]]:
    """compare's runs as Ray tasks (`placement_gym.distributed.compare`), records in the serial order:
    ``(records, skipped, missing)``. The table's rows come from `compare_plan` on the workers; the jobs are
    `compare_jobs`, each run by `compare_job`."""
    from .. import distributed

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    real = not backend.simulated
    with signal_handlers_kept():  # Ray's start replaces this process's SIGTERM handling with its own
        plan = distributed.warm_up(args.ray, compare_plan, settings, names, real=real)
    rows_known(list(plan["rows"]), plan["missing"])
    on_plan(args.planned_runs)
    jobs = compare_jobs(settings, plan["rows"], seeds, real=real)
    warm = set(plan["warm"])
    records, skipped = distributed.compare(jobs, compare_job, args.ray,
                                           warm_started=lambda j: j["label"] in warm,
                                           failed=failed_compare_job, on_record=on_record)
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
