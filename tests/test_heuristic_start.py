"""The heuristic start (`agents.search.heuristic_start`): what a learned agent measures before its policy samples,
and that its own placement can then be what it measured (grouped policies split to express it)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agents.search.heuristic_start import (_best_window, move_large_savings, override_zero_shot, runs_back_to_base,
                                           start_placements, transfer_change)
from placement_gym.backends.profiles import Profile, device_memory_bytes, memory_need
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym import registry
from placement_gym.callbacks import Callback
from placement_gym.env import DevicePlacementEnv
from agents.search.config import hybrid_options


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


def test_the_memory_window_is_the_best_that_fits():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        saving = rng.normal(size=n)
        memory = rng.integers(0, 5, (n, 2)).astype(np.float64)
        capacity = float(rng.integers(0, 12))
        windows = [(i, j) for i in range(n) for j in range(i + 1, n + 1)
                   if memory[i:j, 0].sum() + memory[i:j, 1].max() <= capacity]
        i, j = _best_window(saving, memory, capacity)
        if not windows:
            assert (i, j) == (0, 0)
            continue
        assert (i, j) in windows
        assert saving[i:j].sum() == pytest.approx(max(saving[a:b].sum() for a, b in windows))


def test_a_start_placement_keeps_what_a_small_device_holds_in_one_window(tiny_branch_graph):
    graph = tiny_branch_graph
    whole = device_memory_bytes(graph, np.zeros(graph.n_ops, dtype=np.int64), 1)[0]
    profile = Profile.preset("paper")
    gpu = replace(profile.devices[1], memory_bytes=0.5 * whole)  # the faster device holds half the model
    env = DevicePlacementEnv(graph, backend=SimulatedBackend(replace(profile, devices=[profile.devices[0], gpu])))
    obs, _ = env.reset(seed=0)
    assert not env.step(np.ones(graph.n_ops, dtype=np.int64))[4]["ok"]  # the GPU alone: out of memory
    placements = start_placements(obs)
    on_gpu = [np.flatnonzero(p == 1) for p in placements]
    assert any(ops.size for ops in on_gpu)  # the GPU is still used, for what it holds ...
    for placement, ops in zip(placements, on_gpu):
        assert memory_need(obs["node_memory_bytes"], placement, 2)[1] <= 0.5 * whole
        assert env.step(placement)[4]["ok"]  # ... so every start placement runs
    # The GPU "alone" (the second start): one window of consecutive ops on it, the rest on the CPU.
    assert on_gpu[1].size and np.array_equal(on_gpu[1], np.arange(on_gpu[1][0], on_gpu[1][-1] + 1))
    without = {key: value for key, value in obs.items() if key != "node_memory_bytes"}
    assert (start_placements(without)[1] == 1).all()  # an observation without memory: the device alone, as before


@pytest.mark.parametrize("name", ["hsdag", "post", "ppo", "placeto", "ppo-node"])
def test_learned_agent_measures_the_start_first_and_its_policy_returns_the_best(name, tiny_branch_graph):
    agent = registry.make_agent(f"hybrid:{name}", {"seed": 0})
    # `server`: every device may share a model. On `ai_pc` a per-op start may put ops on the NPU, which the env then
    # repairs (the observation does not say the NPU runs a whole model or nothing), so what is measured differs.
    features = {} if agent.feature_families is None else {"features": agent.feature_families}
    env = DevicePlacementEnv(tiny_branch_graph, backend="simulated", profile="server", unsupported="repair", **features)
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
        cls(search={"heuristic_start": "always"})
    agent = cls(seed=0, **hybrid_options(cls, heuristic_start="off"))
    env = ai_pc_env(tiny_branch_graph, agent)
    seen = Placements()
    agent.learn(env, budget=4, seed=0, callback=seen)
    start = {p.tobytes() for p in start_placements(env.reset(seed=0)[0])}
    assert len(seen.placements) == 4 and not all(p.tobytes() in start for p in seen.placements)


def test_placeto_distils_the_group_majority_of_a_placement_it_cannot_express(tiny_branch_graph):
    # Without the heuristic start the run's best is one of its episodes' (constant on the 2 groups): no refinement.
    agent = registry.make_agent(registry.load_agent_class("placeto"), {"seed": 0, "node_groups": 2, "heuristic_start": "off"})
    env = ai_pc_env(tiny_branch_graph, agent)
    agent.learn(env, budget=4, seed=0)
    obs = env.reset(seed=0)[0]
    per_op = start_placements(obs)[-1]  # every op on its cheapest device: devices mix
    target, groups = agent._expressible(per_op), agent._groups(obs)
    assert not np.array_equal(target, per_op)  # not a placement Placeto's 2 groups can build ...
    assert all(len(np.unique(target[groups == g])) == 1 for g in np.unique(groups))  # ... its group majority is
    # The distillation aims at what predict can return, so it stops early instead of spinning its 1000 steps.
    assert agent._distill(per_op, 1000, env.as_measured) < 1000
    np.testing.assert_array_equal(env.as_measured(agent.predict(env.reset(seed=0)[0])), env.as_measured(target))


def test_what_a_move_adds_on_links_counts_its_own_tensors_and_those_live_across_it():
    # 0 -> 1 -> 2 -> 3 (100 bytes each) and a skip 0 -> 3 (1000 bytes); both devices' links move 100 bytes/s.
    edge_index = np.array([[0, 1, 2, 0], [1, 2, 3, 3]])
    edge_bytes = np.array([100.0, 100.0, 100.0, 1000.0])
    link = np.array([100.0, 100.0])
    everything_on_0, to_1 = np.zeros(4, np.int64), np.ones(4, np.int64)
    # op 0: its outputs cross (1 + 10 s); op 1: its two tensors (2 s) and the skip, live across it (10 s); op 2
    # likewise; op 3: its inputs (1 + 10 s), nothing live across the last op.
    assert transfer_change(everything_on_0, to_1, edge_index, edge_bytes, link).tolist() == [11.0, 12.0, 12.0, 11.0]
    assert transfer_change(everything_on_0, everything_on_0, edge_index, edge_bytes, link).tolist() == [0.0] * 4
    # Joining its consumers takes op 0's tensors off the link.
    assert transfer_change(np.array([0, 1, 1, 1]), to_1, edge_index, edge_bytes, link)[0] == -11.0
    # move_large_savings: op 1 saves 15 s on device 1 and its move adds 12 s: it moves at a threshold of 2, not 4.
    cost = np.array([[1.0, 1.0], [20.0, 5.0], [1.0, 1.0], [1.0, 1.0]])
    added = transfer_change(everything_on_0, to_1, edge_index, edge_bytes, link)
    assert move_large_savings(everything_on_0, cost, None, 2.0, added).tolist() == [0, 1, 0, 0]
    assert move_large_savings(everything_on_0, cost, None, 4.0, added).tolist() == [0, 0, 0, 0]


def test_a_run_the_policy_put_off_its_main_device_goes_back_unless_it_pays_for_itself():
    # 0 -> 1 -> 2 -> 3 -> 4 -> 5 (1 byte each) and a skip 0 -> 5 (3 bytes); links move 1 byte/s. Every op takes
    # 1 s on either device except op 3: 10 s on device 0, 1 s on device 1.
    edge_index = np.array([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 5, 5]])
    edge_bytes, link = np.array([1.0, 1, 1, 1, 1, 3]), np.array([1.0, 1.0])
    cost = np.ones((6, 2))
    cost[3] = [10.0, 1.0]
    mask = np.ones((6, 2), bool)

    def back(placement, threshold):
        return runs_back_to_base(np.array(placement), cost, mask, 0, threshold, edge_index, edge_bytes, link).tolist()

    # Ops 1-2 on device 1 save nothing and put two tensors and the skip on links: back to device 0.
    assert back([0, 1, 1, 0, 0, 0], 0.0) == [0] * 6
    # Op 3 saves 9 s and adds 2 s of its tensors and 3 s of the skip live across it: it stays below 4 s of overheads.
    assert back([0, 0, 0, 1, 0, 0], 3.9) == [0, 0, 0, 1, 0, 0]
    assert back([0, 0, 0, 1, 0, 0], 4.0) == [0] * 6
    # Both runs at once; a run with an op device 0 cannot run stays.
    assert back([0, 1, 1, 1, 0, 0], 0.0) == [0, 1, 1, 1, 0, 0]  # 9 s saved, 2 s of tensors, 3 s of the skip
    mask[1, 0] = False
    assert back([0, 1, 1, 0, 0, 0], 0.0) == [0, 1, 1, 0, 0, 0]


def test_the_zero_shot_override_starts_from_the_device_its_moves_gain_most_from():
    # Two elementwise ops (fastest on device 0) and two convolutions (fastest on device 2, slowest on 0); device 1
    # alone is the fastest single device (14 s against 22 and 42), what the whole-graph cost term would pick.
    cost = np.array([[1.0, 2.0, 20.0], [1.0, 2.0, 20.0], [10.0, 5.0, 1.0], [10.0, 5.0, 1.0]])
    obs = {"node_device_cost": cost, "action_mask": np.ones((4, 3), bool),
           "edge_index": np.array([[0, 1, 2], [1, 2, 3]]),
           "submodel_overhead": np.array([0.5])}  # 2 overheads: an op moves when it saves more than 1 s
    on_1 = np.ones(4, np.int64)
    # From device 1 the convolutions move (4 s saved each, 3 net of the overheads); the elementwise ops save only
    # 1 s on device 0 and stay: 14 - 6 = 8 s estimated.
    assert override_zero_shot(on_1, obs, 2.0, rebase=False).tolist() == [1, 1, 2, 2]
    # From device 0 they save 9 s each (8 net): 22 - 16 = 6 s, lower: the override starts from device 0.
    assert override_zero_shot(on_1, obs, 2.0).tolist() == [0, 0, 2, 2]
    # A base from which the moves gain as much or more stays the policy's, even where another device alone is
    # faster (the policy's device head weighs the totals): with no op saving enough, device 0 stays device 0.
    assert override_zero_shot(np.zeros(4, np.int64), obs, 20.0).tolist() == [0, 0, 0, 0]
    assert override_zero_shot(np.zeros(4, np.int64), obs, 2.0).tolist() == [0, 0, 2, 2]
    # A mixed placement is not re-based; but first its runs off the main device that do not pay go back (op 2 on
    # device 0 is 5 s slower, `runs_back_to_base`), which leaves device 1 alone, and that is re-based.
    assert override_zero_shot(np.array([1, 1, 0, 1]), obs, 2.0, consolidate=False).tolist() == [1, 1, 2, 2]
    assert override_zero_shot(np.array([1, 1, 0, 1]), obs, 2.0).tolist() == [0, 0, 2, 2]
    # Nor is anything moved when the override is off.
    assert override_zero_shot(on_1, obs, 0.0).tolist() == on_1.tolist()
