"""The classical baselines: valid placements, the budget respected, the planners' algorithms on known cases.

Real parts: the tiny zoo models measured on the real OpenVINO backend (CPU + a one-thread virtual CPU), METIS
through pymetis. The planners' algorithms are checked on hand-made cost models whose answers are known.
"""
from __future__ import annotations

import numpy as np
import pytest

from agents.baselines import (
    CheapestDevice, CostModel, GreedyETF, MetisPartition, OpenVINOChoice, RandomSearch, SingleDevice, TopoBalance,
    cost_model, etf_schedule, metis_partition, topo_balance,
)
from placement_gym import DevicePlacementEnv, registry
from placement_gym.evaluation import evaluate


def test_single_device_is_exact_and_measures_one_placement(env):
    for device in (0, 1, "CPU"):
        before = env.placements_measured
        agent = SingleDevice(device).learn(env, budget=10, seed=0)
        d = 0 if device == "CPU" else device
        assert env.placements_measured - before == 1
        assert np.array_equal(agent.best_placement, np.full(env.graph.n_ops, d))
        assert np.array_equal(agent.predict(env.reset()[0]), agent.best_placement)
    rows = registry.agent_factories(["single-device"], env.device_names)  # the paper's rows, one per device
    assert list(rows) == ["CPU-only", "CPU[INFERENCE_NUM_THREADS=1]-only"] and rows["CPU-only"]().device == 0
    with pytest.raises(ValueError, match="unknown device 'GPU'"):
        SingleDevice("GPU").learn(env, 1, 0)


def test_random_search_uses_the_budget_and_keeps_the_best(env):
    before = env.placements_measured
    agent = RandomSearch().learn(env, budget=5, seed=3)
    run = agent.run_summary
    assert env.placements_measured - before == 5 and run.steps == 5 and run.updates == 0
    assert run.best_latency_seen_s == run.curve[-1][1] and agent.best_latency_s > 0  # re-measured afresh
    assert agent.best_placement.shape == (env.graph.n_ops,) and set(agent.best_placement) <= {0, 1}
    # Same seed, same candidates (the measurements themselves are real and noisy).
    again = RandomSearch()
    first = [p.copy() for p in again.candidates(env, 5, np.random.default_rng(3))]
    second = list(RandomSearch().candidates(env, 5, np.random.default_rng(3)))
    assert all(np.array_equal(a, b) for a, b in zip(first, second))


def test_zero_budget_measures_only_the_plan_afterwards(env):
    before = env.placements_measured
    agent = SingleDevice(1).learn(env, budget=0, seed=0)
    assert env.placements_measured == before and agent.run_summary.placement_source == "predict"
    assert np.array_equal(agent.best_placement, np.ones(env.graph.n_ops)) and agent.best_latency_s > 0
    with pytest.raises(RuntimeError, match="before learn"):
        RandomSearch().predict(env.reset()[0])


def test_openvino_choice_asks_openvino(env):
    hetero = OpenVINOChoice("hetero").learn(env, 1, 0)
    # Both devices are CPU plugins that support every op: HETERO keeps everything on the first listed one.
    assert "query_model" in hetero.plan_info["how"]
    assert np.array_equal(hetero.best_placement, np.zeros(env.graph.n_ops))
    auto = OpenVINOChoice("auto").learn(env, 1, 0)
    assert "AUTO:CPU,VCPU1" in auto.plan_info["how"]
    assert len(set(auto.best_placement.tolist())) == 1  # AUTO runs the whole model on one device
    rows = registry.agent_factories(["openvino"], env.device_names)
    assert {label: agent().policy for label, agent in rows.items()} == {"openvino-auto": "auto",
                                                                         "openvino-hetero": "hetero"}
    with pytest.raises(ValueError, match="policy"):
        OpenVINOChoice("manual")


def test_metis_partition_balances_by_share_and_cuts_little():
    # A chain of 100 equal ops: the best cut with shares 3:1 is one edge, 75 ops / 25 ops.
    n = 100
    edges = np.stack([np.arange(n - 1), np.arange(1, n)])
    parts, cut = metis_partition(n, edges, 2, np.ones(n), np.ones(n - 1), part_share=np.array([0.75, 0.25]))
    counts = np.bincount(parts, minlength=2)
    assert abs(counts[0] - 75) <= 5 and cut <= 3 * 1_000_000  # a few cut edges at most (weights are scaled)
    assert metis_partition(n, edges, 1, np.ones(n), np.ones(n - 1))[0].max() == 0


def test_metis_agent_places_validly_on_the_real_backend(env):
    records = evaluate(MetisPartition, env, budget=3, seeds=2)
    for r in records:
        assert r["ok"] and r["placements_measured"] == 1 and set(r["placement"]) == {0, 1}
    with pytest.raises(ValueError, match="no cost model"):
        MetisPartition(use_costs=True).learn(env, 1, 0)


def _fork_join_costs(transfer_s: float) -> tuple[np.ndarray, CostModel]:
    # 0 -> (1, 2) -> 3; the two branches take 1 s on either device, the ends 0.1 s.
    edges = np.array([[0, 0, 1, 2], [1, 2, 3, 3]])
    op_time = np.array([[0.1, 0.1], [1.0, 1.0], [1.0, 1.0], [0.1, 0.1]])
    edge_time = np.zeros((4, 2, 2))
    edge_time[:, 0, 1] = edge_time[:, 1, 0] = transfer_s
    return edges, CostModel(op_time, edge_time)


def test_greedy_etf_parallelises_when_transfers_are_cheap_and_not_otherwise():
    edges, cheap = _fork_join_costs(0.01)
    placement, makespan = etf_schedule(edges, cheap)
    assert placement[1] != placement[2] and makespan == pytest.approx(0.1 + 0.01 + 1.0 + 0.1)  # join on the later branch's device
    edges, dear = _fork_join_costs(5.0)
    placement, makespan = etf_schedule(edges, dear)
    assert len(set(placement.tolist())) == 1 and makespan == pytest.approx(2.2)


def test_topo_balance_splits_by_device_speed():
    n = 40
    op_time = np.stack([np.full(n, 3.0), np.full(n, 1.0)], axis=1)  # device 1 three times as fast
    costs = CostModel(op_time, np.zeros((n - 1, 2, 2)))
    placement = topo_balance(costs, (1, 0))
    # Balanced: device 1 takes ~3/4 of the ops, first in topological order, as one contiguous piece.
    assert np.all(np.diff(np.flatnonzero(placement == 1)) == 1) and placement[0] == 1
    assert abs((placement == 1).sum() - 30) <= 1


def test_cheapest_puts_each_op_on_its_fastest_device_that_runs_it():
    env = DevicePlacementEnv("tiny_branch", backend="simulated", profile="paper", unsupported="repair")
    agent = CheapestDevice().learn(env, 1, 0)
    costs = cost_model(env)
    assert agent.run_summary.steps == 1
    chosen = costs.op_time_s[np.arange(len(agent.best_placement)), agent.best_placement]
    assert np.allclose(chosen, costs.op_time_s.min(axis=1))


def test_cheapest_keeps_the_npu_to_a_whole_model():
    """On `ai_pc` the NPU runs a whole model or nothing: the per-op plan is over CPU and GPU, and the whole model on
    the NPU is a candidate of its own, the cheaper of the two by the cost model measured first."""
    env = DevicePlacementEnv("tiny_branch", backend="simulated", profile="ai_pc", unsupported="repair")
    agent = CheapestDevice().learn(env, 2, 0)
    assert agent.run_summary.steps == 2
    npu = env.unwrapped.device_names.index("NPU")
    placement = np.asarray(agent.best_placement)
    assert (placement == npu).all() or not (placement == npu).any()
    costs = cost_model(env)
    assert (costs.op_time_s[:, npu] >= 1.0).all()  # priced out of every per-op plan


def test_planners_need_a_cost_model_on_the_real_backend(env):
    for agent in (GreedyETF(), TopoBalance()):  # without one they say which setting gives one (test_cost_profile.py)
        with pytest.raises(ValueError, match="cost_profile"):
            agent.learn(env, 1, 0)


def test_cheapest_plans_on_the_real_backends_measured_per_op_costs(env):
    """Cheapest ignores transfers, so the real backend's per-op profile is all it needs (`costs.op_times`)."""
    agent = CheapestDevice().learn(env, 1, 0)
    cost = env.unwrapped.backend.node_device_cost(env.unwrapped.graph)
    assert agent.run_summary.steps == 1
    assert agent.best_placement.tolist() == np.argmin(cost, axis=1).tolist()
    assert "per-op costs" in agent.plan_info["cost_model"]


def test_save_and_load_round_trip(env, tmp_path):
    agent = SingleDevice(1).learn(env, 1, 0)
    path = agent.save(tmp_path / "single.json")
    with pytest.raises(FileExistsError):
        agent.save(path)
    loaded = SingleDevice.load(path)
    assert loaded.device == 1 and np.array_equal(loaded.best_placement, agent.best_placement)
    assert loaded.best_latency_s == agent.best_latency_s
    with pytest.raises(ValueError, match="not"):
        RandomSearch.load(path)
