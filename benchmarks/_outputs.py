"""What the benchmark scripts share before any work: refuse existing output files (unless ``--overwrite``) with
argparse's usage error, so a long measurement never ends on a file it may not replace; and pin the timing
process to one CPU core. After it: what every results JSON records beside its numbers, and writing it (or, a row at
a time, a JSON-lines file)."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Iterable

import sys
import time

from placement_gym import files
from placement_gym.backends.simulated import COST_MODEL_VERSION


def refuse_existing_outputs(parser: argparse.ArgumentParser, paths: Iterable["str | Path | None"],
                            overwrite: bool) -> None:
    """``parser.error`` (exit 2, usage line) if two of `paths` (None entries skipped) are one file, or one exists
    and not `overwrite` (`placement_gym.files.check_outputs`, as the CLI checks its outputs)."""
    try:
        given = [path for path in paths if path is not None]
        files.check_outputs({f"output {i + 1} ({path})": path for i, path in enumerate(given)}, overwrite)
    except (ValueError, FileExistsError) as exc:
        parser.error(str(exc))


def parse_args_with_results_file(parser: argparse.ArgumentParser, argv: "list[str] | None", *,
                                 help: str = "results JSON path", option: str = "--json") -> argparse.Namespace:
    """Adds the results file's option (`option`, optional, described by `help`) and ``--overwrite`` as the last
    options of `parser`, parses `argv` and refuses a results file that may not be replaced
    (`refuse_existing_outputs`): what every benchmark that writes one results file checks before any work."""
    results_file = parser.add_argument(option, help=help)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    refuse_existing_outputs(parser, [getattr(args, results_file.dest)], args.overwrite)
    return args


def pin_to_one_core(enabled: bool = True) -> bool:
    """Pin this process to one CPU core (where the OS allows it), so timings are not spread over cores that other
    jobs use; returns whether it did."""
    if not enabled or not hasattr(os, "sched_setaffinity"):
        return False
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    return True


def run_metadata(argv: "list[str] | None", note: str) -> dict:
    """What every results JSON of a benchmark records beside its numbers: the command that made it (`argv` as
    ``main`` got it, None = this process's), a note on how to read it, when, the versions, the simulator's cost
    model version (which its SIMULATED figures belong to) and the machine."""
    return {
        "command": "python " + " ".join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))),
        "note": note,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "versions": files.versions(),
        "cost_model_version": COST_MODEL_VERSION,
        "machine": files.machine(),
    }


def write_results(path: "str | Path | None", data: dict, overwrite: bool = False) -> None:
    """Write `data` to the results file `path` (`files.write_json`) and say so; nothing where no path was given
    (a benchmark's results file is optional: it prints its figures either way)."""
    if path:
        files.write_json(path, data, overwrite=overwrite)
        print(f"wrote {path}")


def emit_row(row: dict, out: "str | Path | None") -> None:
    """Print `row` as one JSON line and, with `out`, append it to that JSON-lines file (a long script's rows are
    kept as they come)."""
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
