"""Does imitating each training graph's best placement teach GO to mix devices zero-shot? (issue: transfer)

    python benchmarks/learned_placer/transfer_imitation_probe.py --epochs 150 --seed 0
    python benchmarks/learned_placer/transfer_imitation_probe.py --epochs 150 --seed 0 --agent-option graph_cost=false

GO is trained as docs/results/transfer.md's table trains it (``dataset:train``, 200 placements, ``--profile``), then
fitted by behaviour cloning to one placement per training graph: the best of the heuristic start's placements
(`agents.search.heuristic_start.start_placements`: each device alone, every op on its cheapest device), which on
``ai_pc`` is per-op mixed on the four graphs whose optimum mixes devices (encoder-m/l, gpt-m/l) and the CPU
alone elsewhere. ``--epochs`` passes over the training graphs, one gradient step on ``-imitate(target)`` per graph
(Adam, lr 1e-3). Then every training target is checked against ``predict`` and every test graph
(``dataset:test``, families never trained on) is placed zero-shot, against its best single device and the
per-op cheapest placement. A probe, not a feature: it answers whether such imitation is the way to target 3
(zero-shot better than the best single device where the optimum mixes devices). All figures SIMULATED.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from agents.search.heuristic_start import start_placements
from agents.algos.reinforce import apply_gradients
from placement_gym import registry
from placement_gym.backends import make_backend
from placement_gym.env import DevicePlacementEnv
from placement_gym.models.dataset import dataset_names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ai_pc")
    parser.add_argument("--train-budget", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agent-option", action="append", default=[], metavar="KEY=JSON",
                        help="a GO constructor option, e.g. graph_cost=false")
    args = parser.parse_args()
    options = {"seed": args.seed, **{k: json.loads(v) for k, v in (o.split("=", 1) for o in args.agent_option)}}

    backend = make_backend("simulated", "auto", profile=args.profile)
    agent = registry.make_agent(registry.load_agent_class("go"), options)

    def graph_env(name):
        env = DevicePlacementEnv(name, backend=backend, features=agent.feature_families, unsupported="repair")
        return env, env.reset(seed=0)[0]

    def latency(env, placement) -> float:
        m = env.backend.measure(env.graph, env.as_measured(placement))
        return m.latency_s if m.ok else float("inf")

    started = time.perf_counter()
    agent.learn(DevicePlacementEnv(dataset_names("train"), backend=backend, features=agent.feature_families,
                                   unsupported="repair"), args.train_budget, seed=args.seed)
    print(f"GO trained on dataset:train for {args.train_budget} placements in {time.perf_counter() - started:.1f} s")

    targets = []  # (name, observation, best start placement)
    for name in dataset_names("train"):
        env, obs = graph_env(name)
        candidates = start_placements(obs)
        targets.append((name, obs, min(candidates, key=lambda p: latency(env, p))))
    print("training graphs whose target mixes devices:", [n for n, _, p in targets if len(np.unique(p)) > 1])

    optimizer = torch.optim.Adam(agent.policy.parameters(), lr=1e-3)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    for _ in range(args.epochs):
        for i in rng.permutation(len(targets)):
            _, agent.imitation_obs, placement = targets[i]
            agent.policy.train()
            apply_gradients(optimizer, agent.policy.parameters(), -agent._imitate(placement), 1.0)
    reproduced = sum(np.array_equal(agent.predict(obs), p) for _, obs, p in targets)
    print(f"imitation: {args.epochs} epochs in {time.perf_counter() - started:.1f} s; training targets that "
          f"predict returns: {reproduced} / {len(targets)}")

    for name in dataset_names("test"):
        env, obs = graph_env(name)
        placement = agent.predict(obs)
        best_single = min(latency(env, np.full(env.graph.n_ops, d)) for d in range(env.n_devices))
        cheapest = latency(env, start_placements(obs)[-1])
        print(f"{name}: zero-shot {100 * (latency(env, placement) / best_single - 1):+.1f}% vs the best single device "
              f"({best_single * 1e3:.3f} ms; every op on its cheapest device {100 * (cheapest / best_single - 1):+.1f}%), "
              f"ops per device {np.bincount(placement, minlength=env.n_devices).tolist()}")


if __name__ == "__main__":
    main()
