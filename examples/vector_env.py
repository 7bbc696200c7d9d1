"""Many placements per step: the native vector env on the simulated backend, by hand and under an agent.

    python examples/vector_env.py [--model resnet] [--num-envs 64] [--steps 20] [--budget 200] [--seed 0]

Part 1 steps ``gym.make_vec("DevicePlacement-v0", num_envs=K, ...)`` with placements made of random runs of ops
on one device: each step prices its K placements in one batched call. Episodes last one step and are reset within
that same step (Gymnasium's ``SAME_STEP`` autoreset), so what was measured is in ``info["final_info"]``, masked by
``info["_final_info"]``; ``copy=False`` shares the observation arrays that never change (read-only) instead of
copying them every step. Part 2 hands a vector env to Post, whose trainer then measures the samples of each update
in one step of it. Latencies are SIMULATED (the cost model of the ``paper`` preset).
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import placement_gym  # noqa: F401  (registers DevicePlacement-v0)
from agents.post import PostAgent


def runs_of_ops(rng: np.random.Generator, k: int, n: int, devices: int, run: int = 16) -> np.ndarray:
    """(k, n) int64 placements: consecutive runs of `run` ops, each run on a device drawn at random."""
    return np.repeat(rng.integers(0, devices, (k, n // run + 1)), run, axis=1)[:, :n]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--num-envs", type=int, default=64, help="placements per step in part 1")
    parser.add_argument("--steps", type=int, default=20, help="vector steps in part 1")
    parser.add_argument("--budget", type=int, default=200, help="placements Post measures in part 2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    # Part 1: by hand.
    venv = gym.make_vec("DevicePlacement-v0", num_envs=args.num_envs, model=args.model, backend="simulated",
                        profile="paper", copy=False)
    obs, info = venv.reset(seed=args.seed)
    k, n = obs["placement"].shape
    devices = venv.unwrapped.device_names
    print(f"{args.model}: {n} ops, devices {devices}, {k} sub-envs; reference = all on {info['reference_device'][0]}")
    rng = np.random.default_rng(args.seed)
    best_latency, best_placement = np.inf, None
    started = time.perf_counter()
    for _ in range(args.steps):
        placements = runs_of_ops(rng, k, n, len(devices))
        obs, reward, terminated, truncated, info = venv.step(placements)
        measured = info["final_info"]  # every sub-env's one-step episode ended: each row is a measured placement
        latency = np.where(measured["ok"], measured["latency_s"], np.inf)
        if latency.min() < best_latency:
            best_latency, best_placement = float(latency.min()), measured["placement"][latency.argmin()]
    seconds = time.perf_counter() - started
    print(f"part 1: {args.steps * k} placements in {seconds:.2f} s ({args.steps * k / seconds:,.0f} per second); "
          f"best {best_latency * 1e3:.3f} ms, ops per device {np.bincount(best_placement, minlength=len(devices))}")
    venv.close()

    # Part 2: an agent that samples several placements per update measures them in one vector step each.
    agent = PostAgent(seed=args.seed)
    venv = gym.make_vec("DevicePlacement-v0", num_envs=agent.reinforce.samples_per_update, model=args.model,
                        backend="simulated", profile="paper")
    started = time.perf_counter()
    agent.learn(venv, budget=args.budget)
    run = agent.run_summary
    print(f"part 2: Post measured {run.steps} placements in {time.perf_counter() - started:.1f} s, "
          f"{venv.num_envs} per vector step; best {run.final.latency_s * 1e3:.3f} ms, "
          f"its own placement (predict) {run.predict.latency_s * 1e3:.3f} ms")
    venv.close()


if __name__ == "__main__":
    main()
