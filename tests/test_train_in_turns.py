"""Training over several graphs one graph at a time (`agents.core.run.train_in_turns`): the agents whose env or
model is built for one graph (Placeto and ppo-node's node-by-node wrapper, PPO's action groups) learn on a
multi-graph env (``model=[...]`` / ``"dataset:SPLIT"``) in turns of one update on a single-graph env of each
graph, recorded into the one run; Post, whose distributions are one graph's, refuses such an env."""
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

import placement_gym  # noqa: F401  (registers the env ids)
from agents.placeto.agent import PlacetoAgent
from agents.post.agent import PostAgent
from agents.ppo.agent import PPOAgent, PPONodeAgent
from placement_gym import DevicePlacementEnv
from placement_gym.callbacks import Callback
from placement_gym.env import strip_padding
from agents.search.config import hybrid_options

MODELS = ["tiny_chain", "tiny_branch"]
SIM = dict(backend="simulated", profile="paper")


class GraphsSeen(Callback):
    """Records the graph (``info["model"]``) of every step."""

    def __init__(self) -> None:
        self.models: list[str] = []

    def on_step(self, step, reward, info) -> bool:
        self.models.append(info["model"])
        return True


def test_strip_padding_gives_the_single_graph_observation():
    multi = DevicePlacementEnv(MODELS, **SIM)
    for name in MODELS:
        padded, _ = multi.reset(options={"model": name})
        alone = multi.one_graph(name).observation()
        stripped = strip_padding(padded)
        assert stripped.keys() == alone.keys()
        for key in alone:
            assert np.array_equal(stripped[key], alone[key]), key
    single, _ = DevicePlacementEnv("tiny_chain", **SIM).reset()
    assert strip_padding(single).keys() == single.keys()


def test_one_graph_shares_the_backend_and_settings():
    multi = DevicePlacementEnv(MODELS, reward="neg_latency", unsupported="repair", **SIM)
    alone = multi.one_graph("tiny_branch")
    assert alone.backend is multi.backend and not alone.multi_graph
    assert alone.graph is multi.graphs["tiny_branch"]
    assert (alone.reward_name, alone.unsupported, alone.feature_families) == ("neg_latency", "repair",
                                                                              multi.feature_families)
    with pytest.raises(ValueError, match="unknown model 'resnet'.*tiny_chain"):
        multi.one_graph("resnet")


@pytest.mark.parametrize("make_agent, per_turn", [
    (lambda: PlacetoAgent(node_groups=4, start="random", seed=0), lambda g: 4 + 1),  # 4 groups after a random start
    (lambda: PPOAgent(n_steps=8, batch_size=8, n_groups=8, seed=0), lambda g: 8),  # one rollout of action-group placements
    (lambda: PPONodeAgent(node_groups=4, n_steps=8, batch_size=8, seed=0), lambda g: 8 + 2),  # + 2 starts
])
def test_agents_built_for_one_graph_train_over_several_in_turns(make_agent, per_turn):
    env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
    agent = make_agent()
    seen = GraphsSeen()
    budget = 60
    agent.learn(env, budget=budget, seed=0, callback=seen)
    summary = agent.run_summary
    assert summary.steps == budget == len(seen.models)
    # Turns: runs of one graph, each one update's placements long (the last cut by the budget).
    runs = [(name, len(list(group))) for name, group in itertools.groupby(seen.models)]
    graphs = env.unwrapped.graphs
    assert all(n % per_turn(graphs[name]) == 0 for name, n in runs[:-1])  # a graph drawn twice in a row: 2 turns
    assert set(seen.models) == set(MODELS)
    # Every turn trained the one policy (an update per turn), and it places every graph on its own.
    assert len(agent.history) >= len(runs) - 1 > 0
    rows = summary.details["graphs"]
    for name in MODELS:
        assert "predict_error" not in rows[name] and rows[name]["predict_latency_s"] is not None
        obs, _ = env.reset(options={"model": name})
        assert agent.predict(obs).shape == (graphs[name].n_ops,)
    # Nothing single-graph ran: no heuristic start placements outside the turns, no distillation target.
    assert getattr(agent, "distilled_steps", 0) == 0


def test_turn_order_is_seeded():
    def models(seed):
        seen = GraphsSeen()
        env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
        PPOAgent(n_steps=4, batch_size=4, seed=seed).learn(env, budget=24, callback=seen)
        return seen.models

    assert models(0) == models(0)
    assert len({tuple(models(s)) for s in range(4)}) > 1


def test_ppo_trains_on_a_rollout_the_budget_completes():
    env = gym.make("DevicePlacement-v0", model="tiny_branch", **SIM)
    agent = PPOAgent(n_steps=8, batch_size=8, **hybrid_options(PPOAgent, heuristic_start="off", greedy_final=False),
                     seed=0)
    agent.learn(env, budget=16)
    assert [h["step"] for h in agent.history] == [8, 16]  # the second rollout ends the budget and is learned from


def test_a_checkpoint_trained_in_turns_runs_on_another_device_order(tmp_path):
    env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
    agent = PlacetoAgent(node_groups=4, seed=0).learn(env, budget=20)
    path = agent.save(tmp_path / "placeto.pt")
    other = gym.make("DevicePlacement-v0", model="tiny_branch", devices=["GPU", "CPU"], **SIM)
    loaded = PlacetoAgent.load(path)
    obs, _ = other.reset(seed=0)
    assert loaded.predict(obs).shape == (other.unwrapped.graph.n_ops,)
    assert loaded.learn(other, budget=10).run_summary.steps == 10


def test_post_refuses_to_train_over_several_graphs():
    env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
    seen = GraphsSeen()
    with pytest.raises(ValueError, match="Post cannot train over several graphs.*tiny_chain.*train across graphs"):
        PostAgent(seed=0).learn(env, budget=10, callback=seen)
    assert seen.models == []


def test_turns_keep_torch_weights_shared_across_graphs():
    """One policy object serves every turn (Placeto: the same module; its weights move)."""
    env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
    agent = PlacetoAgent(node_groups=4, seed=0)
    agent.learn(env, budget=5)
    first = agent.policy
    before = [p.detach().clone() for p in first.parameters()]
    agent.learn(env, budget=30)
    assert agent.policy is first
    assert any(not torch.equal(a, b) for a, b in zip(before, first.parameters()))
