"""Train HSDAG on a zoo model from Python: the agent API end to end.

    python examples/train_hsdag.py --model resnet --budget 500 --seed 0
    tensorboard --logdir runs/hsdag          # training curves (reward, latency, groups, entropy)

The CLI does the same and writes result records: ``placement-gym train --agent hsdag --model resnet
--backend simulated --budget 500 --seed 0 --json out.json``.
"""
from __future__ import annotations

import argparse

import numpy as np

from agents.hsdag import HSDAGAgent
from placement_gym import DevicePlacementEnv
from placement_gym.callbacks import make_callback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--backend", default="simulated", help="simulated (paper preset) or openvino")
    parser.add_argument("--devices", nargs="+", default=None, help="e.g. CPU 'CPU[INFERENCE_NUM_THREADS=1]'")
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tensorboard", default="runs/hsdag")
    parser.add_argument("--save", default=None, help="checkpoint path (not overwritten if it exists)")
    args = parser.parse_args()

    agent = HSDAGAgent(seed=args.seed)
    # The env observes the node features this agent was built for (structure features included).
    measuring = {"warmup": 1, "repeats": 5} if args.backend == "openvino" else {}  # real measurements only
    env = DevicePlacementEnv(args.model, devices=args.devices or "auto", backend=args.backend,
                             features=agent.feature_families, backend_options=measuring)
    agent.learn(env, budget=args.budget, callback=make_callback(progress_bar=True, tensorboard_log=args.tensorboard))

    reference = env.reference.latency_s
    kind = "simulated" if env.backend.simulated else "measured"
    print(f"{args.model} on {env.device_names} ({kind}): reference ({env.device_names[0]}-only) "
          f"{reference * 1e3:.3f} ms, best found {agent.best_latency_s * 1e3:.3f} ms "
          f"(x{reference / agent.best_latency_s:.2f}), ops per device {np.bincount(agent.best_placement, minlength=env.n_devices)}")
    run = agent.run_summary
    print(f"found after {run.best_step} of {run.steps} placements; agent compute {run.agent_ms_per_placement:.2f} ms "
          "per placement")
    obs, _ = env.reset(seed=args.seed)
    print(f"the policy's own placement: {run.predict_latency_s * 1e3:.3f} ms, "
          f"{np.bincount(run.predict_placement, minlength=env.n_devices)} ops per device, "
          f"{len(set(agent.groups(obs).tolist()))} groups")
    if args.save:
        print(f"saved {agent.save(args.save)}")


if __name__ == "__main__":
    main()
