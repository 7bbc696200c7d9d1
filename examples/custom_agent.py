"""Benchmark your own placement agent against the baselines, without touching placement-gym's code.

Subclass `agents.core.run.RunAgent` and write the algorithm in ``train(run, seed)``: measure placements with
``run.env.step(placement)`` until ``run.done``. The shared run loop around it does the rest, as for every agent
shipped here: the exact budget, the best placement and its fresh re-measurement, the best-so-far curve, the
agent's compute per placement, the fresh measurement of your policy's own placement (``predict``), callbacks.
`placement_gym.evaluation.evaluate` then runs it for a budget and seeds and returns records in the same schema
as `placement-gym compare`. The same class also works from the command line:

    PYTHONPATH=examples placement-gym evaluate --agent custom_agent:BlockHillClimb --model resnet

Run:  python examples/custom_agent.py [--model resnet] [--backend auto] [--budget 100] [--seeds 2]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from agents.core.run import RunAgent
from placement_gym import DevicePlacementEnv, registry
from placement_gym.evaluation import add_placements_to_within, evaluate
from placement_gym.results import format_learning_table, format_table, summarize, write_json


class BlockHillClimb(RunAgent):
    """Hill climbing over contiguous blocks: move a random run of ops (in topological order) to another device
    and keep the move if the measured latency drops. Contiguous blocks keep the number of device switches,
    and so of HETERO submodels, small."""

    name = "block-hill-climb"

    def __init__(self, max_block: int = 32) -> None:
        super().__init__()
        self.max_block = max_block
        self.current: np.ndarray | None = None

    def train(self, run, seed) -> None:
        rng = np.random.default_rng(seed)
        obs, _ = run.env.reset(seed=seed)
        n_ops, n_devices = run.base.graph.n_ops, run.base.n_devices
        current, current_latency = obs["placement"], float("inf")  # the reference: everything on device 0
        first = True
        while not run.done:
            candidate = current.copy()
            if not first:  # the first step measures the starting point itself
                start = int(rng.integers(n_ops))
                length = int(rng.integers(1, min(self.max_block, n_ops) + 1))
                candidate[start:start + length] = rng.integers(n_devices)
            first = False
            _, _, terminated, truncated, info = run.env.step(candidate)
            latency = info["latency_corrected_s"]  # drift-corrected on a real backend (= latency_s when simulated)
            if info["ok"] and latency < current_latency:
                current, current_latency = candidate, latency
            if terminated or truncated:
                run.env.reset()
        self.current = current

    def predict(self, obs, deterministic: bool = True) -> np.ndarray:
        """Where the climb ended (the reference placement before any learning)."""
        return np.array(obs["placement"] if self.current is None else self.current, dtype=np.int64)

    def hyperparameters(self) -> dict:
        return {"max_block": self.max_block}

    def save(self, path, overwrite: bool = False) -> Path:
        return write_json(path, {"hyperparameters": self.hyperparameters(), "current": self.current},
                          overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "BlockHillClimb":
        data = json.loads(Path(path).read_text())  # plain data only: nothing in the file is executed
        agent = cls(**data["hyperparameters"])
        agent.current = None if data["current"] is None else np.asarray(data["current"], dtype=np.int64)
        return agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--backend", default="auto", help="auto (default), simulated or openvino")
    parser.add_argument("--devices", nargs="+", default=None, help="device specs (default: the backend's)")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()

    env = DevicePlacementEnv(args.model, devices=args.devices or "auto", backend=args.backend)
    records = []
    for label, factory in registry.agent_factories(["single-device", "random"], env.device_names).items():
        records += evaluate(factory, env, args.budget, args.seeds, name=label, relative=False)  # our baselines
    records += evaluate(BlockHillClimb, env, args.budget, args.seeds, relative=False)  # your agent, same harness
    add_placements_to_within(records)
    kind = "simulated" if env.backend.simulated else "measured"
    print(f"{args.model} on {env.backend.name} ({kind}), devices {env.device_names}, budget {args.budget}")
    rows = summarize(records)
    print(format_table(rows, reference_label=f"{env.device_names[0]}-only"))
    print(format_learning_table(rows))


if __name__ == "__main__":
    main()
