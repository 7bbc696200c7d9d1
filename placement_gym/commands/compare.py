"""``compare``: several agents on several models, the paper's table; in this process, or as Ray tasks
(``--ray``: the workers' side, the jobs and their plan, is `placement_gym.distributed`'s).
"""
from __future__ import annotations

import argparse
from typing import Sequence

from .. import evaluation, registry
from .report import check_outputs, interrupted, output_paths, report_results
from .settings import agent_rows, compare_agent_options, env_factory
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
    seeds = evaluation.seed_list(args.seed if args.seed is not None else args.seeds)
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
    ``(records, skipped, missing)``. The table's rows come from `placement_gym.distributed.compare_plan` on the
    workers; the jobs are `placement_gym.distributed.compare_jobs`, each run by
    `placement_gym.distributed.compare_job`."""
    from .. import distributed

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    real = not backend.simulated
    with signal_handlers_kept():  # Ray's start replaces this process's SIGTERM handling with its own
        plan = distributed.warm_up(args.ray, distributed.compare_plan, settings, names, real=real)
    rows_known(list(plan["rows"]), plan["missing"])
    on_plan(args.planned_runs)
    jobs = distributed.compare_jobs(settings, plan["rows"], seeds, real=real)
    warm = set(plan["warm"])
    records, skipped = distributed.compare(jobs, distributed.compare_job, args.ray,
                                           warm_started=lambda j: j["label"] in warm,
                                           failed=distributed.failed_compare_job, on_record=on_record)
    evaluation.add_placements_to_within(records)
    return records, skipped, plan["missing"]
