"""Latency of uniformly random placements (mean, std, best) next to every single-device placement.

The floor a learned agent must clear is the MEAN random placement (what a policy that learned nothing
places); `placement-gym compare --agents random` reports the BEST of its budget instead (random search).

    python benchmarks/leaderboard/random_placements.py                          # zoo models, simulated backend
    python benchmarks/leaderboard/random_placements.py --models resnet --samples 200 --json random.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--samples", type=int, default=1000, help="random placements per model")
    parser.add_argument("--backend", default="simulated")
    parser.add_argument("--devices", nargs="+", default=None, help="device specs (default: the backend's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here (refuses to overwrite)")
    args = parser.parse_args(argv)

    from placement_gym import DevicePlacementEnv
    from benchmarks._outputs import write_results
    from placement_gym.files import machine, versions

    results = {"settings": vars(args), "versions": versions(), "machine": machine(), "models": {}}
    for model in args.models:
        env = DevicePlacementEnv(model, backend=args.backend, devices=args.devices or "auto")
        graph, backend = env.graph, env.backend
        n, d = graph.n_ops, env.n_devices

        def latency_ms(placement: np.ndarray) -> float:
            m = backend.measure(graph, placement)
            return m.latency_s * 1e3 if m.ok else float("nan")

        single = {name: latency_ms(np.full(n, i, dtype=np.int64)) for i, name in enumerate(env.device_names)}
        rng = np.random.default_rng(args.seed)
        random = np.array([latency_ms(rng.integers(0, d, size=n)) for _ in range(args.samples)])
        row = {"n_ops": n, "single_device_ms": single, "random_mean_ms": float(np.nanmean(random)),
               "random_std_ms": float(np.nanstd(random)), "random_best_ms": float(np.nanmin(random)),
               "random_failed": int(np.isnan(random).sum()), "samples": args.samples,
               "simulated": backend.simulated, "backend_settings": backend.describe()}
        results["models"][model] = row
        singles = ", ".join(f"{k}-only {v:.3f}" for k, v in single.items())
        print(f"{model:10s} ({n} ops): {singles} | random mean {row['random_mean_ms']:.3f} ± {row['random_std_ms']:.3f}, "
              f"best {row['random_best_ms']:.3f} ms over {args.samples}{' (SIMULATED)' if backend.simulated else ''}")
        env.close()
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
