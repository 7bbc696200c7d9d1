"""Issue 13: learned policies end on what they find (self-imitation, distillation), can express any placement
(per-op refinement), do not depend on the order the devices are listed in, and Post."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.core import PolicySpec
from agents.algos.reinforce import apply_gradients, imitation_loss
from agents.algos.rollout import Decision, EliteSet
from agents.hsdag import HSDAGAgent
from agents.post import PostAgent, PostPolicy, PostTrainer
from agents.rnn import RNNAgent
from placement_gym import registry
from placement_gym.backends import make_backend
from placement_gym.env import DevicePlacementEnv

from .known_optimum import SplitBackend, chain_graph, optimum, optimum_latency_s
from agents.search.config import hybrid_options

LEARNED = ["hsdag", "placeto", "rnn", "post", "ppo", "ppo-node"]


def make_env(agent, graph, backend):
    features = {} if agent.feature_families is None else {"features": agent.feature_families}
    return DevicePlacementEnv(graph, backend=backend, **features)


# ------------------------------------------------------------------------------------------ convergence
@pytest.mark.parametrize("name", LEARNED)
def test_every_learned_agent_ends_on_what_it_found(name, tiny_branch_graph):
    agent = registry.make_agent(f"hybrid:{name}", {"seed": 0})  # distillation: the search layer's
    env = make_env(agent, tiny_branch_graph, make_backend("simulated", "auto"))
    agent.learn(env, budget=40)
    summary = agent.run_summary
    # The policy's own (deterministic) placement is the best one its search measured: distilled into it.
    assert summary.predict_latency_s <= 1.01 * agent.best_latency_s, (summary.predict_latency_s, agent.best_latency_s)


@pytest.mark.parametrize("name", LEARNED)
def test_under_repair_the_policy_ends_on_its_best_action(name, tiny_branch_graph):
    # A device that cannot run some ops, and an env that repairs placements onto devices that can: the best
    # placement measured is a repaired one, which a group placer cannot express itself. Distillation aims at the
    # action the agent sent instead, so it converges (well before its cap) and `predict`, measured as a step
    # would measure it, is the best placement.
    from placement_gym.backends.simulated import SimulatedBackend

    from .test_baselines_optimal import mixed_profile
    from .test_hardware_settings import with_device

    banned = sorted(set(tiny_branch_graph.op_types))[0]
    profile = with_device(mixed_profile(3, "sequential"), 1, unsupported_ops=[banned])
    agent = registry.make_agent(f"hybrid:{name}", {"seed": 0})
    features = {} if agent.feature_families is None else {"features": agent.feature_families}
    env = DevicePlacementEnv(tiny_branch_graph, backend=SimulatedBackend(profile),
                             unsupported="repair", **features)
    agent.learn(env, budget=30)
    summary = agent.run_summary
    assert summary.predict.ok, summary.predict.error
    assert summary.predict_latency_s == pytest.approx(agent.best_latency_s, rel=1e-9)
    assert agent.distilled_steps < 1000


def test_distillation_makes_the_policy_end_on_its_best():
    # The same run with the distillation switched off and on: both find the optimum; with the distillation the
    # policy's own placement is that optimum. (Without it the policy's placement may or may not be there yet
    # after this budget, depending on where its last update left it: nothing to assert.)
    results = {}
    for steps in (0, 1000):
        agent = RNNAgent(seed=0, n_groups=4, reward="env", **hybrid_options(RNNAgent, distill_steps=steps))
        env = make_env(agent, chain_graph(12), SplitBackend())
        agent.learn(env, budget=30)
        results[steps] = (agent.best_placement.tolist(), agent.predict(env.reset(seed=0)[0]).tolist())
    assert results[0][0] == optimum(12)
    assert results[1000][0] == results[1000][1] == optimum(12)


def test_elite_set_keeps_the_fastest_distinct_placements():
    elites = EliteSet(2)
    decision = Decision(None, None, torch.zeros(4), [3.0, 1.0, 1.0, 2.0],
                        [np.array([0, 0]), np.array([1, 1]), np.array([1, 1]), np.array([0, 1])])
    elites.offer([decision])
    assert elites.latencies == [1.0, 2.0] and [p.tolist() for p in elites.placements] == [[1, 1], [0, 1]]
    elites.offer([Decision(None, None, torch.zeros(1), [float("inf")], [np.array([1, 0])])])  # failures never
    assert elites.latencies == [1.0, 2.0]


def test_self_imitation_raises_the_likelihood_of_the_elites():
    agent = RNNAgent(seed=0, n_groups=4, reward="env", **hybrid_options(RNNAgent, imitation_coef=1.0, distill_steps=0))
    env = make_env(agent, chain_graph(12), SplitBackend())
    agent.learn(env, budget=24)
    trainer = agent.trainer
    assert trainer.elites.latencies[0] == pytest.approx(agent.best_latency_s)
    target = trainer.elites.placements[0]
    before = float(agent._imitate(target).detach())
    loss = imitation_loss(trainer.imitate, trainer.elites, trainer.config.imitation_coef)
    apply_gradients(trainer.optimizer, agent.policy.parameters(), loss, None)
    assert float(agent._imitate(target).detach()) > before
    with pytest.raises(ValueError, match="imitate"):
        imitation_loss(None, trainer.elites, trainer.config.imitation_coef)


# ------------------------------------------------------------------------------------------ expressiveness
# No wall-time cap on the distillation here (distill_seconds=None): these are about what the policy can express.
@pytest.mark.parametrize("make", [lambda: HSDAGAgent(seed=0, hidden_channels=16, **hybrid_options(HSDAGAgent, distill_seconds=None)),
                                  lambda: RNNAgent(seed=0, n_groups=2, **hybrid_options(RNNAgent, distill_seconds=None))], ids=["hsdag", "rnn"])
def test_group_placers_can_express_any_placement(make, tiny_branch_graph):
    # Groups (HSDAG's parse, the RNN's two chunks) do not follow this random placement; the per-op refinement
    # lets the policy produce it anyway, and distillation gets it there.
    agent = make()
    env = make_env(agent, tiny_branch_graph, make_backend("simulated", "auto"))
    agent.learn(env, budget=10)
    target = np.random.default_rng(1).integers(0, 2, tiny_branch_graph.n_ops)
    steps = agent._distill(target, 2000)
    assert steps < 2000 and agent.predict(agent.imitation_obs).tolist() == target.tolist()


def test_without_refinement_a_group_placer_cannot_split_its_groups(tiny_branch_graph):
    agent = RNNAgent(seed=0, n_groups=2, **hybrid_options(RNNAgent, refine=False, distill_seconds=None))
    env = make_env(agent, tiny_branch_graph, make_backend("simulated", "auto"))
    agent.learn(env, budget=10)
    target = np.zeros(tiny_branch_graph.n_ops, dtype=np.int64)
    target[0] = 1  # one op of the first chunk on its own
    assert agent._distill(target, 300) == 300
    assert agent.predict(agent.imitation_obs).tolist() != target.tolist()


# ------------------------------------------------------------------------------------------ device order
class SwappedSplitBackend(SplitBackend):
    """`SplitBackend` with its two devices listed the other way round: the optimum is the mirror image."""

    device_names = ["B", "A"]

    def measure(self, graph, placement, *, use_cache=True):
        return super().measure(graph, 1 - np.asarray(placement), use_cache=use_cache)


@pytest.mark.parametrize("name, options, budget", [
    ("placeto", {"node_groups": None}, 600),   # node by node: starts from random placements, not from device 0
    ("post", {"n_groups": None}, 300),
], ids=["placeto", "post"])
def test_swapping_the_device_order_keeps_the_quality(name, options, budget):
    for backend, best in ((SplitBackend(), optimum(12)), (SwappedSplitBackend(), [1 - d for d in optimum(12)])):
        agent = registry.make_agent(registry.load_agent_class(name), {"seed": 0, **options})
        env = make_env(agent, chain_graph(12), backend)
        agent.learn(env, budget=budget)
        assert agent.best_latency_s == pytest.approx(optimum_latency_s(12)), type(backend).__name__
        assert agent.predict(env.reset(seed=0)[0]).tolist() == best


@pytest.mark.parametrize("name", ["hsdag", "placeto", "rnn", "post"])
def test_learned_policies_start_favouring_no_device(name, tiny_branch_graph):
    # Before any training every device is (nearly) equally likely for every decision, so listing the devices in
    # another order cannot bias where the search starts. (The SB3 agents' action heads start near-uniform too:
    # SB3 initialises them with gain 0.01.)
    # The refinement stage's boundary moves add "keep or move this boundary op" decisions (they read which
    # device an op's neighbours are on, not a device index: tests/test_coarse_to_fine.py); here the group
    # decisions alone are scored.
    options = {"refine": False} if name in ("hsdag", "rnn") else {}
    agent = registry.make_agent(registry.load_agent_class(name), {"seed": 0, **options})
    env = agent._agent_env(make_env(agent, tiny_branch_graph, make_backend("simulated", "auto")))
    agent._setup(PolicySpec.from_env(env, agent.feature_families), seed=0)
    with torch.no_grad():
        sample = agent.policy.act(env.reset(seed=0)[0], num_samples=1, deterministic=True)
    decisions = sample.decisions
    assert float(sample.log_prob[0]) / decisions == pytest.approx(np.log(0.5), abs=0.02)


def test_node_by_node_predict_does_not_depend_on_the_start_placement():
    agent = registry.make_agent(registry.load_agent_class("placeto"), {"seed": 0})
    env = make_env(agent, chain_graph(12), SplitBackend())
    agent.learn(env, budget=60)
    obs = env.reset(seed=0)[0]
    assert agent.predict(obs).tolist() == agent.predict(dict(obs, placement=1 - obs["placement"])).tolist()


# ------------------------------------------------------------------------------------------ Post
def test_cross_entropy_step_moves_the_distribution_toward_the_elites():
    policy = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=6), n_groups=None)
    elites = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    policy.fit(elites, smoothing=0.5)
    p = torch.softmax(policy.logits, -1)[:, 1]
    # p <- 0.5 * 0.5 + 0.5 * frequency of device 1 among the elites
    assert torch.allclose(p, torch.tensor([0.75, 0.75, 0.5, 0.25, 0.25, 0.25]), atol=1e-6)
    grouped = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=6), n_groups=2)
    grouped.fit(elites, smoothing=1.0)  # group devices are the ops' majority: [1, 0] and [1, 0]
    assert torch.softmax(grouped.logits, -1).argmax(-1).tolist() == [1, 0]


def test_shared_device_logits_keep_the_cross_entropy_step_exact_and_load_older_policies():
    shared = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=6), n_groups=None, shared_device_logits=True)
    assert torch.allclose(torch.softmax(shared.logits, -1), torch.full((6, 2), 0.5))  # uniform at first
    with torch.no_grad():
        shared.device_logits.copy_(torch.tensor([0.7, -0.3]))
    elites = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    shared.fit(elites, smoothing=1.0)  # the closed form, whatever the shared part
    expected = np.clip([1.0, 1.0, 0.5, 0.0, 0.0, 0.0], 1e-3, None)
    p = torch.softmax(shared.logits, -1)[:, 1].detach().numpy()
    assert np.allclose(p, expected / (expected + np.clip(1 - np.array([1.0, 1.0, 0.5, 0, 0, 0]), 1e-3, None)), atol=1e-6)
    # a policy saved without the shared logits loads into one with them, with the same distributions
    alone = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=6), n_groups=None)
    alone.fit(elites, smoothing=0.5)
    shared.load_state_dict(alone.state_dict())
    assert torch.allclose(torch.softmax(shared.logits, -1), torch.softmax(alone.logits, -1))


def test_post_interleaves_ppo_and_cross_entropy_and_finds_the_known_optimum():
    agent = PostAgent(seed=0, n_groups=None, ce_every=3)
    env = make_env(agent, chain_graph(12), SplitBackend())
    agent.learn(env, budget=300)
    assert isinstance(agent.trainer, PostTrainer)
    ce_updates = [h for h in agent.history if "ce_elites" in h]
    assert len(ce_updates) == len(agent.history) // 3 and all(h["epochs"] >= 1 for h in agent.history)
    assert agent.best_placement.tolist() == optimum(12)
    assert agent.best_latency_s == pytest.approx(optimum_latency_s(12))
    assert agent.predict(env.reset(seed=0)[0]).tolist() == optimum(12)


def test_post_saves_loads_and_refuses_another_graph(tmp_path, tiny_branch_graph, tiny_chain_graph):
    agent = PostAgent(seed=0)
    env = make_env(agent, tiny_branch_graph, make_backend("simulated", "auto"))
    agent.learn(env, budget=20)
    loaded = PostAgent.load(agent.save(tmp_path / "post.pt"))
    obs = env.reset(seed=0)[0]
    assert loaded.predict(obs).tolist() == agent.predict(obs).tolist()
    other = make_env(agent, tiny_chain_graph, make_backend("simulated", "auto"))
    with pytest.raises(ValueError, match="built for a graph of"):
        agent.predict(other.reset(seed=0)[0])
    for bad in ({"n_groups": 0}, {"ce_every": 0}, {"elite_fraction": 0}, {"ce_smoothing": 2}):
        with pytest.raises(ValueError):
            PostAgent(**bad)
