"""The critical-path baseline (DOPPLER's heuristic, `agents.baselines.critical_path`): its two choices on hand-made
cost models whose answers can be checked by hand, and the agent on the simulated presets (valid placements, a
device outside HETERO never shared, memory respected). Real parts: the simulated backend; nothing mocked."""
from __future__ import annotations

import numpy as np
import pytest

from agents.baselines import CostModel, CriticalPath, critical_path_schedule
from agents.baselines.constraints import Constraints
from agents.baselines.critical_path import TieDraw, bottom_levels, top_levels
from placement_gym import DevicePlacementEnv, registry
from placement_gym.backends.base import shareable_devices

from .conftest import small_accelerator_profile


def _costs(op_time: list[list[float]], edge_time: float, n_edges: int) -> CostModel:
    op = np.asarray(op_time, dtype=float)
    d = op.shape[1]
    edges = np.full((n_edges, d, d), edge_time)
    edges[:, np.arange(d), np.arange(d)] = 0.0
    return CostModel(op_time_s=op, edge_time_s=edges)


def test_a_chain_goes_to_the_device_where_it_finishes_first():
    # 0 -> 1 -> 2; device 1 runs every op in 1 s, device 0 in 3 s; a transfer costs 0.5 s.
    chain = np.array([[0, 1], [1, 2]])
    placement, makespan, order = critical_path_schedule(chain, _costs([[3, 1], [3, 1], [3, 1]], 0.5, 2))
    assert placement.tolist() == [1, 1, 1] and makespan == 3.0 and order == [0, 1, 2]
    # Bottom levels: mean time 2 s per op, mean transfer 0.5 s: 2, 2 + 0.5 + 2, 4.5 + 0.5 + 2.
    assert bottom_levels(chain, _costs([[3, 1], [3, 1], [3, 1]], 0.5, 2)).tolist() == [7.0, 4.5, 2.0]
    assert top_levels(chain, _costs([[3, 1], [3, 1], [3, 1]], 0.5, 2)).tolist() == [2.0, 4.5, 7.0]


def test_a_device_change_pays_the_submodel_overhead_too():
    # 0 -> 1 -> 2; op 0 takes 0.1 s on device 0 and 0.3 s on device 1, ops 1 and 2 take 0.1 s on device 0 and
    # 0.05 s on device 1; a transfer costs 0.01 s. Without a submodel overhead, ops 1 and 2 move to device 1 (op 1
    # finishes at 0.1 + 0.01 + 0.05 = 0.16 there against 0.2); with 0.1 s per extra submodel the move would finish
    # at 0.26, so the chain stays on device 0 (makespan 0.3).
    chain = np.array([[0, 1], [1, 2]])
    free = _costs([[0.1, 0.3], [0.1, 0.05], [0.1, 0.05]], 0.01, 2)
    placement, makespan, _ = critical_path_schedule(chain, free)
    assert placement.tolist() == [0, 1, 1] and makespan == pytest.approx(0.21)
    priced = CostModel(op_time_s=free.op_time_s, edge_time_s=free.edge_time_s, submodel_overhead_s=0.1)
    placement, makespan, _ = critical_path_schedule(chain, priced)
    assert placement.tolist() == [0, 0, 0] and makespan == pytest.approx(0.3)
    # The overhead prices a device change, not a tensor: the bottom levels (the selection's priority) ignore it.
    assert bottom_levels(chain, priced).tolist() == bottom_levels(chain, free).tolist()


def test_the_longest_branch_is_scheduled_first_and_the_other_runs_beside_it():
    # 0 -> {1 (4 s), 2 (1 s)} -> 3 on two identical devices, transfers 0.5 s. Op 1 has the larger bottom level, so
    # it goes first, on op 0's device (no transfer: starts at 1); op 2 then starts earliest on the free device
    # (1 + 0.5 = 1.5) and finishes at 2.5; op 3 waits for op 1 (5) on device 0, op 2's tensor arrives by 3.
    graph = np.array([[0, 0, 1, 2], [1, 2, 3, 3]])
    costs = _costs([[1, 1], [4, 4], [1, 1], [1, 1]], 0.5, 4)
    placement, makespan, order = critical_path_schedule(graph, costs)
    assert order == [0, 1, 2, 3] and placement.tolist() == [0, 0, 1, 0] and makespan == 6.0


def test_drawn_ties_choose_among_the_tied_choices_only():
    # Two identical devices: op 0 finishes as early on either (an exact tie), so DOPPLER's rule (`TieDraw`) puts it
    # on each in some draws, where the lowest-index rule always takes device 0; ops 1 and 2 then follow op 0 (a
    # transfer costs 0.5 s). With two devices of different speeds there is no tie: every draw is the plan.
    chain = np.array([[0, 1], [1, 2]])
    tied = _costs([[1, 1], [1, 1], [1, 1]], 0.5, 2)
    assert critical_path_schedule(chain, tied)[0].tolist() == [0, 0, 0]
    ties = TieDraw(np.random.default_rng(0))
    drawn = {tuple(critical_path_schedule(chain, tied, ties=ties)[0].tolist()) for _ in range(20)}
    assert drawn == {(0, 0, 0), (1, 1, 1)}
    untied = _costs([[3, 1], [3, 1], [3, 1]], 0.5, 2)
    assert {tuple(critical_path_schedule(chain, untied, ties=ties)[0].tolist()) for _ in range(5)} == {(1, 1, 1)}
    # within 50%, a device that finishes op 0 at 1.2 s against 1 s is tied too; a slower one (2 s) is not
    near = _costs([[1.2, 1, 2]] * 3, 0.5, 2)
    wide = TieDraw(np.random.default_rng(0), within=0.5)
    assert {critical_path_schedule(chain, near, ties=wide)[0][0] for _ in range(20)} == {0, 1}


def test_a_device_without_room_takes_no_more_ops():
    # The chain of the first test with device 1 holding 2 bytes: each op has 1 byte of weights, no working set.
    chain = np.array([[0, 1], [1, 2]])
    constraints = Constraints(np.ones((3, 2), dtype=bool), np.ones(3), np.zeros(3), np.array([np.inf, 2.0]))
    placement, _, _ = critical_path_schedule(chain, _costs([[3, 1], [3, 1], [3, 1]], 0.5, 2), constraints)
    assert placement.tolist() == [1, 1, 0]


@pytest.mark.parametrize("preset", ["paper", "ai_pc"])
def test_the_agent_measures_its_plan_and_never_shares_a_device_outside_hetero(preset):
    env = DevicePlacementEnv("tiny_branch", backend="simulated", profile=preset)
    agent = registry.make_agent("critical-path", {}).learn(env, budget=4, seed=0)
    assert isinstance(agent, CriticalPath) and agent.run_summary.steps >= 1
    plan = agent.best_placement
    assert plan.shape == (env.graph.n_ops,) and env.backend.measure(env.graph, plan).ok
    alone = np.flatnonzero(~shareable_devices(env.backend))
    for device in alone:  # the NPU runs the whole model or nothing
        assert (plan == device).all() or not (plan == device).any()
    assert agent.plan_info["heuristic"].startswith("critical-path") and agent.plan_info["predicted_makespan_s"] > 0


def test_the_plan_fits_a_small_accelerators_memory():
    env = DevicePlacementEnv("resnet", backend="simulated", profile=small_accelerator_profile())
    agent = CriticalPath().learn(env, budget=2, seed=0)
    assert env.backend.check_feasible(env.graph, agent.plan) is None


def test_it_saves_and_loads_like_every_planner(tmp_path):
    env = DevicePlacementEnv("tiny_chain", backend="simulated", profile="paper")
    agent = CriticalPath().learn(env, budget=2, seed=0)
    loaded = CriticalPath.load(agent.save(tmp_path / "cp.json"))
    assert np.array_equal(loaded.predict(env.reset()[0]), agent.predict(env.reset()[0]))
