"""Where does placement pay? The headroom of every preset, model and objective (SIMULATED).

    python benchmarks/headroom.py --json benchmarks/results/headroom.json

For each preset (``paper``, ``ai_pc``, ``edge``, ``server``), model (ResNet-50, Inception-V3, BERT-base) and
objective (latency, throughput): every single device (or why it fails: memory, op support), Tarnawski et al.'s
contiguous dynamic program (``dp``) and the exact optimum (``optimal``, time-limited: "proven" or "best found"
with its lower bound). The headroom is ``best single device / best found - 1``: what a placement agent can win
over simply picking the best device. Deterministic: the cost model has no noise.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
from _outputs import refuse_existing_outputs

from agents.baselines import ContiguousDP, ExactOptimum
from placement_gym import DevicePlacementEnv, results
from placement_gym.models import load_graph

PRESETS = ("paper", "ai_pc", "edge", "server")
MODELS = ("resnet", "inception", "bert")
OBJECTIVES = ("latency", "throughput")


def headroom(preset: str, objective: str, model: str, time_limit_s: float) -> dict:
    env = DevicePlacementEnv(load_graph(model), backend="simulated", profile=preset, objective=objective)
    env.reset(seed=0)
    singles = {}
    for d, name in enumerate(env.device_names):
        m = env.measure(np.full(env.graph.n_ops, d, dtype=np.int64))
        singles[name] = m.latency_s if m.ok else m.error
    single = min(v for v in singles.values() if isinstance(v, float))
    dp = ContiguousDP().learn(env, 1, 0)
    started = time.perf_counter()
    optimum = ExactOptimum(time_limit_s=time_limit_s).learn(env, 1, 0)
    best = min(dp.best_latency_s, optimum.best_latency_s)
    return {"preset": preset, "objective": objective, "model": model, "single_devices_s": singles,
            "best_single_s": single, "dp_s": dp.best_latency_s, "optimal_s": optimum.best_latency_s,
            "optimal_label": optimum.plan_info["label"], "lower_bound_s": optimum.plan_info["lower_bound_s"],
            "optimal_wall_s": time.perf_counter() - started, "best_found_s": best,
            "headroom_pct": 100.0 * (single / best - 1.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=OBJECTIVES)
    parser.add_argument("--time-limit", type=float, default=60.0, help="optimal's time limit per case (s)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    refuse_existing_outputs(parser, [args.json], args.overwrite)
    started = time.perf_counter()
    rows = []
    print("| preset | objective | model | best single ms | dp ms | optimal ms | optimal | headroom |")
    print("|---|---|---|---:|---:|---:|---|---:|")
    for preset in args.presets:
        for objective in args.objectives:
            for model in args.models:
                r = headroom(preset, objective, model, args.time_limit)
                rows.append(r)
                print(f"| {preset} | {objective} | {model} | {r['best_single_s'] * 1e3:.2f} | {r['dp_s'] * 1e3:.2f} | "
                      f"{r['optimal_s'] * 1e3:.2f} | {r['optimal_label']} | {r['headroom_pct']:.0f}% |", flush=True)
    paying = [r for r in rows if r["headroom_pct"] >= 15 and r["preset"] != "paper"]
    new = [r for r in rows if r["preset"] != "paper"]
    print(f"\nnew presets: {len(paying)} of {len(new)} cases with headroom >= 15%")
    if args.json:
        results.write_json(args.json, {
            "rows": rows, "note": "SIMULATED; headroom = best single device / best found (dp or optimal) - 1",
            "settings": {"time_limit_s": args.time_limit, "presets": args.presets, "models": args.models,
                         "objectives": args.objectives},
            "command": "python " + " ".join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "wall_s": time.perf_counter() - started,
            "versions": {**results.versions(), "python": platform.python_version()}, "machine": results.machine(),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
