"""Zero-shot transfer over training seeds: does a trained agent's placement of unseen graphs depend on the seed
it was trained with? (issue: transfer, targets 1-3)

    python benchmarks/learned_placer/transfer_seeds.py --agents go hsdag rnn placeto ppo ppo-node --seeds 0 1 2 3 4 \\
        --profile ai_pc --reference benchmarks/results/transfer_ai_pc_override.json \\
        --json benchmarks/results/transfer_seeds_ai_pc.json

For each agent and seed: one `learn` over ``--train-models`` for ``--train-budget`` placements (as
``benchmarks/learned_placer/transfer.py`` trains), then its own placement (``predict``, zero-shot, with the zero-shot
override) of every test graph, measured once. Gaps are % above the best placement known for each graph, read from the
``--reference`` results of ``benchmarks/learned_placer/transfer.py`` (its ``best_known_s``: the optimum or a faster
placement a run found), so no optimum is solved here and a gap is never negative (a faster zero-shot placement lowers
the reference); also against each graph's best and worst single device. Without ``--reference``, gaps are against each
graph's best single device: how the whole-graph cost term's weight was chosen, on the VAL split
(``--test-models dataset:val``; `agents.nn.device_head.GRAPH_COST_WEIGHT`). Per agent and seed: the
geometric-mean gap (target 1: within 10%), never worse than the worst single device (target 2), and how many of
the graphs whose best known beats the best single device by >= 5% the zero-shot placement beats it on (target 3:
at least half).

All figures SIMULATED (``--profile``); seconds per agent and seed.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from placement_gym import evaluation, files
from placement_gym.backends import make_backend

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, run_metadata  # noqa: E402
from benchmarks.learned_placer.transfer import (  # noqa: E402
    _features, _reference, _test_graphs, train_agent, zero_shot_targets,
)


def best_known(reference_paths: list[str]) -> dict[str, float]:
    """Seconds of the best placement known per test graph over every row of the `reference_paths` (results of
    ``benchmarks/learned_placer/transfer.py``)."""
    known: dict[str, float] = {}
    for path in reference_paths:
        for result in files.load_json(path)["results"]:
            for row in result["rows"]:
                known[row["model"]] = min(_reference(row), known.get(row["model"], math.inf))
    return known


def zero_shot(name: str, seed: int, args: argparse.Namespace, backend, known: dict[str, float]) -> dict:
    """Train `name` with `seed`, place every test graph zero-shot; the rows and the targets' summary."""
    agent = train_agent(name, args, backend, seed)
    rows = []
    for model, env in _test_graphs(args.test_models, backend, _features(agent)).items():
        if args.reference and model not in known:
            raise SystemExit(f"{model}: no best known latency in {args.reference}; run "
                             "benchmarks/learned_placer/transfer.py on it")
        singles = [v for v in evaluation.single_device_latencies(env).values() if v is not None]
        obs, _ = env.reset(seed=seed)
        placement = agent.predict(obs)
        latency = env.backend.measure(env.graph, env.as_measured(placement)).latency_s
        ref = min(known.get(model, min(singles)), latency)  # no --reference: the best single device
        rows.append({"model": model, "zero_shot_s": latency, "best_known_s": ref, "best_single_s": min(singles),
                     "worst_single_s": max(singles), "devices_used": len(set(placement.tolist()))})
    targets = zero_shot_targets(rows)
    summary = {
        "zero_shot_gap_geomean_pct": targets["gap_geomean_pct"],
        "zero_shot_never_worse_than_worst_single": targets["never_worse_than_worst_single"],
        "graphs_where_best_known_beats_best_single_by_5pct": len(targets["room"]),
        "zero_shot_beats_best_single_there": targets["beats_best_single_there"],
    }
    return {"agent": name, "seed": seed, "rows": rows, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["go"], help="registered agents that transfer")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="training seeds")
    parser.add_argument("--train-models", nargs="+", default=["dataset:train"],
                        help="graphs to train over (specs or dataset:SPLIT)")
    parser.add_argument("--test-models", nargs="+", default=["dataset:test"], help="graphs to transfer to")
    parser.add_argument("--profile", default="paper", help="simulated hardware preset (paper, ai_pc, server, edge)")
    parser.add_argument("--train-budget", type=int, default=200, help="placements of each training run")
    parser.add_argument("--reference", nargs="+", default=[],
                        help="results of benchmarks/learned_placer/transfer.py on the same preset and test graphs "
                             "(best known); "
                             "none: gaps against each graph's best single device (e.g. on --test-models "
                             "dataset:val, to choose settings without the test graphs or their optima)")
    parser.add_argument("--agent-option", action="append", metavar="KEY=VALUE", help="agent constructor argument")
    args = parse_args_with_results_file(parser, argv, help="write the results here (benchmarks/results/...)")
    backend = make_backend("simulated", profile=args.profile)
    known = best_known(args.reference)
    out = []
    print("| agent | seed | zero-shot geomean | never worse than worst single | beats best single (>= 5% room) |")
    print("|---|---|---|---|---|")
    for name in args.agents:
        for seed in args.seeds:
            result = zero_shot(name, seed, args, backend, known)
            out.append(result)
            s = result["summary"]
            beats = f"{s['zero_shot_beats_best_single_there']}/{s['graphs_where_best_known_beats_best_single_by_5pct']}"
            print(f"| {name} | {seed} | {s['zero_shot_gap_geomean_pct']:+.1f}% | "
                  f"{'yes' if s['zero_shot_never_worse_than_worst_single'] else 'no'} | {beats} |", flush=True)
    if args.json:
        against = ("the best placement known (the --reference files)" if args.reference else
                   "each graph's best single device (or the zero-shot placement where faster; no --reference)")
        meta = run_metadata(argv, "SIMULATED latencies (profile " + args.profile + "); zero-shot gaps are % above "
                            + against + "; test graphs were not trained on")
        path = files.write_json(args.json, {**meta, "profile": args.profile, "reference": args.reference,
                                              "results": out}, overwrite=args.overwrite)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
