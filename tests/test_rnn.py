"""RNN placer (Mirhoseini et al. 2017): group inputs, decoder shapes, reward sign, budget, save/load."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.core import BaseAgent, PolicySpec
from agents.rnn import RNNAgent, RNNPolicy
from agents.rnn.policy import group_inputs
from placement_gym import DevicePlacementEnv
from placement_gym.wrappers import SqrtLatencyReward
from agents.search.config import hybrid_options


def test_group_inputs_mean_features_and_directed_adjacency():
    # 4 nodes in 2 groups {0, 1}, {2, 3}; edges 0->1 (inside group 0), 1->2 and 0->3 (group 0 -> group 1)
    x = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [0.0, 4.0]])
    edge_index = torch.tensor([[0, 1, 0], [1, 2, 3]])
    groups = torch.tensor([0, 0, 1, 1])
    out = group_inputs(x, edge_index, groups, n_groups=2, max_groups=3)
    assert out.shape == (2, 2 + 2 * 3)
    torch.testing.assert_close(out[:, :2], torch.tensor([[2.0, 0.0], [0.0, 3.0]]))
    incoming, outgoing = out[:, 2:5], out[:, 5:8]
    torch.testing.assert_close(incoming, torch.tensor([[0.0, 0, 0], [float(np.log2(3.0)), 0, 0]]))  # 2 edges into group 1
    torch.testing.assert_close(outgoing, torch.tensor([[0.0, float(np.log2(3.0)), 0], [0.0, 0, 0]]))


def test_policy_decodes_k_placements_one_device_per_group(env):
    torch.manual_seed(0)
    policy = RNNPolicy(PolicySpec.from_env(env), n_groups=5, hidden_channels=16)
    obs, _ = env.reset(seed=0)
    sample = policy.act(obs, num_samples=6)
    n = env.graph.n_ops
    assert sample.actions.shape == (6, n) and sample.log_prob.shape == (6,) and sample.entropy.shape == ()
    assert sample.info["n_groups"] == 5
    groups = policy.groups_for(n)
    for g in range(5):  # every op of a group takes the group's device
        assert (sample.actions[:, groups == g] == sample.actions[:, groups == g][:, :1]).all()
    # log-probabilities are over the 5 group decisions: between 5 * log(1/D) - slack and 0
    assert torch.all(sample.log_prob <= 0) and torch.all(sample.log_prob > 5 * np.log(1e-3))
    greedy = policy.act(obs, num_samples=3, deterministic=True).actions
    assert (greedy == greedy[0]).all()
    # more groups than ops: one group per op
    tiny = RNNPolicy(PolicySpec.from_env(env), n_groups=100, hidden_channels=8)
    assert tiny.act(obs, num_samples=1).info["n_groups"] == n


def test_teacher_forced_scoring_equals_the_sampling_decoder_in_any_block_size(tiny_branch_graph, monkeypatch):
    # evaluate() scores all steps at once (in blocks); it must give the log-probabilities and entropy that the
    # step-by-step decoder drew the samples with, whatever the block size (1 step, several, all). The simulated
    # ai_pc preset gives every group its own costs, so a block that read another block's steps would differ.
    import agents.rnn.policy as rnn_policy

    torch.manual_seed(0)
    env = DevicePlacementEnv(tiny_branch_graph, backend="simulated", profile="ai_pc")
    policy = RNNPolicy(PolicySpec.from_env(env), n_groups=6, hidden_channels=8)
    with torch.no_grad():  # away from the near-uniform start, whose cost term is zero
        for parameter in policy.parameters():
            parameter.normal_(0.0, 0.5)
    obs, _ = env.reset(seed=0)
    sample = policy.act(obs, num_samples=4)
    steps = int(sample.info["n_groups"])
    for block_steps in (1, 2, steps):
        monkeypatch.setattr(rnn_policy, "ATTENTION_BLOCK", 4 * steps * 8 * block_steps)  # K x G x H x steps
        scored = policy.evaluate(obs, sample)
        torch.testing.assert_close(scored.log_prob, sample.log_prob)
        torch.testing.assert_close(scored.entropy, sample.entropy)
        assert torch.equal(scored.actions, sample.actions)


def test_sqrt_latency_reward_prefers_faster_placements(env):
    wrapped = SqrtLatencyReward(env)
    wrapped.reset(seed=0)
    rewards = {}
    for name, placement in {"all_cpu": np.zeros(env.graph.n_ops, dtype=np.int64),
                            "alternating": np.arange(env.graph.n_ops, dtype=np.int64) % 2}.items():
        _, reward, *_, info = wrapped.step(placement)
        assert reward == pytest.approx(-np.sqrt(info["latency_s"] / info["reference_latency_s"]))
        rewards[name] = (reward, info["latency_s"])
    (r_a, lat_a), (r_b, lat_b) = rewards["all_cpu"], rewards["alternating"]
    assert (r_a > r_b) == (lat_a < lat_b)  # the faster placement gets the higher reward


def test_agent_budget_and_save_load_round_trip(env, tmp_path):
    agent = RNNAgent(n_groups=4, hidden_channels=16, samples_per_update=4, measure_argmax=False,
                     **hybrid_options(RNNAgent, heuristic_start="off"), seed=0)
    before = env.placements_measured
    agent.learn(env, budget=10)
    assert env.placements_measured - before == 10
    assert agent.run_summary.updates == 3  # 4 + 4 + 2
    assert agent.best_placement.shape == (env.graph.n_ops,)
    path = agent.save(tmp_path / "rnn.pt")
    loaded = BaseAgent.load(path)
    assert isinstance(loaded, RNNAgent) and loaded.hyperparameters() == agent.hyperparameters()
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(loaded.predict(obs), agent.predict(obs))
    with pytest.raises(ValueError, match="reward"):
        RNNAgent(reward="sqrt_latency")


@pytest.mark.parametrize("seed", [0])  # 6 of 6 seeds pass; one keeps the suite fast
def test_learns_a_known_mixed_optimum(seed):
    from .known_optimum import SplitBackend, chain_graph, optimum, optimum_latency_s

    env = DevicePlacementEnv(chain_graph(12), backend=SplitBackend())
    agent = RNNAgent(n_groups=4, seed=seed).learn(env, budget=200)
    assert agent.best_placement.tolist() == optimum(12)
    assert agent.best_latency_s == pytest.approx(optimum_latency_s(12))
    assert agent.predict(env.reset(seed=0)[0]).tolist() == optimum(12)
