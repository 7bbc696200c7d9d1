"""Checkpoints that transfer: trained on one graph and device set, loaded, run on another (issue 14).

Every learned agent except Post has no graph size or device count in its parameters (the shared device head,
`agents.nn.device_head.DeviceScorer`): trained on ``tiny_chain`` (9 ops) with the ``paper`` preset's 2
devices, its checkpoint predicts a valid placement for ``tiny_branch`` (24 ops) on the ``ai_pc`` preset's 3
devices listed in reverse order, and keeps learning there. Post's parameters are its training graph's
distributions: it says so. Every learned agent trained over many graphs places a new one with the zero-shot
override (`agents.core.run`, "Zero-shot").
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import placement_gym  # noqa: F401  (registers the envs)
from agents.core.base import BaseAgent
from agents.search.heuristic_start import (LINK_FEATURE, ZERO_SHOT_OVERRIDE, cheapest_devices, move_large_savings,
                                           transfer_change)
from placement_gym.backends.profiles import Profile
from placement_gym.features import bytes_from_edge_features
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


def graph_cost_weights(agent) -> list:
    """The whole-graph cost term's weight of every device head of the agent's policy that has one."""
    from agents.nn.device_head import DeviceScorer

    return [m.graph_cost.weight for m in agent.policy.modules()
            if isinstance(m, DeviceScorer) and m.graph_cost is not None]


def trains(agent, weight) -> bool:
    """Whether the agent's optimizer (its trainer's, or its SB3 model's) updates `weight`."""
    optimizer = agent.model.policy.optimizer if hasattr(agent, "model") else agent.trainer.optimizer
    return any(p is weight for group in optimizer.param_groups for p in group["params"])


@pytest.mark.parametrize("name, options, budget", AGENTS, ids=[a[0] for a in AGENTS])
def test_training_over_many_graphs_gives_the_device_head_the_whole_graph_cost_term(name, options, budget, tmp_path):
    """A run on one graph leaves the policy as it was (no term); the first run over many graphs builds the term in
    the head that places (`agents.nn.device_head.enable_graph_cost`) and trains its weight from
    GRAPH_COST_WEIGHT; the checkpoint keeps it, and a fine-tuning run on one graph goes on training it."""
    cls = registry.load_agent_class(name)
    agent = registry.make_agent(cls, {"seed": 0, **options})
    agent.learn(make(agent, "tiny_chain", "ai_pc"), budget=budget, seed=0)
    assert graph_cost_weights(agent) == []
    agent.learn(make(agent, ["tiny_chain", "tiny_branch"], "ai_pc"), budget=2 * budget, seed=0)
    (weight,) = graph_cost_weights(agent)
    assert trains(agent, weight)  # a policy built before the term was added trains it too
    loaded = cls.load(agent.save(tmp_path / f"{name}.pt"))
    assert [float(w.detach()) for w in graph_cost_weights(loaded)] == [float(weight.detach())]
    env = make(loaded, "tiny_branch", "ai_pc")
    obs, _ = env.reset(seed=0)
    assert loaded.predict(obs).tolist() == agent.predict(obs).tolist()
    # Most ops on the fastest single device for the graph as a whole (the term's lean, the override aside)
    singles = obs["node_device_cost"].sum(0)
    assert np.bincount(loaded.predict(obs), minlength=3).argmax() == singles.argmin()
    loaded.learn(env, budget=budget, seed=1)  # fine-tuning on one graph: the loaded term is trained
    (tuned,) = graph_cost_weights(loaded)
    assert trains(loaded, tuned)


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
#: The devices of ``ai_pc`` that OpenVINO's HETERO plugin can place ops on.
HETERO = ["CPU", "GPU"]


@pytest.mark.parametrize("name, options, budget", FINE_TUNED, ids=[a[0] for a in FINE_TUNED])
def test_fine_tuning_starts_from_the_policy_and_ends_no_worse_than_it_or_any_single_device(name, options, budget,
                                                                                          tmp_path):
    cls = registry.load_agent_class(name)
    agent = registry.make_agent(f"hybrid:{name}", {"seed": 0, **options})
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
    agent = registry.make_agent(f"hybrid:{name}", {"seed": 0, "node_groups": 4, **options})
    agent.learn(make(agent, "tiny_chain", "paper"), budget=12, seed=0)
    loaded = cls.load(agent.save(tmp_path / f"{name}.pt"))
    env = make(loaded, "tiny_branch", "ai_pc")
    seen = Placements()
    loaded.learn(env, budget=30, seed=1, callback=seen)
    groups = loaded._groups(env.reset(seed=0)[0]) if name == "placeto" else loaded._groups(env.observation_space)
    starts = 1 + 4  # the policy's own placement and the heuristic start's (4 distinct on ai_pc at most)
    # Every episode starts from the best placement so far (not measured again), so each later placement re-places
    # one group of some placement measured before it: no random starts.
    for i in range(starts, len(seen.placements)):
        placement = seen.placements[i]
        assert any(len(np.unique(groups[placement != before])) <= 1 for before in seen.placements[:i]), i


@pytest.mark.parametrize("name, options, budget", FINE_TUNED, ids=[a[0] for a in FINE_TUNED])
def test_after_many_graphs_predict_moves_the_ops_that_save_more_than_a_cut_until_a_run_on_one_graph(
        name, options, budget, tmp_path):
    cls = registry.load_agent_class(name)
    agent = registry.make_agent(f"hybrid:{name}", {"seed": 0, **options})
    assert agent.search.zero_shot_override == ZERO_SHOT_OVERRIDE and not agent.zero_shot_active
    # On ai_pc's CPU and GPU: its NPU is no HETERO device (it runs a whole model or nothing) and, under cost model
    # version 2, the fastest device alone on tiny_branch: the policies put every op there, and no op can move off it.
    agent.learn(make(agent, ["tiny_chain", "tiny_branch"], "ai_pc", HETERO), budget=2 * budget, seed=0)
    assert agent.zero_shot_active  # on after training over many graphs
    env = make(agent, "tiny_branch", "ai_pc", HETERO)
    obs, _ = env.reset(seed=0)
    assert obs["submodel_overhead"].tolist() == [pytest.approx(Profile.preset("ai_pc").boundary_overhead_s)]
    raw = agent.predict(dict(obs, submodel_overhead=np.zeros(1, np.float32)))  # 0: unknown, the policy's own
    cost, mask = obs["node_device_cost"], obs["action_mask"].astype(bool)
    cheapest = move_large_savings(raw, cost, mask, 0.0)
    assert not np.array_equal(raw, cheapest)  # some op of the policy's placement is not on its cheapest device
    # The network does not read the overhead: it only sets the threshold of the override.
    assert agent.predict(dict(obs, submodel_overhead=np.ones(1, np.float32))).tolist() == raw.tolist()
    # An op moves when it saves more than what its tensors then add on links plus ZERO_SHOT_OVERRIDE overheads.
    on_links = transfer_change(raw, cheapest_devices(cost, mask), obs["edge_index"],
                               bytes_from_edge_features(obs["edge_features"]),
                               10.0 ** obs["device_features"][:, LINK_FEATURE].astype(np.float64))
    assert on_links.any()
    tiny = dict(obs, submodel_overhead=np.full(1, 1e-12, np.float32))
    moved = agent.predict(tiny)
    assert moved.tolist() == move_large_savings(raw, cost, mask, 2e-12, on_links).tolist()
    assert not np.array_equal(moved, raw)
    zero_shot = agent.predict(obs)  # tiny_branch's ops save less than 2 x the preset's boundary: none moves
    overhead = Profile.preset("ai_pc").boundary_overhead_s
    assert zero_shot.tolist() == move_large_savings(raw, cost, mask, ZERO_SHOT_OVERRIDE * overhead, on_links).tolist()

    loaded = cls.load(agent.save(tmp_path / f"{name}.pt"))  # the checkpoint keeps it
    assert loaded.zero_shot_active and loaded.predict(obs).tolist() == zero_shot.tolist()
    loaded.learn(env, budget=0)  # zero-shot through a run (`evaluate --budget 0`): nothing measured, it stays on
    assert loaded.zero_shot_active and loaded.run_summary.predict_placement.tolist() == zero_shot.tolist()
    # Fine-tuning measures the zero-shot placement first, then turns the override off: predict is the run's own.
    seen = Placements()
    loaded.learn(env, budget=budget, seed=1, callback=seen)
    assert seen.placements[0].tolist() == zero_shot.tolist()
    assert not loaded.zero_shot_active
    assert loaded.predict(obs).tolist() == loaded.predict(dict(obs, submodel_overhead=np.zeros(1, np.float32))).tolist()
    assert not cls.load(loaded.save(tmp_path / f"{name}-fine-tuned.pt")).zero_shot_active


@pytest.mark.parametrize("name", [a[0] for a in FINE_TUNED])
def test_the_zero_shot_override_is_a_number_of_overheads_or_off(name):
    cls = registry.load_agent_class(name)
    assert cls(search={"zero_shot_override": None}).search is None  # None: off, as earlier releases spelled it
    assert cls(search={"zero_shot_override": 2.0}).search.zero_shot_override == 2.0
    with pytest.raises(ValueError, match="SearchConfig: field zero_shot_override: found -1.0; expected a number"):
        cls(search={"zero_shot_override": -1.0})


def test_a_checkpoint_from_before_the_flag_has_the_override_on_if_it_was_trained_over_many_graphs(tmp_path):
    import torch

    cls = registry.load_agent_class("hsdag")
    for models, expected in ((["tiny_chain", "tiny_branch"], True), ("tiny_chain", False)):
        agent = cls(seed=0, search="hybrid")
        agent.learn(make(agent, models, "ai_pc"), budget=10, seed=0)
        path = agent.save(tmp_path / f"{len(models)}.pt")
        data = torch.load(path, weights_only=True)
        del data["extra"]["zero_shot_active"]  # as files written before the flag (the checksum covers tensors only)
        torch.save(data, path)
        assert cls.load(path).zero_shot_active is expected
