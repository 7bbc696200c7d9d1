"""Zero-shot transfer of the imitation placer (``imitation``) against the classical planners, per preset x objective.

    python benchmarks/train_learned_placer.py --cases ai_pc:latency ai_pc:throughput edge:latency \\
        --synthetic 32 --epochs 100 --rl-budget 3000 --seeds 0 1 2
    python benchmarks/learned_transfer.py --cases ai_pc:latency ai_pc:throughput edge:latency --seeds 0 1 2 \\
        --test-models dataset:test resnet inception bert --json benchmarks/results/learned_transfer.json

For each case and each checkpoint seed (``runs/learned_placer/imitation-PRESET-OBJECTIVE-sSEED.pt``, written by
`benchmarks/train_learned_placer.py`), every test graph (families never trained on) is placed by ``predict``:
one forward pass, its wall time taken, the placement then measured once. Beside it, from the graph's reference
label (`agents.imitation.labels.compute_label` with ``--optimal-s`` and ``--search-budget``; cached): `cheapest`,
`dp`, `topo`, `metis`, every single device, `local-search` and `optimal`; the *best known* is the fastest of all
of these and the zero-shot placement itself. Gaps are % above the best known. The table says per graph the
zero-shot gap, the best classical planner's (best of dp / cheapest / topo / metis), the best single device's, and
per case the geometric means, how many graphs the placer beats the best classical planner on, how many it is
worse than the best single device on, and the wall times of predict, dp and optimal. All figures SIMULATED.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from _outputs import refuse_existing_outputs, run_metadata
from agents.imitation import ImitationAgent
from agents.imitation.labels import LabelCache, LabelSettings, label_env, labels_for
from leaderboard_table import geomean_gap
from placement_gym.env import model_list
from placement_gym.results import write_json
from train_learned_placer import checkpoint_path, parse_case

CLASSICAL = ("cheapest", "dp", "topo", "metis")
#: A placement "beats" another when it is faster by more than this fraction (equal plans are not wins).
TIE = 1e-6


def test_graph_names(specs: list[str]) -> list[str]:
    """Graph names of `specs` (``dataset:SPLIT`` stands for each graph of the split)."""
    return [name for spec in specs for name in (model_list(spec) or [spec])]


def evaluate_case(preset: str, objective: str, seed: int, graphs: list[str], args) -> dict:
    """Zero-shot rows of one checkpoint on every graph of `graphs` (module docstring)."""
    path = checkpoint_path(args.checkpoints, preset, objective, seed)
    agent = ImitationAgent.load(path)
    settings = LabelSettings(local_search_budget=args.search_budget, optimal_time_limit_s=args.optimal_s)
    references = labels_for(graphs, preset, objective, settings, LabelCache(), args.workers)
    rows = []
    for reference in references:
        env = label_env(reference.graph, preset, objective, agent.feature_families).unwrapped
        obs = env.reset(seed=0)[0]
        started = time.perf_counter()
        placement = agent.predict(obs)
        predict_s = time.perf_counter() - started
        m = env.measure(placement)
        zero = float(m.latency_s) if m.ok else None
        planners = {name: r["latency_s"] for name, r in reference.planners.items()}
        feasible = [v for v in planners.values() if v is not None] + ([zero] if zero is not None else [])
        best = min(feasible)
        singles = [v for k, v in planners.items() if k.startswith("single:") and v is not None]
        classical = [planners[k] for k in CLASSICAL if planners.get(k) is not None]

        def gap(latency: float | None) -> float | None:
            return None if latency is None else 100.0 * (latency / best - 1.0)

        rows.append({
            "model": reference.graph, "n_ops": env.graph.n_ops, "best_known_s": best,
            "reference_source": reference.source,
            "zero_shot_s": zero, "zero_shot_gap": gap(zero), "predict_s": predict_s,
            "ops_per_device": np.bincount(env.as_measured(placement), minlength=env.n_devices).tolist(),
            **{f"{k}_gap": gap(planners.get(k)) for k in (*CLASSICAL, "local-search", "optimal")},
            "best_classical_gap": gap(min(classical)), "best_single_gap": gap(min(singles)),
            "beats_best_classical": zero is not None and zero < min(classical) * (1 - TIE),
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
        "predict_s_median": float(np.median([r["predict_s"] for r in rows])),
        "dp_s_median": float(np.median([r["dp_s"] for r in rows])),
        "optimal_s_median": float(np.median([r["optimal_s"] for r in rows if r["optimal_s"] is not None])),
    }
    return {"summary": summary, "rows": rows}


def _pct(value: float | None) -> str:
    return "fail" if value is None else f"{value:+.1f}%"


def format_case(result: dict) -> str:
    """The markdown table of one case."""
    s = result["summary"]
    lines = [f"### {s['preset']} {s['objective']} (seed {s['seed']})", "",
             "| graph | ops | zero-shot | cheapest | dp | topo | metis | best classical | best single "
             "| beats classical |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|"]
    for r in result["rows"]:
        lines.append(f"| {r['model']} | {r['n_ops']} | {_pct(r['zero_shot_gap'])} | {_pct(r['cheapest_gap'])} | "
                     f"{_pct(r['dp_gap'])} | {_pct(r['topo_gap'])} | {_pct(r['metis_gap'])} | "
                     f"{_pct(r['best_classical_gap'])} | {_pct(r['best_single_gap'])} | "
                     f"{'yes' if r['beats_best_classical'] else 'no'} |")
    g = s["geomean_gap"]
    lines.append(f"| **geomean** | | **{_pct(g['zero_shot'])}** | {_pct(g['cheapest'])} | {_pct(g['dp'])} | "
                 f"{_pct(g['topo'])} | {_pct(g['metis'])} | {_pct(g['best_classical'])} | {_pct(g['best_single'])} | "
                 f"{s['beats_best_classical']}/{s['graphs']} |")
    lines += ["", f"Geometric means over the {s['graphs'] - s['zero_shot_failed']} graphs whose zero-shot placement "
              f"ran ({s['zero_shot_failed']} failed: out of memory or unsupported). "
              f"Worse than the best single device on {s['worse_than_best_single']}/{s['graphs']} graphs (a failure "
              "counts as worse); "
              f"median wall time: predict {1e3 * s['predict_s_median']:.1f} ms, dp {1e3 * s['dp_s_median']:.1f} ms, "
              f"optimal {s['optimal_s_median']:.2f} s (time limit).", ""]
    return "\n".join(lines)


def format_seeds(results: list[dict]) -> str:
    """One markdown row per case over its seeds: the zero-shot geometric-mean gap of each seed, and the graphs it
    beats the best classical planner on and is worse than the best single device on, summed over the seeds."""
    cases: dict[tuple[str, str], list[dict]] = {}
    for result in results:
        s = result["summary"]
        cases.setdefault((s["preset"], s["objective"]), []).append(s)
    lines = ["| case | seeds | zero-shot geomean per seed | beats best classical | worse than best single |",
             "|---|---:|---|---:|---:|"]
    for (preset, objective), summaries in cases.items():
        gaps = ", ".join(_pct(s["geomean_gap"]["zero_shot"]) for s in summaries)
        graphs = sum(s["graphs"] for s in summaries)
        lines.append(f"| {preset} {objective} | {len(summaries)} | {gaps} | "
                     f"{sum(s['beats_best_classical'] for s in summaries)}/{graphs} | "
                     f"{sum(s['worse_than_best_single'] for s in summaries)}/{graphs} |")
    return "\n".join(lines) + "\n"


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", type=parse_case, default=[("ai_pc", "latency")])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--test-models", nargs="+", default=["dataset:test"])
    parser.add_argument("--checkpoints", default="runs/learned_placer")
    parser.add_argument("--optimal-s", type=float, default=10.0, help="the reference optimum's time limit")
    parser.add_argument("--search-budget", type=int, default=100, help="the reference local search's placements")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", default=None)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
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
