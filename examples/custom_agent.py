"""Benchmark your own placement agent against the baselines, without touching placement-gym's code.

An agent only needs two methods:

    learn(env, budget, seed, callback=None) -> self      measure at most `budget` placements with env.step
    predict(obs, deterministic=True) -> placement       (N,) int: a device index per compute op

and may set ``best_placement`` (the placement it would deploy). `placement_gym.evaluation.evaluate` runs it for
a budget and seeds and returns records in the same schema as `placement-gym compare`; the final placement is
re-measured afresh. The same class also works from the command line:

    placement-gym evaluate --agent custom_agent:BlockHillClimb --model resnet   (with examples/ on PYTHONPATH)

Run:  python examples/custom_agent.py [--model resnet] [--backend auto] [--budget 100] [--seeds 2]
"""
from __future__ import annotations

import argparse

import numpy as np

from placement_gym import DevicePlacementEnv
from placement_gym.evaluation import evaluate, format_table, summarize


class BlockHillClimb:
    """Hill climbing over contiguous blocks: move a random run of ops (in topological order) to another device
    and keep the move if the measured latency drops. Contiguous blocks keep the number of device switches,
    and so of HETERO submodels, small."""

    name = "block-hill-climb"

    def __init__(self, max_block: int = 32) -> None:
        self.max_block = max_block
        self.best_placement: np.ndarray | None = None
        self.best_latency_s: float | None = None

    def learn(self, env, budget: int, seed: int, callback=None) -> "BlockHillClimb":
        rng = np.random.default_rng(seed)
        obs, _ = env.reset(seed=seed)
        n_ops, n_devices = env.unwrapped.graph.n_ops, env.unwrapped.n_devices
        current = obs["placement"]  # the reference placement: everything on device 0
        current_latency = float("inf")
        for step in range(budget):
            candidate = current.copy()
            if step > 0:  # the first step measures the starting point itself
                start = int(rng.integers(n_ops))
                length = int(rng.integers(1, min(self.max_block, n_ops) + 1))
                candidate[start:start + length] = rng.integers(n_devices)
            _, _, terminated, truncated, info = env.step(candidate)
            if info["ok"] and info["latency_s"] < current_latency:
                current, current_latency = candidate, info["latency_s"]
            if terminated or truncated:
                env.reset()
        self.best_placement, self.best_latency_s = current, current_latency
        return self

    def predict(self, obs, deterministic: bool = True) -> np.ndarray:
        if self.best_placement is None:
            raise RuntimeError("call learn() first")
        return self.best_placement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--backend", default="auto", help="auto (default), simulated or openvino")
    parser.add_argument("--devices", nargs="+", default=None, help="device specs (default: the backend's)")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()

    env = DevicePlacementEnv(args.model, devices=args.devices or "auto", backend=args.backend)
    from agents.baselines import RandomSearch, SingleDevice  # our baselines, for comparison

    records = []
    for d, device in enumerate(env.device_names):
        records += evaluate(SingleDevice(d), env, budget=1, seeds=1, name=f"{device}-only")
    records += evaluate(RandomSearch, env, args.budget, args.seeds)
    records += evaluate(BlockHillClimb, env, args.budget, args.seeds)  # your agent, same harness
    kind = "simulated" if env.backend.simulated else "measured"
    print(f"{args.model} on {env.backend.name} ({kind}), devices {env.device_names}, budget {args.budget}")
    print(format_table(summarize(records), reference_label=f"{env.device_names[0]}-only"))


if __name__ == "__main__":
    main()
