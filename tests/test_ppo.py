"""The shared PPO trainer (agents/algos/ppo.py): the clipped objective, re-scoring a policy's own decisions,
one epoch = REINFORCE, learning known optima in bandit and node-by-node mode, the critic, bad settings."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from agents.algos import PPOConfig, PPOTrainer, ReinforceConfig, ReinforceTrainer, clipped_surrogate
from agents.core import PolicySpec, RunLoop
from agents.nn import PolicySample, categorical_log_prob, obs_to_batch, sample_categorical
from agents.hsdag import HSDAGAgent
from agents.placeto import PlacetoAgent
from agents.rnn import RNNAgent
from placement_gym.env import DevicePlacementEnv
from placement_gym.wrappers import NodePlacementWrapper

from .known_optimum import SplitBackend, chain_graph, optimum, optimum_latency_s


class PerNodePolicy(nn.Module):
    """A device distribution per node from a linear layer on the node features: act and evaluate."""

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__()
        self.head = nn.Linear(spec.node_features, spec.n_devices)

    def act(self, obs, num_samples=1, deterministic=False):
        return PolicySample(*sample_categorical(self.head(obs_to_batch(obs).x), num_samples, deterministic))

    def evaluate(self, obs, taken):
        return PolicySample(taken.actions, *categorical_log_prob(self.head(obs_to_batch(obs).x), taken.actions))


def split_env(agent=None, n: int = 12) -> DevicePlacementEnv:
    features = {} if agent is None or agent.feature_families is None else {"features": agent.feature_families}
    return DevicePlacementEnv(chain_graph(n), backend=SplitBackend(), **features)


# ------------------------------------------------------------------------------------------ the objective
def test_clipped_surrogate_stops_the_gradient_outside_the_trust_region():
    old = torch.zeros(4)
    log_prob = torch.log(torch.tensor([1.0, 1.1, 1.5, 0.5])).requires_grad_()
    advantage = torch.tensor([1.0, 1.0, 1.0, 1.0])
    loss, diagnostics = clipped_surrogate(log_prob, old, advantage, clip_range=0.2)
    loss.backward()
    ratio = log_prob.detach().exp()
    # -mean(min(rho A, clip(rho) A)): 1.5 is clipped to 1.2 (no gradient); 0.5 < 0.8 keeps its own (smaller) term.
    assert float(loss.detach()) == pytest.approx(-(1.0 + 1.1 + 1.2 + 0.5) / 4)
    assert log_prob.grad[2] == 0 and log_prob.grad[0] == pytest.approx(-ratio[0] / 4)
    assert log_prob.grad[3] == pytest.approx(-ratio[3] / 4)
    assert diagnostics["clip_fraction"] == pytest.approx(0.5) and diagnostics["approx_kl"] > 0
    # A negative advantage clips the other side: a ratio below 1 - eps gets no gradient.
    log_prob.grad = None
    clipped_surrogate(log_prob, old, -advantage, clip_range=0.2)[0].backward()
    assert log_prob.grad[3] == 0 and log_prob.grad[2] != 0


def test_bad_ppo_settings_are_refused():
    for bad in ({"clip_range": 0}, {"n_epochs": 0}, {"value": "q"}, {"target_kl": -1}, {"minibatch_size": 0}):
        with pytest.raises(ValueError):
            PPOConfig(**bad)
    with pytest.raises(ValueError, match="algorithm"):
        HSDAGAgent(algorithm="sgd")
    with pytest.raises(ValueError, match="unknown PPO settings"):
        HSDAGAgent(algorithm="ppo", ppo={"epochs": 3})
    with pytest.raises(ValueError, match="algorithm='ppo'"):
        RNNAgent(ppo={"n_epochs": 3})

    class ActOnly(nn.Linear):  # a policy REINFORCE can train but PPO cannot: nothing to re-score with
        def act(self, obs, num_samples=1, deterministic=False): ...

    with pytest.raises(ValueError, match="evaluate"):
        PPOTrainer(ActOnly(1, 1))


# ------------------------------------------------------------------------------------------ re-scoring
@pytest.mark.parametrize("make", [
    lambda: HSDAGAgent(seed=0, hidden_channels=16),
    lambda: HSDAGAgent(seed=0, hidden_channels=16, place="group", stochastic_parsing=True),
    lambda: HSDAGAgent(seed=0, hidden_channels=16, pooling=False),
    lambda: RNNAgent(seed=0, n_groups=4),
], ids=["hsdag", "hsdag-stochastic-parsing", "hsdag-no-pooling", "rnn"])
def test_evaluate_rescores_the_decisions_act_made(make, tiny_branch_graph):
    agent = make()
    features = {} if agent.feature_families is None else {"features": agent.feature_families}
    env = DevicePlacementEnv(tiny_branch_graph, backend="simulated", **features)
    policy = agent._setup(PolicySpec.from_env(env, agent.feature_families), seed=0)
    obs, _ = env.reset(seed=0)
    torch.manual_seed(1)
    taken = policy.act(obs, num_samples=5)
    scored = policy.evaluate(obs, taken)
    assert torch.equal(scored.actions, taken.actions)
    assert torch.allclose(scored.log_prob, taken.log_prob, atol=1e-5)
    assert torch.allclose(scored.entropy, taken.entropy, atol=1e-5)
    assert taken.embedding is not None and taken.embedding.dim() == 1
    with torch.no_grad():  # other weights, other probabilities for the same decisions
        for p in policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    assert not torch.allclose(policy.evaluate(obs, taken).log_prob, taken.log_prob, atol=1e-3)


def test_placeto_evaluate_rescores_the_current_node():
    agent = PlacetoAgent(node_groups=None, seed=0)
    env = agent._agent_env(split_env())
    policy = agent._setup(PolicySpec.from_env(env), seed=0)
    obs, _ = env.reset(seed=0)
    taken = policy.act(obs, num_samples=3)
    assert torch.allclose(policy.evaluate(obs, taken).log_prob, taken.log_prob)


# ------------------------------------------------------------------------------------------ training
def _train(trainer_cls, config, budget: int = 48):
    env = split_env()
    torch.manual_seed(0)
    policy = PerNodePolicy(PolicySpec.from_env(env))
    run = RunLoop(env, budget=budget, seed=0)
    trainer_cls(policy, config).train(run, run.env, seed=0)
    return run.history, policy


def test_one_epoch_of_ppo_is_reinforce():
    settings = dict(learning_rate=0.05, samples_per_update=8)
    reinforce, a = _train(ReinforceTrainer, ReinforceConfig(**settings))
    ppo, b = _train(PPOTrainer, PPOConfig(**settings, n_epochs=1, target_kl=None))
    assert [h["reward_mean"] for h in ppo] == pytest.approx([h["reward_mean"] for h in reinforce], rel=1e-6)
    assert torch.allclose(a.head.weight, b.head.weight, atol=1e-6)
    # Several epochs take more steps per rollout, so the policy moves further from the same rollouts.
    many, c = _train(PPOTrainer, PPOConfig(**settings, n_epochs=4, minibatch_size=4, target_kl=None))
    assert all(h["epochs"] == 4 for h in many)
    assert not torch.allclose(a.head.weight, c.head.weight, atol=1e-3)


@pytest.mark.parametrize("make, budget, predicts_the_optimum", [
    (lambda: HSDAGAgent(seed=0, hidden_channels=32, pooling=False, algorithm="ppo", learning_rate=3e-3), 300, True),
    # The pure RNN placer samples the optimum, but its own policy settles on a neighbour of it (one group of ops
    # on the wrong device), better than either device alone.
    (lambda: RNNAgent(seed=0, n_groups=4, reward="env", algorithm="ppo", learning_rate=3e-3), 300, False),
], ids=["hsdag-no-pooling", "rnn"])
def test_ppo_learns_a_known_mixed_optimum_bandit_mode(make, budget, predicts_the_optimum):
    agent = make()
    env = split_env(agent)
    agent.learn(env, budget=budget)
    assert agent.best_placement.tolist() == optimum(12)
    assert agent.best_latency_s == pytest.approx(optimum_latency_s(12))
    predicted = agent.predict(env.reset(seed=0)[0]).tolist()  # the policy itself: no search, no distillation
    if predicts_the_optimum:
        assert predicted == optimum(12)
    else:
        assert agent.run_summary.predict_latency_s < 0.9 * env.backend.measure(env.graph, np.zeros(12)).latency_s
    assert agent.run_summary.steps == budget and all(h["epochs"] >= 1 for h in agent.history)


@pytest.mark.parametrize("value", ["baseline", "critic"])
def test_ppo_learns_a_known_mixed_optimum_node_by_node(value):
    agent = PlacetoAgent(node_groups=None, seed=2, algorithm="ppo", ppo={"value": value})
    env = split_env()
    agent.learn(env, budget=600)  # 50 episodes of 12 steps, episodic mode
    assert agent.best_placement.tolist() == optimum(12)
    predicted = agent.predict(env.reset(seed=0)[0])
    if value == "baseline":
        assert predicted.tolist() == optimum(12)
    else:
        # With the critic the policy's own placement is mixed, well ahead of either device alone, but where it
        # lands depends on the CPU's float rounding: the optimum itself on the AMD EPYC machines, a neighbour of it
        # on an Intel Xeon (the closing note of 2026-11-26 has the measurements).
        single = min(env.backend.measure(env.graph, np.full(12, d)).latency_s for d in (0, 1))
        assert env.backend.measure(env.graph, predicted).latency_s < 0.9 * single
    assert (agent.trainer.critic is not None) == (value == "critic")


def test_ppo_episodic_leave_one_out_replaces_the_moving_average():
    """``leave_one_out`` in the PPO trainer's episodic mode with the baseline: every step against the other
    episodes' returns at its step index (`PolicyGradientTrainer.step_comparison`), as REINFORCE's."""
    agent = PlacetoAgent(node_groups=None, seed=0, algorithm="ppo", episodes_per_update=2, leave_one_out=True,
                         start="random")
    agent.learn(split_env(), budget=52)  # two updates of two episodes of 12 steps (and a random start each)
    assert agent.run_summary.updates == 2 and agent.trainer.advantages.step_baselines == []
    moving = PlacetoAgent(node_groups=None, seed=0, algorithm="ppo", episodes_per_update=2, start="random")
    moving.learn(split_env(), budget=52)
    assert len(moving.trainer.advantages.step_baselines) == 12


def test_critic_needs_an_embedding():
    env = split_env()
    run = RunLoop(env, budget=8, seed=0)
    trainer = PPOTrainer(PerNodePolicy(PolicySpec.from_env(env)), PPOConfig(value="critic"))
    with pytest.raises(ValueError, match="embedding"):
        trainer.train(run, run.env, seed=0)


def test_ppo_agent_saves_and_loads_its_algorithm(tmp_path):
    agent = RNNAgent(seed=0, n_groups=4, algorithm="ppo", ppo={"n_epochs": 2})
    env = split_env(agent)
    agent.learn(env, budget=16)
    path = agent.save(tmp_path / "rnn.pt")
    loaded = RNNAgent.load(path)
    assert loaded.algorithm == "ppo" and loaded.reinforce.n_epochs == 2
    obs = env.reset(seed=0)[0]
    assert np.array_equal(loaded.predict(obs), agent.predict(obs))


def test_node_by_node_env_is_accepted_directly():
    env = NodePlacementWrapper(split_env())
    agent = PlacetoAgent(node_groups=None, seed=0, algorithm="ppo").learn(env, budget=24)
    assert agent.run_summary.steps == 24
