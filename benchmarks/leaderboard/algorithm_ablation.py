"""REINFORCE vs PPO for the project's own policies, with and without the convergence aids, on the simulated
cost model.

    python benchmarks/leaderboard/algorithm_ablation.py --json benchmarks/results/algorithm_ablation.json

Every agent in ``--agents`` (default hsdag, placeto, rnn) is trained once per algorithm in ``--algorithms``
(``--agent-option algorithm=...``) and per variant in ``--variants`` (``LABEL=JSON`` constructor options; the
default compares the agents' defaults with ``no-distill``, the final distillation of the best placement into
the policy switched off) on each model, for ``--seeds`` seeds at ``--budget`` placements, next to the exact
optimum of the cost model (``optimal``), which ``placements_to_within`` is measured against. The table gives, per model and (agent, algorithm): the best
placement found (mean over seeds, re-measured), the agent's own deterministic placement (``predict``), the
placements it needed to get within 5 / 2 / 1 % of the optimum (median over the seeds that got there, and how
many did) and the agent's own compute per placement. All figures are SIMULATED (``--profile``, default the
``paper`` preset).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from placement_gym import evaluation, registry, results
from placement_gym.backends import make_backend
from placement_gym.env import DevicePlacementEnv
from placement_gym.models import load_graph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["hsdag", "placeto", "rnn"])
    parser.add_argument("--algorithms", nargs="+", default=["reinforce", "ppo"], choices=["reinforce", "ppo"])
    parser.add_argument("--variants", nargs="+", default=["default={}", 'no-distill={"distill_steps": 0}'],
                        help="LABEL=JSON constructor options per variant")
    parser.add_argument("--models", nargs="+", default=["resnet", "inception"])
    parser.add_argument("--profile", default="paper", help="simulated hardware profile (preset name)")
    parser.add_argument("--budget", type=int, default=500, help="placements per run")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    args = parse_args_with_results_file(parser, argv, help="write the records and the summary here")

    backend = make_backend("simulated", "auto", profile=args.profile)
    variants = {}
    for item in args.variants:
        label, _, options = item.partition("=")
        try:
            variants[label] = json.loads(options or "{}")
        except json.JSONDecodeError as exc:
            parser.error(f"--variants takes LABEL=JSON, got {item!r}: {exc}")
    factories = {}
    for name in args.agents:
        cls = registry.load_agent_class(name)
        for algorithm in args.algorithms:
            for label, options in variants.items():
                row = f"{name} {algorithm}" + ("" if label == "default" else f" {label}")
                factories[row] = (lambda cls=cls, options={**options, "algorithm": algorithm}:
                                  registry.make_agent(cls, options))
    factories["optimal"] = lambda: registry.make_agent(registry.load_agent_class("optimal"))
    graphs = {model: load_graph(model) for model in args.models}

    def make_env(model, families=None):
        features = {} if families is None else {"features": families}
        return DevicePlacementEnv(graphs[model], backend=backend, **features)

    start = time.perf_counter()

    def progress(record: dict) -> None:
        print(f"{time.perf_counter() - start:7.1f} s  {record['model']:>10}  {record['agent']:<18} seed {record['seed']}"
              f"  best {record['latency_s'] * 1e3:.3f} ms  predict "
              f"{(record.get('predict_latency_s') or float('nan')) * 1e3:.3f} ms", file=sys.stderr, flush=True)

    records, skipped = evaluation.compare(args.models, factories, make_env, args.budget, range(args.seeds),
                                          on_record=progress)
    rows = results.summarize(records)
    print(f"\nREINFORCE vs PPO (variants: {', '.join(variants)}), SIMULATED ({args.profile!r} preset), budget {args.budget}, seeds 0-{args.seeds - 1}; "
          "placements to within x% of the optimum")
    print(results.format_learning_table(rows))
    if args.json:
        results.write_records(args.json, records, overwrite=args.overwrite, summary=rows, skipped=skipped,
                              command="python benchmarks/leaderboard/algorithm_ablation.py "
                              + " ".join(argv or sys.argv[1:]))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
