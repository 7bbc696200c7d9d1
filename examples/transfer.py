"""Transfer: train GO over graphs of several families, then place a graph of a family it never saw, zero-shot and
after a few measured placements (SIMULATED backend).

    python examples/transfer.py [--profile paper] [--train-budget 200] [--test unet-m] [--finetune 20] [--seed 0]

Training draws one graph of ``dataset:train`` per reset (a multi-graph env); the test graph comes from
``dataset:test`` (families never in training). The checkpoint goes to a temporary file and is loaded back, as a
user would ship it. `benchmarks/learned_placer/transfer.py` runs the whole protocol (every test graph, the optimum, from
scratch).
"""
import argparse
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

import placement_gym  # noqa: F401  (registers DevicePlacement-v0)
from agents.go import GOAgent


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper", help="simulated preset (paper, ai_pc, server, edge)")
    parser.add_argument("--train-budget", type=int, default=200, help="placements measured while training")
    parser.add_argument("--test", default="unet-m", help="a graph of dataset:test (or any model)")
    parser.add_argument("--finetune", type=int, default=20, help="placements of the fine-tuning run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    train_env = gym.make("DevicePlacement-v0", model="dataset:train", backend="simulated", profile=args.profile)
    agent = GOAgent(seed=args.seed).learn(train_env, budget=args.train_budget)
    with tempfile.TemporaryDirectory() as tmp:
        agent = GOAgent.load(agent.save(Path(tmp) / "go.pt"))

    test_env = gym.make("DevicePlacement-v0", model=args.test, backend="simulated", profile=args.profile)
    base = test_env.unwrapped
    obs, _ = test_env.reset(seed=args.seed)
    singles = {name: base.measure(np.full(base.graph.n_ops, d)).latency_s for d, name in enumerate(base.device_names)}
    zero_shot = base.measure(agent.predict(obs)).latency_s
    agent.learn(test_env, budget=args.finetune, seed=args.seed)  # fine-tuning: learn again, on the new graph
    print(f"{args.test} ({base.graph.n_ops} ops, {args.profile}, SIMULATED)")
    for name, latency in singles.items():
        print(f"  all on {name:<10} {latency * 1e3:8.3f} ms")
    print(f"  GO zero-shot      {zero_shot * 1e3:8.3f} ms")
    print(f"  GO fine-tuned {args.finetune:>3} {agent.best_latency_s * 1e3:8.3f} ms "
          f"(its own placement: {agent.run_summary.predict_latency_s * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
