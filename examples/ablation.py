"""HSDAG ablations (the paper's Table 3 layout): drop a feature family, the pooling, or the training extras.

    python examples/ablation.py                                   # simulated paper preset, 3 models, 3 seeds
    python examples/ablation.py --setting two-gpu --models inception --budget 500 --seeds 3
    python examples/ablation.py --models tiny_branch --budget 50 --seeds 1 --variants full no-pooling

Each variant is an `HSDAGAgent` with one switch changed; its env observes the agent's own feature families.
Every cell is a fresh measurement of the best placement found (mean +- std over seeds), as the records of
`placement_gym.evaluation` (the same builder `placement-gym train` uses).

Settings (both SIMULATED; say so when you quote them):
    paper     the simulated ``paper`` preset (desktop CPU + discrete GPU, sequential HETERO execution). Its
              proven optimum moves the last stage to the CPU: 8.1% below GPU-only on ResNet, 5.2% on Inception;
              on BERT GPU-only is the optimum, so variants can at best tie there.
    two-gpu   a diagnostic setting: two copies of the preset's GPU with overlapping execution ("parallel"
              schedule). Splitting parallel branches pays off here (Inception: local search finds ~23% below
              one device), so placement quality, not only convergence, separates the variants.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

#: Variant name -> HSDAGAgent keyword arguments (changes from the full method).
VARIANTS: dict[str, dict] = {
    "full": {},
    "no-output-shape": {"output_shape": False},
    "no-node-id": {"node_id": False},
    "no-structure": {"structure": False},
    "no-pooling": {"pooling": False},
    "no-refine": {"refine": False},  # groups only: placements that split a parsed group are out of reach
    "no-distill": {"distill_steps": 0},  # predict = the policy's mode after training, not fitted to the best
    "stochastic-parsing": {"stochastic_parsing": True},  # sampled merge decisions trained by the reward
    "until-no-merge": {"max_levels": None},  # the paper's stopping rule (parse until a level merges nothing)
    "no-baseline-no-entropy": {"baseline": False, "entropy_coef": 0.0, "normalize_advantage": False},  # authors' REINFORCE
}


def make_backend(setting: str):
    from placement_gym.backends import make_backend as build
    from placement_gym.backends.profiles import Profile, paper_profile
    from placement_gym.backends.simulated import SimulatedBackend

    if setting == "paper":
        return build("simulated", "auto", profile="paper")
    if setting == "two-gpu":
        paper = paper_profile()
        gpu = paper.devices[1]
        profile = Profile(devices=[gpu, replace(gpu, name="GPU2")], link=paper.link,
                          boundary_overhead_s=paper.boundary_overhead_s, schedule="parallel", name="two-gpu-parallel",
                          description="diagnostic: two copies of the paper preset's GPU, parallel schedule (SIMULATED)")
        return SimulatedBackend(profile)
    raise ValueError(f"unknown setting {setting!r}; choose paper or two-gpu")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", default="paper", choices=["paper", "two-gpu"])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--budget", type=int, default=500, help="placements per run")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)

    from agents.hsdag import HSDAGAgent
    from placement_gym import evaluation, results
    from placement_gym.env import DevicePlacementEnv

    backend = make_backend(args.setting)
    records = []
    for model in args.models:
        envs = {}  # feature families -> env of this model
        for name in args.variants:
            options = VARIANTS[name]
            start = time.perf_counter()
            for seed in range(args.seeds):
                agent = HSDAGAgent(**options)  # its env observes the variant's own feature families
                if agent.feature_families not in envs:
                    envs[agent.feature_families] = DevicePlacementEnv(model, backend=backend,
                                                                      features=agent.feature_families)
                env = envs[agent.feature_families]
                records += evaluation.evaluate(agent, env, args.budget, [seed], name=name, model=model,
                                               extra={"variant_options": options, "setting": args.setting},
                                               relative=False)
            print(f"{model:>10} {name:<24} {time.perf_counter() - start:6.1f} s", file=sys.stderr, flush=True)
    evaluation.add_placements_to_within(records)
    rows = results.summarize(records)
    reference = f"{records[0]['devices'][0]}-only"
    print(f"\nHSDAG ablation, setting {args.setting!r} (SIMULATED), budget {args.budget} placements, {args.seeds} seed(s)")
    print(results.format_table(rows, reference_label=reference))
    print("\nplacements measured until the final best was first found (mean over seeds; lower = faster):")
    print(f"{'variant':<24}" + "".join(f"{m:>12}" for m in args.models))
    for name in args.variants:
        cells = []
        for model in args.models:
            steps = [r["best_step"] for r in records
                     if r["agent"] == name and r["model"] == model and r["best_step"] is not None]
            cells.append(f"{sum(steps) / len(steps):12.0f}" if steps else f"{'-':>12}")
        print(f"{name:<24}" + "".join(cells))
    print("\n" + results.format_learning_table(rows))
    if args.json:
        results.write_records(args.json, records, overwrite=args.overwrite, summary=rows,
                                 command="python examples/ablation.py " + " ".join(argv or sys.argv[1:]))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
