"""What a cap of G contiguous groups costs: the best placement of the space Placeto and ``ppo-node`` search
(`placement_gym.wrappers.contiguous_groups`: the topological order cut into G groups of ops that share a device),
against the leaderboard's best known (SIMULATED).

    python benchmarks/leaderboard/group_space.py [--groups 16] [FOLDER]

For every case and zoo model of the leaderboard in FOLDER (default ``benchmarks/results/leaderboard``, with the pure
learned agents' reruns of ``benchmarks/results/pure-agents``): the contiguous dynamic program of ``dp``
(`agents.baselines.dp.contiguous_dp`) with cuts allowed only at the G groups' boundaries, so every placement it can
return is one of the space's; measured by the simulator. It is the best placement of the space under the
program's contiguous cost model, not a proof of the space's optimum: under throughput the program keeps one
segment per device (a pipeline stage) where the space also holds groups of one device apart, so there an agent
can beat it. Prints per case and model its gap and that of ``placeto`` and ``ppo-node``, and per case their
geometric means over the models.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from agents.baselines import dp  # noqa: E402
from benchmarks.leaderboard import leaderboard_table  # noqa: E402
from placement_gym.env import DevicePlacementEnv  # noqa: E402
from placement_gym.results import markdown_table  # noqa: E402
from placement_gym.wrappers import contiguous_groups  # noqa: E402

AGENTS = ("placeto", "ppo-node")


def group_space_placement(env: DevicePlacementEnv, n_groups: int) -> np.ndarray:
    """(N,) int64 the contiguous program's best placement of `env`'s graph with cuts only between its `n_groups`
    contiguous groups (one device per group)."""
    backend, graph = env.unwrapped.backend, env.unwrapped.graph
    groups = contiguous_groups(graph.n_ops, n_groups)
    positions = np.concatenate(([0], np.flatnonzero(np.diff(groups)) + 1, [graph.n_ops])).astype(np.int64)
    placement, _ = dp.contiguous_dp(backend, graph, cut_positions=positions)
    if backend.check_feasible(graph, placement) is not None:  # as the dp baseline re-plans
        placement, _ = dp.contiguous_dp(backend, graph, one_segment_per_device=True, cut_positions=positions)
    return placement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="benchmarks/results/leaderboard")
    parser.add_argument("--groups", type=int, default=16, help="G, contiguous groups (default: %(default)s)")
    parser.add_argument("--update", default="benchmarks/results/pure-agents",
                        help="the pure learned agents' reruns (leaderboard_table.py --update)")
    args = parser.parse_args(argv)
    updates = leaderboard_table.update_cases(Path(args.update)) if args.update else {}
    per_model, per_case = [], []
    for name, paths in leaderboard_table.folder_cases(Path(args.folder), "zoo").items():
        case, rows = leaderboard_table.case_rows(paths, update=updates.get(name, ()))
        preset, objective = case.split(":")
        gaps: dict[str, list] = {"space": [], **{agent: [] for agent in AGENTS}}
        for model in dict.fromkeys(r["model"] for r in rows):
            best = next(r["best_known_s"] for r in rows if r["model"] == model)
            env = DevicePlacementEnv(model, backend="simulated", profile=preset, objective=objective,
                                     unsupported="repair")
            env.reset(seed=0)
            info = env.step(group_space_placement(env, args.groups))[4]
            gaps["space"].append(100 * (info["latency_s"] / best - 1) if info["ok"] else None)
            for agent in AGENTS:
                gaps[agent].append(next((r["gap_pct"][max(r["gap_pct"])] for r in rows
                                         if r["model"] == model and r["agent"] == agent), None))
            per_model.append([case, model] + [leaderboard_table.benchmark.format_gap(gaps[k][-1]) for k in gaps])
        per_case.append([case] + [leaderboard_table.benchmark.format_gap(leaderboard_table.geomean_gap(gaps[k]))
                                  for k in gaps])
    header = [f"{args.groups}-group space (program)", *AGENTS]
    print(markdown_table(["case", "model", *header], per_model))
    print()
    print(markdown_table(["case", *header], per_case))
    return 0


if __name__ == "__main__":
    sys.exit(main())
