"""``benchmark``: one agent on a versioned suite, each run written as it finishes (resumable), ranked among the
suite's reference results (`placement_gym.benchmark`), with the sanity verdict on a suite with proven optima.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import files, registry, results
from .settings import key_values
from .signals import exit_status, interruption, signal_handlers_kept


def cmd_benchmark(args: argparse.Namespace) -> int:
    """Run one agent on a benchmark suite, each run written as it finishes, and rank it among the suite's
    reference results (`placement_gym.benchmark`); on a suite with proven optima (``sanity``) run ``random`` too and
    give the sanity verdict (`placement_gym.sanity`)."""
    from .. import benchmark, sanity

    suite = benchmark.load_suite(args.suite)
    options = key_values(args.agent_option, "--agent-option")
    if options:  # refused in one line before any folder, bar or run (`registry.check_options`)
        registry.check_options(args.agent, options)
    reference = benchmark.reference_records(suite, args.reference)  # refused here if of another version
    optima = sanity.load_optima(suite) if sanity.optima_path(suite).is_file() else None
    if args.check and optima is None:
        raise ValueError(f"--check gives the sanity verdict, which needs a suite with proven optima (sanity); suite "
                         f"{suite.name!r} has none")
    if args.json:
        files.check_outputs({"--json": Path(args.json)}, args.overwrite)  # before the minutes of running
    out = Path(args.out or f"benchmark-{files.safe_name(suite.name)}-{files.safe_name(Path(args.agent).name)}")
    files.check_creatable(out, "--out")  # a file where the folder goes, a read-only place: before any run
    runs = [(args.agent, out, options)]
    if optima is not None and args.agent != sanity.RANDOM_AGENT:  # the verdict compares with random's runs
        runs.append((sanity.RANDOM_AGENT, out / sanity.RANDOM_AGENT, {}))
    done: list[list[dict]] = []
    for agent, folder, agent_options in runs:
        records = _run_benchmark(args, suite, agent, folder, agent_options, reference)
        if records is None:
            return exit_status()
        done.append(records)
    records, others = done[0], [r for rs in done[1:] for r in rs]
    mine = list(dict.fromkeys(r["agent"] for r in records))
    extra = others + (sanity.optima_records(optima) if optima is not None else [])
    rows = benchmark.leaderboard(records + extra + [r for r in reference if r["agent"] not in mine], suite)
    table = benchmark.leaderboard_markdown(rows, highlight=mine)
    written = [files.write_json(out / "leaderboard.json", {**suite.versions(), "agents": mine, "rows": rows},
                                  overwrite=True),
               files.write_text(out / "leaderboard.md", table + "\n", overwrite=True)]
    for preset, objective in suite.cases:
        case = f"{preset}:{objective}"
        shown = [r for r in records + others + reference if r["case"] == case and r.get("curve") is not None]
        written.append(results.plot_curves(out / f"curves.{preset}_{objective}.png", shown, overwrite=True,
                                           title=f"{suite.name} suite, {case} (SIMULATED)"))
    print(table)
    verdict = [] if optima is None else sanity.sanity_check(records + others, suite, optima)
    if verdict:
        written += _print_sanity(out, suite, verdict, mine)
    elif not reference:
        print(f"note: suite {suite.name} ships no reference results: the table holds your agent alone "
              "(benchmarks/leaderboard/reference_results.py makes them)", file=sys.stderr)
    if args.json:
        written.append(_write_benchmark_json(args, suite, records + others, mine, verdict))
    print(f"wrote {', '.join(map(str, written))}", file=sys.stderr)
    if all(not r.get("ok", True) for r in records):
        return 1
    return 1 if args.check and any(not row["passed"] for row in verdict if row["agent"] in mine) else 0


def _print_sanity(out: Path, suite, verdict: list[dict], mine: list[str]) -> list[Path]:
    """Print the sanity verdict of the agents `mine` (a table, then one line on stderr) and write every row
    (random's own too: whether random alone reaches an optimum says what a case tests) beside the runs."""
    from .. import sanity

    rows = [row for row in verdict if row["agent"] in mine]
    text = sanity.sanity_markdown(rows)
    print("\n" + text)
    passed = sum(row["passed"] for row in rows)
    print(f"sanity: {'PASS' if passed == len(rows) else 'FAIL'} ({passed} of {len(rows)} rows of {', '.join(mine)} "
          "passed)", file=sys.stderr)
    return [files.write_json(out / "sanity.json", {**suite.versions(), "rows": verdict}, overwrite=True),
            files.write_text(out / "sanity.md", text + "\n", overwrite=True)]


def _run_benchmark(args: argparse.Namespace, suite, agent: str, out: Path, options: dict,
                   reference: list[dict]) -> list[dict] | None:
    """`benchmark.run_suite` of `agent` into `out` with a progress bar and an up-front estimate; None when a
    signal interrupted it (every finished run is in `out`: the message says how to resume)."""
    from tqdm.auto import tqdm

    from .. import benchmark

    finished: list[dict] = []
    with tqdm(total=0, desc=f"benchmark {agent}", unit="run", disable=args.no_progress) as bar:
        def planned(total: int, todo: list) -> None:
            span = benchmark.estimate_seconds(todo, reference)
            rough = "" if span is None else (f", roughly {_duration(span[0])} to {_duration(span[1])} (what the "
                                             "reference agents took, fastest to slowest)")
            tqdm.write(f"suite {suite.name} v{suite.version} (cost model v{benchmark.COST_MODEL_VERSION}, SIMULATED): "
                       f"{total} runs of {agent} ({len(suite.pairs())} (case, model) pairs x {len(suite.seeds)} "
                       f"seeds, {suite.budget} placements each): {total - len(todo)} done already, "
                       f"{len(todo)} to run{rough}; each written to {out} as it finishes", file=sys.stderr)
            bar.total = len(todo)
            bar.refresh()

        def done(record: dict) -> None:
            finished.append(record)
            bar.set_postfix_str(f"{record['case']}/{record['model']}")
            bar.update(1)

        try:
            if args.ray:  # started here: Ray's start replaces this process's SIGTERM handling, which is put back
                from .. import distributed

                with signal_handlers_kept():
                    distributed.connect(args.ray)
            return benchmark.run_suite(agent, suite, out=out, resume=args.resume, options=options, ray=args.ray,
                                       on_plan=planned, on_record=done)
        except KeyboardInterrupt:
            print(f"placement-gym benchmark: {interruption()} after {len(finished)} run(s) of {agent} in this "
                  f"session; every finished run is in {out}: add --resume to finish it", file=sys.stderr)
            return None


def _write_benchmark_json(args: argparse.Namespace, suite, records: list[dict], agents: list[str],
                          verdict: list[dict]) -> Path:
    """``benchmark --json``: the runs' records (`benchmark.write_results`, random's included on a sanity suite),
    with the command, the date, the versions, the machine, your agents and the sanity verdict's rows."""
    import datetime
    import shlex

    from .. import benchmark

    words = ["placement-gym", "benchmark", "--suite", args.suite, "--agent", args.agent]
    for option in args.agent_option or []:
        words += ["--agent-option", option]
    return benchmark.write_results(
        args.json, suite, records, overwrite=args.overwrite, command=shlex.join(words),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        versions=files.versions(), machine=files.machine(), agents=agents, sanity=verdict)


def _duration(seconds: float) -> str:
    """`seconds` as a rough duration for people ("40 s", "12 min", "3.5 h")."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"
