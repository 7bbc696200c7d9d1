"""Does OpenVINO's HETERO overlap the submodels of different requests? Latency vs throughput on real devices.

    python benchmarks/fidelity/real_throughput.py --models tiny_branch tiny_chain resnet --repeats 5 \\
        --out benchmarks/results/real_throughput.json

For each model and a few placements (everything on device 0, everything on device 1, a 50/50 contiguous split in
topological order, a uniformly random split), each repeat compiles the placement once and times on that one
compiled model, back to back:

* the synchronous latency (`timed_runs`, the backend's ``objective="latency"`` timing);
* the steady-state period between completed inferences with 1, 2 and 4 requests in flight (`timed_periods`, the
  backend's ``objective="throughput"`` timing; ``--requests``).

Repeats are interleaved over placements, so a machine slowing down or speeding up affects all alike; the
summary gives medians over repeats and the median of the per-repeat ratios period / latency. If a split's period
with several requests in flight is below its synchronous latency (which is the sum of its parts: HETERO runs one
request's submodels one after the other), the devices work on different requests at the same time: the
submodels overlap, by ``1 - ratio``. For reference the summary also gives the parts themselves, from per-op
profiling of each device alone (`OpenVINOBackend.node_device_cost`): a perfect pipeline of two independent
devices would reach a period of ``max(parts)``.

Devices: `placement_gym.two_cpu_devices()` (the CPU plus a virtual copy in bf16 where the CPU runs bf16, else
with one inference thread), or ``--devices``. A control for "is there spare hardware to overlap onto at all?":
one device that runs several requests at once by itself (OpenVINO's THROUGHPUT hint: one stream per core),

    python benchmarks/fidelity/real_throughput.py --models resnet --placements device0 --repeats 3 \
        --devices "CPU[PERFORMANCE_HINT=THROUGHPUT]" "CPU[INFERENCE_NUM_THREADS=1]" \
        --out benchmarks/results/real_throughput_control.json

Real timings depend on what else runs on the machine: the JSON records the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from placement_gym import files, load_graph, two_cpu_devices
from placement_gym.backends.openvino import OpenVINOBackend, timed_periods, timed_runs
from placement_gym.devices import cpu_runs_bf16

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, write_results  # noqa: E402


def fixed_placements(n: int, seed: int) -> dict[str, np.ndarray]:
    """The placements compared: each device alone, a contiguous 50/50 split, a uniformly random split."""
    rng = np.random.default_rng(seed)
    return {
        "device0": np.zeros(n, dtype=np.int64),
        "device1": np.ones(n, dtype=np.int64),
        "half": (np.arange(n) >= n // 2).astype(np.int64),
        "random": rng.integers(0, 2, n).astype(np.int64),
    }


def load_average() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny_branch", "tiny_chain", "resnet"])
    parser.add_argument("--requests", type=int, nargs="+", default=[1, 2, 4], help="requests in flight to compare")
    parser.add_argument("--devices", nargs=2, help="two device specs (default: placement_gym.two_cpu_devices())")
    parser.add_argument("--placements", nargs="+", choices=["device0", "device1", "half", "random"],
                        default=["device0", "device1", "half", "random"])
    parser.add_argument("--repeats", type=int, default=5, help="compiles (and timings) of each placement")
    parser.add_argument("--window-s", type=float, default=0.2, help="shortest timed window of the throughput timing")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random split")
    args = parse_args_with_results_file(parser, argv, option="--out",
                                        help="results JSON path (refused if it exists, unless --overwrite)")
    if args.repeats < 1 or min(args.requests) < 1:
        parser.error("--repeats and --requests must be >= 1")

    devices = args.devices or two_cpu_devices()
    backend = OpenVINOBackend(devices, cache=False)  # its defaults: the timing settings measure() uses
    timing = dict(target_rel_halfwidth=backend.target_rel_halfwidth, max_s=backend.max_timing_s)
    out = {
        "devices": devices, "cpu_runs_bf16": cpu_runs_bf16(), "backend": backend.describe(),
        "requests_in_flight": args.requests, "repeats": args.repeats, "window_s": args.window_s, "seed": args.seed,
        "versions": files.versions(), "machine": files.machine(), "load_average_before": load_average(),
        "models": {},
    }
    started = time.perf_counter()
    for model in args.models:
        graph = load_graph(model)
        placements = {k: v for k, v in fixed_placements(graph.n_ops, args.seed).items() if k in args.placements}
        cost = backend.node_device_cost(graph)  # (N, 2) per-op seconds on each device alone
        rows = {label: {"latency_s": [], "period_s": {str(k): [] for k in args.requests}, "n_submodels": None,
                        "compile_s": []} for label in placements}
        for repeat in range(args.repeats):
            for label, placement in placements.items():
                row = rows[label]
                start = time.perf_counter()
                compiled, row["n_submodels"] = backend.compile_placement(graph, placement)
                row["compile_s"].append(time.perf_counter() - start)
                inputs = backend.example_inputs(graph)
                request = compiled.create_infer_request()
                for index, tensor in inputs.items():
                    request.set_input_tensor(index, tensor)
                runs = timed_runs(request, backend.repeats, backend.warmup, max_runs=backend.max_repeats, **timing)
                row["latency_s"].append(float(np.median(runs)))
                del request
                for k in args.requests:
                    periods = timed_periods(compiled, inputs, k, backend.warmup, windows=backend.windows,
                                            window_s=args.window_s, max_windows=backend.max_repeats, **timing)
                    row["period_s"][str(k)].append(float(np.median(periods)))
                del compiled
                print(f"{model} repeat {repeat + 1}/{args.repeats} {label:8s} latency {row['latency_s'][-1] * 1e3:8.3f} ms; "
                      + ", ".join(f"{k} in flight {row['period_s'][str(k)][-1] * 1e3:8.3f} ms" for k in args.requests),
                      flush=True)
        summary = {}
        for label, row in rows.items():
            latency = np.asarray(row["latency_s"])
            parts = [float(cost[placements[label] == d, d].sum()) for d in range(len(devices))]
            summary[label] = {
                **row,
                "latency_median_s": float(np.median(latency)),
                "period_median_s": {k: float(np.median(v)) for k, v in row["period_s"].items()},
                # per repeat: period / latency on the same compiled model, then the median over repeats
                "ratio_to_latency_median": {k: float(np.median(np.asarray(v) / latency))
                                            for k, v in row["period_s"].items()},
                "ratio_to_latency_range": {k: [float(np.min(np.asarray(v) / latency)), float(np.max(np.asarray(v) / latency))]
                                           for k, v in row["period_s"].items()},
                "parts_profiled_s": parts,  # per-op profiles of each device alone, summed over the ops placed there
                "ideal_pipeline_period_s": max(parts),
            }
        out["models"][model] = {"n_ops": graph.n_ops, "placements": summary}
    out["load_average_after"] = load_average()
    out["wall_s"] = time.perf_counter() - started

    print(f"\ndevices {devices}; medians over {args.repeats} repeats; ratio = period / synchronous latency "
          "(median of per-repeat ratios; < 1: requests overlap)")
    header = f"{'model':12s} {'placement':9s} {'subm':>4s} {'latency ms':>11s} " + " ".join(
        f"{f'{k} in flight ms (ratio)':>24s}" for k in args.requests) + f" {'max(parts) ms':>14s}"
    print(header)
    for model, entry in out["models"].items():
        for label, s in entry["placements"].items():
            print(f"{model:12s} {label:9s} {s['n_submodels']:4d} {s['latency_median_s'] * 1e3:11.3f} " + " ".join(
                f"{s['period_median_s'][str(k)] * 1e3:15.3f} ({s['ratio_to_latency_median'][str(k)]:.3f})"
                for k in args.requests) + f" {s['ideal_pipeline_period_s'] * 1e3:14.3f}")
    print(f"load average before {out['load_average_before']}, after {out['load_average_after']}; {out['wall_s']:.0f} s")
    backend.close()
    write_results(args.out, out, args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
