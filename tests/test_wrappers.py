"""The node-by-node (Placeto-style) variant `DevicePlacementNode-v0` on the real OpenVINO backend (tiny model)."""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym import DevicePlacementEnv
from placement_gym.wrappers import NodePlacementWrapper, contiguous_groups

from .conftest import REAL


def test_passes_gymnasium_and_sb3_env_checkers(tiny_branch_graph):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = NodePlacementWrapper(DevicePlacementEnv(tiny_branch_graph, **REAL), groups=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # infinite Box bounds, 2-D observations: expected for a graph env
        check_env(env, skip_render_check=False)
        sb3_check_env(env)
    env.close()


def test_gym_make_builds_the_wrapped_env():
    env = gym.make("DevicePlacementNode-v0", model="tiny_branch", groups=4, **REAL)
    assert isinstance(env.unwrapped, DevicePlacementEnv)
    assert env.action_space == gym.spaces.Discrete(2)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"node_features", "edge_index", "edge_features", "placement", "action_mask", "device_features",
                        "node_device_cost", "node_memory_bytes", "submodel_overhead", "current_node", "visited"}
    assert obs["submodel_overhead"].tolist() == [0.0]  # the real backend's, unless given: unknown
    assert info["latency_s"] == pytest.approx(info["reference_latency_s"])
    env.close()


def test_episode_visits_every_node_in_topological_order_and_rewards_telescope(env):
    env = NodePlacementWrapper(env, groups=4, sweeps=2)
    n = env.graph.n_ops
    obs, info = env.reset(seed=0)
    start_latency = info["latency_s"]
    measured_before = env.placements_measured
    chunks = contiguous_groups(n, 4)
    assert env.episode_length == 8
    np.testing.assert_array_equal(obs["current_node"], (chunks == 0).astype(np.float32))
    assert obs["visited"].sum() == 0
    total, terminated, t = 0.0, False, 0
    actions = [1, 0, 1, 1, 0, 1, 0, 1]
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(actions[t])
        assert not truncated and info["node"] == t % 4
        mask = chunks == t % 4
        assert np.all(obs["placement"][mask] == actions[t])  # the whole node moved
        np.testing.assert_array_equal(info["placement"], obs["placement"])  # info: the whole placement measured
        assert info["placement"].dtype == np.int64
        total += reward
        t += 1
        if not terminated:
            np.testing.assert_array_equal(obs["current_node"], (chunks == t % 4).astype(np.float32))
        assert obs["visited"].sum() == (n if t >= 4 else int(np.isin(chunks, np.arange(t)).sum()))
    assert t == 8
    assert obs["current_node"].sum() == 0  # nothing left to place
    assert env.placements_measured - measured_before == 8  # one measured placement per step
    # Per-step improvements add up to the episode's improvement (normalised by the reference latency).
    assert total == pytest.approx((start_latency - info["latency_s"]) / info["reference_latency_s"], rel=1e-9, abs=1e-12)
    np.testing.assert_array_equal(env.placement, obs["placement"])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_single_op_nodes_and_label_groups(env):
    n = env.graph.n_ops
    assert NodePlacementWrapper(env).episode_length == n  # default: every op is a node
    # Labels are renumbered in order of their first op, so the episode still runs in topological order.
    labels = np.where(np.arange(n) < n // 2, 7, 3)
    env = NodePlacementWrapper(env, groups=labels)
    assert env.n_nodes == 2
    np.testing.assert_array_equal(env.groups, (np.arange(n) >= n // 2).astype(np.int64))


def test_random_start_and_explicit_start_are_measured(env):
    env = NodePlacementWrapper(env, groups=2, start="random")
    before = env.placements_measured
    obs_a, info_a = env.reset(seed=3)
    assert env.placements_measured == before + 1
    obs_b, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs_a["placement"], obs_b["placement"])  # seeded
    for node in range(2):  # the ops of a node share a device
        assert len(set(obs_a["placement"][env.node_mask(node)])) == 1
    start = np.ones(env.graph.n_ops, dtype=np.int64)
    obs, info = env.reset(options={"placement": start})
    np.testing.assert_array_equal(obs["placement"], start)
    assert info["latency_s"] > 0


def test_best_start_reuses_the_fastest_placement_measured_or_offered_without_measuring_it_again():
    env = NodePlacementWrapper(gym.make("DevicePlacement-v0", model="tiny_branch", backend="simulated"), groups=4,
                               start="best")
    assert env.incumbent is None
    env.reset(seed=0)  # no best yet: a random start, measured
    assert env.placements_measured == 1 and env.incumbent is not None
    latencies = [env.incumbent[1]]
    for action in (0, 1, 0, 1):
        _, _, _, _, info = env.step(action)
        latencies.append(info["latency_corrected_s"])
    best = min(latencies)
    measured = env.placements_measured
    obs, info = env.reset()
    assert env.placements_measured == measured  # the incumbent is not measured again
    assert info["latency_s"] == best == env.incumbent[1]
    np.testing.assert_array_equal(obs["placement"], env.incumbent[0])
    # A placement measured elsewhere (below the wrapper) is offered; it becomes the start only if faster.
    slower = np.ones(env.graph.n_ops, dtype=np.int64)
    env.start_from_best(slower, best * 2)
    assert env.incumbent[1] == best
    faster = np.zeros(env.graph.n_ops, dtype=np.int64)
    env.start_from_best(faster, best / 2)
    obs, info = env.reset()
    assert info["latency_s"] == best / 2 and obs["placement"].tolist() == faster.tolist()


def test_bad_arguments_and_actions_say_what_is_accepted(env):
    with pytest.raises(ValueError, match="sweeps"):
        NodePlacementWrapper(env, sweeps=0)
    with pytest.raises(ValueError, match="start"):
        NodePlacementWrapper(env, start="middle")
    with pytest.raises(ValueError, match="n_groups"):
        NodePlacementWrapper(env, groups=10_000)
    with pytest.raises(ValueError, match="groups must be"):
        NodePlacementWrapper(env, groups=np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="DevicePlacementEnv"):
        NodePlacementWrapper(gym.make("CartPole-v1"))
    env = NodePlacementWrapper(env, groups=2)
    env.reset(seed=0)
    for bad in (2, -1, 0.5, [0, 1]):
        with pytest.raises(ValueError, match="device index in 0..1"):
            env.step(bad)


def test_node_env_on_the_simulated_backend_passes_the_checkers():
    """The node-by-node variant is meant for the simulated backend: one cheap measurement per step."""
    from gymnasium.utils.env_checker import check_env

    env = gym.make("DevicePlacementNode-v0", model="tiny_branch", backend="simulated")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env)
    obs, info = env.reset(seed=0)
    total, terminated = 0.0, False
    while not terminated:  # every op on the second device, one op per step
        obs, reward, terminated, _, info = env.step(1)
        total += reward
    assert info["simulated"] and obs["placement"].tolist() == [1] * obs["placement"].shape[0]
    assert total == pytest.approx(1.0 - info["latency_s"] / info["reference_latency_s"])
    env.close()


def test_place_node_by_node_builds_what_an_episode_builds(env):
    """The unmeasured roll-out used to deploy node policies matches a real episode for the same choices."""
    from placement_gym.wrappers import place_node_by_node

    env = NodePlacementWrapper(env, groups=4, sweeps=2)

    def choose(node_obs) -> int:  # a deterministic rule that reads the node-level observation
        return int(node_obs["visited"].sum() % 3 == 0) ^ int(node_obs["placement"][node_obs["current_node"] > 0][0])

    obs, _ = env.reset(seed=0)
    terminated = False
    while not terminated:
        obs, _, terminated, _, _ = env.step(choose(obs))
    whole_obs, _ = env.reset(seed=0)
    rolled = place_node_by_node(whole_obs, env.groups, choose, sweeps=2)
    np.testing.assert_array_equal(rolled, obs["placement"])
