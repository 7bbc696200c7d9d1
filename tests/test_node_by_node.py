"""Node-by-node placers (Placeto, ppo-node): groups refined so that the run's best is expressible, and the
teacher-forced steps that score a whole episode in one batched pass (`agents.search.node_by_node`)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.search.heuristic_start import start_placements
from agents.search.node_by_node import NodeGroups, graph_key, refine_groups
from placement_gym import registry
from placement_gym.env import DevicePlacementEnv
from placement_gym.wrappers import contiguous_groups, place_node_by_node

from .known_optimum import CostedSplitBackend, chain_graph, optimum, optimum_latency_s


def test_refine_groups_is_the_coarsest_refinement_on_which_the_placement_is_constant():
    rng = np.random.default_rng(0)
    for n, g in [(24, 4), (50, 7), (9, 9), (13, 1)]:
        groups = contiguous_groups(n, g)
        placement = rng.integers(0, 3, n)
        refined = refine_groups(groups, placement)
        labels = np.unique(refined)
        np.testing.assert_array_equal(labels, np.arange(len(labels)))  # 0..G'-1, in op order
        assert np.all(np.diff(refined) >= 0)  # still contiguous
        for label in labels:
            ops = refined == label
            assert len(np.unique(placement[ops])) == 1 and len(np.unique(groups[ops])) == 1
        # Coarsest: two neighbouring new groups differ in their old group or their device.
        first = np.flatnonzero(np.diff(refined)) + 1
        assert np.all((groups[first] != groups[first - 1]) | (placement[first] != placement[first - 1]))
        np.testing.assert_array_equal(refine_groups(refined, placement), refined)  # nothing left to split


def test_node_groups_refine_one_graph_only_and_survive_plain_data():
    grouping = NodeGroups(4)
    key, other = (24, 30), (24, 31)
    constant = np.repeat([0, 1, 0, 1], 6)  # already constant on the 4 groups of 6
    assert not grouping.refine_to_express(key, constant)
    mixed = constant.copy()
    mixed[2] = 1
    assert grouping.refine_to_express(key, mixed)
    assert grouping.of(key).max() + 1 == 6  # group 0 split into [0, 1], [2], [3, 5]
    np.testing.assert_array_equal(grouping.of(other), contiguous_groups(24, 4))  # another graph: unchanged
    restored = NodeGroups(4)
    restored.load_data(grouping.to_data())
    np.testing.assert_array_equal(restored.of(key), grouping.of(key))


def test_node_groups_stay_where_the_refined_episode_would_be_too_big(monkeypatch, caplog):
    import agents.search.node_by_node as node_by_node

    monkeypatch.setattr(node_by_node, "MAX_EPISODE_NODES", 24 * 5)  # at most 5 groups of a 24-op graph
    grouping = NodeGroups(4)
    mixed = np.repeat([0, 1, 0, 1], 6)
    mixed[[2, 8]] = 1  # 8 groups needed
    assert not grouping.refine_to_express((24, 30), mixed) and not grouping.refined
    assert "MAX_EPISODE_NODES" in caplog.text


def ai_pc_env(graph, agent):
    features = {} if agent.feature_families is None else {"features": agent.feature_families}
    return DevicePlacementEnv(graph, backend="simulated", profile="ai_pc", unsupported="repair", **features)


@pytest.mark.parametrize("name", ["placeto", "ppo-node"])
def test_teacher_forced_batch_scores_the_steps_predict_takes(name, tiny_branch_graph):
    agent = registry.make_agent(registry.load_agent_class(name), {"seed": 0, "heuristic_start": "off"})
    env = ai_pc_env(tiny_branch_graph, agent)
    agent.learn(env, budget=4, seed=0)
    obs = env.reset(seed=0)[0]
    groups = agent._groups(obs)
    target = agent._expressible(start_placements(obs)[-1])

    # The same log-probabilities, one observation at a time, along the steps that build the target.
    per_step = []

    def choose(node_obs) -> int:
        device = int(target[np.argmax(node_obs["current_node"] > 0)])
        logits = agent.teacher.node_logits({k: np.asarray(v)[None] for k, v in node_obs.items()})
        per_step.append(torch.log_softmax(logits, -1)[0, device])
        return device

    place_node_by_node(obs, groups, choose)
    agent.imitation_obs = obs
    with torch.no_grad():
        batched = agent._imitate(target)
    torch.testing.assert_close(batched, torch.stack(per_step).mean(), rtol=1e-5, atol=1e-6)
    # `reproduces` says what predict does.
    own = agent.predict(obs)
    assert agent._reproduces(own) and np.array_equal(agent._expressible(own), own)
    assert agent._reproduces(target) == np.array_equal(agent.predict(obs), target)


@pytest.mark.parametrize("name", ["placeto", "ppo-node"])
def test_refined_groups_let_predict_return_a_per_op_best_and_are_saved(name, tmp_path):
    # 3 groups of 4 ops on a 12-op chain whose optimum cuts at op 6, inside the second group; the heuristic start
    # measures that optimum (every op on its cheapest device), a placement 3 groups cannot build.
    graph = chain_graph(12)
    agent = registry.make_agent(f"hybrid:{name}",
                                {"seed": 0, "node_groups": 3})
    env = DevicePlacementEnv(graph, backend=CostedSplitBackend(),
                             **({} if agent.feature_families is None else {"features": agent.feature_families}))
    agent.learn(env, budget=6, seed=0)
    obs = env.reset(seed=0)[0]
    assert agent.best_placement.tolist() == optimum(12)
    groups = agent._groups(obs)
    np.testing.assert_array_equal(groups, [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3])  # the second group split at op 6
    assert agent.predict(obs).tolist() == optimum(12)
    assert agent.run_summary.predict_latency_s == pytest.approx(optimum_latency_s(12))
    loaded = type(agent).load(agent.save(tmp_path / f"{name}.pt"))
    assert loaded.predict(obs).tolist() == optimum(12)
    assert graph_key(obs) in loaded.node_grouping.refined
    other = chain_graph(16)  # another graph keeps the 3 contiguous groups
    other_obs = DevicePlacementEnv(other, backend=CostedSplitBackend()).reset(seed=0)[0]
    assert loaded.node_grouping.of(graph_key(other_obs)).max() + 1 == 3
