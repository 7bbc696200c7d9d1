"""How fast is a simulated env step, and how does its cost grow with the graph?

    python benchmarks/performance/simulator_speed.py --json benchmarks/results/simulator_speed.json

Times ``env.step`` of ``DevicePlacement-v0`` on the simulated backend (the ``paper`` profile, two devices) for
ResNet-50, Inception-V3, BERT-base and synthetic DAGs of 1,000 / 3,000 / 10,000 ops, pinned to one CPU core.
Each step places every op on a uniformly random device (the worst case: the most submodels and transfers);
``--blocky`` also times placements made of runs of 16 ops, closer to what a trained agent proposes. The
placements are drawn before timing, so only ``env.step`` is timed; the reported figure is the median over
``--repeats`` timed loops of ``--steps`` steps.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from placement_gym import DevicePlacementEnv, files, load_graph
from placement_gym.graph import ComputationGraph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, pin_to_one_core, run_metadata  # noqa: E402

ZOO = ("resnet", "inception", "bert")
SYNTHETIC_SIZES = (1_000, 3_000, 10_000)


def synthetic_graph(n_ops: int, seed: int = 0) -> ComputationGraph:
    """A network-like random DAG: each op reads the previous op and, with probability 0.15, one of the 50 before
    it (skip connections); convolution-sized FLOPs and activation-sized tensors."""
    rng = np.random.default_rng(seed)
    edges = [(i - 1, i) for i in range(1, n_ops)]
    for i in range(2, n_ops):
        if rng.random() < 0.15:
            edges.append((int(rng.integers(max(0, i - 50), i - 1)), i))
    edges = sorted(set(edges))
    types = rng.choice(["Convolution", "Add", "Relu", "MatMul"], size=n_ops, p=[0.35, 0.2, 0.35, 0.1])
    bytes_out = rng.integers(10_000, 1_000_000, size=n_ops)
    return ComputationGraph(
        name=f"synthetic{n_ops}",
        op_names=tuple(f"op{i}" for i in range(n_ops)),
        op_types=tuple(types.tolist()),
        output_shapes=tuple(((1, int(b) // 4),) for b in bytes_out),
        bytes_out=bytes_out,
        flops=np.where(np.isin(types, ["Convolution", "MatMul"]), rng.uniform(1e7, 5e8, n_ops), bytes_out / 4.0),
        edge_index=np.array(edges, dtype=np.int64).T,
        edge_bytes=np.array([bytes_out[s] for s, _ in edges]),
    )


def time_steps(env: DevicePlacementEnv, placements: list[np.ndarray], repeats: int) -> list[float]:
    """Seconds per step of each timed loop over `placements`."""
    env.reset(seed=0)
    for p in placements[: min(20, len(placements))]:  # warm up: per-graph arrays are built on the first step
        env.step(p)
    per_step = []
    for _ in range(repeats):
        start = time.perf_counter()
        for p in placements:
            env.step(p)
        per_step.append((time.perf_counter() - start) / len(placements))
    return per_step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(ZOO), help=f"zoo models (default {list(ZOO)})")
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SYNTHETIC_SIZES), help="synthetic graph sizes")
    parser.add_argument("--steps", type=int, default=1000, help="steps per timed loop (default 1000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops; the median is reported")
    parser.add_argument("--schedule", default="sequential", choices=["sequential", "parallel"])
    parser.add_argument("--blocky", action="store_true", help="also time blocky placements (runs of 16 ops)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args_with_results_file(parser, argv)

    pin_to_one_core(not args.no_pin)
    graphs = [load_graph(m) for m in args.models] + [synthetic_graph(n, args.seed) for n in args.sizes]
    rows = []
    for graph in graphs:
        env = DevicePlacementEnv(graph, backend="simulated", profile="paper", backend_options={"schedule": args.schedule})
        rng = np.random.default_rng(args.seed)
        # Fewer steps for big graphs keep every loop around a second.
        steps = max(50, min(args.steps, args.steps * 200 // max(graph.n_ops, 1)))
        kinds = {"random": [rng.integers(0, 2, graph.n_ops) for _ in range(steps)]}
        if args.blocky:
            kinds["blocky16"] = [np.repeat(rng.integers(0, 2, graph.n_ops // 16 + 1), 16)[: graph.n_ops] for _ in range(steps)]
        for kind, placements in kinds.items():
            per_step = time_steps(env, placements, args.repeats)
            median = float(np.median(per_step))
            submodels = float(np.mean([env.backend.measure(graph, p).n_submodels for p in placements[:50]]))
            row = {"graph": graph.name, "ops": graph.n_ops, "edges": graph.n_edges, "placements": kind,
                   "steps_per_s": 1.0 / median, "us_per_step": median * 1e6, "us_per_op": median * 1e6 / graph.n_ops,
                   "mean_submodels": submodels, "loops_us_per_step": [s * 1e6 for s in per_step], "steps": steps}
            rows.append(row)
            print(f"{graph.name:>16} {graph.n_ops:>6} ops  {kind:>8}: {row['steps_per_s']:>8.0f} steps/s  "
                  f"{row['us_per_step']:>9.1f} us/step  {row['us_per_op']:.3f} us/op  (~{submodels:.0f} submodels)")
        env.close()
    if args.json:
        files.write_json(args.json, {
            "rows": rows,
            "settings": {"steps": args.steps, "repeats": args.repeats, "schedule": args.schedule,
                         "pinned_to_one_core": not args.no_pin, "profile": "paper", "seed": args.seed},
            **run_metadata(argv, "env.step on the SIMULATED backend; the machine was shared, so these are noisy medians"),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
