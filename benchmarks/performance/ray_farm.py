"""The measurement farm on Ray: 1 vs 2 local workers, side by side (issue: Scale).

    python benchmarks/performance/ray_farm.py --json benchmarks/results/ray_farm.json

1. Real placements of a tiny model: `FarmBackend("openvino", ...)` with 1 and then 2 workers measures the same
   fresh random placements of ``tiny_branch`` (``measure_many``, ``use_cache=False``; fixed repeats, so every
   placement costs the same work; one-thread devices, so two workers fit this 2-core machine). Rounds
   interleave the worker counts; the figure is the ratio of median wall times.
2. A simulated ``compare`` grid: the same ``placement-gym compare`` command run serially, with ``--ray local:1``
   and with ``--ray local:2`` (each a fresh process, Ray start-up included), interleaved; the records of every run
   are checked identical to the serial ones (timings aside).

Local Ray workers are processes on this machine: with 2 cores, 2 workers is the most that can help.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from placement_gym import files
from placement_gym.models import load_graph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file  # noqa: E402

#: Timing-relevant record fields that differ between runs; everything else must match.
TIMING_KEYS = {"wall_s", "agent_ms_per_placement", "extra", "backend_settings"}
GRID = ["compare", "--models", "resnet", "inception", "--agents", "random", "greedy", "topo", "dp", "hsdag", "rnn",
        "post", "ppo", "placeto", "--backend", "simulated", "--budget", "100", "--seeds", "4", "--no-progress"]


def real_placements(workers: int, placements: list[np.ndarray], devices: list[str]) -> float:
    """Seconds to measure `placements` afresh on a farm of `workers` local workers (Ray start excluded)."""
    import ray

    from placement_gym.distributed import FarmBackend

    farm = FarmBackend("openvino", devices, address=f"local:{workers}", warmup=5, repeats=100,
                       target_rel_halfwidth=None)
    graph = load_graph("tiny_branch")
    farm.measure_many(graph, placements[:workers], use_cache=False)  # every worker compiles once, holds the graph
    started = time.perf_counter()
    measured = farm.measure_many(graph, placements, use_cache=False)
    elapsed = time.perf_counter() - started
    assert all(m.ok for m in measured), [m.error for m in measured if not m.ok]
    farm.close()
    ray.shutdown()
    return elapsed


def compare_grid(ray_address: str | None, out: Path) -> float:
    command = [sys.executable, "-m", "placement_gym.cli", *GRID, "--json", str(out)]
    if ray_address:
        command += ["--ray", ray_address]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def comparable(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in files.load_json(path)["records"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of each setting")
    parser.add_argument("--placements", type=int, default=24, help="real placements per round")
    parser.add_argument("--devices", nargs="+", default=["CPU[INFERENCE_NUM_THREADS=1]",
                                                         "CPU[INFERENCE_NUM_THREADS=1,INFERENCE_PRECISION_HINT=bf16]"])
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args_with_results_file(parser, argv, help="write the figures here")

    graph = load_graph("tiny_branch")
    rng = np.random.default_rng(args.seed)
    placements = [rng.integers(0, len(args.devices), graph.n_ops) for _ in range(args.placements)]
    real: dict[int, list[float]] = {1: [], 2: []}
    grid: dict[str, list[float]] = {"serial": [], "local:1": [], "local:2": []}
    identical = True
    load: list[float] = []  # the machine's 1-minute load average after each round
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for workers in (1, 2) if round_ % 2 == 0 else (2, 1):
                real[workers].append(real_placements(workers, placements, args.devices))
            for setting in grid:
                out = Path(folder) / f"{setting.replace(':', '_')}_{round_}.json"
                grid[setting].append(compare_grid(None if setting == "serial" else setting, out))
                identical &= comparable(out) == comparable(Path(folder) / f"serial_{round_}.json")
            load.append(os.getloadavg()[0])  # other work on the machine slows the 2-worker runs most
            print(f"round {round_} (load {load[-1]:.1f}): real {real[1][-1]:.1f} / {real[2][-1]:.1f} s, grid "
                  + " / ".join(f"{k} {v[-1]:.1f} s" for k, v in grid.items()), flush=True)
    medians = {"real_1_worker_s": float(np.median(real[1])), "real_2_workers_s": float(np.median(real[2])),
               **{f"grid_{k.replace(':', '_')}_s": float(np.median(v)) for k, v in grid.items()}}
    summary = {
        "real_speedup_2_vs_1": medians["real_1_worker_s"] / medians["real_2_workers_s"],
        "grid_speedup_local2_vs_local1": medians["grid_local_1_s"] / medians["grid_local_2_s"],
        "grid_speedup_local2_vs_serial": medians["grid_serial_s"] / medians["grid_local_2_s"],
        "grid_records_identical": identical,
    }
    print(json.dumps({**medians, **summary}, indent=1))
    if args.json:
        files.write_json(args.json, {
            "command": " ".join(sys.argv), "machine": {"processor": platform.processor(), "cpu_count": os.cpu_count()},
            "settings": vars(args), "grid_command": GRID, "rounds": {"real": real, "grid": grid, "load_average": load},
            "medians": medians, "summary": summary}, overwrite=args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
