"""The tables of the results pages (docs/results/*.md, docs/design-decisions.md, docs/published-benchmarks.md,
docs/agents/learned-placer.md), regenerated from the committed results files in benchmarks/results/.

    python benchmarks/results_pages.py                  # rewrite the tables inside the committed pages
    python benchmarks/results_pages.py --out DIR        # write the pages under DIR instead (DIR/docs/results/...)
    python benchmarks/results_pages.py --check          # exit 1 if a committed page differs from its regeneration

A page keeps its prose; each table sits between two markers that name it::

    <!-- generated: NAME -->
    ...
    <!-- end generated -->

and is replaced by ``TABLES[NAME]()``, which reads only JSON files under benchmarks/results/ and writes, above
the table, the command that made the file, the machine and the date (and, for a file measured before today's
agent defaults, the commit it was measured at). The table code of the benchmark scripts is imported, not copied
(leaderboard_table, transfer, placement_gym.results, placement_gym.benchmark). Each results file is read once
(`load`, cached): a table must not change what it reads.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from placement_gym import results
from placement_gym.benchmark import SUITES_DIR, best_known, best_within, format_gap
from placement_gym.models.dataset import dataset_names
from placement_gym.sanity import SANITY_TOLERANCE_PCT
from placement_gym.results import markdown_table as md_table
from placement_gym.sim2real import describe_gain

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a file (python benchmarks/results_pages.py): import benchmarks.*
    sys.path.insert(0, str(ROOT))

from benchmarks.leaderboard import leaderboard_table  # noqa: E402
from benchmarks.leaderboard.sanity_curves import suite_files as sanity_suite_files  # noqa: E402
from benchmarks.learned_placer import learned_transfer, learned_transfer_others, transfer  # noqa: E402
from benchmarks.published import published_benchmarks  # noqa: E402
from benchmarks.fidelity import simulator_fidelity as simulator_fidelity_script  # noqa: E402

RESULTS = "benchmarks/results"
PAGES = (sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "results").glob("*.md"))
         + ["docs/design-decisions.md", "docs/published-benchmarks.md", "docs/agents/learned-placer.md",
            "docs/agents/doppler.md"])
MARKER = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
#: The commit that made the search a layer of its own: results measured before it ran each learned agent with the
#: search around it, which is today's ``hybrid:NAME`` (tests/test_search_layer.py pins the seeded results).
SEARCH_LAYER_COMMIT = "7d979ae"
MACHINE = "the project's {cores}-core {cpu} VM (KVM, shared with other jobs unless said)"
#: The CPU of the files written before results recorded its model (`placement_gym.files.machine`).
EARLIER_CPU = "AMD EPYC"


def load(name: str) -> dict:
    """The contents of results file `name` (under benchmarks/results/), read once (`leaderboard_table.read`)."""
    return leaderboard_table.read(ROOT / RESULTS / name)


def load_rows(name: str) -> list[dict]:
    """The rows of JSON-lines results file `name` (under benchmarks/results/), one per non-blank line."""
    return [json.loads(line) for line in (ROOT / RESULTS / name).read_text().splitlines() if line.strip()]


def _machine(data: dict) -> str:
    """The machine line of a results file: its core count and CPU, and the openvino and torch versions it recorded
    (a file that recorded none, such as the Ray farm's, gets none)."""
    versions = data.get("versions") or {}
    host = data.get("machine") or {}
    cpu = EARLIER_CPU
    if "cpu_model" in host:  # "Intel(R) Xeon(R) Processor" -> "Intel Xeon Processor"
        cpu = " ".join(host["cpu_model"].replace("(R)", "").replace("(TM)", "").split())
    text = MACHINE.format(cores=host.get("cpu_count", 2), cpu=cpu)
    if "openvino" in versions:
        text += f", openvino {str(versions['openvino']).split('-')[0]}"
    return text + (f", torch {versions['torch']}" if "torch" in versions else "")


def source(files: list[str], command: str, *, date: str | None = None, at: str | None = None,
           data: dict | None = None) -> str:
    """The line above a table: its command, results files, machine and date; `at` (a commit) marks a file measured
    with earlier defaults."""
    data = data if data is not None else load(files[0])
    created = sorted({load(f).get("created", "")[:10] for f in files} - {""})
    day = date or (" to ".join(dict.fromkeys([created[0], created[-1]])) if created else "unknown")
    cited = ", ".join(f"`{RESULTS}/{f}`" for f in files)
    lines = [f"Command: `{command}`  ", f"Results: {cited}  ", f"Machine: {_machine(data)}; measured {day}."]
    if at:
        lines[-1] += (f" **Measured at commit {at}**, before {SEARCH_LAYER_COMMIT} made the search a layer of its "
                      "own: a learned agent's defaults then are today's `hybrid:NAME`.")
    return "\n".join(lines)


# --- leaderboard and sample efficiency (SIMULATED) --------------------------------------------------------------

LEADERBOARD = "leaderboard"
#: Per graph set (`leaderboard_table.GRAPH_SETS`), the command of its files: every preset under both objectives
#: (the empty CASES argument: the script's default), 3 seeds (it resumes past the files that exist).
LEADERBOARD_COMMANDS = {"zoo": 'bash benchmarks/leaderboard/leaderboard.sh 1000 benchmarks/results/leaderboard 3 "" '
                               'local:2',
                        "test": 'bash benchmarks/leaderboard/leaderboard.sh 1000 benchmarks/results/leaderboard 3 "" '
                                'local:2 "" test'}


#: Per graph set, the folder of the pure learned agents' reruns after their defaults changed (2026-11-26, `post`'s
#: again 2026-11-27) and the commands that wrote it: their rows in the leaderboard's tables come from there
#: (`leaderboard_table.case_records`), the other rows (baselines, search, hybrids, whose settings did not change) from
#: the leaderboard's own files. The test split's reruns have seed 0 only.
PURE_RERUNS = {
    "zoo": ("pure-agents", (
        "placement-gym compare --models resnet inception bert --agents hsdag go post rnn ppo placeto ppo-node "
        "--backend simulated --profile P --objective O --unsupported repair --budget 1000 --seed 0 (then --seed 1 2) "
        "--json benchmarks/results/pure-agents/P_O_seed0.json.gz (P_O_seeds1-2)",
        "the same with --agents post --seed 0 1 2 --json benchmarks/results/pure-agents/P_O_post_seeds0-2.json.gz")),
    "test": ("pure-agents-test", (
        'bash benchmarks/leaderboard/leaderboard.sh 1000 benchmarks/results/pure-agents-test 1 "" "" "hsdag go post" '
        "test",
        "placement-gym compare --models TEST_GRAPHS --agents ppo placeto ppo-node --backend simulated --profile P "
        "--objective O --unsupported repair --budget 1000 --seed 0 --json "
        "benchmarks/results/pure-agents-test/P_O_test_sb3-placeto_seed0.json.gz",
        "the same with --agents rnn --json benchmarks/results/pure-agents-test/P_O_test_rnn_seed0.json.gz")),
}


#: The leaderboard re-run under cost model version 2 (`placement_gym.backends.simulated.COST_MODEL_VERSION`), seeds
#: 0 to 2 of the zoo and seed 0 of the test split so far, every agent with its paper's defaults; the rows the
#: script did not hold when it ran (`replicate` under throughput, `doppler`, `hybrid:doppler`, `critical-path`) come
#: from the extra folder.
LEADERBOARD_V2 = "leaderboard-v2"
#: The zoo agents of both version-2 runs (seed 0 adds ``optimal``, which runs with seed 0 only).
LEADERBOARD_V2_ZOO_AGENTS = ("single-device openvino replicate random cheapest greedy topo metis dp local-search hsdag "
                             "placeto rnn post go ppo ppo-node hybrid:hsdag hybrid:placeto hybrid:rnn hybrid:post "
                             "hybrid:go hybrid:ppo hybrid:ppo-node")
LEADERBOARD_V2_COMMANDS = {"zoo": (
    'bash benchmarks/leaderboard/leaderboard.sh 1000 benchmarks/results/leaderboard-v2 1 "" local:2` (the ai_pc and '
    'edge cases, stopped in server latency) and `bash benchmarks/leaderboard/leaderboard.sh 1000 '
    'benchmarks/results/leaderboard-v2 1 "paper:latency paper:throughput server:latency server:throughput" local:2 '
    f'"{LEADERBOARD_V2_ZOO_AGENTS} optimal"` (seed 0), then seeds 1 and 2 case by case: `bash '
    'benchmarks/leaderboard/leaderboard.sh 1000 benchmarks/results/leaderboard-v2 SEEDS "P:O" "" '
    f'"{LEADERBOARD_V2_ZOO_AGENTS}"` (SEEDS 2, then 3), server throughput with RAY `local:2'),
    "test": (
    'bash benchmarks/leaderboard/leaderboard.sh 1000 benchmarks/results/leaderboard-v2 1 "CASES" local:2 '
    '"single-device openvino replicate random cheapest greedy critical-path topo metis dp local-search hsdag placeto '
    'rnn post go ppo ppo-node hybrid:hsdag hybrid:placeto hybrid:rnn hybrid:post hybrid:go hybrid:ppo '
    'hybrid:ppo-node optimal" test')}
LEADERBOARD_V2_EXTRA = {"zoo": ("leaderboard-v2-extra", (
    "placement-gym compare --models resnet inception bert --agents replicate --budget 1000 --seed 0 --profile P "
    "--objective throughput --unsupported repair --json benchmarks/results/leaderboard-v2-extra/"
    "P_throughput_replicate_seed0.json.gz",
    'bash benchmarks/leaderboard/leaderboard.sh 1000 OUT 1 "P:O" local:2 "doppler hybrid:doppler" (its '
    "OUT/P_O_seed0.json.gz moved to benchmarks/results/leaderboard-v2-extra/P_O_doppler_seed0.json.gz)",
    "placement-gym compare --models resnet inception bert --agents critical-path --budget 1000 --seed 0 --profile P "
    "--objective O --unsupported repair --json benchmarks/results/leaderboard-v2-extra/P_O_critical-path_seed0.json.gz"
    )), "test": ("leaderboard-v2-test-extra", (
    f"placement-gym compare --models {' '.join(dataset_names('test'))} --agents critical-path --budget 1000 --seed 0 "
    "--profile P --objective O --unsupported repair --json "
    "benchmarks/results/leaderboard-v2-test-extra/P_O_test_critical-path_seed0.json.gz",
    ))}
#: folder -> (its commands per graph set, per graph set the folder and commands of the runs that update or add
#: rows: `leaderboard_table.case_records`)
BOARDS = {LEADERBOARD: (LEADERBOARD_COMMANDS, PURE_RERUNS), LEADERBOARD_V2: (LEADERBOARD_V2_COMMANDS,
                                                                            LEADERBOARD_V2_EXTRA)}


def _leaderboard_cases(graphs: str = "zoo", board: str = LEADERBOARD) -> dict[str, list[Path]]:
    """A leaderboard folder's results files of one graph set by case (``ai_pc_latency``: its seeds' files)."""
    return leaderboard_table.folder_cases(ROOT / RESULTS / board, graphs)


def _pure_reruns(graphs: str = "zoo", board: str = LEADERBOARD) -> dict[str, list[Path]]:
    """The runs that update or add rows to one graph set of a leaderboard folder, by case (`BOARDS`; none: empty):
    the pure learned agents' reruns of version 1, the rows version 2's script did not hold."""
    reruns = BOARDS[board][1]
    if graphs not in reruns:
        return {}
    return leaderboard_table.update_cases(ROOT / RESULTS / reruns[graphs][0])


def _cited(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT / RESULTS)) for p in paths]


def _leaderboard_source(graphs: str = "zoo", board: str = LEADERBOARD) -> str:
    """The source lines of a graph set's tables: the leaderboard folder's files and command, and the pure learned
    agents' reruns' (`BOARDS`)."""
    cases = _leaderboard_cases(graphs, board)
    paths = [p for paths in cases.values() for p in paths]
    commands, reruns = BOARDS[board]
    command = commands[graphs]
    updates = {name: files for name, files in _pure_reruns(graphs, board).items() if name in cases}
    if updates:
        paths += [p for paths in updates.values() for p in paths]
        command += "`; the rows run apart: `" + "` and `".join(reruns[graphs][1])
    return source(_cited(paths), command)


def _table_command(graphs: str, summary: bool, board: str = LEADERBOARD) -> str:
    words = ["python benchmarks/leaderboard/leaderboard_table.py"] + (["--graphs test"] if graphs == "test" else [])
    reruns = BOARDS[board][1]
    if graphs in reruns:
        words += ["--update", f"{RESULTS}/{reruns[graphs][0]}"]
    return " ".join(words + (["--summary"] if summary else []) + [f"{RESULTS}/{board}"])


def _leaderboard_tables(graphs: str, summary: bool, board: str = LEADERBOARD) -> str:
    """One graph set's summary table (`summary`) or per-case tables of a leaderboard folder, under the source and
    table commands."""
    cases = _leaderboard_cases(graphs, board)
    if not cases:
        return f"No results file yet: `{BOARDS[board][0][graphs]}` writes them."
    updates = _pure_reruns(graphs, board)
    if summary:
        label, body = "Table", leaderboard_table.summary_table(cases, updates)
    else:
        label, body = "Tables", "\n\n".join(leaderboard_table.table(paths, updates.get(name, ()))
                                             for name, paths in cases.items())
    return (_leaderboard_source(graphs, board) + f"  \n{label}: `{_table_command(graphs, summary, board)}`\n\n"
            + body)


def leaderboard_v2_summary() -> str:
    return _leaderboard_tables("zoo", summary=True, board=LEADERBOARD_V2)


def leaderboard_v2_cases() -> str:
    return _leaderboard_tables("zoo", summary=False, board=LEADERBOARD_V2)


def leaderboard_v2_seeds() -> str:
    """The version-2 zoo summary per seed: for every agent with more than one seed, each seed's gap at the runs'
    budget to the case's best found (the same best as the summary's, over every seed's runs), geometric mean over
    the models, ``seed 0 / seed 1 / ...``; the agents whose seeds ended alike in every case, and those with one
    seed, are named below."""
    cases, updates = _leaderboard_cases("zoo", LEADERBOARD_V2), _pure_reruns("zoo", LEADERBOARD_V2)
    columns, per_seed = [], {}  # per_seed: (agent, case) -> {seed: [gap per model]}
    for name, paths in cases.items():
        case, budget, records = leaderboard_table.case_records(paths, updates.get(name, ()))
        columns.append(case)
        known = best_known(records)
        for r in records:
            if r["agent"] == "replicate" or r["agent"].endswith(leaderboard_table.SINGLE_SUFFIX):
                continue  # no placement of its own; a single device is the same run at every seed
            best = best_within(r, budget) if r.get("ok", True) else None
            gap = None if best is None else 100 * (best / known[(case, r["model"])] - 1)
            per_seed.setdefault((r["agent"], case), {}).setdefault(r["seed"], []).append(gap)
    agents = list(dict.fromkeys(agent for (agent, _), seeds in per_seed.items() if len(seeds) > 1))
    if not agents:
        return "Seed 0 only so far: no agent has run a second seed in this folder."
    rows, alike = [], []
    for agent in agents:
        cells = []
        for case in columns:
            seeds = per_seed.get((agent, case), {})
            cells.append(" / ".join(format_gap(leaderboard_table.geomean_gap(seeds[s]))
                                    for s in sorted(seeds)) if seeds else "")
        same = all(len({tuple(g) for g in per_seed.get((agent, case), {}).values()}) <= 1 for case in columns)
        if same:
            alike.append(agent)
        else:
            rows.append([agent] + cells)
    single = [a for a in dict.fromkeys(agent for agent, _ in per_seed) if a not in agents]
    note = "".join(f"\n\n{label}: " + ", ".join(f"`{a}`" for a in names) + "." for label, names in (
        ("The same best latency at every seed in every case", alike), ("Seed 0 only", single)) if names)
    return (_leaderboard_source("zoo", LEADERBOARD_V2) + "\n\n"
            + md_table(["agent"] + [c.replace(":", " ") for c in columns], rows) + note)


def leaderboard_v2_test_summary() -> str:
    return _leaderboard_tables("test", summary=True, board=LEADERBOARD_V2)


def leaderboard_v2_test_cases() -> str:
    return _leaderboard_tables("test", summary=False, board=LEADERBOARD_V2)


#: Zoo graphs by results name, as the tables name them.
ZOO_NAMES = {"resnet": "ResNet-50", "inception": "Inception-V3", "bert": "BERT-base"}


def doppler_sanity() -> str:
    """DOPPLER's rows of both sanity suites (benchmarks/results/SUITE_doppler.json): per (case, model) the proven
    optimum, each seed's gap to it, the seeds within 2%, the median beside `random`'s, its own `predict` and the
    verdict."""
    files = [f"{suite}_doppler.json" for suite in ("sanity", "sanity-holdout")]
    files = [f for f in files if (ROOT / RESULTS / f).is_file()]
    if not files:
        return "No results file yet: `" + SANITY_COMMAND.format(suite="sanity", agent="doppler") + "` writes one."
    rows = []
    for f in files:
        data = load(f)
        predicts: dict[tuple, list] = {}
        for r in data["records"]:
            if r["agent"] == "doppler":
                predicts.setdefault((r["case"], r["model"]), []).append(r["predict_latency_s"])
        for v in data["sanity"]:
            if v["agent"] != "doppler":
                continue
            ms = [f"{1e3 * s:.4f}" for s in predicts[(v["case"], v["model"])]]
            rows.append(["sanity" if data["suite"] == "sanity" else "holdout", v["case"], v["model"],
                         f"{1e3 * v['optimum_s']:.4f}", " / ".join(f"{g:+.1f}" for g in v["gap_pct"]),
                         f"{v['within']}/{len(v['seeds'])}", f"{1e3 * v['median_s']:.4f}",
                         f"{1e3 * v['random_median_s']:.4f}",
                         f"{ms[0]} ({len(ms)} seeds)" if len(set(ms)) == 1 else ", ".join(ms),
                         "pass" if v["passed"] else "fail"])
    header = ["suite", "case", "model", "optimum ms", "gap % per seed", f"seeds within {SANITY_TOLERANCE_PCT:g}%",
              "median ms", "`random`'s median ms", "`predict` ms", "verdict"]
    commands = "` and `".join(SANITY_COMMAND.format(suite=s, agent="doppler") for s in ("sanity", "sanity-holdout"))
    return source(files, commands) + "\n\n" + md_table(header, rows)


#: The issue's bar for DOPPLER's imitation stage: its placement within this many per cent of `critical-path`'s.
IMITATION_WITHIN_PCT = 2.0
#: DOPPLER's imitation stage alone against the heuristic it imitates (`benchmarks/leaderboard/doppler_imitation.py`):
#: results file -> its command (the agent's default 200 episodes on every row; DOPPLER's own 2,000 on the rows the
#: default misses, and on two it meets)
DOPPLER_IMITATION = {
    "doppler_imitation.jsonl": "python benchmarks/leaderboard/doppler_imitation.py --models resnet inception bert "
                               "--presets paper ai_pc server edge --out benchmarks/results/doppler_imitation.jsonl",
    "doppler_imitation_2000.jsonl": "python benchmarks/leaderboard/doppler_imitation.py --models resnet "
                                    "--presets paper ai_pc --imitation-episodes 2000 --out "
                                    "benchmarks/results/doppler_imitation_2000.jsonl` and the same with `--models "
                                    "inception --presets edge"}


def doppler_imitation(name: str = "doppler_imitation.jsonl") -> str:
    """Per (model, preset, objective) of results file `name` (`DOPPLER_IMITATION`): the latency of DOPPLER's
    imitation stage's own placement beside the `critical-path` baseline's, the heuristic's placement's and `dp`'s,
    and how many ops it places as the heuristic; the count of rows within 2% of `critical-path` below."""
    command = DOPPLER_IMITATION[name]
    path = ROOT / RESULTS / name
    if not path.is_file():
        return f"No results file yet: `{command}` writes it."
    lines = load_rows(name)

    def ms(seconds: "float | None") -> str:
        return "fails" if seconds is None else f"{1e3 * seconds:.3f}"

    def versus(a: "float | None", b: float) -> str:
        return "n/a" if a is None else f"{100 * (a / b - 1):+.1f}%"

    rows, within = [], 0
    for r in lines:
        close = (r["imitation_s"] is not None
                 and 100 * abs(r["imitation_s"] / r["critical_path_s"] - 1) <= IMITATION_WITHIN_PCT)
        within += close
        rows.append([ZOO_NAMES.get(r["model"], r["model"]), r["preset"], r["objective"], ms(r["imitation_s"]),
                     ms(r["critical_path_s"]), ms(r["heuristic_s"]), ms(r["dp_s"]),
                     versus(r["imitation_s"], r["critical_path_s"]), versus(r["imitation_s"], r["heuristic_s"]),
                     f"{100 * r['same_ops_as_heuristic']:.1f}%"])
    header = ["model", "preset", "objective", "imitation ms", "`critical-path` ms", "heuristic's placement ms",
              "`dp` ms", "imitation vs `critical-path`", "vs the heuristic's placement", "ops as the heuristic"]
    episodes = sorted({r.get("imitation_episodes") for r in lines} - {None})
    machine = "the project's 2-core AMD EPYC VM (beside other jobs)"
    return (f"Command: `{command}`  \nResults: `{RESULTS}/{name}` "
            f"({', '.join(map(str, episodes))} imitation episodes)  \nMachine: {machine}.\n\n"
            + md_table(header, rows)
            + f"\n\n**Within {IMITATION_WITHIN_PCT:g}% of `critical-path`: {within} of {len(rows)} rows.**")


HEURISTIC_TIES = ("heuristic_ties.jsonl", "python benchmarks/leaderboard/heuristic_ties.py --out "
                  "benchmarks/results/heuristic_ties.jsonl")


def heuristic_ties() -> str:
    """Per (model, preset, objective) where drawing among ties moves the heuristic's latency at all: the
    ``critical-path`` heuristic's latency (ties to the lowest index) and the gaps to it of the placements drawn
    among exact ties (DOPPLER's rule) and among choices within 0.1% (`benchmarks/leaderboard/heuristic_ties.py`)."""
    name, command = HEURISTIC_TIES
    path = ROOT / RESULTS / name
    if not path.is_file():
        return f"No results file yet: `{command}` writes it."
    lines = load_rows(name)

    def spread(tie: dict) -> str:
        low, median, high = tie["gap_pct"]
        return f"{low:+.1f}% / {median:+.1f}% / {high:+.1f}%"

    rows, still = [], 0
    for r in lines:
        exact, close = r["within_0"], r["within_0.001"]
        if all(g == 0 for g in exact["gap_pct"] + close["gap_pct"]):
            still += 1
            continue
        rows.append([ZOO_NAMES.get(r["model"], r["model"]), r["preset"], r["objective"],
                     f"{1e3 * r['lowest_index_s']:.3f}", spread(exact), f"{exact['within_2pct']} of {r['draws']}",
                     spread(close), f"{close['within_2pct']} of {r['draws']}"])
    header = ["model", "preset", "objective", "`critical-path` ms (lowest index)", "exact ties drawn: min / median / max",
              "within 2%", "ties within 0.1% drawn: min / median / max", "within 2%"]
    return (f"Command: `{command}`  \nResults: `{RESULTS}/{name}` ({lines[0]['draws']} draws per tolerance, seed "
            f"{lines[0]['seed']})\n\n" + md_table(header, rows)
            + f"\n\nThe other {still} rows: every drawn placement prices as the lowest-index one (+0.0%).")


#: The changes to DOPPLER's agent code that change its runs, oldest first: (when, commit, what a run created before
#: it did). A DOPPLER run created before a change says so on its table.
DOPPLER_CHANGES = (
    ("2026-11-28T20:17", "78aa54a", "DOPPLER imitated the heuristic without the submodel overhead"),
    ("2026-11-29T06:30", "db61306", "the policy priced transfers by the devices' slowest links, not the link table"),
)


def doppler_leaderboard() -> str:
    """DOPPLER's rows of the version-2 leaderboard (seed 0), one table per case that has them: `doppler` (best
    measured, and its own `predict`), `hybrid:doppler`, the `critical-path` heuristic it imitates, the best placement
    any agent of the case found, and (throughput) `replicate`; milliseconds (throughput: per inference). Each case
    says when its DOPPLER runs were made, and which of `DOPPLER_CHANGES` came after them."""
    cases, updates = _leaderboard_cases("zoo", LEADERBOARD_V2), _pure_reruns("zoo", LEADERBOARD_V2)
    files, blocks = [], []
    for name, paths in cases.items():
        extra = updates.get(name, [])
        if not any(r["agent"] == "doppler" for path in extra for r in leaderboard_table.read(path)["records"]):
            continue
        case, _, records = leaderboard_table.case_records(paths, extra)
        files += [*paths, *extra]
        by = {(r["agent"], r["model"]): r for r in records}
        known = best_known(records)  # the leaderboard's best known: every placement any run measured
        throughput = case.endswith("throughput")
        lines = []
        for model, label in ZOO_NAMES.items():
            best = known[(case, model)]
            ms = [by[(a, model)]["latency_s"] for a in ("doppler", "hybrid:doppler", "critical-path")]
            row = [label, f"{1e3 * ms[0]:.3f}", f"{1e3 * by[('doppler', model)]['predict_latency_s']:.3f}",
                   f"{1e3 * ms[1]:.3f}", f"{1e3 * ms[2]:.3f}", f"{1e3 * best:.3f}",
                   *(f"{100 * (v / best - 1):+.1f}%" for v in (ms[0], ms[1]))]
            if throughput:
                row.append(f"{1e3 * by[('replicate', model)]['latency_s']:.3f}")
            lines.append(row)
        header = ["model", "`doppler`", "`doppler`'s `predict`", "`hybrid:doppler`", "`critical-path`",
                  "best found (any agent)", "`doppler` vs best", "`hybrid:doppler` vs best"]
        created = max(leaderboard_table.read(p)["created"] for p in extra
                      if any(r["agent"] == "doppler" for r in leaderboard_table.read(p)["records"]))
        missed = [f"**before {commit}**: {what}" for when, commit, what in DOPPLER_CHANGES if created < when]
        stale = "; ".join([""] + missed) if missed else f" (after {DOPPLER_CHANGES[-1][1]})"
        blocks.append(f"`{case}` (DOPPLER's runs: {created[:16].replace('T', ' ')} UTC{stale}):\n\n"
                      + md_table(header + (["`replicate`"] if throughput else []), lines))
    if not blocks:
        return "No results file yet."
    cited = ", ".join(f"`{path.relative_to(ROOT)}`" for path in files)
    commands = "` and `".join(LEADERBOARD_V2_EXTRA["zoo"][1][1:])
    return (f"Commands: `{commands}`  \nResults: {cited}  \n"
            f"Machine: {_machine(leaderboard_table.read(files[0]))}.\n\n" + "\n\n".join(blocks))


def leaderboard_summary() -> str:
    return _leaderboard_tables("zoo", summary=True)


def leaderboard_cases() -> str:
    return _leaderboard_tables("zoo", summary=False)


def leaderboard_test_summary() -> str:
    return _leaderboard_tables("test", summary=True)


def leaderboard_test_cases() -> str:
    return _leaderboard_tables("test", summary=False)


#: The pure learned agents' long runs: folder -> the command that wrote it. Where two folders hold the same (agent,
#: model, seed), the newer file's run is shown (`leaderboard_table.newest_runs`): `pure-agents-10k` reruns some agents
#: with the defaults of 2026-11-26 and 2026-11-27.
LONG_RUNS = {
    "leaderboard_10k": 'bash benchmarks/leaderboard/leaderboard.sh 10000 benchmarks/results/leaderboard_10k 1 "" '
                       'local:2 "hsdag placeto rnn post go"',
    "leaderboard_10k_sb3": 'bash benchmarks/leaderboard/leaderboard.sh 10000 benchmarks/results/leaderboard_10k_sb3 1 '
                           '"" local:2 "ppo ppo-node"',
    "pure-agents-10k": "placement-gym compare --models resnet inception bert --agents AGENTS --backend simulated "
                       "--profile P --objective O --unsupported repair --budget 10000 --seed 0 --json "
                       "benchmarks/results/pure-agents-10k/P_O_seed0.json.gz (AGENTS hsdag go post; "
                       "P_O_ppo_seed0, P_O_placeto_seed0, P_O_rnn_seed0: one agent)",
}


def leaderboard_long() -> str:
    """The pure learned agents' long runs, against the leaderboard's best known of the same case."""
    folders = [ROOT / RESULTS / name for name in LONG_RUNS if (ROOT / RESULTS / name).is_dir()]
    groups = leaderboard_table.long_run_table_files(folders)
    references = _leaderboard_cases()
    commands = "` and `".join(LONG_RUNS[folder.name] for folder in folders)
    texts = [leaderboard_table.long_run_table(paths, references[case]) for case, paths in groups.items()]
    return (source(_cited([p for paths in groups.values() for p in paths]), commands)
            + "  \nTables: `python benchmarks/leaderboard/leaderboard_table.py --long "
            f"{RESULTS}/{LEADERBOARD} " + " ".join(f"{RESULTS}/{f.name}" for f in folders) + "`\n\n"
            + "\n\n".join(texts))


#: The README's main job (its first command), with the file it writes.
MAIN_JOB = ("main_job.json", "placement-gym compare --models resnet --objective throughput --budget 100 --seeds 1 "
                             "--agent-option optimal:time_limit_s=10 --json benchmarks/results/main_job.json")


def main_job() -> str:
    """The README's main job as it prints it: every agent's row on ResNet-50 (`leaderboard_table.table`)."""
    name, command = MAIN_JOB
    return source([name], command) + "\n\n" + leaderboard_table.table(ROOT / RESULTS / name)


EFFICIENCY_BUDGETS = (10, 50, 100, 200, 500, 1000)
#: The agents that search (their best improves with the budget); the planners' rows would be flat.
SEARCHING = ("random", "local-search")


def sample_efficiency(board: str = LEADERBOARD) -> str:
    """Per case of a leaderboard folder: each searching agent's best-so-far gap after k placements, geometric mean
    of (1 + gap) over the models (`leaderboard_table.case_rows` at those budgets)."""
    out = [_leaderboard_source(board=board)]
    updates = _pure_reruns(board=board)
    for name, paths in _leaderboard_cases(board=board).items():
        budget = leaderboard_table.case_records(paths)[1]
        budgets = tuple(b for b in EFFICIENCY_BUDGETS if b <= budget)
        case, rows = leaderboard_table.case_rows(paths, budgets, updates.get(name, ()))
        agents = [a for a in dict.fromkeys(r["agent"] for r in rows)
                  if a.removeprefix("hybrid:") in leaderboard_table.LEARNED or a in SEARCHING]
        table = [[a] + [leaderboard_table.geomean_gap([r["gap_pct"][b] for r in rows if r["agent"] == a])
                        for b in budgets] for a in agents]
        models = ", ".join(dict.fromkeys(r["model"] for r in rows))
        out.append(f"**{case.replace(':', ', ')}** (SIMULATED; gap % of the best placement found so far to the best "
                   f"found by any agent, geometric mean over {models}; `-`: no working placement on some model "
                   "yet)\n\n" + md_table(["agent"] + [f"after {b}" for b in budgets],
                                          [[row[0]] + [format_gap(g) for g in row[1:]] for row in table]))
    return "\n\n".join(out)


def sample_efficiency_v2() -> str:
    """`sample_efficiency` of the version-2 leaderboard (seed 0 so far)."""
    return sample_efficiency(LEADERBOARD_V2)


# --- learning sanity (SIMULATED) ---------------------------------------------------------------------------------

#: One results file per agent and suite: ``placement-gym benchmark --suite SUITE --agent NAME --json`` (its runs,
#: random's beside them, and the sanity verdict's rows: `placement_gym.sanity`); SUITE is ``sanity`` (the rows the
#: defaults were chosen on) or ``sanity-holdout`` (rows no default was chosen on).
SANITY_COMMAND = ("placement-gym benchmark --suite {suite} --agent {agent} --json "
                  "benchmarks/results/{suite}_{agent}.json")


def _sanity_files(suite: str) -> list[str]:
    """The results files of `suite` under benchmarks/results/ (`benchmarks/leaderboard/sanity_curves.suite_files`: the
    pure learned agents first in the leaderboard's order)."""
    return [p.name for p in sanity_suite_files(ROOT / RESULTS, suite)]


def _sanity_rows(files: list[str]) -> list[dict]:
    """Every file's verdict rows of its own agents, then ``random``'s rows (of the first file: the same seeded runs
    in every file), as a reference line: what random alone reaches."""
    rows = [row for f in files for row in load(f)["sanity"] if row["agent"] in load(f)["agents"]]
    return rows + [row for row in load(files[0])["sanity"] if row["agent"] == "random"]


def _sanity_grid(rows: list[dict], cell: Callable[[dict], str], last: Callable[[list[dict]], str] | None = None,
                 last_header: str = "") -> str:
    """A table of `rows`: an agent per line, a (case, model) pair per column, ``cell(row)`` in each."""
    pairs = list(dict.fromkeys((r["case"], r["model"]) for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    by = {(r["agent"], r["case"], r["model"]): r for r in rows}
    header = ["agent"] + [f"{case} {model}" for case, model in pairs] + ([last_header] if last else [])
    table = []
    for agent in agents:
        mine = [by[agent, case, model] for case, model in pairs if (agent, case, model) in by]
        table.append([agent] + ["" if (agent, case, model) not in by else cell(by[agent, case, model])
                                for case, model in pairs] + ([last(mine)] if last else []))
    return md_table(header, table)


def _sanity_source(suite: str, files: list[str]) -> str:
    """The source lines of a sanity table: the command of each agent's file."""
    agents = [f.removeprefix(f"{suite}_").removesuffix(".json") for f in files]
    return source(files, "` and `".join(SANITY_COMMAND.format(suite=suite, agent=agent) for agent in agents))


def sanity_verdict(suite: str = "sanity") -> str:
    """Per pure learned agent and (case, model) of `suite`: the verdict, seeds within 2% of the proven optimum, and
    the median's gap to it."""
    files = _sanity_files(suite)
    if not files:
        return ("No results file yet: `" + SANITY_COMMAND.format(suite=suite, agent="NAME") + "` writes one per "
                "agent (for NAME in hsdag, placeto, rnn, post, go, ppo, ppo-node).")

    def cell(r: dict) -> str:
        gap = None if r["median_s"] is None else 100 * (r["median_s"] / r["optimum_s"] - 1)
        text = f"{r['within']}/{len(r['seeds'])}, {'failed' if gap is None else f'{gap:+.1f}'}"
        if r["agent"] == "random":  # the bar itself: no verdict
            return text
        worse = ", worse than random" if "random" in r["why"] else ""
        return f"{'pass' if r['passed'] else '**FAIL**'}: {text}{worse}"

    def verdict(rs: list[dict]) -> str:
        if rs[0]["agent"] == "random":
            return "(the bar)"
        return f"{'PASS' if all(r['passed'] for r in rs) else 'FAIL'} ({sum(r['passed'] for r in rs)}/{len(rs)})"

    rows = _sanity_rows(files)
    return (_sanity_source(suite, files) + f"\n\n**{suite}** (SIMULATED; per (case, model): the verdict, seeds "
            "within 2% of the proven optimum, gap % of the median over seeds to it; `random`: the bar, not a "
            "candidate)\n\n" + _sanity_grid(rows, cell, verdict, "verdict (rows passed)"))


def sanity_curves(suite: str = "sanity") -> str:
    """Per pure learned agent and (case, model) of `suite`: placements to within 2% of the proven optimum, the
    median over the seeds and each seed's, from the runs' best-so-far curves."""
    files = _sanity_files(suite)
    if not files:
        return "No results file yet (see above)."

    def cell(r: dict) -> str:
        seeds = " / ".join("never" if n is None else str(n) for n in r["placements_to_within"])
        median = r["placements_to_within_median"]
        return f"{'never' if median is None else f'{median:.0f}'} ({seeds})"

    return ("**placements to within 2% of the proven optimum** (SIMULATED; median over seeds, a seed that never "
            "got there counted as the worst; each seed's in brackets)\n\n" + _sanity_grid(_sanity_rows(files), cell))


def sanity_optima(suite: str = "sanity") -> str:
    """`suite`'s rows with their proven optima (the suite's shipped optima file): the optimum, the devices its
    placement uses (ops per device) and the best single device's gap to it."""
    path = SUITES_DIR / "reference" / f"{suite}_optima.json"
    data = json.loads(path.read_text())
    lines = []
    for o in data["optima"]:
        counts = np.bincount(np.asarray(o["placement"]), minlength=len(o["devices"]))
        used = [(o["devices"][d], int(n)) for d, n in enumerate(counts) if n]
        where = f"the {used[0][0]} alone" if len(used) == 1 else ", ".join(f"{name} {n} ops" for name, n in used)
        unit = " per inference" if o["case"].endswith(":throughput") else ""
        single = 100 * (o["best_single_device_s"] / o["latency_s"] - 1)
        lines.append([f"`{o['case']}`", f"`{o['model']}`", f"{o['latency_s'] * 1e3:.4f} ms{unit}",
                      f"{o['status']} ({o['solve_s']:.1f} s)", where, f"+{single:.1f}%"])
    return (f"Optima: `{path.relative_to(ROOT)}` (suite version {data['suite_version']}, cost model version "
            f"{data['cost_model_version']}), proven by `python benchmarks/leaderboard/sanity_optima.py --suite "
            f"{suite} --overwrite`\n\n" + md_table(["case", "graph", "optimum", "proof (solve time)",
                                                     "optimal placement", "best single device"], lines))


def sim_to_real() -> str:
    """Per ``placement-gym sim2real`` results file (benchmarks/results/sim2real_*.json): each placement of its real
    comparison (the simulated phase's, the real phase's best, every device alone, the planners on the profile), its
    real latency and its paired ratio to the simulated phase's placement with the 95% interval."""
    files = sorted(p.name for p in (ROOT / RESULTS).glob("sim2real_*.json"))
    if not files:
        return "No results file yet: `placement-gym sim2real ... --json benchmarks/results/sim2real_AGENT_MODEL.json`."
    lines, commands = [], []
    for name in files:
        data = load(name)
        simulated, real = data["records"]
        a = data["arguments"]
        commands.append(f"placement-gym sim2real --agent {a['agent']} --model {a['model']} --profile {a['profile']} "
                        f"--devices {' '.join(shlex.quote(d) for d in a['devices'])} --sim-budget {a['sim_budget']} "
                        f"--real-budget {a['real_budget']} --seed {a['seed']} --json {RESULTS}/{name}")
        comparison = data["sim2real"]
        for label, row in comparison["placements"].items():
            if "error" in row:
                lines.append([f"`{simulated['model']}`", f"`{simulated['agent']}`", label, "failed", "", ""])
                continue
            low, high = row["ratio_interval"]
            lines.append([f"`{simulated['model']}`", f"`{simulated['agent']}`", label,
                          f"{row['latency_s'] * 1e3:.3f}", f"x{row['ratio']:.3f} ({low:.3f}-{high:.3f})",
                          str(row.get("n_submodels", ""))])
        lines.append([f"`{simulated['model']}`", f"`{simulated['agent']}`",
                      f"**what the {real['placements_measured']} real measurements added**", "",
                      describe_gain(comparison["real_phase_gain"]), ""])
    return (source(files, "` and `".join(commands)) + "\n\n" + md_table(
        ["model", "agent", "placement (timed for real)", "real latency (ms, median)",
         "paired ratio to the simulated phase's placement (95% interval)", "submodels"], lines))


#: The learned agents whose defaults became their paper's method on 2026-11-27, with the option set that keeps the
#: earlier defaults (the agents' pages list them); their runs with it are under benchmarks/results/option-sets/.
OPTION_SETS = {"hsdag": "place=op max_levels=1", "post": "shared_device_logits=true ce_smoothing=0.2",
               "rnn": "leave_one_out=true", "placeto": "start=random"}


def option_sets() -> str:
    """Per agent of `OPTION_SETS` and sanity suite: rows passed with the paper's defaults and with the option set,
    and each row's seeds within 2% of the proven optimum."""
    lines, files = [], []
    for agent, options in OPTION_SETS.items():
        for suite in ("sanity", "sanity-holdout"):
            pair = [f"{suite}_{agent}.json", f"option-sets/{suite}_{agent}.json"]
            if not all((ROOT / RESULTS / f).exists() for f in pair):
                continue
            files += pair
            cells = []
            for f in pair:
                rows = [r for r in load(f)["sanity"] if r["agent"] == agent]
                within = " ".join(str(r["within"]) for r in rows)
                cells.append(f"{sum(r['passed'] for r in rows)}/{len(rows)} ({within})")
            lines.append([f"`{agent}`", f"`{options}`", suite, *cells])
    if not lines:
        return "No results files yet."
    command = (SANITY_COMMAND.format(suite="SUITE", agent="NAME") + "` (the paper's defaults) and the same with "
               "`--agent-option KEY=VALUE` for each option of the set, `--json benchmarks/results/option-sets/"
               "SUITE_NAME.json")
    return (source(files, command) + "\n\n" + md_table(
        ["agent", "option set", "suite", "paper's defaults: rows passed (seeds within 2% per row)",
         "option set: rows passed (seeds within 2% per row)"], lines))


# --- transfer (SIMULATED) ----------------------------------------------------------------------------------------

TRANSFER_PRESETS = ("paper", "ai_pc", "server", "edge")


def _transfer_rows(files: list[str], replicate: bool = False) -> list[list[str]]:
    """One row per (file, agent) of `TRANSFER_HEADER`; `replicate`: and how many fine-tuned-50 placements beat
    `replicate` (throughput files)."""
    rows = []
    for f in files:
        data = load(f)
        for result in data["results"]:
            s, n = result["summary"], len(result["rows"])
            rows.append([f"`{result['agent']}`", f"`{data['profile']}`",
                         transfer._fmt_gap(s["zero_shot_gap_geomean_pct"]),
                         "yes" if s["zero_shot_never_worse_than_worst_single"] else "no",
                         f"{s['zero_shot_beats_best_single_there']}/"
                         f"{s['graphs_where_optimum_beats_best_single_by_5pct']}",
                         transfer._fmt_gap(s["finetune_10_gap_geomean_pct"]),
                         transfer._fmt_gap(s["finetune_50_gap_geomean_pct"]),
                         f"{s['finetune_50_within_2pct']}/{n}", f"{s['scratch_reached_finetuned']}/{n}",
                         f"{result['train_s']:.0f}"]
                        + ([f"{s['finetune_50_beats_replicate']}/{n}"] if replicate else []))
    return rows


TRANSFER_HEADER = ["agent", "preset", "zero-shot", "never worse than worst single",
                   "beats best single where the optimum is >= 5% better", "fine-tuned 10", "fine-tuned 50",
                   "fine-tuned 50 within 2%", "from scratch (200) reached fine-tuned 50", "train s"]


#: Cost model version 2's transfer results: `transfer-v2/PRESET_OBJECTIVE_AGENTS.json`, AGENTS ``go`` (with the
#: untrained agent's fine-tuning) or ``others`` (the other learned agents of version 1's table, one run per preset).
TRANSFER_V2 = "transfer-v2"
TRANSFER_V2_OTHERS = "hsdag rnn placeto ppo ppo-node"


def _transfer_v2_command(agents: str, objective: str) -> str:
    untrained = " --untrained-finetune" if agents == "go" else ""
    names = "go" if agents == "go" else TRANSFER_V2_OTHERS
    return (f"python benchmarks/learned_placer/transfer.py --agents {names} --train-models dataset:train "
            f"--test-models dataset:test --train-budget 200 --profile P --objective {objective}{untrained} --json "
            f"{RESULTS}/{TRANSFER_V2}/P_{objective}_{agents}.json")


def transfer_v2(agents: str, objective: str) -> str:
    """Cost model version 2: the summary of `agents` (``go`` or ``others``) under `objective` on every preset, and
    (GO) each preset's table per test graph."""
    presets = [p for p in TRANSFER_PRESETS if (ROOT / RESULTS / TRANSFER_V2 / f"{p}_{objective}_{agents}.json").exists()]
    if not presets:
        return f"No results file yet: `{_transfer_v2_command(agents, objective)}` writes them."
    files = [f"{TRANSFER_V2}/{p}_{objective}_{agents}.json" for p in presets]  # the presets run so far
    replicate = objective == "throughput"
    header = TRANSFER_HEADER + (["fine-tuned 50 faster than `replicate`"] if replicate else [])
    text = (source(files, _transfer_v2_command(agents, objective)) + " P = " + ", ".join(presets)
            + f". Objective: {objective}.\n\n" + md_table(header, _transfer_rows(files, replicate)))
    if agents == "go":
        text += "\n\n" + "\n\n".join(_transfer_graph_tables(files))
    return text


def _transfer_graph_tables(files: list[str]) -> list[str]:
    """Per results file and agent, its preset's name above `transfer.markdown`'s table per test graph."""
    return [f"`{load(f)['profile']}`:\n\n" + transfer.markdown(r, [10, 50]) for f in files for r in load(f)["results"]]


def transfer_today() -> str:
    files = [f"transfer_{p}_go.json" for p in ("paper", "ai_pc")]
    command = ("PYTHONPATH=. python benchmarks/learned_placer/transfer.py --agents go --train-models dataset:train "
               "--test-models dataset:test --train-budget 200 --profile P --untrained-finetune --json "
               "benchmarks/results/transfer_P_go.json")
    tables = _transfer_graph_tables(files)
    return (source(files, command) + " P = paper, ai_pc.\n\n" + md_table(TRANSFER_HEADER, _transfer_rows(files))
            + "\n\n" + "\n\n".join(tables))


def transfer_all() -> str:
    files = [f"transfer_{p}_consolidate{s}.json" for s in ("", "_others") for p in TRANSFER_PRESETS]
    command = ("PYTHONPATH=. python benchmarks/learned_placer/transfer.py --agents go --train-models dataset:train "
               "--test-models dataset:test --train-budget 200 --profile P --untrained-finetune --json "
               "benchmarks/results/transfer_P_consolidate.json` and `... --agents hsdag rnn placeto ppo ppo-node "
               "--json benchmarks/results/transfer_P_consolidate_others.json")
    return source(files, command, at="ccb5dcf") + "\n\n" + md_table(TRANSFER_HEADER, _transfer_rows(files))


# --- the imitation placer on unseen graphs (SIMULATED) ----------------------------------------------------------

#: The imitation placer's transfer runs (benchmarks/learned_placer/learned_transfer.py), each file with the command that
#: made it: the ai_pc and edge cases, then the paper and server cases (two commands run side by side).
LEARNED_TRANSFER = ("learned_transfer.json", "learned_transfer_paper_server.json")


def _learned_source() -> str:
    return source(list(LEARNED_TRANSFER), "` and `".join(load(f)["command"] for f in LEARNED_TRANSFER))


def _learned_results() -> list[dict]:
    return [result for f in LEARNED_TRANSFER for result in load(f)["cases"]]


def learned_transfer_seeds() -> str:
    """Per case, every seed's zero-shot and fine-tuning geometric means (`learned_transfer.format_seeds`)."""
    return _learned_source() + "\n\n" + learned_transfer.format_seeds(_learned_results())


#: The other learned agents trained on the same graphs (benchmarks/learned_placer/learned_transfer_others.py): GO's
#: network trained the imitation placer's way (every case; one file per seed), then the other agents by their own
#: methods (the same two halves).
LEARNED_OTHERS = ("learned_transfer_others_go_imitation.json", "learned_transfer_others_go_imitation_s1.json",
                  "learned_transfer_others_go_imitation_s2.json", "learned_transfer_others.json",
                  "learned_transfer_others_paper_server.json")


def learned_transfer_others_table() -> str:
    """Per case, the imitation placer's and every other learned agent's zero-shot gaps against one best known
    (`learned_transfer_others.format_table`)."""
    files = [*LEARNED_TRANSFER, *LEARNED_OTHERS]
    return (source(files, "` and `".join(load(f)["command"] for f in files)) + "\n\n"
            + learned_transfer_others.format_table(_learned_results(),
                                                   [case for f in LEARNED_OTHERS for case in load(f)["cases"]]))


def learned_transfer_cases() -> str:
    """Per case, seed 0's table per graph (`learned_transfer.format_case`)."""
    return (_learned_source() + "\n\n"
            + "\n".join(learned_transfer.format_case(r) for r in _learned_results() if r["summary"]["seed"] == 0))


#: The checkpoints that ship (agents/imitation/pretrained/, seed 0; benchmarks/learned_placer/imitation_model_cards.py
#: writes their model cards from the same two files): zero-shot on the test graphs, then on the validation graphs.
LEARNED_SHIPPED = ("learned_transfer_shipped.json", "learned_transfer_shipped_val.json")


def learned_transfer_shipped() -> str:
    """Per shipped checkpoint, its zero-shot geometric means on the test graphs and on the validation graphs
    (`learned_transfer.format_seeds`)."""
    test, val = (load(f) for f in LEARNED_SHIPPED)
    return (source(list(LEARNED_SHIPPED), f"{test['command']}` and `{val['command']}")
            + "\n\nTest graphs (the dataset's test split and the zoo's ResNet, Inception, BERT):\n\n"
            + learned_transfer.format_seeds(test["cases"])
            + "\nValidation graphs (the val split and the held-out synthetic graphs):\n\n"
            + learned_transfer.format_seeds(val["cases"]))


#: The shipped checkpoints (cost model version 2) fine-tuned on every test graph: seed 0's tables per graph.
LEARNED_SHIPPED_FINETUNE = "learned_transfer_shipped_finetune.json"


def learned_transfer_v2_cases() -> str:
    """The shipped checkpoints' zero-shot and fine-tuning figures: per case the geometric means
    (`learned_transfer.format_seeds`), then each case's table per graph (`learned_transfer.format_case`)."""
    data = load(LEARNED_SHIPPED_FINETUNE)
    return (source([LEARNED_SHIPPED_FINETUNE], data["command"]) + "\n\n"
            + learned_transfer.format_seeds(data["cases"]) + "\n"
            + "\n".join(learned_transfer.format_case(r) for r in data["cases"]))


# --- simulator (SIMULATED) ---------------------------------------------------------------------------------------

def simulator_speed() -> str:
    f = "simulator_speed.json"
    data = load(f)
    rows = [[r["graph"], f"{r['ops']:,}", r["placements"], f"{r['steps_per_s']:,.0f}", f"{r['us_per_step']:.0f}",
             f"{r['us_per_op']:.2f}", f"{r['mean_submodels']:.1f}"] for r in data["rows"]]
    command = "python benchmarks/performance/simulator_speed.py --json benchmarks/results/simulator_speed.json"
    return (source([f], command) + "\n\n"
            + md_table(["graph", "ops", "placements", "env steps/s", "us/step", "us/op", "submodels (mean)"], rows))


def simulator_batched() -> str:
    files = ["batched_simulation_crossings.json", "batched_simulation_crossings_two_cores.json"]
    rows = []
    for f, cores in zip(files, ("one core", "both cores")):
        for r in load(f)["rows"]:
            per_s, vs = r["placements_per_s"], r["speedup_vs_env_step"]
            step = per_s["env.step"]
            for mode, value in per_s.items():
                rows.append([cores, r["placements"], f"`{mode}`", f"{value:,.0f}", f"{value / step:.2f}x"])
    command = ("python benchmarks/performance/batched_simulation.py --repeats 21 [--no-pin] --json "
               "benchmarks/results/batched_simulation_crossings[_two_cores].json")
    return (source(files, command) + "\n\n"
            + md_table(["cores", "placements", "mode", "placements/s (median)", "vs `env.step`"], rows))


def simulator_simpy() -> str:
    f = "simpy_reference.json"
    data = load(f)
    rows = [[r["graph"], f"{r['ops']:,}", r["schedule"], str(r["placements_checked"]),
             f"{r['max_relative_difference']:.1e}", f"{r['ours_per_s']:,.0f}", f"{r['simpy_per_s']:,.1f}",
             f"{r['ratio']:.0f}x"] for r in data["rows"]]
    return (source([f], data["command"]) + "\n\n"
            + md_table(["graph", "ops", "schedule", "placements checked", "max rel. difference", "ours pl/s",
                        "SimPy pl/s", "ours / SimPy"], rows))


def _fidelity_table(files: list[str], labels: list[str] | None = None) -> str:
    """`simulator_fidelity.py` results files as one table (a first column `labels` where given) under their
    commands, as each file records it."""
    rows = []
    for k, f in enumerate(files):
        d = load(f)
        repeatability = simulator_fidelity_script.pass_spearman(d)
        rows.append(([labels[k]] if labels else []) + [
            d["model"], " + ".join(f"`{x}`" for x in d["devices"]), str(len(d["placements"])), f"{d['spearman']:.3f}",
            "-" if repeatability is None else f"{repeatability:.3f}", f"{100 * d['mape']:.1f}%",
            f"{100 * d['mape_by_kind']['single']:.1f}%", f"{100 * d['submodel_count_exact']:.0f}%"])
    command = "` and `".join(shlex.join(shlex.split(load(f)["command"])) for f in files)
    header = ["model", "devices", "placements", "Spearman", "real passes' own Spearman", "MAPE",
              "MAPE of the single devices", "submodel count exact"]
    return source(files, command) + "\n\n" + md_table((["run"] if labels else []) + header, rows)


def simulator_fidelity() -> str:
    return _fidelity_table([f"fidelity_{m}_precision_wall.json" for m in ("resnet", "inception", "bert")]
                           + ["fidelity_resnet_wall.json"])


#: Cost model version 2's fidelity runs on the f32 / bf16 pair, quiet and loaded: the file, what ran beside it and
#: at which code.
FIDELITY_V2 = {
    "fidelity-v2/resnet_quiet_before_fix.json": "quiet (load < 1), code of 9667171: two backends, min of the pairs",
    "fidelity-v2/resnet_loaded.json": "loaded (the leaderboard's 2 Ray workers beside it, load 5), one backend, "
                                      "each side's fastest run",
    "fidelity-v2/resnet_quiet.json": "quiet (the leaderboard's workers paused), one backend, each side's fastest run",
    "fidelity-v2/resnet_loaded_passes4.json": "loaded (a leaderboard run's 2 Ray workers and the test suite beside it, "
                                              "load 3.4 to 5.7), one backend, each side's fastest of 4 passes",
}


def simulator_fidelity_v2() -> str:
    return _fidelity_table(list(FIDELITY_V2), list(FIDELITY_V2.values()))


# --- real measurement --------------------------------------------------------------------------------------------

def _noise_rows(data: dict, labels: dict[str, str]) -> list[list[str]]:
    rows = []
    for model, settings in data["models"].items():
        for name, s in settings.items():
            pairs = " pairs" if name.startswith("paired") else ""
            rows.append([model, labels.get(name, name), f"{100 * s['cv_median_mean']:.2f}%",
                         f"+-{100 * s['interval_halfwidth_rel_mean']:.2f}%", f"{s['runs_mean']:.0f}{pairs}",
                         f"{s['wall_s_median']:.2f}",
                         f"{s['rank_spearman_two_passes']:.2f}" if "rank_spearman_two_passes" in s else "-"])
    return rows


NOISE_HEADER = ["model", "setting", "CV of fresh measurements", "95% interval of one measurement", "timed runs",
                "s / measurement", "Spearman, two passes"]
NOISE_LABELS = {"fixed": "fixed 20 runs", "adaptive": "adaptive, alone", "paired": "**paired (default)**",
                "paired-fixed": "paired, exactly 20 pairs (`target_rel_halfwidth=None`)",
                "paired-2pct": "paired, adaptive to +-2% (`target_rel_halfwidth=0.02`)"}


def real_noise() -> str:
    f = "real_noise_paired_quiet.json"
    command = ("python benchmarks/fidelity/real_noise.py --models resnet inception bert --fresh 5 --rank-placements 20 "
               "0 0 --json benchmarks/results/real_noise_paired_quiet.json")
    return (source([f], command, date="2026-11-23") + " Nothing else ran on the 2 cores.\n\n"
            + md_table(NOISE_HEADER, _noise_rows(load(f), NOISE_LABELS)))


def real_noise_variants() -> str:
    f = "real_noise_resnet_paired_variants.json"
    command = ("python benchmarks/fidelity/real_noise.py --models resnet --settings fixed paired paired-fixed "
               "paired-2pct --fresh 5 --rank-placements 20 --json "
               "benchmarks/results/real_noise_resnet_paired_variants.json")
    return source([f], command, date="2026-11-23") + "\n\n" + md_table(NOISE_HEADER, _noise_rows(load(f), NOISE_LABELS))


def real_step_cost() -> str:
    f = "env_step.json"
    rows = []
    for r in load(f)["results"]:
        m = r["median"]
        rows.append([r["model"], str(r["n_ops"]), f"{m['env_wall_s']:.3f}", f"{m['raw_wall_s']:.3f}",
                     f"{m['env_compile_s']:.2f}",
                     f"{1e3 * m['overhead_s']:+.0f} ms ({100 * m['overhead_ratio']:+.1f}%)"])
    command = ("python benchmarks/performance/env_step.py --models resnet inception bert --placements 7 --json "
               "benchmarks/results/env_step.json")
    return (source([f], command, date="2026-11-21") + " Measured at commit 84d5e45, before adaptive repeats and "
            "paired timing: as with `target_rel_halfwidth=None, paired_reference=False` today (warmup 3, "
            "20 repeats).\n\n"
            + md_table(["model", "ops", "env step s", "raw OpenVINO s", "of which compile s", "our overhead"], rows))


def real_throughput() -> str:
    files = ["real_throughput.json", "real_throughput_control.json"]
    rows = []
    for f in files:
        d = load(f)
        control = f.endswith("_control.json")
        for model, entry in d["models"].items():
            for label, s in entry["placements"].items():
                rows.append([model + (f" (control: `{d['devices'][0]}`)" if control else ""), label,
                             str(s["n_submodels"]), f"{s['latency_median_s'] * 1e3:.3f}"]
                            + [f"{s['period_median_s'][k] * 1e3:.3f} ({s['ratio_to_latency_median'][k]:.2f})"
                               for k in ("1", "2", "4")]
                            + [f"{s['ideal_pipeline_period_s'] * 1e3:.3f}"])
    command = ("python benchmarks/fidelity/real_throughput.py --models tiny_branch tiny_chain resnet --repeats 5 --out "
               "benchmarks/results/real_throughput.json` and, for the control, `python "
               "benchmarks/fidelity/real_throughput.py --models resnet --placements device0 --repeats 3 --devices "
               "\"CPU[PERFORMANCE_HINT=THROUGHPUT]\" "
               "\"CPU[INFERENCE_NUM_THREADS=1]\" --out benchmarks/results/real_throughput_control.json")
    return (source(files, command, date="2026-11-23") + " Devices `CPU` + `CPU[INFERENCE_NUM_THREADS=1]`; "
            "another job kept one core busy.\n\n"
            + md_table(["model", "placement", "submodels", "sync latency ms", "1 in flight ms (ratio)",
                        "2 in flight ms (ratio)", "4 in flight ms (ratio)", "max(parts) ms"], rows))


# --- scale (SIMULATED) -------------------------------------------------------------------------------------------

def scale_env() -> str:
    f = "big_graphs.json"
    d = load(f)
    rows = [[f"synthetic:{g['ops']}", "build the graph", f"{g['median_s']:.2f} s (median of {len(g['seconds'])})",
             f"{g['peak_rss_mb']:.0f}"] for g in d["graph_build"]]
    rows += [[f"synthetic:{g['ops']}", f"every feature family ({g['columns']} columns, structure {g['structure']})",
              f"{g['all_families_s']:.2f} s", f"{g['peak_rss_mb']:.0f}"] for g in d["feature_build"]]
    env = d["env"]
    rows.append([f"synthetic:{env['ops']}", "build the env (every feature family)", f"{env['env_create_s']:.1f} s",
                 f"{env['peak_rss_mb']:.0f}"])
    for kind, s in env["steps"].items():
        rows.append([f"synthetic:{env['ops']}", f"one simulated step, {kind} placements",
                     f"{s['step_median_s'] * 1e3:.1f} ms (median of {len(s['step_s'])})", "-"])
    command = "python benchmarks/performance/big_graphs.py --json benchmarks/results/big_graphs.json"
    return (source([f], command) + "\n\n"
            + md_table(["graph", "what", "time", "peak RSS MB"], rows))


def scale_agents() -> str:
    files = ["big_graphs_agents.json", "big_graphs_agents_go.json"]
    by = {}
    for f in files:
        for a in load(f)["agents"]:
            by[a["agent"]] = a  # the later, GO-only run replaces the first run's GO row
    rows = []
    for a in by.values():
        rows.append([f"`{a['agent']}`", str(a.get("steps", "-")), f"{a['agent_ms_per_placement']:.1f}",
                     f"{a['learn_s']:.1f} ({a['env_s']:.1f})",
                     f"{a['peak_rss_mb']:.0f}" if a.get("peak_rss_mb") else "-",
                     f"{a['latency_s']:.3f} / {a['predict_latency_s']:.3f}" if a.get("predict_latency_s")
                     else f"{a['latency_s']:.3f}"])
    command = ("nice -n 10 python benchmarks/performance/big_graphs.py --only-agents --agent-budget 20 --json "
               "benchmarks/results/big_graphs_agents.json` and, for GO, the same with `--agents go --json "
               "benchmarks/results/big_graphs_agents_go.json")
    return (source(files, command, at="81400d2 (GO: b133640)") + f" `synthetic:80000`, `paper` preset, seed 0, "
            f"reference (best single device) {by['hsdag']['reference_latency_s']:.2f} s.\n\n"
            + md_table(["agent", "placements", "agent ms / placement", "learn s (env s)", "peak RSS MB",
                        "best / predict latency s"], rows))


# --- Ray farm ----------------------------------------------------------------------------------------------------

def ray_farm() -> str:
    files = ["ray_farm_pinned.json", "ray_farm_pinned_2.json", "ray_farm_versions.json"]
    rows = []
    for f in files:
        d = load(f)
        m, s = d["medians"], d["summary"]
        rows.append([f"`{f}`", f"{m['real_1_worker_s']:.2f} / {m['real_2_workers_s']:.2f}",
                     f"**{s['real_speedup_2_vs_1']:.2f}x**", f"{m['grid_serial_s']:.1f}",
                     f"{m['grid_local_1_s']:.1f} / {m['grid_local_2_s']:.1f}",
                     f"**{s['grid_speedup_local2_vs_local1']:.2f}x**", f"{s['grid_speedup_local2_vs_serial']:.2f}x",
                     "yes" if s["grid_records_identical"] else "no"])
    return (source(files, "python benchmarks/performance/ray_farm.py --json benchmarks/results/ray_farm_versions.json",
                   date="2026-11-23 to 2026-11-24", at="fabedb7 / b2ed27f", data=load(files[0]))
            + f" Medians of {load(files[0])['settings']['rounds']} interleaved rounds each.\n\n"
            + md_table(["file", "real placements s, 1 / 2 workers", "speedup", "grid serial s",
                        "grid s, `local:1` / `local:2`", "speedup over 1 worker", "over serial",
                        "records identical to serial"], rows))


# --- published benchmarks (SIMULATED by the peers' cost models) -------------------------------------------------

PUBLISHED = "published_benchmarks.json"
TARNAWSKI_CLAIM = ("Tarnawski et al. (NeurIPS 2020) report their IP 1.46x better than the human expert on average "
                   "and 1.10x better than PipeDream (their claim; not reproduced here)")
#: DOPPLER's published claim, quoted as theirs (not reproduced here).
DOPPLER_CLAIM = ("DOPPLER (Yao et al., ICLR 2026) reports up to 52.7% lower execution time than the best baseline "
                 "(Placeto, GDP, critical path) on its graphs (their claim, on their system; not reproduced here)")


def _published_mean(records: list[dict], model: str, agent: str) -> float | None:
    """`agent`'s latency on `model`, mean over its seeds; None where it found no placement their cost model
    accepts (or did not run)."""
    values = [r["latency_s"] for r in records if r["model"] == model and r["agent"] == agent
              and r.get("latency_s") is not None and math.isfinite(r["latency_s"])]
    return float(np.mean(values)) if values else None


def _published_failed(records: list[dict], model: str, agent: str) -> bool:
    """Whether `agent` ran on `model` and found no placement that their cost model accepts."""
    ran = any(r["model"] == model and r["agent"] == agent and "skipped" not in r for r in records)
    return ran and _published_mean(records, model, agent) is None


def _published_rows(records: list[dict]) -> list[str]:
    """The table's rows: the best single device first, then every agent in the order it ran (not the X-only
    rows the best single device is chosen from)."""
    first = sorted(records, key=lambda r: r["agent"] != published_benchmarks.BEST_SINGLE)
    return [a for a in dict.fromkeys(r["agent"] for r in first) if not a.endswith("-only")]


def tarnawski_table(records: list[dict], theirs: dict, experts: dict[str, float]) -> str:
    """Per Tarnawski input, their programs' numbers (`theirs`), the human expert's split (`experts`, ms) and each
    row's max-load (ms, mean over seeds), each with its ratio to their DP optimum."""
    models = list(dict.fromkeys(r["model"] for r in records))
    short = [m.split("throughput-inputs/", 1)[1] for m in models]

    def cell(ms: float | None, model_short: str) -> str:
        if ms is None:
            return "—"
        dp = (theirs.get(model_short) or {}).get("dp")
        return f"{ms:.3f}" + (f" ({ms / dp:.3f}x)" if dp else "")

    theirs_rows = (("their DP optimum (dp.cpp)", "dp"), ("their PipeDream (dp.cpp -pipeDream)", "pipedream"))
    rows = [[label] + [cell((theirs.get(s) or {}).get(key), s) for s in short] for label, key in theirs_rows]
    rows.append(["human expert (their split, priced here = their -expert)"]
                + [cell(experts.get(m), s) for m, s in zip(models, short)])
    for row in _published_rows(records):
        values = [_published_mean(records, m, row) for m in models]
        rows.append([row] + ["failed" if _published_failed(records, m, row) else cell(None if v is None else v * 1e3, s)
                             for m, v, s in zip(models, values, short)])
    return md_table(["agent"] + short, rows)


def doppler_table(records: list[dict]) -> str:
    """Per DOPPLER graph, each row's makespan (s, mean over seeds) and its reduction vs the best single device."""
    models = list(dict.fromkeys(r["model"] for r in records))
    singles = {m: _published_mean(records, m, published_benchmarks.BEST_SINGLE) for m in models}
    rows = []
    for row in _published_rows(records):
        cells = []
        for m in models:
            v, base = _published_mean(records, m, row), singles[m]
            if v is None:
                cells.append("failed" if _published_failed(records, m, row) else "—")
            else:
                cells.append(f"{v:.1f}" + (f" ({100 * (1 - v / base):+.1f}%)" if base else ""))
        rows.append([row] + cells)
    return md_table(["agent"] + [Path(m).stem for m in models], rows)


def published() -> str:
    """The tables of docs/published-benchmarks.md: Tarnawski et al.'s inputs, then DOPPLER's graphs (a ``.txt``
    model, as `placement_gym.models.published.load_published` reads it) where the file has them; the command,
    date and machine under them."""
    data = load(PUBLISHED)
    records = data["records"]
    doppler = [r for r in records if r["model"].lower().endswith(".txt")]
    tarnawski = [r for r in records if not r["model"].lower().endswith(".txt")]
    out = ["### Tarnawski et al.'s throughput inputs (max-load, ms per sample; x = ratio to their DP optimum)", "",
           TARNAWSKI_CLAIM + ".", "", tarnawski_table(tarnawski, data["theirs"], data["experts_ms"])]
    if doppler:
        out += ["", "### DOPPLER's graphs (makespan, seconds = their cost / 1e10; % = reduction vs the best single "
                "device)", "", DOPPLER_CLAIM + ".", "", doppler_table(doppler)]
    skipped = [r for r in records if "skipped" in r]
    if skipped:
        out += ["", "Not run: " + "; ".join(sorted({f"{r['agent']} ({r['skipped']})" for r in skipped})) + "."]
    # The command that made the JSON, less the --markdown PATH it took while it wrote this page itself.
    words = shlex.split(data["command"])
    if "--markdown" in words:
        del words[words.index("--markdown"):words.index("--markdown") + 2]
    out += ["", source([PUBLISHED], shlex.join(words), data=data)
            + f" Budget {data['budget']} placements, {len(data['seeds'])} seed(s). All numbers SIMULATED."]
    return "\n".join(out)


# --- design decisions --------------------------------------------------------------------------------------------

def algorithm_ablation() -> str:
    f = "algorithm_ablation.json"
    data = load(f)
    command = "python benchmarks/leaderboard/algorithm_ablation.py --json benchmarks/results/algorithm_ablation.json"
    return (source([f], command, at="143e167") + " SIMULATED, `paper` preset, budget 500, seeds 0-4.\n\n```text\n"
            + results.format_learning_table(data["summary"]) + "\n```")


TABLES: dict[str, Callable[[], str]] = {
    "leaderboard-v2-summary": leaderboard_v2_summary, "leaderboard-v2-cases": leaderboard_v2_cases,
    "leaderboard-v2-seeds": leaderboard_v2_seeds,
    "leaderboard-v2-test-summary": leaderboard_v2_test_summary, "leaderboard-v2-test-cases": leaderboard_v2_test_cases,
    "leaderboard-summary": leaderboard_summary, "leaderboard-cases": leaderboard_cases,
    "leaderboard-long": leaderboard_long, "leaderboard-test-summary": leaderboard_test_summary,
    "leaderboard-test-cases": leaderboard_test_cases,
    "main-job": main_job, "sample-efficiency": sample_efficiency,
    "sample-efficiency-v2": sample_efficiency_v2, "transfer-today": transfer_today,
    "doppler-leaderboard": doppler_leaderboard, "doppler-sanity": doppler_sanity,
    "doppler-imitation": doppler_imitation,
    "doppler-imitation-2000": lambda: doppler_imitation("doppler_imitation_2000.jsonl"),
    "doppler-heuristic-ties": heuristic_ties,
    "transfer-v2-go-latency": lambda: transfer_v2("go", "latency"),
    "transfer-v2-go-throughput": lambda: transfer_v2("go", "throughput"),
    "transfer-v2-others-latency": lambda: transfer_v2("others", "latency"),
    "transfer-v2-others-throughput": lambda: transfer_v2("others", "throughput"),
    "transfer-all": transfer_all,
    "simulator-speed": simulator_speed, "simulator-batched": simulator_batched, "simulator-simpy": simulator_simpy,
    "simulator-fidelity": simulator_fidelity, "simulator-fidelity-v2": simulator_fidelity_v2, "real-noise": real_noise, "real-noise-variants": real_noise_variants,
    "real-step-cost": real_step_cost, "real-throughput": real_throughput, "scale-env": scale_env,
    "scale-agents": scale_agents, "ray-farm": ray_farm, "algorithm-ablation": algorithm_ablation,
    "published-benchmarks": published, "learned-transfer-seeds": learned_transfer_seeds,
    "learned-transfer-cases": learned_transfer_cases, "learned-transfer-others": learned_transfer_others_table,
    "learned-transfer-shipped": learned_transfer_shipped,
    "learned-transfer-v2-cases": learned_transfer_v2_cases,
    "sanity-verdict": sanity_verdict, "sanity-curves": sanity_curves,
    "sanity-holdout-verdict": lambda: sanity_verdict("sanity-holdout"),
    "sanity-holdout-curves": lambda: sanity_curves("sanity-holdout"),
    "option-sets": option_sets, "sanity-optima": sanity_optima, "sim-to-real": sim_to_real,
    "sanity-holdout-optima": lambda: sanity_optima("sanity-holdout"),
}


def render(text: str) -> str:
    """`text` with every generated block replaced by its table."""
    def replace(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"unknown generated table {name!r}")
        return match.group(1) + TABLES[name]().rstrip() + "\n" + match.group(4)

    return MARKER.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the pages under this folder instead of in place")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed page is not up to date")
    args = parser.parse_args(argv)
    stale = []
    for page in PAGES:
        text = (ROOT / page).read_text()
        new = render(text)
        if args.check:
            if new != text:
                stale.append(page)
            continue
        target = (args.out / page) if args.out else ROOT / page
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text() != new:
            target.write_text(new)
            print(f"wrote {target}")
    if stale:
        print("not up to date (run python benchmarks/results_pages.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
