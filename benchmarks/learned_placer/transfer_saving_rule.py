"""Is there a per-op cost rule that places unseen graphs zero-shot better than their best single device? (issue:
transfer, target 3)

    python benchmarks/learned_placer/transfer_saving_rule.py --profile ai_pc \
        --json benchmarks/results/transfer_saving_rule_ai_pc.json
    python benchmarks/learned_placer/transfer_saving_rule.py --profile ai_pc --base CPU --splits test

A diagnostic (in the agents: every learned agent's ``zero_shot_override``, the same function,
`agents.search.heuristic_start.override_zero_shot`). Every op goes on the graph's best single device (measured;
``--base NAME``: on that device, e.g. the one a trained policy chose; ``--rebase``: the agents' choice of where the
moves start, `override_zero_shot`'s ``rebase``), except the ops whose own time on their
cheapest device (``obs["node_device_cost"]``: seconds of an op alone on each device) is lower by more than what
moving them adds: the change in their tensors' time on links (from the observation's edge bytes and the devices'
link bandwidths) plus tau x the per-submodel overhead (``obs["submodel_overhead"]``, the preset's
``boundary_overhead_s``): those go there. Printed per graph of each split: the placement's latency relative to the
best single device, and how many ops moved. It answers whether target 3 (zero-shot better than the best single
device on half of the test graphs where the optimum beats it by >= 5%) is reachable from what a policy observes,
and with what threshold chosen on the TRAIN split only. All figures SIMULATED. (Files from before the link term:
``transfer_saving_rule_<preset>.json``, where tau = 0 was every op that saves anything.)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from agents.search.heuristic_start import override_zero_shot
from placement_gym import files
from placement_gym.backends import make_backend
from placement_gym.backends.base import submodel_overhead
from placement_gym.env import DevicePlacementEnv
from placement_gym.models.dataset import dataset_names

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, run_metadata  # noqa: E402


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ai_pc")
    parser.add_argument("--splits", nargs="+", default=["train", "val", "test"])
    parser.add_argument("--tau", nargs="+", type=float, default=[0.5, 1.0, 2.0, 4.0, 8.0],
                        help="thresholds in units of the preset's per-submodel overhead (> 0)")
    parser.add_argument("--base", nargs="+", help="the device(s) every op starts on (names from the preset; "
                                                  "several: a row for each, e.g. every device a trained policy "
                                                  "may choose); default: each graph's best single device")
    parser.add_argument("--rebase", action="store_true",
                        help="let the rule start from another device when its moves gain more from there (the "
                             "agents' override does; `override_zero_shot`'s rebase); default: from --base")
    args = parse_args_with_results_file(parser, argv, help="write the per-graph figures here")

    backend = make_backend("simulated", "auto", profile=args.profile)
    overhead = submodel_overhead(backend)  # what obs["submodel_overhead"] holds
    for device in args.base or []:
        if device not in backend.device_names:
            parser.error(f"--base {device!r} is not a device of {args.profile!r}: {list(backend.device_names)}")
    print(f"{args.profile}: per-submodel overhead {overhead * 1e6:.0f} us; tau in units of it (SIMULATED)")
    rows = []
    for split in args.splits:
        for name in dataset_names(split):
            env = DevicePlacementEnv(name, backend=backend, unsupported="repair")
            obs, _ = env.reset(seed=0)

            def latency(placement: np.ndarray) -> float:
                m = env.backend.measure(env.graph, env.as_measured(placement))
                return m.latency_s if m.ok else float("inf")

            singles = [latency(np.full(env.graph.n_ops, d)) for d in range(env.n_devices)]
            best = int(np.argmin(singles))
            bases = [best] if args.base is None else [env.device_names.index(device) for device in args.base]
            for base in bases:
                row = {"split": split, "graph": name, "ops": env.graph.n_ops,
                       "best_single_device": env.device_names[best], "best_single_s": singles[best],
                       "base_device": env.device_names[base], "rule": []}
                for tau in args.tau:
                    placement = override_zero_shot(np.full(env.graph.n_ops, base), obs, tau, rebase=args.rebase)
                    start = int(np.bincount(placement).argmax()) if args.rebase else base  # re-based: its majority
                    row["rule"].append({"tau": tau,
                                        "vs_best_single_pct": 100 * (latency(placement) / singles[best] - 1),
                                        "start_device": env.device_names[start],
                                        "ops_moved": int((placement != start).sum())})
                rows.append(row)
                cells = " ".join(f"tau {r['tau']:g}: {r['vs_best_single_pct']:+.1f}% ({r['ops_moved']}"
                                 + (f" from {r['start_device']})" if r["start_device"] != row["base_device"] else ")")
                                 for r in row["rule"])
                print(f"{split:5s} {name:12s} {row['ops']:4d} ops, best single {row['best_single_device']:5s} "
                      f"{row['best_single_s'] * 1e3:.3f} ms, from {row['base_device']:5s} | {cells}", flush=True)
    if args.json:
        files.write_json(args.json, {**run_metadata(argv, "SIMULATED; vs_best_single_pct: the rule's placement "
                                                             "against the graph's best single device"),
                                       "profile": args.profile, "base": args.base or "best single device",
                                       "rebase": args.rebase,
                                       "boundary_overhead_s": overhead, "rows": rows},
                           overwrite=args.overwrite)


if __name__ == "__main__":
    main()
