"""The heuristic start (`agents.common.heuristic_start`): what a learned agent measures before its policy samples,
and that its own placement can then be what it measured (grouped policies split to express it)."""
from __future__ import annotations

import numpy as np
import pytest

from agents.common.heuristic_start import start_placements
from placement_gym import registry
from placement_gym.callbacks import Callback
from placement_gym.env import DevicePlacementEnv


class Placements(Callback):
    """Records every placement the run measured, in order."""

    def __init__(self) -> None:
        self.placements: list[np.ndarray] = []

    def on_step(self, step, reward, info) -> bool:
        self.placements.append(np.asarray(info["placement"]))
        return True


def ai_pc_env(graph, agent=None):
    features = {} if agent is None or agent.feature_families is None else {"features": agent.feature_families}
    return DevicePlacementEnv(graph, backend="simulated", profile="ai_pc", unsupported="repair", **features)


def ai_pc_obs(graph):
    return ai_pc_env(graph).reset(seed=0)[0]


def test_start_placements_are_each_device_alone_then_each_op_on_its_cheapest_device(tiny_branch_graph):
    obs = ai_pc_obs(tiny_branch_graph)
    cost, mask = obs["node_device_cost"], obs["action_mask"].astype(bool)
    placements = start_placements(obs)
    cheapest = np.argmin(np.where(mask, cost, np.inf), axis=1)
    assert any(np.array_equal(p, cheapest) for p in placements)
    assert len(set(cheapest.tolist())) >= 2  # on `ai_pc` the cheapest devices mix (the point of measuring it)
    for d in range(cost.shape[1]):  # device d wherever it can run the op, the op's cheapest device elsewhere
        alone = np.where(mask[:, d], d, cheapest)
        assert any(np.array_equal(p, alone) for p in placements)
    assert len({p.tobytes() for p in placements}) == len(placements) <= cost.shape[1] + 1
    assert all(mask[np.arange(len(p)), p].all() for p in placements)


def test_start_placements_do_not_depend_on_the_device_order(tiny_branch_graph):
    obs = ai_pc_obs(tiny_branch_graph)
    order = np.array([2, 0, 1])  # the devices listed in another order
    swapped = {k: obs[k][:, order] for k in ("node_device_cost", "action_mask")}
    as_original = {order[p].tobytes() for p in start_placements(swapped)}  # device indices mapped back
    assert as_original == {p.tobytes() for p in start_placements(obs)}


@pytest.mark.parametrize("name", ["hsdag", "post", "ppo", "placeto", "ppo-node"])
def test_learned_agent_measures_the_start_first_and_its_policy_returns_the_best(name, tiny_branch_graph):
    agent = registry.make_agent(registry.load_agent_class(name), {"seed": 0})
    env = ai_pc_env(tiny_branch_graph, agent)
    start = start_placements(env.reset(seed=0)[0])
    seen = Placements()
    agent.learn(env, budget=len(start) + 8, seed=0, callback=seen)
    for measured, expected in zip(seen.placements, start):
        np.testing.assert_array_equal(measured, expected)
    summary = agent.run_summary
    cheapest_latency = min(env.backend.measure(tiny_branch_graph, p).latency_s for p in start)
    assert agent.best_latency_s <= cheapest_latency * (1 + 1e-9)
    # Post, PPO, Placeto and ppo-node decide per group of ops: they split or refine their groups until they can
    # return the per-op best.
    assert summary.predict_latency_s <= 1.01 * agent.best_latency_s, (summary.predict_latency_s, agent.best_latency_s)


def test_heuristic_start_off_measures_only_the_policy_and_bad_values_are_refused(tiny_branch_graph):
    cls = registry.load_agent_class("hsdag")
    with pytest.raises(ValueError, match="heuristic_start must be one of"):
        cls(heuristic_start="always")
    agent = cls(seed=0, heuristic_start="off")
    env = ai_pc_env(tiny_branch_graph, agent)
    seen = Placements()
    agent.learn(env, budget=4, seed=0, callback=seen)
    start = {p.tobytes() for p in start_placements(env.reset(seed=0)[0])}
    assert len(seen.placements) == 4 and not all(p.tobytes() in start for p in seen.placements)


def test_placeto_distils_the_group_majority_of_a_placement_it_cannot_express(tiny_branch_graph):
    # Without the heuristic start the run's best is one of its episodes' (constant on the 2 groups): no refinement.
    agent = registry.make_agent(registry.load_agent_class("placeto"), {"seed": 0, "groups": 2, "heuristic_start": "off"})
    env = ai_pc_env(tiny_branch_graph, agent)
    agent.learn(env, budget=4, seed=0)
    obs = env.reset(seed=0)[0]
    per_op = start_placements(obs)[-1]  # every op on its cheapest device: devices mix
    target, groups = agent.expressible(per_op), agent.node_groups(obs)
    assert not np.array_equal(target, per_op)  # not a placement Placeto's 2 groups can build ...
    assert all(len(np.unique(target[groups == g])) == 1 for g in np.unique(groups))  # ... its group majority is
    # The distillation aims at what predict can return, so it stops early instead of spinning its 1000 steps.
    assert agent.distill(per_op, 1000, env.as_measured) < 1000
    np.testing.assert_array_equal(env.as_measured(agent.predict(env.reset(seed=0)[0])), env.as_measured(target))
