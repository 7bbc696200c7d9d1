"""SB3 integration: the vectorised multi-categorical, the graph policy, and the `ppo` agent."""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.distributions import MultiCategoricalDistribution
from stable_baselines3.common.utils import obs_as_tensor

import placement_gym  # noqa: F401
from agents.algos.sb3 import (
    GraphPolicy, GroupedMultiCategoricalDistribution, DeviceActionHead, StockMultiCategoricalDistribution,
    VectorizedMultiCategoricalDistribution,
)
from placement_gym import DevicePlacementEnv
from placement_gym.wrappers import NodePlacementWrapper
from agents.search.config import hybrid_options


def _policy(env, **kwargs) -> GraphPolicy:
    return GraphPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **kwargs)


def _batch(env, obs_list) -> dict[str, torch.Tensor]:
    """What SB3 hands a policy: stacked observations as tensors (the Box arrays become float)."""
    stacked = {k: np.stack([o[k] for o in obs_list]) for k in obs_list[0]}
    return obs_as_tensor(stacked, torch.device("cpu"))


@pytest.mark.parametrize("n_nodes, n_devices", [(5, 2), (40, 3)])
def test_vectorized_distribution_matches_sb3_stock(n_nodes, n_devices):
    torch.manual_seed(0)
    logits = torch.randn(4, n_nodes * n_devices)
    stock = MultiCategoricalDistribution([n_devices] * n_nodes).proba_distribution(logits)
    fast = VectorizedMultiCategoricalDistribution([n_devices] * n_nodes, entropy_per_node=False).proba_distribution(logits)
    actions = stock.sample()
    assert fast.sample().shape == actions.shape == (4, n_nodes)
    torch.testing.assert_close(fast.log_prob(actions.float()), stock.log_prob(actions))
    torch.testing.assert_close(fast.entropy(), stock.entropy())
    torch.testing.assert_close(fast.mode(), stock.mode())
    per_node = VectorizedMultiCategoricalDistribution([n_devices] * n_nodes).proba_distribution(logits)
    torch.testing.assert_close(per_node.entropy(), stock.entropy() / n_nodes)  # entropy as a mean over nodes


def test_grouped_distribution_draws_one_device_per_group():
    torch.manual_seed(0)
    groups = torch.tensor([0, 0, 1, 1, 1, 2])
    logits = torch.randn(500, 6 * 3)
    dist = GroupedMultiCategoricalDistribution([3] * 6, groups).proba_distribution(logits)
    actions = dist.sample()
    assert actions.shape == (500, 6)
    for g in range(3):  # every node of a group carries the group's device
        members = actions[:, groups == g]
        assert torch.all(members == members[:, :1])
    # log-probability: the group's categorical over the mean of its nodes' logits, summed over groups
    node_logits = logits.view(500, 6, 3)
    group_logits = torch.stack([node_logits[:, groups == g].mean(1) for g in range(3)], dim=1)
    expected = torch.distributions.Categorical(logits=group_logits).log_prob(actions[:, [0, 2, 5]]).sum(-1)
    torch.testing.assert_close(dist.log_prob(actions.float()), expected)
    assert dist.entropy().shape == (500,) and torch.all(dist.entropy() <= np.log(3) + 1e-5)  # mean over groups
    mode = dist.mode()
    assert torch.all(mode[:, :2] == mode[:, :1]) and torch.all(mode[:, 2:5] == mode[:, 2:3])
    with pytest.raises(ValueError, match="no gaps"):
        GroupedMultiCategoricalDistribution([3] * 3, torch.tensor([0, 2, 2]))


def test_graph_policy_with_action_groups(env, tmp_path):
    from stable_baselines3 import PPO

    n = env.graph.n_ops
    policy = _policy(env, n_groups=4)
    assert isinstance(policy.action_dist, GroupedMultiCategoricalDistribution)
    obs = _batch(env, [env.reset(seed=s)[0] for s in range(3)])
    actions, _, log_prob = policy(obs)
    groups = np.arange(n) * 4 // n  # contiguous chunks of the topological order
    assert all(len(set(row[groups == g].tolist())) == 1 for row in actions.numpy() for g in range(4))
    torch.testing.assert_close(policy.evaluate_actions(obs, actions)[1], log_prob)
    with pytest.raises(ValueError, match="n_groups"):
        _policy(env, n_groups=0)
    with pytest.raises(ValueError, match="whole-placement"):
        _policy(NodePlacementWrapper(env, groups=4), n_groups=2)
    # survives SB3's save/load
    model = PPO(GraphPolicy, env, policy_kwargs=dict(n_groups=4), n_steps=4, batch_size=4, n_epochs=1, seed=0)
    model.learn(4)
    model.save(tmp_path / "grouped.zip")
    loaded = PPO.load(tmp_path / "grouped.zip")
    assert loaded.policy.n_groups == 4
    first, _ = env.reset(seed=0)
    expected, _ = model.predict(first, deterministic=True)
    np.testing.assert_array_equal(loaded.predict(first, deterministic=True)[0], expected)


def test_distribution_needs_one_device_count():
    with pytest.raises(ValueError, match="same number of devices"):
        VectorizedMultiCategoricalDistribution([2, 3])


def test_per_node_head_forces_padded_nodes_to_device_zero():
    torch.manual_seed(0)
    head = DeviceActionHead(latent_dim=4, device_features=5)
    latent = torch.randn(2, 5, 5)
    latent[..., -1] = 1.0
    latent[1, 3:, -1] = 0.0  # the last two nodes of graph 1 are padding
    obs = {"device_features": torch.randn(2, 3, 5), "node_device_cost": torch.rand(2, 5, 3) * 1e-3 + 1e-5}
    logits = head(latent, obs, 3)
    assert logits.shape == (2, 5, 3)
    dist = VectorizedMultiCategoricalDistribution([3] * 5).proba_distribution(logits.flatten(1))
    sample = dist.sample()
    assert torch.all(sample[1, 3:] == 0)
    assert torch.all(dist.distribution.entropy()[1, 3:] < 1e-6)
    # the same weights apply to every node (not one Linear per position), each against its own graph's devices
    one = head.scorer(latent[0, :, :-1], obs["device_features"][0], obs["node_device_cost"][0])
    torch.testing.assert_close(logits[0], one)


def test_graph_policy_forward_shapes_on_whole_placement_env(env):
    policy = _policy(env)
    assert isinstance(policy.action_dist, VectorizedMultiCategoricalDistribution)
    n = env.graph.n_ops
    obs = _batch(env, [env.reset(seed=s)[0] for s in range(3)])
    actions, values, log_prob = policy(obs)
    assert actions.shape == (3, n) and values.shape == (3, 1) and log_prob.shape == (3,)
    assert actions.min() >= 0 and actions.max() < env.n_devices
    values2, log_prob2, entropy = policy.evaluate_actions(obs, actions)
    torch.testing.assert_close(log_prob2, log_prob)
    assert entropy.shape == (3,) and torch.all(entropy <= np.log(env.n_devices) + 1e-5)
    action, _ = policy.predict(env.reset(seed=0)[0], deterministic=True)
    assert action.shape == (n,) and action.dtype.kind == "i"


def test_graph_policy_on_node_by_node_env(env):
    node_env = NodePlacementWrapper(env, groups=4)
    policy = _policy(node_env)
    obs0, _ = node_env.reset(seed=0)
    obs1, *_ = node_env.step(1)
    actions, values, log_prob = policy(_batch(node_env, [obs0, obs1]))
    assert actions.shape == (2,) and values.shape == (2, 1) and log_prob.shape == (2,)
    # The actor reads the current node: moving the mark changes the logits.
    features = policy.extract_features(_batch(node_env, [obs0]))
    moved = dict(obs0, current_node=np.roll(obs0["current_node"], 12))
    features_moved = policy.extract_features(_batch(node_env, [moved]))
    assert not torch.allclose(policy.mlp_extractor.forward_actor(features), policy.mlp_extractor.forward_actor(features_moved))


def test_graph_policy_drops_padded_nodes(env):
    """Observations padded to a common size (node_mask) give padded nodes device 0 at no log-probability."""
    n = env.graph.n_ops
    space = gym.spaces.Dict({**env.observation_space.spaces, "node_mask": gym.spaces.Box(0, 1, (n,), np.int64)})
    policy = GraphPolicy(space, env.action_space, lambda _: 1e-3)
    obs, _ = env.reset(seed=0)
    mask = np.ones(n, dtype=np.int64)
    mask[-4:] = 0  # pretend the last four nodes are padding
    edge_index = obs["edge_index"].copy()
    edge_index[:, np.any(edge_index >= n - 4, axis=0)] = 0  # padded edges become (0, 0) self-loops
    padded = dict(obs, node_mask=mask, edge_index=edge_index)
    actions, _, log_prob = policy(_batch(env, [padded, padded]))
    assert torch.all(actions[:, -4:] == 0)
    dist = policy.get_distribution(_batch(env, [padded]))
    assert torch.all(dist.distribution.entropy()[0, -4:] < 1e-6)


def test_graph_policy_says_what_it_accepts(env):
    with pytest.raises(ValueError, match="Dict observation"):
        GraphPolicy(gym.spaces.Box(0, 1, (3,)), env.action_space, lambda _: 1e-3)
    with pytest.raises(ValueError, match="current_node"):
        GraphPolicy(env.observation_space, gym.spaces.Discrete(2), lambda _: 1e-3)
    with pytest.raises(ValueError, match="distribution"):
        _policy(env, distribution="fancy")


def test_stock_distribution_policy_gives_the_same_log_probs(env):
    torch.manual_seed(0)
    fast = _policy(env)
    torch.manual_seed(0)
    stock = _policy(env, distribution="stock")
    assert isinstance(stock.action_dist, StockMultiCategoricalDistribution)
    stock.load_state_dict(fast.state_dict())
    obs = _batch(env, [env.reset(seed=0)[0]] * 2)
    actions = torch.randint(0, 2, (2, env.graph.n_ops))
    torch.testing.assert_close(fast.evaluate_actions(obs, actions)[1], stock.evaluate_actions(obs, actions)[1])


def test_ppo_with_graph_policy_learns_and_round_trips(env, tmp_path):
    from stable_baselines3 import PPO

    model = PPO(GraphPolicy, env, n_steps=4, batch_size=4, n_epochs=1, seed=0, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.learn(8)
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "ppo.zip")
    loaded = PPO.load(tmp_path / "ppo.zip")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], action)


def test_ppo_agent_budget_best_placement_and_save_load(env, tmp_path):
    from agents.ppo import PPOAgent

    agent = PPOAgent(n_steps=4, batch_size=4, n_epochs=1, **hybrid_options(PPOAgent, heuristic_start="off"), seed=0)
    before = env.placements_measured
    agent.learn(env, budget=10)  # not a multiple of n_steps: collection stops at the budget
    assert env.placements_measured - before == 10  # the final re-measurement bypasses the env
    summary = agent.run_summary
    assert summary.steps == 10 and summary.updates == 2 and all(h["update_s"] > 0 for h in agent.history)
    assert agent.best_placement.shape == (env.graph.n_ops,) and agent.best_latency_s > 0
    obs, _ = env.reset(seed=0)
    action = agent.predict(obs)
    assert action.shape == (env.graph.n_ops,) and action.dtype == np.int64
    path = agent.save(tmp_path / "agent.zip")
    with pytest.raises(FileExistsError):
        agent.save(path)
    loaded = PPOAgent.load(path)
    np.testing.assert_array_equal(loaded.predict(obs), action)
    np.testing.assert_array_equal(loaded.best_placement, agent.best_placement)
    assert loaded.hyperparameters() == agent.hyperparameters()


@pytest.mark.parametrize("seed", [0])  # 6 of 6 seeds pass; one keeps the suite fast
def test_ppo_agent_learns_a_known_mixed_optimum(seed):
    from agents.ppo import PPOAgent

    from .known_optimum import SplitBackend, chain_graph, optimum, optimum_latency_s

    env = DevicePlacementEnv(chain_graph(12), backend=SplitBackend())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = PPOAgent(n_steps=16, batch_size=16, hidden_channels=32, seed=seed).learn(env, budget=200)
    assert agent.best_placement.tolist() == optimum(12)
    assert agent.best_latency_s == pytest.approx(optimum_latency_s(12))
    assert agent.predict(env.reset(seed=0)[0]).tolist() == optimum(12)


def test_ppo_node_agent_trains_on_groups_and_places_whole_graphs(env, tmp_path):
    from agents.ppo import PPOAgent, PPONodeAgent

    # No heuristic start: on this real backend the per-op costs are profiled (noisy), so its "every op on its
    # cheapest device" placement is sometimes mixed and sometimes the run's best, and the agent then refines its
    # groups to return it (tests/test_heuristic_start.py), which this test's one-device-per-group check excludes.
    agent = PPONodeAgent(node_groups=4, n_steps=4, batch_size=4, n_epochs=1, seed=0,
                         **hybrid_options(PPONodeAgent, heuristic_start="off"))
    before = env.placements_measured
    agent.learn(env, budget=9)  # wrapped into the node-by-node variant: one group per step
    assert env.placements_measured - before == 9
    assert isinstance(agent.model.action_space, gym.spaces.Discrete)
    obs, _ = env.reset(seed=0)
    placement = agent.predict(obs)
    assert placement.shape == (env.graph.n_ops,)
    groups = np.arange(env.graph.n_ops) * 4 // env.graph.n_ops
    assert all(len(set(placement[groups == g])) == 1 for g in range(4))  # a device per group
    loaded = PPOAgent.load(agent.save(tmp_path / "node.zip"))
    assert loaded.node_groups == 4
    np.testing.assert_array_equal(loaded.predict(obs), placement)
