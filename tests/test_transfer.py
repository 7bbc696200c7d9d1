"""Checkpoints that transfer: trained on one graph and device set, loaded, run on another (issue 14).

Every learned agent except Post has no graph size or device count in its parameters (the shared device head,
`agents.common.device_head.DeviceScorer`): trained on ``tiny_chain`` (9 ops) with the ``paper`` preset's 2
devices, its checkpoint predicts a valid placement for ``tiny_branch`` (24 ops) on the ``ai_pc`` preset's 3
devices listed in reverse order, and keeps learning there. Post's parameters are its training graph's
distributions: it says so.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import placement_gym  # noqa: F401  (registers the envs)
from agents.common.base import BaseAgent
from placement_gym import registry
from placement_gym.callbacks import Callback


def make(agent, model: str, profile: str, devices=None) -> gym.Env:
    features = {} if agent.feature_families is None else {"features": agent.feature_families}
    extra = {} if devices is None else {"devices": devices}
    return gym.make("DevicePlacement-v0", model=model, backend="simulated", profile=profile, **features, **extra)


AGENTS = [
    ("hsdag", {}, 10),
    ("placeto", {}, 10),
    ("rnn", {}, 10),
    ("ppo", {"n_steps": 4, "batch_size": 4}, 10),
    ("ppo-node", {"n_steps": 4, "batch_size": 4}, 12),
]


@pytest.mark.parametrize("name, options, budget", AGENTS, ids=[a[0] for a in AGENTS])
def test_a_checkpoint_places_another_graph_on_another_device_set(name, options, budget, tmp_path):
    cls = registry.load_agent_class(name)
    agent = registry.make_agent(cls, {"seed": 0, **options})
    agent.learn(make(agent, "tiny_chain", "paper"), budget=budget, seed=0)
    path = agent.save(tmp_path / f"{name}.pt")

    loaded = cls.load(path)
    env = make(loaded, "tiny_branch", "ai_pc", devices=["NPU", "GPU", "CPU"])
    obs, _ = env.reset(seed=0)
    action = loaded.predict(obs)
    assert action.shape == (env.unwrapped.graph.n_ops,) and action.dtype == np.int64
    assert action.min() >= 0 and action.max() < 3
    # The policy reads the action mask: it proposes no device that cannot run an op.
    assert obs["action_mask"][np.arange(len(action)), action].all()
    # ... and keeps learning there (fine-tuning), on the new graph and device count.
    loaded.learn(env, budget=budget, seed=1)
    assert loaded.best_placement.shape == action.shape


def test_post_says_why_its_checkpoint_serves_only_its_graph(tmp_path):
    cls = registry.load_agent_class("post")
    agent = cls(seed=0)
    agent.learn(make(agent, "tiny_chain", "paper"), budget=10, seed=0)
    loaded = BaseAgent.load(agent.save(tmp_path / "post.pt"))
    env = make(loaded, "tiny_branch", "ai_pc")
    with pytest.raises(ValueError, match="one free device distribution per op group.*train a new PostAgent"):
        loaded.predict(env.reset(seed=0)[0])
    with pytest.raises(ValueError, match="9 ops on 2 devices.*24 ops on 3 devices"):
        loaded.learn(env, budget=5)


class Placements(Callback):
    """Every placement a run measured, in order."""

    def __init__(self) -> None:
        self.placements: list[np.ndarray] = []

    def on_step(self, step, reward, info):
        self.placements.append(np.asarray(info["placement"]))
        return True


FINE_TUNED = AGENTS + [("go", {"hidden_channels": 16, "heads": 2}, 10)]


@pytest.mark.parametrize("name, options, budget", FINE_TUNED, ids=[a[0] for a in FINE_TUNED])
def test_fine_tuning_starts_from_the_policy_and_ends_no_worse_than_it_or_any_single_device(name, options, budget,
                                                                                          tmp_path):
    cls = registry.load_agent_class(name)
    agent = registry.make_agent(cls, {"seed": 0, **options})
    agent.learn(make(agent, "tiny_chain", "paper"), budget=budget, seed=0)
    loaded = cls.load(agent.save(tmp_path / f"{name}.pt"))
    env = make(loaded, "tiny_branch", "ai_pc", devices=["NPU", "GPU", "CPU"])
    zero_shot = loaded.predict(env.reset(seed=0)[0])
    base = env.unwrapped
    singles = [base.backend.measure(base.graph, np.full(base.graph.n_ops, d)).latency_s for d in range(3)]

    seen = Placements()
    loaded.learn(env, budget=budget, seed=1, callback=seen)
    # The first placement measured is the policy's own (zero-shot), then the heuristic start's ...
    assert seen.placements[0].tolist() == base.as_measured(zero_shot).tolist()
    assert any(np.unique(p).size == 1 for p in seen.placements[1:4])
    # ... so the run ends no worse than either.
    zero_shot_s = base.backend.measure(base.graph, base.as_measured(zero_shot)).latency_s
    assert loaded.best_latency_s <= min([zero_shot_s] + singles) * (1 + 1e-9)
    assert loaded.run_summary.steps == budget


@pytest.mark.parametrize("name", ["placeto", "ppo-node"])
def test_node_by_node_fine_tuning_searches_around_its_best_not_from_random_starts(name, tmp_path):
    cls = registry.load_agent_class(name)
    options = {"n_steps": 4, "batch_size": 4} if name == "ppo-node" else {}
    agent = registry.make_agent(cls, {"seed": 0, "groups" if name == "placeto" else "node_groups": 4, **options})
    agent.learn(make(agent, "tiny_chain", "paper"), budget=12, seed=0)
    loaded = cls.load(agent.save(tmp_path / f"{name}.pt"))
    env = make(loaded, "tiny_branch", "ai_pc")
    seen = Placements()
    loaded.learn(env, budget=30, seed=1, callback=seen)
    groups = loaded.node_groups(env.reset(seed=0)[0]) if name == "placeto" else loaded._groups(env.observation_space)
    starts = 1 + 4  # the policy's own placement and the heuristic start's (4 distinct on ai_pc at most)
    # Every episode starts from the best placement so far (not measured again), so each later placement re-places
    # one group of some placement measured before it: no random starts.
    for i in range(starts, len(seen.placements)):
        placement = seen.placements[i]
        assert any(len(np.unique(groups[placement != before])) <= 1 for before in seen.placements[:i]), i
