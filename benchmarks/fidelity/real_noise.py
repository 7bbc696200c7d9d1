"""How steady are real measurements? Fixed repeats (the first default), adaptive repeats and paired timing (the
default: every run paired with a run of the reference placement), side by side.

For each model and setting, interleaved so that a machine slowing down or speeding up affects both alike:

* a few fixed placements (each device alone, and half/half in topological order) measured afresh `--fresh` times:
  the coefficient of variation (CV) of those fresh latencies, also of the raw median, minimum and 25th percentile
  of each measurement's timed runs as timed (other statistics from the same runs; with pairing, before its
  correction), the mean width of each measurement's 95%
  interval of the median, and the wall time per measurement (compile included);
* with `--rank-placements N`: N placements measured in two passes; the Spearman rank correlation between the
  passes (do two measurements order placements the same way?);
* with `--reference-before`: the reference placement (all on device 0) is also measured right before every
  measurement, and the same statistics are given for the ratio latency / reference (what the env's coarser drift
  correction with ``reference_every=1`` rewards).

    python benchmarks/fidelity/real_noise.py --models resnet inception bert --json benchmarks/results/real_noise.json

Devices: `placement_gym.two_cpu_devices()` (the CPU and a virtual bf16 copy where the CPU runs bf16).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from placement_gym import DevicePlacementEnv, files, two_cpu_devices

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, write_results  # noqa: E402

#: Settings compared: name -> (extra device properties for both devices, OpenVINO backend options).
SETTINGS = {
    "fixed": ("", {"repeats": 20, "target_rel_halfwidth": None, "paired_reference": False}),  # the first release
    # At least 20 runs, more until the median's interval is +-1% (capped at 200 runs / 2 s):
    "adaptive": ("", {"paired_reference": False}),
    "paired": ("", {}),  # the backend's defaults: adaptive, and every run paired with a run of the reference
    "paired-fixed": ("", {"target_rel_halfwidth": None}),  # exactly 20 pairs: twice the inferences of "fixed"
    "paired-2pct": ("", {"target_rel_halfwidth": 0.02}),  # adaptive to +-2%
    # Candidates for steadier timings on a shared machine (timed alone, as before pairing):
    "adaptive-1-thread": ("INFERENCE_NUM_THREADS=1", {"paired_reference": False}),  # no second thread to wait for
    "adaptive-latency-hint": ("PERFORMANCE_HINT=LATENCY", {"paired_reference": False}),  # one stream, latency mode
    "adaptive-pinned": ("ENABLE_CPU_PINNING=YES", {"paired_reference": False}),  # inference threads pinned to cores
}


def with_properties(devices: list[str], extra: str) -> list[str]:
    """`devices` with the properties `extra` ("KEY=VALUE,...") added to each spec."""
    if not extra:
        return list(devices)
    return [f"{d[:-1]},{extra}]" if d.endswith("]") else f"{d}[{extra}]" for d in devices]


def placements(n: int, count: int, seed: int) -> list[np.ndarray]:
    """`count` two-device placements of varied shape: contiguous splits and random blocks of 8-32 ops."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        if k % 2 == 0:
            out.append((np.arange(n) >= int(rng.integers(n // 5, 4 * n // 5))).astype(np.int64))
        else:
            size = int(rng.choice([8, 16, 32]))
            out.append(np.repeat(rng.integers(0, 2, n // size + 1), size)[:n].astype(np.int64))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--settings", nargs="+", default=["fixed", "adaptive", "paired"], choices=list(SETTINGS))
    parser.add_argument("--fresh", type=int, default=5, help="fresh measurements of each fixed placement")
    parser.add_argument("--rank-placements", type=int, nargs="+", default=[20, 0, 0],
                        help="placements for the two-pass rank agreement, per model (0: skip)")
    parser.add_argument("--reference-before", action="store_true",
                        help="also measure the reference before every measurement")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args_with_results_file(parser, argv)

    devices = two_cpu_devices()
    out = {"devices": devices, "settings": {k: {"device_properties": SETTINGS[k][0], "backend_options": SETTINGS[k][1]}
                                            for k in args.settings}, "fresh": args.fresh,
           "versions": files.versions(), "machine": files.machine(), "models": {}}
    for model, n_rank in zip(args.models, args.rank_placements + [0] * len(args.models)):
        envs = {name: DevicePlacementEnv(model, backend="openvino", devices=with_properties(devices, SETTINGS[name][0]),
                                         backend_options=dict(SETTINGS[name][1])) for name in args.settings}
        n = next(iter(envs.values())).graph.n_ops
        fixed = {"device0": np.zeros(n, np.int64), "device1": np.ones(n, np.int64),
                 "half": (np.arange(n) >= n // 2).astype(np.int64)}
        per_placement = ("median", "raw", "min", "p25", "ratio")
        rows = {name: {**{stat: {p: [] for p in fixed} for stat in per_placement},
                       "interval_rel": [], "runs": [], "wall_s": []}
                for name in args.settings}
        for _ in range(args.fresh):
            for label, placement in fixed.items():
                for name, env in envs.items():  # interleaved
                    reference = env.measure(fixed["device0"]).latency_s if args.reference_before else None
                    start = time.perf_counter()
                    m = env.measure(placement)
                    row = rows[name]
                    row["wall_s"].append(time.perf_counter() - start)
                    row["median"][label].append(m.latency_s)
                    row["raw"][label].append(m.raw_latency_s)
                    row["min"][label].append(float(np.min(m.samples)))
                    row["p25"][label].append(float(np.percentile(m.samples, 25)))
                    low, high = m.interval_s
                    row["interval_rel"].append((high - low) / 2 / m.latency_s)
                    row["runs"].append(len(m.samples))
                    if reference is not None:
                        row["ratio"][label].append(m.latency_s / reference)
        summary = {}
        for name, row in rows.items():
            def cv(values) -> float:
                return float(np.std(values) / np.mean(values))

            summary[name] = {
                **{f"cv_{stat}": {p: cv(v) for p, v in row[stat].items()} for stat in ("median", "min", "p25")},
                "cv_median_mean": float(np.mean([cv(v) for v in row["median"].values()])),
                "cv_raw_mean": float(np.mean([cv(v) for v in row["raw"].values()])),
                "fresh_latencies_s": row["median"],
                "cv_min_mean": float(np.mean([cv(v) for v in row["min"].values()])),
                "cv_p25_mean": float(np.mean([cv(v) for v in row["p25"].values()])),
                "interval_halfwidth_rel_mean": float(np.mean(row["interval_rel"])),
                **({"cv_ratio_to_reference": {p: cv(v) for p, v in row["ratio"].items() if p != "device0"},
                    "cv_ratio_mean": float(np.mean([cv(v) for p, v in row["ratio"].items() if p != "device0"]))}
                   if args.reference_before else {}),
                "runs_mean": float(np.mean(row["runs"])),
                "wall_s_median": float(np.median(row["wall_s"])),
            }
        if n_rank:
            from scipy.stats import spearmanr

            chosen = placements(n, n_rank, args.seed)
            passes = {name: [[], []] for name in args.settings}
            ratios = {name: [[], []] for name in args.settings}
            for k in range(2):
                for placement in chosen:
                    for name, env in envs.items():
                        reference = env.measure(fixed["device0"]).latency_s if args.reference_before else None
                        passes[name][k].append(env.measure(placement).latency_s)
                        if reference is not None:
                            ratios[name][k].append(passes[name][k][-1] / reference)
            for name in args.settings:
                summary[name]["rank_spearman_two_passes"] = float(spearmanr(*passes[name]).statistic)
                summary[name]["rank_placements"] = n_rank
                summary[name]["rank_latencies_s"] = passes[name]
                first = np.asarray(passes[name][0])
                summary[name]["rank_latency_spread"] = float((first.max() - first.min()) / np.median(first))
                if args.reference_before:
                    summary[name]["rank_spearman_two_passes_ratio"] = float(spearmanr(*ratios[name]).statistic)
        out["models"][model] = summary
        for name, s in summary.items():
            print(f"{model:10s} {name:9s} CV of fresh latencies {100 * s['cv_median_mean']:.2f}% (raw runs: median "
                  f"{100 * s['cv_raw_mean']:.2f}%, min {100 * s['cv_min_mean']:.2f}%, "
                  f"p25 {100 * s['cv_p25_mean']:.2f}%), interval +-{100 * s['interval_halfwidth_rel_mean']:.2f}%, "
                  f"{s['runs_mean']:.0f} runs, {s['wall_s_median']:.2f} s/measurement"
                  + (f", Spearman over two passes {s['rank_spearman_two_passes']:.3f}" if n_rank else "")
                  + (f"; as ratios to the reference measured just before: CV {100 * s['cv_ratio_mean']:.2f}%"
                     + (f", Spearman {s['rank_spearman_two_passes_ratio']:.3f}" if n_rank else "")
                     if args.reference_before else ""), flush=True)
        for env in envs.values():
            env.close()
    write_results(args.json, out, args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
