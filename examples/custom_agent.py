"""Benchmark your own placement agent against the leaderboard, without touching placement-gym's code.

Subclass `agents.core.run.RunAgent` and write the algorithm in ``train(run, seed)``: measure placements with
``run.env.step(placement)`` until ``run.done`` (``run.base.graph.n_ops``, ``run.base.n_devices`` and the rest of
what a run offers: `agents.core.loop.RunLoop`). That is all an agent needs: ``predict`` only if it has a policy
of its own, and ``hyperparameters`` / ``save`` / ``load`` have defaults (the constructor's keywords read back from
same-named attributes, plain JSON). The shared run loop around ``train`` does the rest, as for every agent shipped
here: the exact budget, the best placement and its fresh re-measurement, the best-so-far curve, the agent's
compute per placement, callbacks.

`placement_gym.benchmark.run_suite` runs it on a versioned suite and `leaderboard` ranks it among the shipped
reference results (the built-in agents and baselines, so only your agent runs). The same from the command line,
with no PYTHONPATH needed:

    placement-gym benchmark --agent examples/custom_agent.py:BlockHillClimb --suite quick

Run:  python examples/custom_agent.py [--suite quick] [--out bench-block-hill-climb] [--resume]
"""
from __future__ import annotations

import argparse

import numpy as np

from agents.core.run import RunAgent
from placement_gym import benchmark


class BlockHillClimb(RunAgent):
    """Hill climbing over contiguous blocks: move a random run of ops (in topological order) to another device
    and keep the move if the measured latency drops. Contiguous blocks keep the number of device switches,
    and so of HETERO submodels, small."""

    name = "block-hill-climb"

    def __init__(self, max_block: int = 32) -> None:
        super().__init__()
        self.max_block = max_block  # read back by the default `hyperparameters` (and so `save` / `load`)

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="quick", help="a shipped suite (quick, standard, full, sanity) or a suite "
                        "file")
    parser.add_argument("--out", default=None, help="folder for each finished run (resumable with --resume)")
    parser.add_argument("--resume", action="store_true", help="finish the benchmark in --out")
    args = parser.parse_args()

    suite = benchmark.load_suite(args.suite)
    records = benchmark.run_suite(BlockHillClimb, suite, out=args.out, resume=args.resume)
    board = benchmark.leaderboard(records + benchmark.reference_records(suite), suite)
    print(benchmark.leaderboard_markdown(board, highlight=[BlockHillClimb.name]))


if __name__ == "__main__":
    main()
