"""The leaderboard tables from the results of `benchmarks/leaderboard/leaderboard.sh` (SIMULATED figures).

    python benchmarks/leaderboard/leaderboard_table.py [benchmarks/results/leaderboard]            # per-case tables
    python benchmarks/leaderboard/leaderboard_table.py --summary [benchmarks/results/leaderboard]  # the summary table
    python benchmarks/leaderboard/leaderboard_table.py --graphs test [--summary] [FOLDER]   # one graph set's files only
    python benchmarks/leaderboard/leaderboard_table.py --update benchmarks/results/pure-agents [--summary] [FOLDER]
                                      # the agents the update folder holds from there (reruns with new defaults)
    python benchmarks/leaderboard/leaderboard_table.py --long benchmarks/results/leaderboard LONG_DIR [LONG_DIR ...]
                                      # long runs of some agents (per case), against the leaderboard's best known

benchmarks/results_pages.py writes both into docs/results/leaderboard.md.

Each results file is one ``placement-gym compare`` of every agent in one (preset, objective) case, on one graph set
and with one seed (``ai_pc_latency_seed0.json``: ResNet / Inception / BERT; ``ai_pc_latency_test_seed0.json``: the
dataset's test split); the files of a case are read together, and their records ranked by
`placement_gym.benchmark.leaderboard`, the ranking `placement-gym benchmark` uses for suites: per model, each
agent's gap to the best placement anyone in the case found (never negative; `replicate`, no placement, shows its
replicated figure against it, below 0 where replicating is faster), mean over seeds, at budget 100 (read from the
runs' best-so-far curves) and at the runs' budget, and its own deterministic placement's gap
(``predict``). Below each case's table: per model, the headroom (best single device / best found - 1: what
placement can win) and whether the ``optimal`` row proved the best found or left a lower bound.
"""
from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from placement_gym import benchmark
from placement_gym.results import markdown_table
from placement_gym.files import load_json
from placement_gym.schema import stored

SINGLE_SUFFIX = "-only"
#: The learned agents of benchmarks/leaderboard/leaderboard.sh (each also as ``hybrid:NAME``).
LEARNED = ("hsdag", "placeto", "rnn", "post", "go", "ppo", "ppo-node", "doppler")
#: Budgets below the run's own, read from the best-so-far curves.
EARLY_BUDGETS = (100,)


def read(path: Path) -> dict:
    """A results file's contents, read once per process while the file stays the same (the tables and
    benchmarks/results_pages.py read each file many times): shared between the callers, so they must not change it."""
    path = stored(Path(path).resolve())  # x.json, or x.json.gz where the results are kept compressed
    stat = path.stat()
    return _read(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _read(path: Path, mtime_ns: int, size: int) -> dict:
    return load_json(path)


def case_of(data: dict) -> str:
    """The case ``"preset:objective"`` of a results file's contents."""
    settings = data["backend_settings"]
    settings = settings if isinstance(settings, dict) else data["records"][0]["backend_settings"]
    return f"{settings.get('profile')}:{settings.get('objective', 'latency')}"


#: ``ai_pc_latency_seed2`` and ``ai_pc_latency_test_seed2`` -> ``ai_pc_latency``: benchmarks/leaderboard/leaderboard.sh
#: writes one file per (case, graph set, seed), the zoo's untagged and the dataset's test split's tagged ``_test``.
FILE_SUFFIX = re.compile(r"(_test)?_seed\d+$")


def case_files(paths: Sequence[Path]) -> dict[str, list[Path]]:
    """Results files grouped by case: ``{"ai_pc_latency": [..._seed0.json, ..._test_seed0.json, ...], ...}``, in name
    order (both graph sets and every seed of a case are read together: each model has its own rows)."""
    groups: dict[str, list[Path]] = {}
    for path in sorted(paths, key=lambda p: p.name):
        groups.setdefault(FILE_SUFFIX.sub("", stem(path)), []).append(path)
    return groups


def stem(path: Path) -> str:
    """A results file's name without ``.json`` or ``.json.gz``: ``ai_pc_latency_seed0``."""
    return path.name.removesuffix(".gz").removesuffix(".json")


def results_files(folder: Path) -> list[Path]:
    """The finished results files of a leaderboard folder, plain (``*.json``) or compressed (``*.json.gz``); an
    interrupted run's ``*.partial.json``, which benchmarks/leaderboard/leaderboard.sh leaves, is not one."""
    return [p for p in sorted(Path(folder).glob("*.json*")) if p.name.endswith((".json", ".json.gz"))
            and not stem(p).endswith(".partial")]


#: The graph sets of benchmarks/leaderboard/leaderboard.sh's GRAPHS argument.
GRAPH_SETS = ("zoo", "test")


def graph_set(path: Path) -> str:
    """``"test"`` for a file of the dataset's test split (``..._test_seedN.json``), else ``"zoo"``."""
    match = FILE_SUFFIX.search(stem(path))
    return "test" if match and match.group(1) else "zoo"


def folder_cases(folder: Path, graphs: str | None = None) -> dict[str, list[Path]]:
    """The results files of a leaderboard folder by case (`case_files`): of one graph set of `GRAPH_SETS`, or of
    both (None)."""
    return case_files([p for p in results_files(folder) if graphs is None or graph_set(p) == graphs])


def case_records(paths: "Path | Sequence[Path]", update: Sequence[Path] = ()) -> tuple[str, int, list[dict]]:
    """The case ``"preset:objective"``, the budget and the records (``case`` added) of one case's results files
    (one per seed); refuses files of different cases or budgets.

    `update`: results files of the same case and budget that rerun some agents (the pure learned agents after
    their defaults changed): every agent they hold is taken from them (`newest_runs`) instead of from `paths`."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    found = {(case_of(read(p)), read(p)["budget"]) for p in [*paths, *update]}
    if len(found) != 1:
        raise ValueError(f"{', '.join(map(str, [*paths, *update]))}: results of different cases or budgets "
                         f"{sorted(found)}")
    (case, budget), = found
    records = [r for p in paths for r in read(p)["records"]]
    if update:
        reruns = newest_runs(update)
        rerun_agents = {r["agent"] for r in reruns}
        kept = [r for r in records if r["agent"] not in rerun_agents]
        # the reruns where the agents' first runs were, so the tables keep their order of rows
        first = next((i for i, r in enumerate(records) if r["agent"] in rerun_agents), len(records))
        before = sum(r["agent"] not in rerun_agents for r in records[:first])
        records = kept[:before] + reruns + kept[before:]
    return case, budget, [{**r, "case": case} for r in records]


def newest_runs(paths: Sequence[Path]) -> list[dict]:
    """The records of `paths`, one per (agent, model, seed): where several files hold the same run (an agent rerun
    after its defaults changed again), the most recently created file's."""
    runs: dict[tuple, dict] = {}
    for path in sorted(paths, key=lambda p: read(p)["created"]):
        runs.update({(r["agent"], r["model"], r["seed"]): r for r in read(path)["records"]})
    return list(runs.values())


def update_cases(folder: Path) -> dict[str, list[Path]]:
    """An update folder's results files by case, named as `folder_cases` names them (``ai_pc_latency``), read from
    each file's settings (its files need not follow the leaderboard's names)."""
    cases: dict[str, list[Path]] = {}
    for path in results_files(folder):
        cases.setdefault(case_of(read(path)).replace(":", "_"), []).append(path)
    return cases


def case_rows(paths: "Path | Sequence[Path]", budgets: tuple[int, ...] | None = None,
              update: Sequence[Path] = ()) -> tuple[str, list[dict]]:
    """The case ``"preset:objective"`` of one case's results files (with `update`'s reruns: `case_records`) and
    their `benchmark.leaderboard` rows at `budgets` (default: `EARLY_BUDGETS` below the runs' budget, and the
    runs' budget)."""
    case, budget, records = case_records(paths, update)
    if budgets is None:
        budgets = tuple(b for b in EARLY_BUDGETS if b < budget) + (budget,)
    return case, benchmark.leaderboard(records, budgets)


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


def long_run_rows(paths: Sequence[Path], reference: Sequence[Path]) -> tuple[str, list[dict]]:
    """The rows of long runs' results files (some agents of the leaderboard, a larger budget, in the same case as
    `reference`, a leaderboard case's files) at budgets 100, 1,000 and their own, ranked against the best known of
    all the files: the reference's records of the other agents join the ranking (``optimal`` and the search among
    them, so a gap is to the best anyone found), and only the long runs' agents are returned. Where several files
    hold the same (agent, model, seed), the newest file's run counts (`newest_runs`: a rerun with new defaults)."""
    long = newest_runs(paths)
    case, _, reference_records = case_records(reference)
    agents = {r["agent"] for r in long}
    others = [r for r in reference_records if r["agent"] not in agents]
    budget = max(read(path)["budget"] for path in paths)
    budgets = tuple(b for b in EARLY_BUDGETS + (1000,) if b < budget) + (budget,)
    rows = benchmark.leaderboard([{**r, "case": case} for r in long] + others, budgets)
    return case, [r for r in rows if r["agent"] in agents]


def long_run_table(paths: Sequence[Path], reference: Sequence[Path]) -> str:
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
    """Case (``ai_pc_latency``) -> its files in `folders` (long runs of different agents; by each file's settings,
    `update_cases`, so a file named after its agent, ``ai_pc_latency_ppo_seed0``, joins its case)."""
    cases: dict[str, list[Path]] = {}
    for folder in folders:
        for case, paths in update_cases(folder).items():
            cases.setdefault(case, []).extend(paths)
    return cases


def table(paths: "Path | Sequence[Path]", update: Sequence[Path] = ()) -> str:
    """One case's tables (`benchmark.leaderboard_markdown`; `update`: reruns, `case_records`) and its headroom
    line."""
    case, rows = case_rows(paths, update=update)
    headroom = best_single_gaps(rows)
    notes = []
    for model, gap in headroom.items():
        row = next(r for r in rows if r["model"] == model)
        bound = row["bound"]
        proof = ("proven" if bound == "proven" else f"bound {bound * 1e3:.2f} ms" if bound else "no bound")
        notes.append(f"{model} {gap:.0f}% (best found {row['best_known_s'] * 1e3:.2f} ms, {proof})")
    return (benchmark.leaderboard_markdown(rows)
            + f"\n**headroom** (best single device vs best found) on {case}: " + "; ".join(notes))


def summary_table(cases_files: Mapping[str, Sequence[Path]],
                  updates: Mapping[str, Sequence[Path]] | None = None) -> str:
    """One row per agent, one column per case (`cases_files`: each case's files by case name, `folder_cases`;
    `updates`: reruns of some agents by the same names, `case_records`): the agent's gap at the runs' budget to
    the best found, mean over seeds, geometric mean of (1 + gap) over the models; the headroom row (best single
    device vs best found) first."""
    updates = updates or {}
    cases = [case_rows(paths, update=updates.get(name, ())) for name, paths in cases_files.items()]
    agents = list(dict.fromkeys(r["agent"] for _, rows in cases for r in rows
                                if not r["agent"].endswith(SINGLE_SUFFIX)))

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
        references = folder_cases(reference, "zoo")
        print("\n\n".join(long_run_table(paths, references[case]) for case, paths in groups.items()))
        return 0
    summary = "--summary" in argv
    argv = [a for a in argv if a != "--summary"]
    updates: dict[str, list[Path]] = {}
    if argv[:1] == ["--update"]:
        updates, argv = update_cases(Path(argv[1])), argv[2:]
    graphs = None
    if argv[:1] == ["--graphs"]:
        if argv[1:2] not in ([g] for g in GRAPH_SETS):
            print(f"leaderboard_table.py: --graphs is one of {', '.join(GRAPH_SETS)}", file=sys.stderr)
            return 2
        graphs, argv = argv[1], argv[2:]
    cases = folder_cases(Path(argv[0] if argv else "benchmarks/results/leaderboard"), graphs)
    print(summary_table(cases, updates) if summary
          else "\n\n".join(table(paths, updates.get(name, ())) for name, paths in cases.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
