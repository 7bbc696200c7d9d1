"""The leaderboard tables from the results of `benchmarks/leaderboard.sh` (SIMULATED figures).

    python benchmarks/leaderboard_table.py [benchmarks/results/leaderboard]               # the per-case tables
    python benchmarks/leaderboard_table.py --summary [benchmarks/results/leaderboard]     # the summary table
    python benchmarks/leaderboard_table.py --long benchmarks/results/leaderboard LONG_DIR [LONG_DIR ...]
                                      # long runs of some agents (per case), against the leaderboard's best known

benchmarks/results_pages.py writes both into docs/results/leaderboard.md.

Each results file is one ``placement-gym compare`` of every agent in one (preset, objective) case; its records are
ranked by `placement_gym.benchmark.leaderboard`, the ranking `placement-gym benchmark` uses for suites: per model,
each agent's gap to the best placement anyone in the case found (never negative), at budget 100 (read from the
run's best-so-far curve) and at the run's budget, and its own deterministic placement's gap (``predict``). Below
each case's table: per model, the headroom (best single device / best found - 1: what placement can win) and
whether the ``optimal`` row proved the best found or left a lower bound.
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np

from placement_gym import benchmark
from placement_gym.results import markdown_table

SINGLE_SUFFIX = "-only"
#: The learned agents of benchmarks/leaderboard.sh (each also as ``hybrid:NAME``).
LEARNED = ("hsdag", "placeto", "rnn", "post", "go", "ppo", "ppo-node")
#: Budgets below the run's own, read from the best-so-far curves.
EARLY_BUDGETS = (100,)


def read(path: Path) -> dict:
    """A results file's contents, read once per process (the tables and benchmarks/results_pages.py read each file
    many times): shared between the callers, so they must not change it."""
    return _read(Path(path).resolve())


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def case_of(data: dict) -> str:
    """The case ``"preset:objective"`` of a results file's contents."""
    settings = data["backend_settings"]
    settings = settings if isinstance(settings, dict) else data["records"][0]["backend_settings"]
    return f"{settings.get('profile')}:{settings.get('objective', 'latency')}"


def case_rows(path: Path, budgets: tuple[int, ...] | None = None) -> tuple[str, list[dict]]:
    """The case ``"preset:objective"`` of one results file and its `benchmark.leaderboard` rows at `budgets`
    (default: `EARLY_BUDGETS` below the run's budget, and the run's budget)."""
    data = read(path)
    records = data["records"]
    case = case_of(data)
    if budgets is None:
        budgets = tuple(b for b in EARLY_BUDGETS if b < data["budget"]) + (data["budget"],)
    return case, benchmark.leaderboard([{**r, "case": case} for r in records], budgets)


def geomean_gap(gaps: list[float | None]) -> float | None:
    """Geometric mean of (1 + gap) over models, as a gap in %; None where any model has no gap."""
    if not gaps or any(g is None for g in gaps):
        return None
    return 100 * (float(np.exp(np.mean(np.log1p(np.asarray(gaps) / 100)))) - 1)


def best_single_gaps(rows: list[dict]) -> dict[str, float]:
    """Per model, the best single device's gap (%) to the best found: the headroom placement can win."""
    models = dict.fromkeys(r["model"] for r in rows)
    return {m: min(r["gap_pct"][max(r["gap_pct"])] for r in rows if r["model"] == m
                   and r["agent"].endswith(SINGLE_SUFFIX) and r["gap_pct"][max(r["gap_pct"])] is not None)
            for m in models}


def long_run_rows(paths: list[Path], reference: Path) -> tuple[str, list[dict]]:
    """The rows of long runs' results files (some agents of the leaderboard, a larger budget, in the same case as
    `reference`, a leaderboard file) at budgets 100, 1,000 and their own, ranked against the best known of all the
    files: the reference's records of the other agents join the ranking (``optimal`` and the search among them, so
    a gap is to the best anyone found), and only the long runs' agents are returned."""
    runs = [read(path) for path in paths]
    long = [r for run in runs for r in run["records"]]
    reference_data = read(reference)
    case = case_of(reference_data)
    agents = {r["agent"] for r in long}
    others = [r for r in reference_data["records"] if r["agent"] not in agents]
    budget = max(run["budget"] for run in runs)
    budgets = tuple(b for b in (100, 1000) if b < budget) + (budget,)
    rows = benchmark.leaderboard([{**r, "case": case} for r in long + others], budgets)
    return case, [r for r in rows if r["agent"] in agents]


def long_run_table(paths: list[Path], reference: Path) -> str:
    """One case's long-run tables (`long_run_rows`, `benchmark.leaderboard_markdown`) and, per model, which of its
    agents got within 2% of the best known and after how many placements."""
    case, rows = long_run_rows(paths, reference)
    notes = []
    for model in dict.fromkeys(r["model"] for r in rows):
        reached = sorted((r["placements_to_within"]["2"], r["agent"]) for r in rows
                         if r["model"] == model and r["placements_to_within"]["2"] is not None)
        bound = next(r["bound"] for r in rows if r["model"] == model)
        known = "the proven optimum" if bound == "proven" else "optimum not proven"
        notes.append(f"{model} ({known}): " + (", ".join(f"{agent} after {n:.0f}" for n, agent in reached)
                                                 if reached else "none"))
    return (benchmark.leaderboard_markdown(rows)
            + f"\n**within 2% of the best known** on {case}: " + "; ".join(notes))


def long_run_table_files(folders: list[Path]) -> dict[str, list[Path]]:
    """Results file name (one per case) -> the files of that name in `folders` (long runs of different agents)."""
    files: dict[str, list[Path]] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            files.setdefault(path.name, []).append(path)
    return dict(sorted(files.items()))


def table(path: Path) -> str:
    """One case's tables (`benchmark.leaderboard_markdown`) and its headroom line."""
    case, rows = case_rows(path)
    headroom = best_single_gaps(rows)
    notes = []
    for model, gap in headroom.items():
        row = next(r for r in rows if r["model"] == model)
        bound = row["bound"]
        proof = ("proven" if bound == "proven" else f"bound {bound * 1e3:.2f} ms" if bound else "no bound")
        notes.append(f"{model} {gap:.0f}% (best found {row['best_known_s'] * 1e3:.2f} ms, {proof})")
    return (benchmark.leaderboard_markdown(rows)
            + f"\n**headroom** (best single device vs best found) on {case}: " + "; ".join(notes))


def summary_table(paths: list[Path]) -> str:
    """One row per agent, one column per case: the agent's gap at the run's budget to the best found, geometric
    mean of (1 + gap) over the models; the headroom row (best single device vs best found) first."""
    cases = [case_rows(p) for p in paths]
    agents = list(dict.fromkeys(r["agent"] for _, rows in cases for r in rows if not r["agent"].endswith(SINGLE_SUFFIX)))

    def gap(rows: list[dict], agent: str) -> float | None:
        mine = [r for r in rows if r["agent"] == agent]
        return geomean_gap([r["gap_pct"][max(r["gap_pct"])] for r in mine]) if mine else None

    table = [["best single device"] + [benchmark.format_gap(geomean_gap(list(best_single_gaps(rows).values())))
                                       for _, rows in cases]]
    table += [[a] + [benchmark.format_gap(gap(rows, a)) for _, rows in cases] for a in agents]
    return markdown_table(["agent"] + [case.replace(":", " ") for case, _ in cases], table)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--long"]:
        reference, folders = Path(argv[1]), [Path(a) for a in argv[2:]]
        groups = long_run_table_files(folders)
        print("\n\n".join(long_run_table(paths, reference / name) for name, paths in groups.items()))
        return 0
    summary = "--summary" in argv
    argv = [a for a in argv if a != "--summary"]
    paths = sorted(Path(argv[0] if argv else "benchmarks/results/leaderboard").glob("*.json"))
    print(summary_table(paths) if summary else "\n\n".join(table(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
