"""Quickstart: measure a few placements of ResNet-50 on two real OpenVINO devices and print a table.

The second device is a *virtual* copy of the CPU (`placement_gym.two_cpu_devices()`: bf16 kernels where the CPU
runs them natively, else one inference thread), so this runs on any machine with OpenVINO. Every row is a real
compile (HETERO, per-op affinity) plus timed inference.

    python examples/quickstart.py [--model resnet] [--seed 0] [--repeats 20]
"""
import argparse

import gymnasium as gym
import numpy as np

import placement_gym  # noqa: F401  (registers DevicePlacement-v0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--devices", nargs="+", help="device specs (default: placement_gym.two_cpu_devices())")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    args.devices = args.devices or placement_gym.two_cpu_devices()

    env = gym.make("DevicePlacement-v0", model=args.model, backend="openvino", devices=args.devices, repeats=args.repeats)
    obs, info = env.reset(seed=args.seed)
    env.action_space.seed(args.seed)
    n = env.unwrapped.graph.n_ops
    print(f"{args.model}: {n} compute ops, devices {info['devices']}; reference = all on {info['devices'][0]}\n")

    first_half = np.zeros(n, dtype=np.int64)
    first_half[: n // 2] = 1
    placements = {
        f"all on {args.devices[0]}": np.zeros(n, dtype=np.int64),
        f"all on {args.devices[1]}": np.ones(n, dtype=np.int64),
        "first half on device 1": first_half,
        "random 50/50": env.action_space.sample(),
    }
    print(f"{'placement':<28} {'latency ms':>10} {'spread ms':>9} {'speedup':>8} {'submodels':>9} {'compile s':>9}")
    for label, placement in placements.items():
        env.reset(seed=args.seed)
        _, reward, _, _, info = env.step(placement)
        if not info["ok"]:
            print(f"{label:<28} FAILED: {info['error']}")
            continue
        print(f"{label:<28} {info['latency_s'] * 1e3:>10.2f} {info['spread_s'] * 1e3:>9.2f} "
              f"{info['speedup']:>8.3f} {info['n_submodels']:>9d} {info['compile_s']:>9.2f}")
    print(f"\n(median of at least {args.repeats} timed runs after warm-up, more while its 95% interval is wider "
          "than +-1% (up to 2 s of timing); spread = interquartile range)")
    env.close()


if __name__ == "__main__":
    main()
