"""The paper's Table 2: every agent on ResNet, Inception-V3 and BERT, latency and speedup % vs CPU-only.

Runs the registered agents (the classical baselines, and HSDAG, Placeto, RNN, PPO where installed) through the
evaluation harness, each with the same budget of measured placements and the same seeds, and prints the table
in the paper's layout: mean ± std over seeds, ``*`` on the fastest agent per model, and, where the exact optimum
ran (simulated backend), every agent's gap to it. The same as ``placement-gym compare``, written out in Python.

Run:  python examples/compare_baselines.py [--models resnet inception bert] [--budget 500] [--seeds 3]
                                            [--backend simulated] [--agents ...] [--json table2.json]
"""
from __future__ import annotations

import argparse

from placement_gym import DevicePlacementEnv, load_graph, registry
from placement_gym.backends import make_backend
from placement_gym.evaluation import compare
from placement_gym.results import format_learning_table, format_table, summarize, write_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--agents", nargs="+", default=list(registry.AGENTS), help="default: every registered agent")
    parser.add_argument("--backend", default="simulated", help="simulated (default), openvino or auto")
    parser.add_argument("--devices", nargs="+", default=None)
    parser.add_argument("--budget", type=int, default=500, help="placements measured per agent and seed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", help="write the records here")
    args = parser.parse_args()

    backend = make_backend(args.backend, args.devices or "auto")  # one backend for every env: shared reference
    agents = {}
    for name in args.agents:  # table row label -> factory (single-device stands for one row per device)
        try:
            agents.update(registry.agent_factories([name], backend.device_names))
        except ValueError as exc:
            print(f"skipping {name}: {exc}")
    graphs = {}  # one graph per model, so its envs (agents observing different features) share the reference

    def make_env(model, feature_families):
        extra = {} if feature_families is None else {"features": feature_families}
        if model not in graphs:
            graphs[model] = load_graph(model)
        return DevicePlacementEnv(graphs[model], backend=backend, **extra)

    records, skipped = compare(args.models, agents, make_env, args.budget, args.seeds,
                               on_record=lambda r: print(f"  {r['model']:<10} {r['agent']:<16} seed {r['seed']}: "
                                                         f"{r['latency_s'] * 1e3 if r['latency_s'] else float('nan'):.3f} ms"))
    settings = records[0]["backend_settings"]
    kind = (f"SIMULATED latencies, profile {settings.get('profile')}, {settings.get('schedule')} schedule"
            if records[0]["simulated"] else f"measured latencies, median of {settings.get('repeats')} runs")
    print(f"\nTable 2 ({records[0]['backend']} backend, {kind}; devices {', '.join(records[0]['devices'])}; "
          f"budget {args.budget} placements, {args.seeds} seeds; mean±std over seeds; * = fastest)")
    rows = summarize(records)
    print(format_table(rows, reference_label=f"{records[0]['devices'][0]}-only"))
    print("\n" + format_learning_table(rows))
    for skip in skipped:
        print(f"skipped {skip['agent']} on {skip['model']}: {skip['reason']}")
    if args.json:
        print(f"wrote {write_records(args.json, records, budget=args.budget, skipped=skipped)}")


if __name__ == "__main__":
    main()
