"""How far the critical-path heuristic's own ties move its placement (SIMULATED): for each zoo model, preset and
objective, the ``critical-path`` heuristic's placement (ties to the lowest index, what DOPPLER's imitation stage aims
at here) beside the heuristic drawing at random among tied ops and devices (`TieDraw`), as DOPPLER's heuristic does:
among exactly equal choices, and among choices within 0.1% of the best (a bottom level or a finish time a policy
reading standardised log-scaled features can hardly tell apart).

    python benchmarks/leaderboard/heuristic_ties.py [--models resnet inception bert]
        [--presets paper ai_pc server edge] [--draws 20] [--seed 0] [--out rows.jsonl]

One JSON line per (model, preset, objective): the lowest-index placement's latency and, per tolerance, the drawn
placements' gaps to it (per cent: min, median, max) and how many are within 2% of it; printed and appended to
``--out``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import agents
    sys.path.insert(0, str(REPOSITORY))

from agents.baselines import cost_model, critical_path_schedule  # noqa: E402
from agents.baselines.constraints import Constraints  # noqa: E402
from agents.baselines.critical_path import TieDraw  # noqa: E402
from benchmarks._outputs import emit_row  # noqa: E402
from placement_gym.env import DevicePlacementEnv  # noqa: E402

#: relative tolerances of a tie: exactly equal (DOPPLER's heuristic), within 0.1%
TOLERANCES = (0.0, 1e-3)
#: the imitation bar of issue 83 (per cent of the `critical-path` latency)
WITHIN_PCT = 2.0


def rows_of(model: str, preset: str, draws: int, seed: int) -> list[dict]:
    """The rows of one (model, preset), one per objective; each tolerance's `draws` placements drawn from `seed`.

    The heuristic reads no objective (its cost model is the same under both), so the placements are drawn once and
    priced under each objective."""
    env = DevicePlacementEnv(model, backend="simulated", profile=preset)
    costs, constraints, edge_index = cost_model(env), Constraints.of(env.backend, env.graph), env.graph.edge_index
    lowest = critical_path_schedule(edge_index, costs, constraints)[0]
    drawn = {within: [critical_path_schedule(edge_index, costs, constraints, ties)[0] for _ in range(draws)]
             for within in TOLERANCES for ties in [TieDraw(np.random.default_rng(seed), within)]}
    rows = []
    for objective in ("latency", "throughput"):
        priced = DevicePlacementEnv(model, backend="simulated", profile=preset, objective=objective)
        lowest_s = priced.backend.measure(priced.graph, lowest).latency_s
        row = {"model": model, "preset": preset, "objective": objective, "draws": draws, "seed": seed,
               "lowest_index_s": lowest_s}
        for within, placements in drawn.items():
            gaps = [100 * (priced.backend.measure(priced.graph, p).latency_s / lowest_s - 1) for p in placements]
            row[f"within_{within:g}"] = {"gap_pct": [float(np.min(gaps)), float(np.median(gaps)), float(np.max(gaps))],
                                         "within_2pct": int(sum(abs(g) <= WITHIN_PCT for g in gaps))}
        rows.append(row)
    return rows


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--presets", nargs="+", default=["paper", "ai_pc", "server", "edge"])
    parser.add_argument("--draws", type=int, default=20, help="placements drawn per tolerance (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="append the rows to this JSON-lines file")
    args = parser.parse_args(argv)
    for model in args.models:
        for preset in args.presets:
            for row in rows_of(model, preset, args.draws, args.seed):
                emit_row(row, args.out)


if __name__ == "__main__":
    main()
