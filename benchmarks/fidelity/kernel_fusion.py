"""Does the fusion rule form the kernels OpenVINO's CPU plugin forms? Predicted against real, per model.

    python benchmarks/fidelity/kernel_fusion.py --models resnet inception bert tiny_branch tiny_chain \
        --json benchmarks/results/kernel_fusion.json

For each model:

1. the rule (`placement_gym.backends.fusion.fusion_parent`) predicts which IR compute ops fuse into their
   producer's kernel; ``predicted_kernels`` counts the kernels it leaves (`kernel_count`);
2. the model is compiled on ``--device`` (default ``CPU``) and its runtime model read (`runtime_kernels`):
   ``runtime_kernels`` counts the compute kernels there (layout and weight plumbing left out: Reorder, Reshape,
   Const, Input, Output, inserted Converts, constant-only nodes), by ``layerType``;
3. ``op_agreement``: the fraction of IR compute ops whose predicted kernel root (the op that starts the kernel
   it runs in) is the real one (the kernel's lowest IR op; an op only plumbing executes rides with its
   producer), with the ops where they differ listed (``--disagreements`` of them);
4. with ``--placements N``: N split placements over two devices (`placement_gym.two_cpu_devices()`; contiguous,
   blocks of 32 and 8 ops, random: `calibration.split_placements`) compiled through HETERO by the real backend,
   and the kernels of the submodels' runtime models counted against ``kernel_count(graph, placement)`` (a
   device boundary prevents the fusion).

The plugin's choices depend on the processor's instruction set and on the device's settings (a one-thread CPU
also tokenizes small MatMul chains into Subgraphs); the JSON records the CPU plugin's device name and
capabilities.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from placement_gym import load_graph, two_cpu_devices
from placement_gym.models import zoo_names
from placement_gym.backends.calibration import split_placements
from placement_gym.backends.fusion import (
    compare_with_runtime, inference_precision, kernel_count, kernel_roots, runtime_kernels_of,
)
from placement_gym.devices import shared_core

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, run_metadata, write_results  # noqa: E402

#: How far the predicted kernel count may be from the runtime's (the target).
TOLERANCE = 0.05
#: The zoo's models (MobileNetV2 where the zoo has it).
DEFAULT_MODELS = [m for m in ("resnet", "inception", "bert", "mobilenet", "tiny_branch", "tiny_chain")
                  if m in zoo_names()]


def plugin_facts(core, device: str) -> dict:
    """What the device's plugin says about itself (its fusion choices depend on the instruction set)."""
    facts = {}
    base = device.split("[")[0].split(".")[0]
    for key in ("FULL_DEVICE_NAME", "OPTIMIZATION_CAPABILITIES", "INFERENCE_PRECISION_HINT"):
        try:
            facts[key.lower()] = str(core.get_property(base, key))
        except Exception:  # noqa: BLE001 (OpenVINO raises plain exceptions for unknown properties)
            continue
    return facts


def split_rows(graph, count: int, seed: int) -> list[dict]:
    """`count` split placements compiled through HETERO on two CPU devices: predicted against real kernels."""
    from placement_gym.backends.openvino import OpenVINOBackend

    devices = two_cpu_devices()
    backend = OpenVINOBackend(devices, warmup=0, repeats=1, cache=False)
    kinds = ["contiguous", "blocks32", "blocks8", "random", "blocks2", "contiguous", "blocks8", "random"]
    rows = []
    precision = [inference_precision(backend.core, d.spec.base, d.properties) for d in backend.devices]
    try:
        for k, placement in enumerate(split_placements(graph, 2, count, seed)):
            compiled, n_submodels = backend.compile_placement(graph, placement)
            real = runtime_kernels_of(compiled.get_runtime_model(), graph)
            del compiled
            predicted = kernel_count(graph, placement, precision)
            rows.append({
                "kind": kinds[k % len(kinds)], "devices": devices, "inference_precision": precision,
                "submodels": n_submodels,
                "ops_on_device_1": int(placement.sum()), "predicted_kernels": predicted,
                "runtime_kernels": real["n_kernels"], "ratio": predicted / real["n_kernels"],
                "op_agreement": float(np.mean(kernel_roots(graph, placement, precision) == real["kernel_root"])),
                "runtime_kernels_by_type": real["kernels_by_type"],
            })
    finally:
        backend.close()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="zoo names, dataset entries or model "
                        f"files (default: {' '.join(DEFAULT_MODELS)})")
    parser.add_argument("--device", default="CPU", help="OpenVINO device to read the runtime model of")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="a compile property of --device (repeatable), e.g. INFERENCE_PRECISION_HINT=f32")
    parser.add_argument("--placements", type=int, default=0,
                        help="split placements per model compiled through HETERO (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split placements")
    parser.add_argument("--disagreements", type=int, default=20, help="ops where prediction and plugin differ, "
                        "listed per model")
    args = parse_args_with_results_file(parser, argv)

    core = shared_core()
    config = dict(item.split("=", 1) for item in args.property)
    out = {**run_metadata(argv, "Kernels predicted by placement_gym.backends.fusion against the compute kernels of "
                                "OpenVINO's runtime model; ratio = predicted / runtime."),
           "device": args.device, "properties": config, "plugin": plugin_facts(core, args.device),
           "tolerance": TOLERANCE, "models": {}}
    header = (f"{'model':<14} {'IR ops':>6} {'predicted':>9} {'runtime':>7} {'ratio':>6} {'op agreement':>12}")
    print(header)
    print("-" * len(header))
    worst = 0.0
    for model in args.models:
        graph = load_graph(model)
        started = time.perf_counter()
        row = compare_with_runtime(graph, args.device, core=core, config=config)
        row["disagreements_total"] = len(row["disagreements"])
        row["disagreements"] = row["disagreements"][:args.disagreements]
        row["within_tolerance"] = abs(row["ratio"] - 1.0) <= TOLERANCE
        row["compile_s"] = time.perf_counter() - started
        worst = max(worst, abs(row["ratio"] - 1.0))
        print(f"{model:<14} {row['ir_compute_ops']:>6} {row['predicted_kernels']:>9} {row['runtime_kernels']:>7} "
              f"{row['ratio']:>6.3f} {row['op_agreement']:>12.1%}", flush=True)
        if args.placements:
            row["split_placements"] = split_rows(graph, args.placements, args.seed)
            for split in row["split_placements"]:
                print(f"{'':<14} split {split['kind']:<10} {split['submodels']:>3} submodels: predicted "
                      f"{split['predicted_kernels']}, runtime {split['runtime_kernels']} "
                      f"(ratio {split['ratio']:.3f}, op agreement {split['op_agreement']:.1%})", flush=True)
        out["models"][graph.name] = row
    out["worst_count_error"] = worst
    print(f"worst count error {worst:.1%} (target {TOLERANCE:.0%})")
    write_results(args.json, out, args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
