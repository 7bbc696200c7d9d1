"""Zero-shot transfer of the imitation placer (``imitation``) against the classical planners, per preset x objective.

    python benchmarks/learned_placer/train_learned_placer.py
    python benchmarks/learned_placer/learned_transfer.py --finetune 50 200 \
        --json benchmarks/results/learned_transfer.json

(By default every case of `train_learned_placer.CASES`, its seeds, on `TEST_MODELS`; each shipped JSON file
names the command that made it.)

For each case and each checkpoint seed (``runs/learned_placer/imitation-PRESET-OBJECTIVE-sSEED.pt``, written by
`benchmarks/learned_placer/train_learned_placer.py`), every test graph (families never trained on) is placed by
``predict``: one forward pass, its wall time taken, the placement then measured once. Beside it, from the graph's
reference label (`agents.imitation.labels.compute_label` with ``--optimal-s`` and ``--search-budget``; read from
``--labels``, the shipped ones by default, as the training labels are): `cheapest`,
`dp`, `topo`, `metis`, every single device, `local-search` and `optimal`; the *best known* is the fastest of all
of these and the zero-shot placement itself. Gaps are % above the best known. The table says per graph the
zero-shot gap, the best classical planner's (best of dp / cheapest / topo / metis), the best single device's (under
throughput also ``replicate``'s: the whole graph on every device, a deployment beside the placements, never the best
known, and whether the zero-shot placement beats it), and
per case the geometric means, how many graphs the placer beats the best classical planner on, how many it is
worse than the best single device on, and the wall times of predict, dp and optimal. All figures SIMULATED.

Fine-tuning (``--finetune 50 200``, off by default): on every test graph, the checkpoint is loaded afresh and
fine-tuned on that one graph, twice: **pure RL** (the agent's own ``learn(env, budget)``: GO's PPO continuing
from the checkpoint, no search, the agent refuses any) and **hybrid** (``hybrid:imitation``: the generic search
layer `agents.search.hybrid.SearchAround` around the loaded agent: heuristic start, the agent's PPO, a quarter of
the budget on local search at the end). Each is one seeded run (the checkpoint's seed) of the largest budget; the
best latency after each smaller budget is read off the run's best-so-far curve, as the leaderboard reads its
budgets (`placement_gym.benchmark`; so the hybrid's 50-placement point is before its local-search share, which
comes at the end of the 200-placement run). With fine-tuning on, the *best known* of a graph also takes every
placement the two fine-tuning runs measured (their curves, their final best and their policy's placement), and
every gap of the row (zero-shot and planners included) is against that one best known; ``best_known_reference_s``
keeps the best known without the fine-tuning runs (what a zero-shot-only run uses). Per case: the geometric-mean
gap at each budget for pure RL and hybrid (over the graphs where that run found a working placement) and how
many graphs are within 1% of the best known (a run without a working placement counts as not within).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from agents.imitation import ImitationAgent
from agents.imitation.labels import LabelCache, LabelSettings, label_env, labels_for, validation_graphs
from agents.imitation.training import place_zero_shot
from agents.search.hybrid import SearchAround
from placement_gym.benchmark import best_within
from placement_gym.env import model_list
from placement_gym.evaluation import replicate_latency
from placement_gym.files import write_json

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import refuse_existing_outputs, run_metadata  # noqa: E402
from benchmarks.leaderboard.leaderboard_table import geomean_gap  # noqa: E402
from benchmarks.learned_placer.recipes import (  # noqa: E402
    CASES, REFERENCE, SEEDS, SHIPPED_LABELS, checkpoint_path, parse_case,
)

#: The unseen graphs: the dataset's test split (families never trained on) and the zoo.
TEST_MODELS = ["dataset:test", "resnet", "inception", "bert"]
#: The classical planners of a label (`LabelSettings.planners`, the one list of them): a column each.
CLASSICAL = LabelSettings().planners
#: A placement "beats" another when it is faster by more than this fraction (equal plans are not wins).
TIE = 1e-6
#: The issue's fine-tuning target: within this % of the best known placement.
WITHIN_PCT = 1.0
#: The fine-tuning modes (`finetune`): the agent's own PPO, and the generic search layer around it.
FINETUNE_MODES = ("pure", "hybrid")
FINETUNE_LABELS = {"pure": "pure RL", "hybrid": "hybrid"}


def finetune_agent(path: "str | Path", mode: str):
    """A fresh agent of checkpoint `path` for fine-tuning `mode`: ``"pure"`` the loaded `ImitationAgent` itself (no
    search), ``"hybrid"`` the same wrapped in `SearchAround`, which is what ``hybrid:imitation`` builds around an
    agent that has no hybrid preset of its own (`agents.search.hybrid.build_agent`)."""
    agent = ImitationAgent.load(path)
    if mode == "pure":
        return agent
    if mode == "hybrid":
        return SearchAround(agent)
    raise ValueError(f"fine-tuning mode is one of {FINETUNE_MODES}, got {mode!r}")


def finetune(path: "str | Path", mode: str, graph: str, preset: str, objective: str, budgets: "list[int]",
             seed: int) -> dict:
    """Fine-tune checkpoint `path` (loaded afresh) on `graph` under (`preset`, `objective`) in `mode`
    (`finetune_agent`): one seeded ``learn`` of ``max(budgets)`` placements. Returns ``{"agent", "search",
    "budget", "seed", "steps", "curve", "best_s" ({budget: best latency measured within it, None if none worked}),
    "latency_s" (the run's best measured afresh), "predict_latency_s" (its policy's placement after the run),
    "wall_s"}``."""
    agent = finetune_agent(path, mode)
    env = label_env(graph, preset, objective, agent.feature_families)
    budget = max(budgets)
    agent.learn(env, budget, seed=seed)
    s = agent.run_summary
    record = {"curve": [[int(n), float(v)] for n, v in s.curve]}
    return {"agent": agent.name, "search": agent.search_components(), "budget": budget, "seed": seed,
            "steps": s.steps, **record, "best_s": {str(b): best_within(record, b) for b in sorted(budgets)},
            "latency_s": s.latency_s, "predict_latency_s": float(s.predict.latency_s) if s.predict.ok else None,
            "wall_s": s.wall_s}


def _measured(run: dict) -> list[float]:
    """Every latency a fine-tuning run measured that worked: its curve, its final best and its policy's."""
    values = [v for _, v in run["curve"]] + [run["latency_s"], run["predict_latency_s"]]
    return [v for v in values if v is not None]


def test_graph_names(specs: list[str]) -> list[str]:
    """Graph names of `specs` (``dataset:SPLIT`` stands for each graph of the split, ``validation`` for the graphs
    recipes are chosen on: `agents.imitation.labels.validation_graphs`)."""
    return [name for spec in specs
            for name in (validation_graphs() if spec == "validation" else model_list(spec) or [spec])]


def evaluate_case(preset: str, objective: str, seed: int, graphs: list[str], args) -> dict:
    """Zero-shot rows of one checkpoint on every graph of `graphs` (module docstring)."""
    path = checkpoint_path(args.checkpoints, preset, objective, seed)
    agent = ImitationAgent.load(path)
    settings = LabelSettings(local_search_budget=args.search_budget, optimal_time_limit_s=args.optimal_s)
    references = labels_for(graphs, preset, objective, settings, LabelCache(args.labels), args.workers, args.ray)
    budgets = sorted(getattr(args, "finetune", None) or [])
    rows = []
    for reference in references:
        env, placement, m, predict_s = place_zero_shot(agent, reference.graph, preset, objective)
        zero = float(m.latency_s) if m.ok else None
        planners = {name: r["latency_s"] for name, r in reference.planners.items()}
        feasible = [v for v in planners.values() if v is not None] + ([zero] if zero is not None else [])
        reference_best = min(feasible)
        runs = {mode: finetune(path, mode, reference.graph, preset, objective, budgets, seed)
                for mode in FINETUNE_MODES} if budgets else {}
        # Under throughput, the whole model on every device (a deployment, not a placement: never the best known)
        replicate = replicate_latency(env) if objective == "throughput" else None
        best = min([reference_best] + [v for run in runs.values() for v in _measured(run)])
        singles = [v for k, v in planners.items() if k.startswith("single:") and v is not None]
        classical = [planners[k] for k in CLASSICAL if planners.get(k) is not None]

        def gap(latency: float | None) -> float | None:
            return None if latency is None else 100.0 * (latency / best - 1.0)

        tuned = {}
        if runs:
            tuned["best_known_reference_s"] = reference_best
            tuned["finetune"] = {mode: {**run, "gap": {b: gap(v) for b, v in run["best_s"].items()}}
                                 for mode, run in runs.items()}
        rows.append({
            "model": reference.graph, "n_ops": env.graph.n_ops, "best_known_s": best, **tuned,
            "reference_source": reference.source,
            "zero_shot_s": zero, "zero_shot_gap": gap(zero), "predict_s": predict_s,
            "ops_per_device": np.bincount(env.as_measured(placement), minlength=env.n_devices).tolist(),
            **{f"{k}_gap": gap(planners.get(k)) for k in (*CLASSICAL, "local-search", "optimal")},
            "best_classical_gap": gap(min(classical)), "best_single_gap": gap(min(singles)),
            "beats_best_classical": zero is not None and zero < min(classical) * (1 - TIE),
            **({"replicate_s": replicate, "replicate_gap": gap(replicate),
                "beats_replicate": zero is not None and (replicate is None or zero < replicate * (1 - TIE))}
               if objective == "throughput" else {}),
            "worse_than_best_single": zero is None or zero > min(singles) * (1 + TIE),
            "dp_s": reference.planners["dp"]["seconds"],
            "optimal_s": reference.planners.get("optimal", {}).get("seconds"),
        })
    failed = [r for r in rows if r["zero_shot_gap"] is None]
    ok = [r for r in rows if r["zero_shot_gap"] is not None]
    summary = {
        "preset": preset, "objective": objective, "seed": seed, "checkpoint": str(path), "graphs": len(rows),
        "zero_shot_failed": len(failed),
        "geomean_gap": {k: geomean_gap([r[f"{k}_gap"] for r in ok if r[f"{k}_gap"] is not None])
                        for k in ("zero_shot", *CLASSICAL, "best_classical", "best_single")},
        "beats_best_classical": sum(r["beats_best_classical"] for r in rows),
        "worse_than_best_single": sum(r["worse_than_best_single"] for r in rows),
        **({"replicate_geomean_gap": geomean_gap([r["replicate_gap"] for r in rows if r["replicate_gap"] is not None]),
            "beats_replicate": sum(r["beats_replicate"] for r in rows)} if objective == "throughput" else {}),
        "predict_s_median": float(np.median([r["predict_s"] for r in rows])),
        "dp_s_median": float(np.median([r["dp_s"] for r in rows])),
        "optimal_s_median": float(np.median([r["optimal_s"] for r in rows if r["optimal_s"] is not None])),
        "optimal_limit_s": settings.optimal_time_limit_s,
    }
    if budgets:
        summary["finetune"] = finetune_summary(rows, budgets)
    return {"summary": summary, "rows": rows}


def finetune_summary(rows: list[dict], budgets: list[int]) -> dict:
    """Per fine-tuning mode and budget: the geometric-mean gap over the graphs where the run had a working
    placement by then (``geomean_gap``), how many had none (``failed``), how many are within `WITHIN_PCT` % of the
    best known (``within``, out of ``graphs``), and the median wall time of a run (``wall_s_median``)."""
    out = {}
    for mode in FINETUNE_MODES:
        runs = [r["finetune"][mode] for r in rows]
        gaps = {str(b): [run["gap"][str(b)] for run in runs] for b in budgets}
        out[mode] = {
            "graphs": len(rows),
            "geomean_gap": {b: geomean_gap([g for g in gs if g is not None]) for b, gs in gaps.items()},
            "failed": {b: sum(g is None for g in gs) for b, gs in gaps.items()},
            "within": {b: sum(g is not None and g <= WITHIN_PCT + 1e-9 for g in gs) for b, gs in gaps.items()},
            "wall_s_median": float(np.median([run["wall_s"] for run in runs])),
        }
    return out


def _pct(value: float | None) -> str:
    return "fail" if value is None else f"{value:+.1f}%"


def _finetune_columns(summary: dict) -> list[tuple[str, str]]:
    """(mode, budget) of the fine-tuning columns of a case, in table order (none without fine-tuning)."""
    tuned = summary.get("finetune") or {}
    return [(mode, b) for mode in FINETUNE_MODES if mode in tuned for b in tuned[mode]["geomean_gap"]]


def format_case(result: dict) -> str:
    """The markdown table of one case (with a column per fine-tuning mode and budget when it was fine-tuned)."""
    s = result["summary"]
    columns = _finetune_columns(s)
    replicate = "beats_replicate" in s  # a throughput case measured since `replicate` was added
    extra = "".join(f" {FINETUNE_LABELS[mode]} @{b} |" for mode, b in columns)
    lines = [f"### {s['preset']} {s['objective']} (seed {s['seed']})", "",
             "| graph | ops | zero-shot |" + extra + "".join(f" {k} |" for k in CLASSICAL)
             + " best classical | best single |" + (" replicate |" if replicate else "") + " beats classical |"
             + (" beats replicate |" if replicate else ""),
             "|---|---:|---:|" + "---:|" * (len(columns) + len(CLASSICAL) + 2 + replicate) + ":-:|"
             + (":-:|" if replicate else "")]
    for r in result["rows"]:
        tuned = "".join(f" {_pct(r['finetune'][mode]['gap'][b])} |" for mode, b in columns)
        classical = "".join(f" {_pct(r[f'{k}_gap'])} |" for k in CLASSICAL)
        lines.append(f"| {r['model']} | {r['n_ops']} | {_pct(r['zero_shot_gap'])} |{tuned}{classical} "
                     f"{_pct(r['best_classical_gap'])} | {_pct(r['best_single_gap'])} |"
                     + (f" {_pct(r['replicate_gap'])} |" if replicate else "")
                     + f" {'yes' if r['beats_best_classical'] else 'no'} |"
                     + (f" {'yes' if r['beats_replicate'] else 'no'} |" if replicate else ""))
    g = s["geomean_gap"]
    tuned = "".join(f" {_pct(s['finetune'][mode]['geomean_gap'][b])} |" for mode, b in columns)
    classical = "".join(f" {_pct(g[k])} |" for k in CLASSICAL)
    lines.append(f"| **geomean** | | **{_pct(g['zero_shot'])}** |{tuned}{classical} {_pct(g['best_classical'])} | "
                 f"{_pct(g['best_single'])} |" + (f" {_pct(s['replicate_geomean_gap'])} |" if replicate else "")
                 + f" {s['beats_best_classical']}/{s['graphs']} |"
                 + (f" {s['beats_replicate']}/{s['graphs']} |" if replicate else ""))
    lines += ["", f"Geometric means over the {s['graphs'] - s['zero_shot_failed']} graphs whose zero-shot placement "
              f"ran ({s['zero_shot_failed']} failed: out of memory or unsupported). "
              f"Worse than the best single device on {s['worse_than_best_single']}/{s['graphs']} graphs (a failure "
              "counts as worse); "
              f"median wall time: predict {1e3 * s['predict_s_median']:.1f} ms, dp {1e3 * s['dp_s_median']:.1f} ms, "
              f"optimal {s['optimal_s_median']:.2f} s (its time limit: {s['optimal_limit_s']:g} s).", ""]
    if columns:
        tuned = s["finetune"]
        within = "; ".join(f"{FINETUNE_LABELS[mode]} @{b}: {tuned[mode]['within'][b]}/{tuned[mode]['graphs']}"
                           for mode, b in columns)
        failed = "; ".join(f"{FINETUNE_LABELS[mode]} @{b}: {tuned[mode]['failed'][b]}" for mode, b in columns
                           if tuned[mode]["failed"][b])
        walls = ", ".join(f"{FINETUNE_LABELS[mode]} {tuned[mode]['wall_s_median']:.1f} s"
                          for mode in FINETUNE_MODES if mode in tuned)
        lines[-1:] = [
            "",
            "Fine-tuning columns: gap of the best placement measured within @N placements of fine-tuning the "
            "checkpoint on that graph alone (pure RL: the agent's own PPO; hybrid: `hybrid:imitation`, the search "
            "layer around it); every gap of this table is against the best known including the fine-tuning runs. "
            f"Within {WITHIN_PCT:g}% of the best known: {within}. "
            + (f"No working placement within the budget: {failed}. " if failed else "")
            + f"Median wall time of a {max(int(b) for _, b in columns)}-placement run: {walls}.", ""]
    return "\n".join(lines)


def reference_gap(row: dict) -> float:
    """The gap (%) of a test graph's reference label (the best of its planners: single devices, the classical
    planners, `local-search` and `optimal`) to the row's best known, which the fine-tuning runs can lower: how far
    the placements a label offers for imitation are from the best known."""
    planners = [row["best_single_gap"], row["best_classical_gap"], row["local-search_gap"], row["optimal_gap"]]
    return min(g for g in planners if g is not None)


def format_seeds(results: list[dict]) -> str:
    """One markdown row per case over its seeds: the zero-shot geometric-mean gap of each seed, its reference
    labels' (`reference_gap`), and the graphs it beats the best classical planner on and is worse than the best
    single device on, summed over the seeds; with fine-tuning, a second table: per case, the geometric-mean gap of
    each seed at each budget, pure RL and hybrid, and the graphs within 1% of the best known, summed over the
    seeds."""
    cases: dict[tuple[str, str], list[dict]] = {}
    labels: dict[tuple[str, str], list[float | None]] = {}
    for result in results:
        s = result["summary"]
        cases.setdefault((s["preset"], s["objective"]), []).append(s)
        labels.setdefault((s["preset"], s["objective"]), []).append(
            geomean_gap([reference_gap(r) for r in result["rows"]]))
    # Throughput cases measured since `replicate` was added say how often the zero-shot placement beats it
    replicate = any("beats_replicate" in s for ss in cases.values() for s in ss)
    lines = ["| case | seeds | zero-shot geomean per seed | reference labels per seed | beats best classical | "
             "worse than best single |" + (" `replicate` per seed | beats `replicate` |" if replicate else ""),
             "|---|---:|---|---|---:|---:|" + ("---|---:|" if replicate else "")]
    for (preset, objective), summaries in cases.items():
        gaps = ", ".join(_pct(s["geomean_gap"]["zero_shot"]) for s in summaries)
        reference = ", ".join(_pct(g) for g in labels[(preset, objective)])
        graphs = sum(s["graphs"] for s in summaries)
        row = (f"| {preset} {objective} | {len(summaries)} | {gaps} | {reference} | "
               f"{sum(s['beats_best_classical'] for s in summaries)}/{graphs} | "
               f"{sum(s['worse_than_best_single'] for s in summaries)}/{graphs} |")
        if replicate:
            row += (f" {', '.join(_pct(s['replicate_geomean_gap']) for s in summaries)} | "
                    f"{sum(s['beats_replicate'] for s in summaries)}/{graphs} |"
                    if all("beats_replicate" in s for s in summaries) else " - | - |")
        lines.append(row)
    columns = next((_finetune_columns(s) for ss in cases.values() for s in ss if s.get("finetune")), [])
    if columns:
        lines += ["", "| case | seeds | "
                  + " | ".join(f"{FINETUNE_LABELS[mode]} @{b} geomean per seed" for mode, b in columns) + " | "
                  + " | ".join(f"{FINETUNE_LABELS[mode]} @{b} within {WITHIN_PCT:g}%" for mode, b in columns) + " |",
                  "|---|---:|" + "---|" * len(columns) + "---:|" * len(columns)]
        for (preset, objective), summaries in cases.items():
            tuned = [s["finetune"] for s in summaries]
            gaps = [" / ".join(_pct(t[mode]["geomean_gap"][b]) for t in tuned) for mode, b in columns]
            within = [f"{sum(t[mode]['within'][b] for t in tuned)}/{sum(t[mode]['graphs'] for t in tuned)}"
                      for mode, b in columns]
            lines.append(f"| {preset} {objective} | {len(summaries)} | " + " | ".join(gaps + within) + " |")
    return "\n".join(lines) + "\n"


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", type=parse_case, default=CASES,
                        help="PRESET:OBJECTIVE pairs (default: all eight)")
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS, help="(default: %(default)s)")
    parser.add_argument("--test-models", nargs="+", default=TEST_MODELS,
                        help="graph names, dataset:SPLIT, or validation: the val split and the held-out synthetic "
                             "graphs recipes are chosen on (default: %(default)s)")
    parser.add_argument("--checkpoints", default="runs/learned_placer")
    parser.add_argument("--optimal-s", type=float, default=REFERENCE.optimal_time_limit_s,
                        help="the reference optimum's time limit (default: %(default)s)")
    parser.add_argument("--search-budget", type=int, default=REFERENCE.local_search_budget,
                        help="the reference local search's placements (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="processes that compute missing reference labels")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="compute missing reference labels as tasks on this Ray cluster instead (local:N or a "
                             "cluster address)")
    parser.add_argument("--labels", default=str(SHIPPED_LABELS),
                        help="folder of label files, read and completed (default: the labels shipped in the repo)")
    parser.add_argument("--finetune", type=int, nargs="+", default=[], metavar="BUDGET",
                        help="also fine-tune each checkpoint on each test graph, pure RL and hybrid, one run of the "
                             "largest budget, read at each (e.g. 50 200; default: zero-shot only)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    if any(b < 1 for b in args.finetune):
        parser.error(f"--finetune budgets are placements, at least 1; got {args.finetune}")
    torch.set_num_threads(1)  # predict's wall time on one core, as the agents' runs use one torch thread
    refuse_existing_outputs(parser, [args.json], args.overwrite)
    graphs = test_graph_names(args.test_models)
    results = []
    for preset, objective in args.cases:
        for seed in args.seeds:
            result = evaluate_case(preset, objective, seed, graphs, args)
            results.append(result)
            print(format_case(result), flush=True)
    print(format_seeds(results), flush=True)
    if args.json:
        write_json(args.json, {**run_metadata(argv, "SIMULATED; gaps in % above the best known placement"),
                               "cases": results}, overwrite=args.overwrite)


if __name__ == "__main__":
    main()
