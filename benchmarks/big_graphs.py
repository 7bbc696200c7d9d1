"""How far does the env scale? Synthetic graphs of 10k and 80k ops, every feature family, a simulated step.

    nice -n 10 python benchmarks/big_graphs.py --json benchmarks/results/big_graphs.json

Measures, on ``synthetic:N`` graphs (`placement_gym.models.synthetic`):

* building the graph (10k, 80k ops; best and median of ``--repeats``);
* building each node-feature family alone on a fresh graph (so the structure families do not share the cached
  `structure_estimate`), and all families together, at 10k and 80k ops; above
  `placement_gym.features.EXACT_STRUCTURE_MAX_OPS` the structure families are estimated;
* ``DevicePlacementEnv(model="synthetic:80000", backend="simulated", features=<every family>)``: creation, reset
  and the median of ``--steps`` steps with uniformly random placements and with runs of 16 ops on one device
  (the ``paper`` profile, two devices);
* peak resident memory (``resource.getrusage``) after each phase;
* agreement of the estimated structure features with the exact ones: per feature column Spearman and Pearson
  correlation and mean absolute error, on the zoo's ResNet-50, Inception-V3 and BERT-base (the estimate forced
  onto them, with the default budgets and with small ones that make it sample) and, unless
  ``--no-exact-10k``, on a 10k-op synthetic graph (the exact path there takes tens of seconds).

The machine is shared, so timings are noisy; the process is pinned to one core unless ``--no-pin``.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from typing import Callable

import numpy as np
from scipy.stats import pearsonr, spearmanr

from _outputs import pin_to_one_core, refuse_existing_outputs, run_metadata
from placement_gym import DevicePlacementEnv, load_graph, results
from placement_gym.features import (
    BALL_BUDGET, EXACT_STRUCTURE_MAX_OPS, FEATURE_FAMILIES, N_PIVOTS, centrality, fractal_dimension, node_features,
    structure_estimate,
)
from placement_gym.graph import ComputationGraph
from placement_gym.models import synthetic_graph

ZOO = ("resnet", "inception", "bert")
#: Budgets small enough that the estimate samples even on the zoo's few hundred ops.
SMALL_BUDGETS = {"ball_budget": 32, "n_pivots": 32}
COLUMNS = ("fractal_dimension", "closeness", "ancestors", "descendants")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def graph_build(sizes: list[int], repeats: int, seed: int) -> list[dict]:
    rows = []
    for n in sizes:
        seconds = [timed(lambda: synthetic_graph(n, seed))[0] for _ in range(repeats)]
        graph = synthetic_graph(n, seed)
        rows.append({"ops": n, "edges": graph.n_edges, "best_s": min(seconds), "median_s": float(np.median(seconds)),
                     "seconds": seconds, "peak_rss_mb": peak_rss_mb()})
        print(f"graph synthetic:{n}: {min(seconds):.2f} s best of {repeats} ({graph.n_edges} edges)")
    return rows


def feature_build(sizes: list[int], seed: int) -> list[dict]:
    """Each family on a fresh graph (no cached estimate shared), then all families together on another."""
    rows = []
    for n in sizes:
        per_family = {}
        for family in FEATURE_FAMILIES:
            graph = synthetic_graph(n, seed)
            seconds, block = timed(lambda: node_features(graph, [family]))
            per_family[family] = {"seconds": seconds, "columns": int(block.shape[1])}
        graph = synthetic_graph(n, seed)
        total, block = timed(lambda: node_features(graph, list(FEATURE_FAMILIES)))
        rows.append({"ops": n, "structure": "exact" if n <= EXACT_STRUCTURE_MAX_OPS else "estimated",
                     "families": per_family, "all_families_s": total, "columns": int(block.shape[1]),
                     "peak_rss_mb": peak_rss_mb()})
        print(f"features synthetic:{n}: all {total:.2f} s; " +
              ", ".join(f"{f} {v['seconds']:.2f}" for f, v in per_family.items()))
    return rows


def env_at(n: int, steps: int, seed: int) -> dict:
    graph_s, graph = timed(lambda: synthetic_graph(n, seed))
    create_s, env = timed(lambda: DevicePlacementEnv(graph, backend="simulated", profile="paper",
                                                     features=tuple(FEATURE_FAMILIES)))
    reset_s, _ = timed(lambda: env.reset(seed=seed))
    rng = np.random.default_rng(seed)
    kinds = {  # uniformly random: the most submodels and transfers; runs of 16 ops: closer to a trained agent's
        "random": [rng.integers(0, env.n_devices, n) for _ in range(steps)],
        "blocky16": [np.repeat(rng.integers(0, env.n_devices, n // 16 + 1), 16)[:n] for _ in range(steps)],
    }
    steps_by_kind = {}
    for kind, placements in kinds.items():
        step_s, infos = [], []
        for placement in placements:
            seconds, (_, _, _, _, info) = timed(lambda: env.step(placement))
            step_s.append(seconds)
            infos.append(info)
        steps_by_kind[kind] = {"step_median_s": float(np.median(step_s)), "step_s": step_s,
                               "all_ok": all(i["ok"] for i in infos),
                               "mean_submodels": float(np.mean([i["n_submodels"] for i in infos]))}
    row = {"ops": n, "edges": graph.n_edges, "graph_s": graph_s, "env_create_s": create_s, "reset_s": reset_s,
           "steps": steps_by_kind, "observation_node_features": list(env.observation_space["node_features"].shape),
           "peak_rss_mb": peak_rss_mb()}
    env.close()
    print(f"env synthetic:{n} (every family): created in {create_s:.2f} s, reset {reset_s:.3f} s; step " +
          ", ".join(f"{kind} {v['step_median_s'] * 1e3:.1f} ms (~{v['mean_submodels']:.0f} submodels)"
                    for kind, v in steps_by_kind.items()) + f", medians of {steps}")
    return row


def agreement(graph: ComputationGraph, params: dict) -> dict:
    """Per column: Spearman, Pearson, mean absolute error of the estimate against the exact values."""
    exact_s, (fractal, central) = timed(lambda: (fractal_dimension(graph, exact_max_ops=graph.n_ops)[:, 0],
                                                 centrality(graph, exact_max_ops=graph.n_ops)))
    exact = dict(zip(COLUMNS, (fractal, central[:, 0], central[:, 1], central[:, 2])))
    estimate_s, estimate = timed(lambda: structure_estimate(graph, **params))
    columns = {}
    for name in COLUMNS:
        a, b = exact[name], getattr(estimate, name)
        columns[name] = {"spearman": float(spearmanr(a, b)[0]), "pearson": float(pearsonr(a, b)[0]),
                         "mean_abs_error": float(np.abs(a - b).mean()), "exact_mean": float(a.mean()),
                         "exact_std": float(a.std())}
    print(f"agreement {graph.name} ({graph.n_ops} ops) {params or 'default budgets'}: exact {exact_s:.2f} s, "
          f"estimate {estimate_s:.2f} s; " + ", ".join(
              f"{k} rho={v['spearman']:.3f} r={v['pearson']:.3f} mae={v['mean_abs_error']:.4f}"
              for k, v in columns.items()))
    return {"graph": graph.name, "ops": graph.n_ops, "params": params or {"ball_budget": BALL_BUDGET,
            "n_pivots": N_PIVOTS}, "exact_s": exact_s, "estimate_s": estimate_s, "columns": columns}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 80_000], help="synthetic graph sizes")
    parser.add_argument("--env-size", type=int, default=80_000, help="ops of the env timed (default 80000)")
    parser.add_argument("--steps", type=int, default=20, help="env steps timed (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="graph builds timed per size (default 3)")
    parser.add_argument("--models", nargs="*", default=list(ZOO),
                        help=f"zoo models for the agreement (default {list(ZOO)})")
    parser.add_argument("--no-exact-10k", action="store_true", help="skip the agreement on synthetic:10000")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="results JSON path")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    refuse_existing_outputs(parser, [args.json], args.overwrite)

    pinned = pin_to_one_core(not args.no_pin)
    report = {"graph_build": graph_build(args.sizes, args.repeats, args.seed),
              "feature_build": feature_build(args.sizes, args.seed),
              "env": env_at(args.env_size, args.steps, args.seed)}
    rows = []
    for model in args.models:
        graph = load_graph(model)
        rows += [agreement(graph, {}), agreement(graph, SMALL_BUDGETS)]
    if not args.no_exact_10k:
        rows.append(agreement(synthetic_graph(10_000, args.seed), {}))
    report["agreement"] = rows
    report["peak_rss_mb"] = peak_rss_mb()
    print(f"peak resident memory: {report['peak_rss_mb']:.0f} MB")
    if args.json:
        results.write_json(args.json, {
            **report,
            "settings": {"seed": args.seed, "steps": args.steps, "repeats": args.repeats, "pinned_to_one_core": pinned,
                         "exact_structure_max_ops": EXACT_STRUCTURE_MAX_OPS, "ball_budget": BALL_BUDGET,
                         "n_pivots": N_PIVOTS, "small_budgets": SMALL_BUDGETS, "profile": "paper"},
            **run_metadata(argv, "shared 2-core machine, run under nice -n 10: timings are noisy single runs unless stated"),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
