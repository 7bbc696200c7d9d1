"""What a run command leaves behind: its output paths (checked before any work), the tables it prints and the
files it writes once its runs are done, and what it keeps when a signal stops it (`interrupted`) or an output
cannot be written (the finished runs' records are kept elsewhere and the one-line error says where).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .. import evaluation, files, results
from .signals import exit_status, interruption, signals_deferred, stopped_by


def output_paths(args: argparse.Namespace) -> dict[str, Path]:
    """Where the results go (JSON; CSV and the curves PNG next to it; compare's bar chart too), by kind:
    ``json``, ``csv``, ``curves``, ``bars``. `check_outputs` checks them before any work."""
    paths: dict[str, Path] = {}
    if args.json:
        stem = Path(args.json)  # x.json or x.json.gz (written compressed): x.csv and x.png beside it
        paths = {"json": stem, "csv": files.beside(stem, ".csv"), "curves": files.beside(stem, ".png")}
        if args.command == "compare":
            paths["bars"] = files.beside(stem, ".bars.png")
    if args.csv:
        paths["csv"] = Path(args.csv)
    if args.plot:
        paths["curves"] = Path(args.plot)
    return paths


def check_outputs(args: argparse.Namespace, paths: Mapping[str, Path],
                  more: Mapping[str, Path] | None = None, folders: Mapping[str, Path] | None = None) -> None:
    """Refuse a run command's outputs before any work (`files.check_outputs`): the results files `paths`
    (`output_paths`) and `more` (train's checkpoints and placements, by name) may not share a path or replace
    a file the command reads (--load, --profile, model files), nor an existing file without --overwrite, nor lie
    in a folder the command writes whole (`folders`: place's --out), which may not hold an input either; each
    must be where it can be created."""
    named_by = {"json": "--json", "csv": "--csv" if args.csv else "the CSV beside --json (--csv moves it)",
                "curves": "--plot" if args.plot else "the curves PNG beside --json (--plot moves it)",
                "bars": "the bar chart beside --json"}
    outputs = {named_by[kind]: path for kind, path in paths.items()}
    outputs.update(more or {})
    inputs = {"--load": getattr(args, "load", None), "--profile": args.profile}
    for flag in ("model", "models"):  # zoo and dataset names are no files: check_outputs skips them
        value = getattr(args, flag, None)
        for model in [value] if isinstance(value, str) else value or []:
            inputs[f"--{flag} {model}"] = model
    files.check_outputs(outputs, args.overwrite, inputs, folders)


def report_results(args: argparse.Namespace, records: list[dict], skipped: list[dict], paths: dict[str, Path],
                   extra_files: Sequence[Path] = (), failed: Sequence[tuple[str, OSError]] = ()) -> int:
    """Print the tables and write the files of a finished command (`extra_files`: those it wrote already;
    `failed`: those it could not, with why). A SIGINT or SIGTERM that arrives meanwhile waits until every file
    is written (`signals_deferred`), then ends the command with its exit status. An output that cannot be
    written does not stop the others; the command then ends with `files.OutputError`, one line saying what
    failed and where the records are (`write_results`)."""
    with signals_deferred():
        status = _print_and_write(args, records, skipped, paths, extra_files, failed)
    if stopped_by() is not None:
        print(f"placement-gym {args.command}: {interruption()} while writing the results; they were written in "
              "full", file=sys.stderr)
        return exit_status()
    return status


def _print_and_write(args: argparse.Namespace, records: list[dict], skipped: list[dict], paths: dict[str, Path],
                     extra_files: Sequence[Path], failed: Sequence[tuple[str, OSError]]) -> int:
    """`report_results`'s work: the tables on stdout, the records and pictures in their files."""
    if not records:
        print(f"placement-gym {args.command}: no agent produced a result", file=sys.stderr)
        return 1
    rows = results.summarize(records)
    reference = f"{records[0]['devices'][0]}-only"
    settings = records[0]["backend_settings"]
    objective = settings.get("objective", "latency")
    kind = (f"SIMULATED {'seconds per inference at steady state (1/throughput)' if objective == 'throughput' else 'latencies'}, "
            f"profile {settings.get('profile')}, {settings.get('schedule')} schedule"
            if records[0]["simulated"] else
            "measured seconds per inference at steady state (1/throughput), median of timed windows"
            if objective == "throughput" else f"measured latencies, median of {settings.get('repeats')} runs")
    print(f"\nbackend {records[0]['backend']} ({kind}); devices {', '.join(records[0]['devices'])}; "
          f"budget {args.budget} placements; {len({r['seed'] for r in records})} seed(s); mean±std over seeds; "
          f"* = fastest; '% vs {reference}' = latency reduction (positive = faster)")
    print(results.format_table(rows, reference_label=reference))
    notes = [note for prefix, note in ROW_NOTES if any(r["agent"].endswith(prefix) or r["agent"] == prefix
                                                        for r in rows)]
    if notes:
        print("rows: " + "; ".join(notes))
    versus = results.format_vs_replicate(rows)
    if versus:
        print(versus + ("" if objective == "throughput" else
                        " (latency objective: replicate is the best single device, one request at a time)"))
    for r in records:  # the exact optimum: proven, or the interval the time limit left
        plan = r["extra"].get("plan", {})
        if r["agent"] == results.OPTIMAL_AGENT and "lower_bound_s" in plan and r["seed"] == records[0]["seed"]:
            proof = "proven optimal" if plan["status"] == "optimal" else f"best found, gap {100 * plan['gap']:.2f}% to its bound"
            fastest = min(x["latency_s"] for x in records if x["model"] == r["model"] and x["latency_s"] is not None
                          and x["agent"] != results.REPLICATE_AGENT)  # replicate is no placement
            beaten = (f"; an agent found {fastest * 1e3:.3f} ms, the gaps above are to that"
                      if fastest < plan["latency_s"] * (1 - 1e-9) else "")
            if plan.get("best_from", "solver") != "solver":
                beaten += f"; its best placement is {plan['best_from']}'s, which it was given as a warm start"
            print(f"optimal on {r['model']}: {plan['latency_s'] * 1e3:.3f} ms, lower bound "
                  f"{plan['lower_bound_s'] * 1e3:.3f} ms ({proof}, {plan['solve_s']:.1f} s, {plan['schedule']} schedule"
                  f"{beaten})")
    learning = results.format_learning_table(rows)
    if learning:
        print("\nhow they learned (best = the best placement found, re-measured; predict = the agent's own "
              "deterministic placement; to N% = placements until within N% of the best known latency, median "
              "over seeds (seeds that got there/all)):")
        print(learning)
    transfer = _transfer_lines(records)
    if transfer:
        print("\n" + transfer)
    for skip in skipped:
        print(f"skipped {skip['agent']} on {skip['model']}: {skip['reason']}")
    pictures = []
    if "curves" in paths:
        pictures.append(("curves", lambda: results.plot_curves(paths["curves"], records, overwrite=args.overwrite)))
    if "bars" in paths:
        pictures.append(("bars", lambda: results.plot_summary(paths["bars"], rows, reference_label=reference,
                                                               overwrite=args.overwrite)))
    written = write_results(args, records, paths, extra_files, failed, pictures, summary=rows, skipped=skipped,
                            backend_settings=records[0]["backend_settings"])
    if not written:
        print("(nothing saved: pass --json PATH to keep the records, curves and, for train, the checkpoints)")
    return 0


def _transfer_lines(records: list[dict]) -> str:
    """For `evaluate --load`: one line per record saying what the saved agent's placement is worth on this model,
    zero-shot (budget 0: its own placement, the one placement measured) or after fine-tuning, against the
    reference and the best and worst single device (measured afresh, not counted as placements)."""
    lines = []
    for r in records:
        singles = r["extra"].get("single_device_latency_s")
        if not singles:
            continue
        how = ("zero-shot (predict only, 1 placement measured)" if r["placements_measured"] == 0 else
               f"fine-tuned for {r['placements_measured']} placements")
        latency = r["predict_latency_s"] if r["placements_measured"] == 0 else r["latency_s"]
        if latency is None:
            lines.append(f"{r['model']}, {r['agent']} seed {r['seed']}, {how}: the placement FAILED ({r['error']})")
            continue
        feasible = {name: v for name, v in singles.items() if v is not None}
        best = min(feasible, key=feasible.get)
        worst = max(feasible, key=feasible.get)
        vs = lambda other: f"{100 * (1 - latency / other):+.1f}%"  # noqa: E731 - positive = faster
        lines.append(f"{r['model']}, {r['agent']} seed {r['seed']}, {how}: {latency * 1e3:.3f} ms; vs reference "
                     f"({r['devices'][0]}-only) {vs(r['reference_latency_s'])}, vs best single device ({best}-only, "
                     f"{feasible[best] * 1e3:.3f} ms) {vs(feasible[best])}, vs worst ({worst}-only) {vs(feasible[worst])}")
    if not lines:
        return ""
    return "the saved agent on this model (positive % = faster):\n" + "\n".join(lines)


#: What the baseline rows of a table are (printed under it when they appear).
ROW_NOTES = (
    ("-only", "X-only = every op on device X"),
    ("openvino-auto", "openvino-auto = the one device OpenVINO's AUTO plugin picks"),
    ("openvino-hetero", "openvino-hetero = the op-by-op map OpenVINO's HETERO plugin makes by itself"),
    ("replicate", "replicate = no placement: the whole model on every device, requests spread over them (AUTO "
                  "CUMULATIVE_THROUGHPUT; latency objective: the best single device)"),
    ("optimal", "optimal = the exact optimum of the simulated cost model (proven or with its bound, below)"),
)


def write_results(args: argparse.Namespace, records: list[dict], paths: dict[str, Path],
                  written: Sequence[Path] = (), failed: Sequence[tuple[str, OSError]] = (),
                  pictures: Sequence[tuple[str, Callable[[], Path]]] = (), announce: bool = True,
                  **metadata) -> list[Path]:
    """Write `records` as the command's JSON (with its arguments and `metadata`) and CSV where asked for, then
    `pictures` (kind in `paths`, drawing function), each as `files.write_atomically` does; return what was
    written (after `written`, files written before), and print it where `announce`.

    An output that cannot be written (`failed` with those before: a full disk, a folder gone read-only) does not
    stop the others. Then `files.OutputError` says, in one line, the first that failed and why, and where the
    records are: the --json file, or, where that was not written, a file `files.keep_records` wrote elsewhere
    (nothing finished is lost to an output error)."""
    metadata = {"command": args.command,
                "arguments": {k: v for k, v in vars(args).items() if k not in ("func", "resumed_from")},
                "budget": args.budget, **metadata}
    if getattr(args, "resumed_from", None):  # compare --resume: where the runs it kept were made
        metadata["resumed_from"] = args.resumed_from
    if sys.argv and sys.argv[0].endswith("placement-gym"):  # run from the shell: keep the exact command line
        metadata["command_line"] = "placement-gym " + " ".join(sys.argv[1:])
    document = results.records_to_json(records, **metadata)
    written, failed = list(written), list(failed)
    named_by = {"json": "--json", "csv": "the CSV", "curves": "the curves PNG", "bars": "the bar chart"}
    steps = [("json", lambda: files.write_json(paths["json"], document, overwrite=args.overwrite)),
             ("csv", lambda: results.write_csv(paths["csv"], records, overwrite=args.overwrite)), *pictures]
    for kind, write in steps:
        if kind not in paths:
            continue
        try:
            written.append(write())
        except OSError as exc:
            failed.append((f"{named_by[kind]} {paths[kind]}", exc))
    for path in written if announce else ():
        print(f"wrote {path}")
    if failed:
        what, exc = failed[0]
        more = f" (and {len(failed) - 1} more output(s))" if len(failed) > 1 else ""
        kept = paths["json"] if "json" in paths and paths["json"] in written else files.keep_records(
            document, args.command, near=paths.get("json"))
        where = (f"the finished runs' records are in {kept}" if kept is not None else
                 "the records could not be written anywhere either (beside it, the current folder, the temp folder)")
        why = exc.strerror or files.os_error_text(exc)  # the reason (its path is a temporary one, or `what`'s)
        raise files.OutputError(f"cannot write {what}{more}: {why}; {where}")
    return written


def interrupted(args: argparse.Namespace, records: list[dict], paths: dict[str, Path],
                written: Sequence[Path] = ()) -> int:
    """Ctrl-C or SIGTERM (`placement_gym.commands.signals.signals_interrupt`): keep the runs that finished
    (records marked incomplete, with what was left), say so in one line, and return the exit status a shell
    reports for the signal."""
    planned = getattr(args, "planned_runs", None)
    left = None if planned is None else planned - len(records)
    saved = list(written)
    if records:
        evaluation.add_placements_to_within(records)
        saved = write_results(args, records, paths, saved, announce=False, incomplete=True,
                              interrupted={"finished_runs": len(records), "planned_runs": planned, "left_runs": left})
    where = f"; wrote {', '.join(map(str, saved))} (marked incomplete)" if saved else (
        "; nothing saved" + ("" if "json" in paths else " (no --json given)"))
    print(f"placement-gym {args.command}: {interruption()} after {len(records)} finished run(s)"
          f"{'' if left is None else f' of {planned}'}{where}", file=sys.stderr)
    return exit_status()
