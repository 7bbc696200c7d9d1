"""How much faster is pricing placements in batches (`SimulatedBackend.measure_many`, the native vector env)?

    nice -n 10 python benchmarks/performance/batched_simulation.py --json benchmarks/results/batched_simulation.json

On one CPU core (pinned), for ResNet-50 (``--models``) on the simulated backend (``paper`` profile), placements
per second of

* ``measure``: `SimulatedBackend.measure`, one placement per call;
* ``measure_many/B``: `SimulatedBackend.measure_many` on batches of B placements (``--batches``, default 64, 256);
* ``env.step``: one `DevicePlacementEnv` stepped once per placement (its one-step episodes not reset: the least a
  single env can do per placement);
* ``env.step+reset``: the same env as a run loop drives it under Gymnasium's API, reset after every step that ends
  its episode (`agents.algos.rollout` does so; what the vector env's same-step autoreset replaces);
* ``make_vec/K``: the native vector env (``gym.make_vec(..., num_envs=K)``, ``--num-envs``, default 64), one
  ``step`` = K placements;
* ``make_vec/K copy=False``: the same with ``copy=False`` (the observation arrays that never change are shared,
  read-only, instead of copied per step);
* ``sync_vec/K``: Gymnasium's ``SyncVectorEnv`` over K envs in ``SAME_STEP`` mode, for comparison.

Placements are drawn before timing: uniformly random devices (``random``: the most submodels) and runs of 16 ops
(``blocky16``: closer to what trained agents propose). Every mode is timed once per repeat, the modes interleaved
within a repeat so that load from other jobs on the machine hits them alike; the report gives each mode's median
over ``--repeats`` and, per repeat, its speed relative to ``measure`` (and the vector envs' relative to ``env.step``
and to ``env.step+reset``), whose medians are the ratios to quote.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from placement_gym import DevicePlacementEnv, files, load_graph
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.vector_env import DevicePlacementVectorEnv

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, pin_to_one_core, run_metadata  # noqa: E402


def timed(run: Callable[[], int]) -> float:
    """Placements per second of one call of `run` (which returns how many placements it priced)."""
    start = time.perf_counter()
    count = run()
    return count / (time.perf_counter() - start)


def modes(graph, placements: np.ndarray, batches: list[int], num_envs: int) -> dict[str, Callable[[], int]]:
    """Each mode as a function that prices every row of `placements` ((P, N), P a multiple of every batch size)."""
    backend = SimulatedBackend("paper")
    env = DevicePlacementEnv(graph, backend=SimulatedBackend("paper"))
    env.reset(seed=0)
    vector = DevicePlacementVectorEnv(num_envs=num_envs, model=graph, backend="simulated", profile="paper")
    vector.reset(seed=0)
    shared = DevicePlacementVectorEnv(num_envs=num_envs, model=graph, backend="simulated", profile="paper", copy=False)
    shared.reset(seed=0)
    sync = gym.make_vec("DevicePlacement-v0", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, model=graph, backend="simulated",
                        profile="paper")
    sync.reset(seed=0)

    def one_at_a_time() -> int:
        for p in placements:
            backend.measure(graph, p)
        return len(placements)

    def batched(size: int) -> Callable[[], int]:
        def run() -> int:
            for start in range(0, len(placements), size):
                backend.measure_many(graph, placements[start:start + size])
            return len(placements)
        return run

    def env_steps() -> int:
        for p in placements:
            env.step(p)
        return len(placements)

    def env_steps_and_resets() -> int:
        for p in placements:
            _, _, terminated, truncated, _ = env.step(p)
            if terminated or truncated:
                env.reset()
        return len(placements)

    def vector_steps(venv) -> Callable[[], int]:
        def run() -> int:
            for start in range(0, len(placements), num_envs):
                venv.step(placements[start:start + num_envs])
            return len(placements)
        return run

    return {"measure": one_at_a_time, **{f"measure_many/{b}": batched(b) for b in batches}, "env.step": env_steps,
            "env.step+reset": env_steps_and_resets,
            f"make_vec/{num_envs}": vector_steps(vector), f"make_vec/{num_envs} copy=False": vector_steps(shared),
            f"sync_vec/{num_envs}": vector_steps(sync)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet"], help="zoo models (default: resnet)")
    parser.add_argument("--placements", type=int, default=1024, help="placements per timed loop (default 1024)")
    parser.add_argument("--batches", nargs="+", type=int, default=[64, 256], help="measure_many batch sizes")
    parser.add_argument("--num-envs", type=int, default=64, help="sub-envs of the vector envs (default 64)")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timed loops; medians reported")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args_with_results_file(parser, argv)
    multiple = int(np.lcm.reduce([*args.batches, args.num_envs]))
    if args.placements % multiple:
        parser.error(f"--placements must be a multiple of every batch size and --num-envs ({multiple})")

    pinned = pin_to_one_core(not args.no_pin)
    rows = []
    for model in args.models:
        graph = load_graph(model)
        rng = np.random.default_rng(args.seed)
        n = graph.n_ops
        kinds = {"random": rng.integers(0, 2, (args.placements, n)),
                 "blocky16": np.repeat(rng.integers(0, 2, (args.placements, n // 16 + 1)), 16, axis=1)[:, :n]}
        for kind, placements in kinds.items():
            runs = modes(graph, placements, args.batches, args.num_envs)
            for run in runs.values():  # warm up: per-graph arrays, first-call costs
                run()
            rates: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.repeats):
                for name, run in runs.items():
                    rates[name].append(timed(run))
            per_repeat = {name: np.array(r) for name, r in rates.items()}
            row = {"graph": graph.name, "ops": n, "placements": kind,
                   "placements_per_s": {name: float(np.median(r)) for name, r in per_repeat.items()},
                   "speedup_vs_measure": {name: float(np.median(r / per_repeat["measure"])) for name, r in per_repeat.items()},
                   "speedup_vs_env_step": {name: float(np.median(r / per_repeat["env.step"])) for name, r in per_repeat.items()
                                           if "vec" in name},
                   "speedup_vs_env_step_reset": {name: float(np.median(r / per_repeat["env.step+reset"]))
                                                 for name, r in per_repeat.items() if "vec" in name},
                   "repeats_placements_per_s": {name: r.tolist() for name, r in per_repeat.items()}}
            rows.append(row)
            for name in runs:
                vs, vs_reset = row["speedup_vs_env_step"].get(name), row["speedup_vs_env_step_reset"].get(name)
                print(f"{graph.name:>14} {kind:>9} {name:>22}: {row['placements_per_s'][name]:>8.0f} placements/s  "
                      f"x{row['speedup_vs_measure'][name]:.2f} vs measure"
                      + (f"  x{vs:.2f} vs env.step  x{vs_reset:.2f} vs env.step+reset" if vs else ""))
    if args.json:
        files.write_json(args.json, {
            "rows": rows,
            "settings": {"placements": args.placements, "batches": args.batches, "num_envs": args.num_envs,
                         "repeats": args.repeats, "pinned_to_one_core": pinned, "profile": "paper",
                         "schedule": "sequential", "objective": "latency", "seed": args.seed},
            **run_metadata(argv, "SIMULATED backend; the machine (2 cores) was shared with other jobs: quote the ratios"),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
