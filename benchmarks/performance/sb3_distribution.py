"""How much the vectorised multi-categorical saves over SB3's stock one, and what PPO with the graph policy costs.

Two measurements, both in this one run so that they share the machine's conditions:

1. distribution only: for N nodes and D devices, the work PPO does with the action distribution
   - rollout: build the distribution from (1, N*D) logits, sample, log-prob;
   - update (one minibatch of B): build from (B, N*D) logits, log-prob of given actions, entropy, backward;
   with SB3's `MultiCategoricalDistribution` (one Categorical per node) and
   `agents.algos.sb3.VectorizedMultiCategoricalDistribution` (one Categorical over (B, N, D)).
2. whole PPO: `PPO(GraphPolicy, env)` for a number of placements on BERT (376 compute ops) and a synthetic 1,000-op
   DAG, with each distribution (``distribution="vectorized"`` vs ``"stock"``; same seed, same rollouts
   settings, ``target_kl`` off so that every update runs the same number of epochs): seconds per update,
   per placement, and the agent's share per placement (env time removed).

    python benchmarks/performance/sb3_distribution.py                       # both, simulated backend
    python benchmarks/performance/sb3_distribution.py --ppo-placements 2000 --stock-placements 320 --json sb3.json

Timings are medians of repeated runs (part 1) on a shared machine; say so when you quote them.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))


def synthetic_graph(n_ops: int, seed: int = 0, width: int = 8):
    """A layered DAG of `n_ops` ops (about `width` per layer), each op fed by 1-3 ops of earlier layers,
    with conv-like FLOPs and tensor sizes: a stand-in for a 1,000-op model."""
    from placement_gym import ComputationGraph

    rng = np.random.default_rng(seed)
    layer = np.arange(n_ops) // width
    src, dst = [], []
    for v in range(width, n_ops):
        earlier = np.flatnonzero(layer < layer[v])
        recent = earlier[earlier >= max(0, v - 3 * width)]
        for u in rng.choice(recent, size=min(len(recent), int(rng.integers(1, 4))), replace=False):
            src.append(int(u))
            dst.append(v)
    types = rng.choice(["Convolution", "Add", "Relu", "MatMul", "Concat"], size=n_ops, p=[0.3, 0.25, 0.25, 0.1, 0.1])
    shapes = tuple(((1, int(c), 28, 28),) for c in rng.choice([32, 64, 128, 256], size=n_ops))
    bytes_out = np.array([4 * np.prod(s[0]) for s in shapes], dtype=np.int64)
    flops = np.where(np.isin(types, ["Convolution", "MatMul"]), bytes_out * 200.0, bytes_out / 4.0)
    edge_index = np.array([src, dst], dtype=np.int64)
    return ComputationGraph(f"synthetic{n_ops}", tuple(f"op{i}" for i in range(n_ops)), tuple(types), shapes,
                            bytes_out, flops, edge_index, bytes_out[edge_index[0]])


def _median_s(fn, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def distribution_only(n_nodes: int, n_devices: int, batch: int, repeats: int) -> dict:
    """Part 1 for one graph size: median seconds of a rollout step and of a minibatch update, per distribution."""
    from stable_baselines3.common.distributions import MultiCategoricalDistribution

    from agents.algos.sb3 import VectorizedMultiCategoricalDistribution

    dims = [n_devices] * n_nodes
    kinds = {"stock": MultiCategoricalDistribution(dims), "vectorized": VectorizedMultiCategoricalDistribution(dims)}
    torch.manual_seed(0)
    rollout_logits = torch.randn(1, n_nodes * n_devices)
    update_logits = torch.randn(batch, n_nodes * n_devices, requires_grad=True)
    actions = torch.randint(0, n_devices, (batch, n_nodes)).float()  # SB3 stores actions as float
    out: dict = {"n_nodes": n_nodes, "n_devices": n_devices, "batch": batch}
    for name, dist in kinds.items():
        def rollout():
            with torch.no_grad():
                d = dist.proba_distribution(rollout_logits)
                d.log_prob(d.sample())

        def update():
            d = dist.proba_distribution(update_logits)
            (-(d.log_prob(actions.long() if name == "stock" else actions)).mean() - 0.01 * d.entropy().mean()).backward()

        out[f"{name}_rollout_ms"] = 1e3 * _median_s(rollout, repeats)
        out[f"{name}_update_ms"] = 1e3 * _median_s(update, repeats)
    out["speedup_rollout"] = out["stock_rollout_ms"] / out["vectorized_rollout_ms"]
    out["speedup_update"] = out["stock_update_ms"] / out["vectorized_update_ms"]
    return out


def ppo_run(model: str, distribution: str, placements: int, args) -> dict:
    """Part 2: `PPOAgent` (PPO + GraphPolicy) for `placements` on `model` with one distribution."""
    from agents.ppo import PPOAgent
    from placement_gym import DevicePlacementEnv

    graph = synthetic_graph(1000) if model == "synthetic1000" else model
    env = DevicePlacementEnv(graph, backend=args.backend, devices=args.devices)
    agent = PPOAgent(n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                     target_kl=args.target_kl, distribution=distribution, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent.learn(env, budget=placements)
    s = agent.run_summary
    update_s = [h["update_s"] for h in agent.history]
    return {
        "model": model, "n_ops": env.graph.n_ops, "distribution": distribution, "placements": s.steps,
        "updates": s.updates, "wall_s": s.wall_s, "env_s": s.env_s,
        "update_s_mean": float(np.mean(update_s)) if update_s else float("nan"),
        "ms_per_placement": 1e3 * (s.wall_s - s.finish_s) / max(s.steps, 1),
        "agent_ms_per_placement": s.agent_ms_per_placement,
        "best_latency_s": s.latency_s, "reference_latency_s": env.reference.latency_s,
        "simulated": env.backend.simulated,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[376, 1000], help="node counts for part 1 (BERT has 376 compute ops)")
    parser.add_argument("--devices-count", type=int, default=2, help="D for part 1")
    parser.add_argument("--batch", type=int, default=32, help="minibatch size for part 1")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--models", nargs="*", default=["bert", "synthetic1000"], help="part 2 graphs ('' to skip)")
    parser.add_argument("--ppo-placements", type=int, default=256, help="placements per PPO run (part 2)")
    parser.add_argument("--stock-placements", type=int, default=None,
                        help="placements for the stock-distribution PPO runs (default: same as --ppo-placements)")
    parser.add_argument("--n-steps", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--n-epochs", type=int, default=4)
    parser.add_argument("--target-kl", type=float, default=None,
                        help="PPO target_kl (default None: every update runs all epochs, so update times compare)")
    parser.add_argument("--backend", default="simulated")
    parser.add_argument("--devices", nargs="+", default=["CPU", "GPU"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")
    parser.add_argument("--json", help="write the results here (refuses to overwrite)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from benchmarks._outputs import write_results
    from placement_gym.files import machine, versions

    results: dict = {"distribution_only": [], "ppo": [], "settings": vars(args), "versions": versions(), "machine": machine()}
    print(f"part 1: distribution only (D={args.devices_count}, minibatch {args.batch}, median of {args.repeats})")
    for n in args.sizes:
        r = distribution_only(n, args.devices_count, args.batch, args.repeats)
        results["distribution_only"].append(r)
        print(f"  N={n:5d}  rollout step: stock {r['stock_rollout_ms']:8.2f} ms  vectorized {r['vectorized_rollout_ms']:6.2f} ms"
              f"  x{r['speedup_rollout']:.1f} | minibatch update: stock {r['stock_update_ms']:8.2f} ms  "
              f"vectorized {r['vectorized_update_ms']:6.2f} ms  x{r['speedup_update']:.1f}")
        sys.stdout.flush()

    models = [m for m in args.models if m]
    if models:
        print(f"part 2: PPO(GraphPolicy) on the {args.backend} backend, n_steps={args.n_steps}, "
              f"batch {args.batch_size}, {args.n_epochs} epochs")
    for model in models:
        runs = {}
        for distribution in ("vectorized", "stock"):
            placements = args.ppo_placements if distribution == "vectorized" else (args.stock_placements or args.ppo_placements)
            r = ppo_run(model, distribution, placements, args)
            runs[distribution] = r
            results["ppo"].append(r)
            print(f"  {model} ({r['n_ops']} ops) {distribution:10s}: {r['placements']} placements, {r['updates']} updates, "
                  f"{r['update_s_mean']:.3f} s/update, {r['ms_per_placement']:.1f} ms/placement "
                  f"(agent {r['agent_ms_per_placement']:.1f} ms), best {r['best_latency_s'] * 1e3:.3f} ms "
                  f"vs reference {r['reference_latency_s'] * 1e3:.3f} ms{' (simulated)' if r['simulated'] else ''}"
                  + (" [target_kl off: a timing run, not a tuned one]" if args.target_kl is None else ""))
            sys.stdout.flush()
        speedup = runs["stock"]["update_s_mean"] / runs["vectorized"]["update_s_mean"]
        results.setdefault("ppo_update_speedup", {})[model] = speedup
        print(f"  {model}: PPO update x{speedup:.2f} faster with the vectorised distribution")
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
