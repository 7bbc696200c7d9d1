"""Take a placement to production: plan it, write the placed model folder, compile it back and run it.

    python examples/deploy_placement.py --model tiny_branch --out placed-tiny

1. Plan: the `cheapest` baseline places every op on the device where it alone runs fastest, measured for real on
   this machine's two devices (`placement_gym.two_cpu_devices()`: the CPU and a virtual second copy of it).
2. Write: `placement_gym.deploy.save_placed` writes model.xml / model.bin (the placed IR), placement.json (the
   device of every op by name, the devices with their properties, the HETERO target) and a README.
3. Compile and run: `placement_gym.deploy.compile_placed` reads the folder as a user's program would, and its
   outputs are checked against the original model's on the same random inputs.

The same folder from the command line: ``placement-gym place --model tiny_branch --agent cheapest --backend
openvino --out placed-tiny`` (docs/deploy.md).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import openvino as ov

import placement_gym
from agents.baselines.greedy import CheapestDevice
from placement_gym import deploy
from placement_gym.evaluation import evaluate
from placement_gym.models import example_inputs, load_model


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny_branch", help="zoo name or model file")
    parser.add_argument("--out", help="placed folder to write (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    # 1. plan and measure, on the real backend (few timed runs: a tiny model's step takes a fraction of a second)
    env = placement_gym.DevicePlacementEnv(args.model, backend="openvino", devices=placement_gym.two_cpu_devices(),
                                           warmup=1, repeats=5)
    record = evaluate(CheapestDevice(), env, budget=1, seeds=[args.seed])[0]
    placement = np.asarray(record["placement"])
    print(f"cheapest on {record['model']}: {np.bincount(placement, minlength=2).tolist()} ops on "
          f"{env.device_names}, measured {record['latency_s'] * 1e3:.3f} ms")

    # 2. write the folder; the devices go with their compile properties (the backend's own Device objects)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="placed-")) / "placed"
    deploy.save_placed(out, env.graph.model, placement, env.backend.devices,
                       info={"agent": "cheapest", "seed": args.seed, "objective": env.objective,
                             "latency_s": record["latency_s"], "simulated": False})
    print(f"wrote {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")

    # 3. compile it as placement.json says and run it next to the original model, on the same inputs
    compiled = deploy.compile_placed(out)
    inputs = list(example_inputs(load_model(args.model), seed=args.seed).values())
    placed_out = compiled(inputs)[0]
    original = ov.Core().compile_model(load_model(args.model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    reference_out = original(inputs)[0]
    # bf16 keeps 8 significant bits (a relative rounding of 2**-8 per op), so a bf16 device's outputs differ
    # from f32's by up to a few percent of the output's scale after a few layers
    error = float(np.max(np.abs(placed_out - reference_out)) / (np.max(np.abs(reference_out)) or 1.0))
    print(f"compiled from {out} on {', '.join(compiled.get_property('EXECUTION_DEVICES'))}: outputs within "
          f"{100 * error:.3g}% of the original model's (of its largest output)")
    return {"out": out, "placement": placement, "relative_error": error,
            "execution_devices": list(compiled.get_property("EXECUTION_DEVICES"))}


if __name__ == "__main__":
    main()
