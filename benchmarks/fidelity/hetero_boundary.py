"""What does one more HETERO submodel cost on the real backend? A model in k segments on two identical devices.

    python benchmarks/fidelity/hetero_boundary.py --models resnet --rounds 3 \\
        --json benchmarks/results/hetero_boundary.json

For each model (``--models``: resnet by default; inception, bert, any zoo name or model file), the compute ops in
topological order are cut into k contiguous segments of equal op counts, alternating between the two devices,
for each k of ``--segments`` (default 1 2 4 8 16 31). The devices are, by default, two f32 CPU devices with the
same settings (``CPU`` and a virtual copy ``CPU[INFERENCE_PRECISION_HINT=f32]``: the real backend pins f32 on
both), so every op computes alike wherever it runs and only the submodel boundaries differ between the k.

Each placement is measured on the project's real backend (`placement_gym.backends.openvino.OpenVINOBackend`, its
defaults: warm-up, at least ``--repeats`` timed runs, each paired with a run of the reference placement, the
median) with a fresh compile, in ``--rounds`` interleaved rounds (every k once per round, every other round in
reverse order); the fastest round counts per k. HETERO's own submodel count of each compiled placement
(``HETERO_NUMBER_OF_SUBMODELS``) is reported beside k. A least-squares fit ``latency = a + b * (submodels - 1)``
gives b, the seconds per extra submodel, with its residual; beside it the fit with a term per crossing tensor
(does it explain anything the submodel count does not?).

The sweep and the fit are `placement_gym.backends.boundary.segment_sweep`, which ``placement-gym calibrate`` also
runs (fewer k, two rounds) for the profile's boundary costs.

Real timings depend on what else runs on the machine: the JSON records the machine, the load average before and
after, the date and the command.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from placement_gym import load_graph  # noqa: E402
from placement_gym.backends.boundary import DEFAULT_SEGMENTS, segment_sweep  # noqa: E402
from placement_gym.backends.openvino import OpenVINOBackend  # noqa: E402

from benchmarks._outputs import parse_args_with_results_file, run_metadata, write_results  # noqa: E402

#: Two f32 CPU devices with the same settings (the backend pins INFERENCE_PRECISION_HINT=f32 on both).
IDENTICAL_CPUS = ["CPU", "CPU[INFERENCE_PRECISION_HINT=f32]"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet"], help="zoo names or model files (default resnet)")
    parser.add_argument("--devices", nargs=2, default=IDENTICAL_CPUS,
                        help=f"the two alternating device specs (default: {' '.join(IDENTICAL_CPUS)})")
    parser.add_argument("--segments", type=int, nargs="+", default=list(DEFAULT_SEGMENTS),
                        help=f"segment counts k (default {' '.join(map(str, DEFAULT_SEGMENTS))})")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the fastest counts per k")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per measurement (at least; adaptive)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs after each compile")
    parser.add_argument("--statistic", choices=["median", "min"], default="median",
                        help="a measurement's latency from its timed runs (default median, as the backend)")
    parser.add_argument("--unpaired", action="store_true", help="time runs alone (default: paired, as the backend)")
    args = parse_args_with_results_file(parser, argv)
    if args.rounds < 1 or min(args.segments) < 1:
        parser.error("--rounds and every --segments value must be at least 1")

    started = time.perf_counter()
    load_before = os.getloadavg()
    backend = OpenVINOBackend(args.devices, warmup=args.warmup, repeats=args.repeats, cache=False,
                              paired_reference=not args.unpaired)
    models = {}
    for model in args.models:
        graph = load_graph(model)
        sweep = segment_sweep(backend, graph, args.segments, rounds=args.rounds, statistic=args.statistic,
                              progress=lambda line: print(line, flush=True))
        models[graph.name] = sweep
        fit, crossings = sweep["fit"], sweep["fit"]["with_crossings"]
        print(f"\n{graph.name} ({graph.n_ops} ops): k, HETERO submodels, crossing tensors, latency (fastest of "
              f"{args.rounds})")
        for row in sweep["rows"]:
            print(f"  k={row['k']:3d}  {row['submodels']:3d} submodels  {row['crossings']:3d} tensors  "
                  f"{row['latency_s'] * 1e3:8.2f} ms  (rounds: "
                  f"{', '.join(f'{t * 1e3:.2f}' for t in row['rounds_s'])})")
        if fit["per_submodel_s"] is None:
            print("  fit: needs two or more distinct submodel counts")
            continue
        print(f"  fit: {fit['intercept_s'] * 1e3:.2f} ms + {fit['per_submodel_s'] * 1e3:.3f} ms per extra submodel "
              f"(residual rms {fit['residual_rms_s'] * 1e3:.3f} ms, max {fit['max_abs_residual_s'] * 1e3:.3f} ms)")
        if crossings["per_crossing_s"] is not None:
            print(f"  with crossing tensors: {crossings['per_submodel_s'] * 1e3:.3f} ms per extra submodel + "
                  f"{crossings['per_crossing_s'] * 1e3:.3f} ms per tensor (residual rms "
                  f"{crossings['residual_rms_s'] * 1e3:.3f} ms; "
                  f"{'adds something' if crossings['crossing_term_helps'] else 'adds nothing'})")
        if fit["bytes_only"]["per_byte_s"] is not None:
            per_byte = fit["bytes_only"]["per_byte_s"]
            print(f"  per crossing byte instead: {per_byte * 1e9:.3f} ms per MB "
                  f"({'%.2f GB/s' % (1e-9 / per_byte) if per_byte > 0 else 'negative'}; residual rms "
                  f"{fit['bytes_only']['residual_rms_s'] * 1e3:.3f} ms)")
    load_after = os.getloadavg()
    out = {
        **run_metadata(argv, "latency_s per k is the fastest of the rounds; each round's latency is the "
                             f"{args.statistic} of a measurement's timed runs on the real backend "
                             f"({'unpaired' if args.unpaired else 'paired with the reference placement'}); "
                             "per_submodel_s is the fitted seconds per extra HETERO submodel"),
        "devices": args.devices,
        "real_backend": backend.describe(),
        "settings": {"segments": args.segments, "rounds": args.rounds, "repeats": args.repeats,
                     "warmup": args.warmup, "statistic": args.statistic, "paired": not args.unpaired},
        "load_average": {"before": list(load_before), "after": list(load_after)},
        "models": models,
        "wall_s": time.perf_counter() - started,
    }
    backend.close()
    write_results(args.json, out, args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
