"""What one real `env.step` costs, and how much of it is ours.

For each model, random two-device placements (CPU + a virtual one-thread CPU) are measured twice, interleaved:
  * env:  `env.step(placement)` with the measurement cache off (so every step compiles and times);
  * raw:  the same work written directly against OpenVINO in this process: set the affinity of every op,
          compile on HETERO, create a request, `warmup` untimed and `repeats` timed inferences.
Our overhead = env step wall time - raw wall time (medians over placements, and per-pair median).

    python benchmarks/performance/env_step.py --models resnet inception bert --placements 7 \
        --json benchmarks/results/env_step.json
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from placement_gym import DevicePlacementEnv
from placement_gym.devices import compile_properties
from placement_gym.files import machine, versions, write_json


def raw_openvino(env: DevicePlacementEnv, placement: np.ndarray, inputs: dict, warmup: int, repeats: int) -> dict:
    """Affinity + HETERO compile + warm-up + timed runs, straight on the OpenVINO API."""
    backend, graph = env.backend, env.graph
    index = {name: i for i, name in enumerate(graph.op_names)}
    start = time.perf_counter()
    for op in graph.model.get_ordered_ops():
        name = op.get_friendly_name()
        op.get_rt_info()["affinity"] = backend.devices[placement[index[name] if name in index else graph.attached[name]]].ov_name
    compile_start = time.perf_counter()
    compiled = backend.core.compile_model(
        graph.model, "HETERO:" + ",".join(d.ov_name for d in backend.devices),
        {"DEVICE_PROPERTIES": compile_properties(backend.devices)},
    )
    compile_s = time.perf_counter() - compile_start
    request = compiled.create_infer_request()
    for i, tensor in inputs.items():
        request.set_input_tensor(i, tensor)
    for _ in range(warmup):
        request.infer()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        request.infer()
        samples.append(time.perf_counter() - t)
    del request, compiled  # freeing the compiled model is part of a step's cost (the env does it too)
    return {"wall_s": time.perf_counter() - start, "compile_s": compile_s, "latency_s": float(np.median(samples))}


def bench_model(model: str, placements: int, warmup: int, repeats: int, seed: int) -> dict:
    env = DevicePlacementEnv(model, backend="openvino", devices=["CPU", "CPU[INFERENCE_NUM_THREADS=1]"],
                             warmup=warmup, repeats=repeats, backend_options={"cache": False})
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    inputs = env.backend.example_inputs(env.graph)
    rows = []
    for k in range(placements):
        placement = rng.integers(0, 2, env.graph.n_ops).astype(np.int64)
        order = ("env", "raw") if k % 2 == 0 else ("raw", "env")  # alternate to cancel drift
        row = {}
        for which in order:
            if which == "env":
                start = time.perf_counter()
                _, _, _, _, info = env.step(placement)
                row["env_wall_s"] = time.perf_counter() - start
                row["env_compile_s"] = info["compile_s"]
                row["env_latency_s"] = info["latency_s"]
                assert info["ok"], info["error"]
            else:
                raw = raw_openvino(env, placement, inputs, warmup, repeats)
                row.update({f"raw_{key}": value for key, value in raw.items()})
        row["overhead_s"] = row["env_wall_s"] - row["raw_wall_s"]
        rows.append(row)
    med = {key: float(np.median([r[key] for r in rows])) for key in rows[0]}
    # The env step's inference part: warm-up + timed runs at (about) the measured latency.
    med["env_inference_s"] = med["env_latency_s"] * (warmup + repeats)
    med["overhead_ratio"] = med["overhead_s"] / med["raw_wall_s"]
    env.close()
    return {"model": model, "n_ops": env.graph.n_ops, "median": med, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--placements", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args()

    results = [bench_model(m, args.placements, args.warmup, args.repeats, args.seed) for m in args.models]
    print(f"{'model':<10} {'env step s':>10} {'raw OV s':>9} {'compile s':>9} {'inference s':>11} {'overhead ms':>11} {'overhead %':>10}")
    for r in results:
        m = r["median"]
        print(f"{r['model']:<10} {m['env_wall_s']:>10.3f} {m['raw_wall_s']:>9.3f} {m['env_compile_s']:>9.3f} "
              f"{m['env_inference_s']:>11.3f} {m['overhead_s'] * 1e3:>11.1f} {100 * m['overhead_ratio']:>9.1f}%")
    print(f"(medians over {args.placements} random placements; warmup {args.warmup}, repeats {args.repeats}; "
          "overhead = env step - raw OpenVINO doing the same work)")
    if args.json:
        write_json(args.json, {"results": results, "settings": vars(args), "versions": versions(), "machine": machine()},
                   overwrite=args.overwrite)


if __name__ == "__main__":
    main()
