"""DOPPLER's imitation stage alone against the heuristic it imitates (SIMULATED): for each zoo model and preset,
``DopplerAgent(seed=0)`` learns with budget 0 (its imitation stage alone, of its default length or
``--imitation-episodes``: DOPPLER's own is 2,000; nothing measured), and its own placement
(``predict``) is priced under each objective beside the ``critical-path`` baseline's result (its heuristic's
placement, and the NPU alone where there is one), the heuristic's placement itself and ``dp``'s.

    python benchmarks/leaderboard/doppler_imitation.py [--models resnet inception bert]
        [--presets paper ai_pc server edge] [--imitation-episodes N] [--out rows.jsonl]

The imitation stage reads neither the objective nor a measurement (the heuristic plans on the cost model, the policy
on the observation, both the same under either objective), so it runs once per (model, preset) and its placement is
priced under both objectives. One JSON line per (model, preset, objective), printed and appended to ``--out``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import agents
    sys.path.insert(0, str(REPOSITORY))

from agents.baselines import ContiguousDP, CriticalPath, cost_model, critical_path_schedule  # noqa: E402
from agents.doppler import DopplerAgent  # noqa: E402
from benchmarks._outputs import emit_row  # noqa: E402
from placement_gym.env import DevicePlacementEnv  # noqa: E402

OBJECTIVES = ("latency", "throughput")


def rows_of(model: str, preset: str, imitation_episodes: "int | None" = None) -> list[dict]:
    """The rows of one (model, preset): one per objective; `imitation_episodes` None: the agent's default."""
    env = DevicePlacementEnv(model, backend="simulated", profile=preset, objective="latency")
    began = time.time()
    options = {} if imitation_episodes is None else {"imitation_episodes": imitation_episodes}
    agent = DopplerAgent(seed=0, **options).learn(env, budget=0, seed=0)
    wall = time.time() - began
    placement = agent.predict(env.reset(seed=0)[0])
    heuristic, _, _ = critical_path_schedule(env.graph.edge_index, cost_model(env))
    matched = [h["matched"] for h in agent.history if h["stage"] == "imitation"]
    rows = []
    for objective in OBJECTIVES:
        e = DevicePlacementEnv(model, backend="simulated", profile=preset, objective=objective)
        measured = e.backend.measure(e.graph, placement)
        rows.append({
            "model": model, "preset": preset, "objective": objective, "n_ops": e.graph.n_ops,
            "imitation_episodes": agent.imitation_episodes,
            "imitation_s": measured.latency_s if measured.ok else None,
            "imitation_error": None if measured.ok else measured.error,
            "critical_path_s": CriticalPath().learn(e, budget=10, seed=0).best_latency_s,
            "heuristic_s": e.backend.measure(e.graph, heuristic).latency_s,
            "dp_s": ContiguousDP().learn(e, budget=10, seed=0).best_latency_s,
            "same_ops_as_heuristic": float(np.mean(placement == heuristic)),
            "last_episode_matched": matched[-1], "imitation_wall_s": round(wall, 1)})
    return rows


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--presets", nargs="+", default=["paper", "ai_pc", "server", "edge"])
    parser.add_argument("--imitation-episodes", type=int, help="episodes of the imitation stage (default: the "
                        "agent's; DOPPLER's own: 2000)")
    parser.add_argument("--out", help="append the rows to this JSON-lines file")
    args = parser.parse_args(argv)
    for model in args.models:
        for preset in args.presets:
            for row in rows_of(model, preset, args.imitation_episodes):
                emit_row(row, args.out)


if __name__ == "__main__":
    main()
