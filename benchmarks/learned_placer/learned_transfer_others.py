"""The other learned agents beside the imitation placer on unseen graphs: each trained by its own paper's method on
the same training graphs, for as many measured placements as the imitation placer's PPO phase, then placed
zero-shot.

    python benchmarks/learned_placer/learned_transfer_others.py --json benchmarks/results/learned_transfer_others.json

For each case (preset x objective, `train_learned_placer.CASES`), seed and agent of ``--agents`` (default
`OTHER_AGENTS`): a fresh agent with its defaults (its paper's method, no search) learns for the case recipe's
``rl_budget`` placements (`train_learned_placer.RECIPES`) on the env over the recipe's training graphs
(dataset:train and its synthetic graphs, `agents.imitation.labels.label_env`), seeded; then ``predict`` places
every test graph (one forward pass, no search, no measurement; its wall time taken) and the placement is measured
once. The rows keep latencies; `join` sets them beside the imitation placer's rows of the same case and seed
(`benchmarks/learned_placer/learned_transfer.py`'s results files) against one best known per graph, and `format_table`
writes the table of docs/agents/learned-placer.md. The results file is written after every (case, seed), so a stopped
run keeps what it finished. All figures SIMULATED.

What the imitation placer has and these agents do not: the labels it imitates before its PPO phase, and its
network (GO's with the placement state). ``--agents go-imitation`` (`GO_IMITATION`) adds the one network that can
be trained its way: GO's own, one pass and no placement state, through the imitation placer's whole recipe
(labels, imitation, PPO). `post` is not among them: it learns one device distribution per op group of one graph,
so it cannot train over many graphs nor place an unseen one.

    python benchmarks/learned_placer/learned_transfer_others.py --agents go-imitation \\
        --json benchmarks/results/learned_transfer_others_go_imitation.json

(the shipped files ran it one seed per file, two at once: ``--seeds 0`` into that file, ``--seeds 1`` and
``--seeds 2`` into ``..._s1.json`` and ``..._s2.json``)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from agents.imitation.labels import LabelCache, label_env
from agents.imitation.training import place_zero_shot, train_case
from placement_gym import registry
from placement_gym.files import write_json

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import refuse_existing_outputs, run_metadata  # noqa: E402
from benchmarks.leaderboard.leaderboard_table import geomean_gap  # noqa: E402
from benchmarks.learned_placer.learned_transfer import CLASSICAL, TEST_MODELS, TIE, test_graph_names  # noqa: E402
from benchmarks.learned_placer.recipes import (  # noqa: E402
    CASES, NETWORK, RECIPES, SEEDS, SHIPPED_LABELS, parse_case,
)

#: The pure learned agents whose weights hold no graph size or device count (those that train over many graphs
#: and place a graph they never saw), each at its defaults: its paper's method.
OTHER_AGENTS = ("go", "hsdag", "placeto", "rnn", "ppo", "ppo-node")
#: Not a registered agent: GO's network trained the imitation placer's way (`train_go_imitation`).
GO_IMITATION = "go-imitation"


def train_and_place(name: str, preset: str, objective: str, seed: int, train_graphs: list[str], budget: int,
                    test_graphs: list[str]) -> dict:
    """Train agent `name` (its defaults) for `budget` placements over `train_graphs` under (`preset`,
    `objective`), seeded, then place every test graph zero-shot (`place`). An agent that cannot train there gives
    ``"error"`` and no rows (reported, not a crash of the loop)."""
    agent = registry.make_agent(registry.load_agent_class(name), {})
    record = {"agent": name, "preset": preset, "objective": objective, "seed": seed, "budget": budget}
    started = time.perf_counter()
    try:
        agent.learn(label_env(train_graphs, preset, objective, agent.feature_families), budget, seed=seed)
    except Exception as exc:  # noqa: BLE001  an agent that cannot train here is a result of its own
        return {**record, "error": f"{type(exc).__name__}: {exc}"[:500], "rows": []}
    return place(agent, {**record, "train_s": time.perf_counter() - started}, test_graphs)


def train_go_imitation(preset: str, objective: str, seed: int, test_graphs: list[str]) -> dict:
    """`GO_IMITATION`: GO's own one-pass network (`ImitationAgent(sequential=False)`, GO's whole-graph cost term
    on) at the imitation placer's width, trained exactly as the imitation placer is (the case's recipe: the
    shipped labels of the same training graphs, the imitation passes, the PPO phase), then placed as `place`
    does."""
    recipe = RECIPES[(preset, objective)]
    network = {**NETWORK, "sequential": False, "graph_cost": True}
    agent, report = train_case(preset, objective, recipe.graphs(), epochs=recipe.epochs, seed=seed,
                               rl_budget=recipe.rl_budget, cache=LabelCache(SHIPPED_LABELS), agent_options=network,
                               average_from=recipe.average_from, log=lambda line: None)
    record = {"agent": GO_IMITATION, "preset": preset, "objective": objective, "seed": seed,
              "budget": recipe.rl_budget, "network": network, "train_s": report["train_s"]}
    return place(agent, record, test_graphs)


def place(agent, record: dict, test_graphs: list[str]) -> dict:
    """`record` with ``"rows"``: a row per test graph ``{"model", "n_ops", "latency_s" (None: the placement
    failed), "predict_s", "ops_per_device"}`` of `agent`'s ``predict``, measured once (`place_zero_shot`, as the
    imitation placer's zero-shot rows are)."""
    rows = []
    for graph in test_graphs:
        env, placement, m, predict_s = place_zero_shot(agent, graph, record["preset"], record["objective"])
        rows.append({"model": graph, "n_ops": env.graph.n_ops, "latency_s": float(m.latency_s) if m.ok else None,
                     "predict_s": predict_s,
                     "ops_per_device": np.bincount(env.as_measured(placement), minlength=env.n_devices).tolist()})
    return {**record, "rows": rows}


# ------------------------------------------------------------------------------------------------ the table
def _latency(row: dict, gap_key: str) -> float | None:
    """A latency of a `learned_transfer` row, from its gap to the row's best known."""
    gap = row[gap_key]
    return None if gap is None else row["best_known_s"] * (1.0 + gap / 100.0)


def join(imitation: list[dict], others: list[dict]) -> dict[tuple[str, str], dict]:
    """Per case: per agent (``"imitation"`` first, then the others in `others`' order) and seed, the zero-shot
    geometric-mean gap to one best known per (seed, graph), how many graphs it beats the best classical planner on
    and is worse than the best single device on (a failed placement counts as worse and as no win), and the
    median predict wall time. The best known is the imitation row's (its reference planners, its zero-shot and
    fine-tuning runs) or an other agent's zero-shot placement, whichever is faster. `imitation`: the ``"cases"``
    of `learned_transfer` results files; `others`: those of this script's."""
    by_case: dict[tuple[str, str], dict] = {}
    latencies: dict[tuple, dict[str, dict]] = {}  # (preset, objective, seed) -> agent -> {graph: latency}
    rows: dict[tuple, dict[str, dict]] = {}  # (preset, objective, seed) -> graph -> imitation row
    predict: dict[tuple, dict[str, list]] = {}
    for result in imitation:
        s = result["summary"]
        key = (s["preset"], s["objective"], s["seed"])
        rows[key] = {r["model"]: r for r in result["rows"]}
        latencies.setdefault(key, {})["imitation"] = {r["model"]: r["zero_shot_s"] for r in result["rows"]}
        predict.setdefault(key, {})["imitation"] = [r["predict_s"] for r in result["rows"]]
    for other in others:
        key = (other["preset"], other["objective"], other["seed"])
        if key in rows and other["rows"]:
            latencies[key][other["agent"]] = {r["model"]: r["latency_s"] for r in other["rows"]}
            predict[key][other["agent"]] = [r["predict_s"] for r in other["rows"]]
    for key, agents in latencies.items():
        graphs = [g for g in rows[key] if all(g in by_graph for by_graph in agents.values())]
        table = by_case.setdefault(key[:2], {"graphs": len(graphs), "agents": {}})
        best = {g: min([rows[key][g]["best_known_s"]] + [a[g] for a in agents.values() if a[g] is not None])
                for g in graphs}
        classical = {g: min(v for k in CLASSICAL if (v := _latency(rows[key][g], f"{k}_gap")) is not None)
                     for g in graphs}
        single = {g: _latency(rows[key][g], "best_single_gap") for g in graphs}
        for name, by_graph in agents.items():
            ok = [g for g in graphs if by_graph[g] is not None]
            entry = table["agents"].setdefault(name, {"gap": {}, "beats_best_classical": 0,
                                                      "worse_than_best_single": 0, "failed": 0, "predict_s": []})
            entry["gap"][key[2]] = geomean_gap([100.0 * (by_graph[g] / best[g] - 1.0) for g in ok])
            entry["beats_best_classical"] += sum(by_graph[g] < classical[g] * (1 - TIE) for g in ok)
            entry["worse_than_best_single"] += sum(g not in ok or by_graph[g] > single[g] * (1 + TIE)
                                                   for g in graphs)
            entry["failed"] += len(graphs) - len(ok)
            entry["predict_s"] += predict[key][name]
        table.setdefault("classical", {})[key[2]] = geomean_gap(
            [100.0 * (classical[g] / best[g] - 1.0) for g in graphs])
    return by_case


def format_table(imitation: list[dict], others: list[dict]) -> str:
    """The markdown table of `join`: a row per case and agent."""
    lines = ["| case | agent | seeds | zero-shot geomean per seed | beats best classical | worse than best single | "
             "median predict |", "|---|---|---|---|---:|---:|---:|"]
    for (preset, objective), table in join(imitation, others).items():
        for name, entry in table["agents"].items():
            seeds = sorted(entry["gap"])
            n = table["graphs"] * len(seeds)
            gaps = " / ".join("fail" if entry["gap"][s] is None else f"{entry['gap'][s]:+.1f}%" for s in seeds)
            failed = f" ({entry['failed']} failed)" if entry["failed"] else ""
            lines.append(f"| {preset} {objective} | `{name}` | {', '.join(map(str, seeds))} | {gaps}{failed} | "
                         f"{entry['beats_best_classical']}/{n} "
                         f"| {entry['worse_than_best_single']}/{n} | "
                         f"{1e3 * float(np.median(entry['predict_s'])):.1f} ms |")
        seeds = sorted(table["classical"])
        gaps = " / ".join(f"{table['classical'][s]:+.1f}%" for s in seeds)
        lines.append(f"| {preset} {objective} | best classical | {', '.join(map(str, seeds))} | {gaps} | | | |")
    return "\n".join(lines) + "\n"


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=list(OTHER_AGENTS),
                        help=f"registered agents, or {GO_IMITATION} (GO's network trained the imitation placer's "
                             "way) (default: %(default)s)")
    parser.add_argument("--cases", nargs="+", type=parse_case, default=CASES,
                        help="PRESET:OBJECTIVE pairs (default: all eight)")
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS, help="(default: %(default)s)")
    parser.add_argument("--test-models", nargs="+", default=TEST_MODELS, help="(default: %(default)s)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    for name in set(args.agents) - {GO_IMITATION}:
        try:
            registry.load_agent_class(name)
        except ValueError as exc:
            parser.error(f"--agents: {exc}")
    refuse_existing_outputs(parser, [args.json], args.overwrite)
    graphs = test_graph_names(args.test_models)
    cases = []
    for seed in args.seeds:  # every case of a seed before the next seed: a stopped run has whole seeds first
        for preset, objective in args.cases:
            recipe = RECIPES[(preset, objective)]
            for name in args.agents:
                cases.append(train_go_imitation(preset, objective, seed, graphs) if name == GO_IMITATION else
                             train_and_place(name, preset, objective, seed, recipe.graphs(), recipe.rl_budget,
                                             graphs))
                done = cases[-1]
                print(f"{preset}/{objective} seed {seed} {name}: "
                      + (done["error"] if "error" in done else
                         f"trained {done['train_s']:.0f} s, geomean latency "
                         f"{np.exp(np.mean([np.log(r['latency_s']) for r in done['rows'] if r['latency_s']])):.3e}"
                         " s"), flush=True)
            write_json(args.json, {**run_metadata(argv, "SIMULATED; latencies of zero-shot placements"),
                                   "cases": cases}, overwrite=True)


if __name__ == "__main__":
    main()
