"""Issue 13, expressiveness: group placers that can move their cut anywhere. Coarse-to-fine contiguous groups
(`agents.search.coarse_to_fine`, Post's ``split_patience``) and the refiner's boundary moves
(`agents.nn.refine`)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.core import PolicySpec
from agents.search.coarse_to_fine import StallDetector, split_groups
from agents.nn.device_head import Devices
from agents.nn.refine import OpRefiner
from agents.search.local_search import neighbour_device_shares
from agents.post import PostAgent, PostPolicy
from placement_gym.env import DevicePlacementEnv

from .known_optimum import SplitBackend, chain_graph, optimum, optimum_latency_s
from agents.search.config import hybrid_options


def test_split_groups_nest_inside_the_old_ones():
    for n, g in ((12, 3), (310, 16), (176, 16), (7, 4)):
        groups, g2 = split_groups(n, g)
        assert g2 == min(2 * g, n) and groups.max() + 1 == g2
        coarse = (np.arange(n) * g) // n
        # every new group lies inside one old group
        assert all(len(set(coarse[groups == j])) == 1 for j in range(g2))
    assert split_groups(5, 4)[1] == 5  # never more groups than ops


def test_stall_detector_fires_after_patience_placements_without_a_new_best():
    stall = StallDetector(3)
    assert not stall.offer([5.0, 4.0, 4.5])   # new best at the 2nd, one since
    assert not stall.offer([4.0])             # equal is no new best: two since
    assert stall.offer([6.0])                 # three since: a stall, and the count starts again
    assert not stall.offer([7.0, 7.0])
    assert not stall.offer([3.0, 8.0, 8.0])
    with pytest.raises(ValueError):
        StallDetector(0)


def test_post_split_keeps_the_distribution_and_survives_save_load(tmp_path):
    policy = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=12), n_groups=3)
    policy.fit(np.array([[1] * 4 + [0] * 8, [1] * 8 + [0] * 4]), smoothing=1.0)
    before = torch.softmax(policy.logits, -1)[policy.groups]  # (N, D) each op's distribution
    assert policy.split() and int(policy.n_groups) == 6
    assert torch.allclose(torch.softmax(policy.logits, -1)[policy.groups], before)
    restored = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=12), n_groups=3)
    restored.load_state_dict(policy.state_dict())
    assert int(restored.n_groups) == 6 and restored.groups.tolist() == policy.groups.tolist()
    while policy.split():
        pass
    assert int(policy.n_groups) == 12


def test_post_boundary_exploration_softens_only_the_groups_at_a_device_boundary():
    # a 12-op chain in 6 groups, every group sure of its device; the best placement cuts between ops 5 and 6
    policy = PostPolicy(PolicySpec(4, 1, 2, None, n_ops=12), n_groups=6)
    best = np.array([0] * 6 + [1] * 6)
    policy.fit(best[None], smoothing=1.0)
    chain = np.array([list(range(11)), list(range(1, 12))])
    assert policy.explore_boundary(best, chain, share=0.5) == 2
    p_other = 1 - torch.softmax(policy.logits, -1).gather(1, torch.as_tensor(best[::2, None])).squeeze(1)
    # groups 2 (ops 4-5) and 3 (ops 6-7) hold the cut's ops: a quarter on the other device; the rest stay sure
    assert torch.allclose(p_other[[2, 3]], torch.tensor([0.25, 0.25]), atol=2e-3)
    assert p_other[[0, 1, 4, 5]].max() < 2e-3
    assert policy.explore_boundary(np.zeros(12, dtype=np.int64), chain, share=0.5) == 0  # no boundary, no change
    with pytest.raises(ValueError, match="boundary_explore"):
        PostAgent(boundary_explore=1.5)


@pytest.mark.parametrize("patience, reaches", [(None, False), (20, True)], ids=["fixed-groups", "coarse-to-fine"])
def test_post_reaches_a_cut_between_its_group_boundaries_only_coarse_to_fine(patience, reaches):
    # 3 groups of a 12-op chain cut at ops 4 and 8; the optimum cuts at 6. Halving the groups when the search
    # stalls makes that cut expressible; with fixed groups it never is.
    agent = PostAgent(seed=0, n_groups=3, **hybrid_options(PostAgent, split_patience=patience, distill_seconds=None))
    env = DevicePlacementEnv(chain_graph(12), backend=SplitBackend())
    agent.learn(env, budget=300)
    assert (agent.best_latency_s == pytest.approx(optimum_latency_s(12))) is reaches
    assert (agent.predict(env.reset(seed=0)[0]).tolist() == optimum(12)) is reaches


def test_neighbour_device_shares_on_a_chain():
    edges = torch.tensor([[0, 1, 2], [1, 2, 3]])
    shares = neighbour_device_shares(torch.tensor([[0, 0, 1, 1]]), edges, 2)[0]
    assert shares.tolist() == [[1, 0], [0.5, 0.5], [0.5, 0.5], [0, 1]]


def test_boundary_moves_propose_ops_at_a_device_boundary_and_rescore_their_path():
    torch.manual_seed(0)
    n = 8
    edges = torch.tensor([list(range(n - 1)), list(range(1, n))])
    refiner = OpRefiner(4, 8, 1, rounds=2)
    h, devices = torch.randn(n, 4), Devices(torch.zeros(2, 1), None, None, 2)
    given = torch.tensor([[0] * 4 + [1] * 4])  # one cut, between ops 3 and 4
    keep = refiner.log_probs(h, given, devices, edges)[0].gather(1, given.T).squeeze(1).exp()
    moved = 1 - keep
    assert moved[[3, 4]].min() > 20 * moved[[0, 1, 6, 7]].max()  # the boundary ops are the ones proposed
    plain = OpRefiner(4, 8, 1, boundary=False)
    plain_moved = 1 - plain.log_probs(h, given, devices, edges)[0].gather(1, given.T).squeeze(1).exp()
    assert plain_moved.max() < 1e-3
    actions, log_prob, path = refiner(h, given.expand(64, -1), devices, edge_index=edges)
    assert path.shape == (64, 2, n) and torch.equal(path[:, -1], actions)
    assert (actions[:, [3, 4]] != given[:, [3, 4]]).any()  # some samples moved the cut
    rescored = refiner(h, given.expand(64, -1), devices, path=path, edge_index=edges)[1]
    assert torch.allclose(rescored, log_prob)


# ------------------------------------------------------------------ coarse to fine beyond Post: RNN and GO
def test_rnn_split_doubles_the_decoded_groups_and_survives_save_load(env):
    from agents.rnn import RNNPolicy

    policy = RNNPolicy(PolicySpec.from_env(env), n_groups=3, hidden_channels=8)
    obs, _ = env.reset(seed=0)
    n = env.graph.n_ops
    assert policy.act(obs).info["n_groups"] == 3
    widths = {k: v.shape for k, v in policy.state_dict().items()}
    assert policy.split() and policy.act(obs).info["n_groups"] == min(6, n)
    assert {k: v.shape for k, v in policy.state_dict().items()} == widths  # no weight depends on the groups
    coarse = policy.coarse_groups_for(n)
    fine = policy.groups_for(n)
    assert all(len(set(coarse[fine == j])) == 1 for j in range(int(fine.max()) + 1))  # nested in the old groups
    restored = RNNPolicy(PolicySpec.from_env(env), n_groups=3, hidden_channels=8)
    restored.load_state_dict(policy.state_dict())
    assert restored.groups_for(n).tolist() == fine.tolist()
    while policy.split():
        pass
    assert int(policy.groups_for(n).max()) + 1 == n  # down to one group per op, then no further


def test_rnn_keeps_its_groups_when_training_over_many_graphs():
    # Coarse to fine refines one graph's cut; over many graphs (training for transfer) the groups stay.
    from agents.rnn import RNNAgent

    agent = RNNAgent(seed=0, n_groups=2, **hybrid_options(RNNAgent, split_patience=1, distill_seconds=None))  # self-imitation on (the default)
    agent.learn(DevicePlacementEnv(["tiny_chain", "tiny_branch"], backend="simulated"), budget=24)
    assert int(agent.policy.n_groups_now) == 2
    single = RNNAgent(seed=0, n_groups=2, **hybrid_options(RNNAgent, split_patience=1, distill_seconds=None))
    single.learn(DevicePlacementEnv("tiny_branch", backend="simulated"), budget=24)  # one graph: it splits
    assert int(single.policy.n_groups_now) > 2


@pytest.mark.parametrize("patience, reaches", [(None, False), (20, True)], ids=["fixed-groups", "coarse-to-fine"])
def test_rnn_reaches_a_cut_between_its_group_boundaries_only_coarse_to_fine(patience, reaches):
    # As Post's test above: 3 groups cannot cut the 12-op chain at 6; halving them when the search stalls can.
    # Without the per-op refinement (which could also split a group), so only the groups decide.
    from agents.rnn import RNNAgent

    agent = RNNAgent(seed=0, n_groups=3, **hybrid_options(RNNAgent, refine=False, split_patience=patience,
                                                                        distill_seconds=None))
    env = DevicePlacementEnv(chain_graph(12), backend=SplitBackend())
    agent.learn(env, budget=300)
    assert (agent.best_latency_s == pytest.approx(optimum_latency_s(12))) is reaches
    assert (agent.predict(env.reset(seed=0)[0]).tolist() == optimum(12)) is reaches


def test_go_single_graph_search_groups_explore_and_keep_transfer_runs_per_op(tiny_branch_graph, tmp_path):
    from agents.go import GOAgent
    from agents.go.policy import GOPolicy

    # The search on one graph: the whole-graph cost term's placement first, then groups, coarse to fine.
    agent = GOAgent(seed=0, hidden_channels=16, **hybrid_options(GOAgent, search_groups=3, split_patience=20))
    env = DevicePlacementEnv(chain_graph(12), backend=SplitBackend())
    agent.learn(env, budget=200)
    assert agent.best_latency_s == pytest.approx(optimum_latency_s(12))
    assert agent.run_summary.predict_placement.tolist() == optimum(12)
    assert float(agent.policy.head.graph_cost_scale) == 0 and float(agent.policy.explore) == 1
    assert agent.policy.refiner is not None  # boundary moves after the decisions
    assert agent.history[0]["n_groups"] == 3 and agent.history[-1]["n_groups"] > 3  # it split
    loaded = GOAgent.load(agent.save(tmp_path / "go.pt"))  # groups, term off and refiner come back
    assert loaded.predict(env.reset(seed=0)[0]).tolist() == optimum(12)
    # A uniform share in every decision: even a sure policy redraws about `explore` decisions per placement.
    policy = GOPolicy(PolicySpec.from_env(env), hidden_channels=8)
    policy.set_groups(4)
    policy.explore.fill_(1.0)
    logits = torch.tensor([[20.0, -20.0]]).expand(12, -1)
    decisions, groups = policy._grouped(logits)
    assert decisions.shape == (4, 2) and groups.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert torch.allclose(decisions.exp()[:, 1], torch.full((4,), 0.125))  # (1/4 of a uniform draw) / 2 devices
    # Fine-tuning a trained GO and training over many graphs stay the paper's per-op search with the term on.
    tuned = GOAgent(seed=0, hidden_channels=16)
    tuned.learn(DevicePlacementEnv(["tiny_chain", "tiny_branch"], backend="simulated"), budget=16)
    assert int(tuned.policy.n_groups) == 0 and float(tuned.policy.head.graph_cost_scale) == 1
    tuned.learn(DevicePlacementEnv(tiny_branch_graph, backend="simulated"), budget=8)
    assert int(tuned.policy.n_groups) == 0 and float(tuned.policy.head.graph_cost_scale) == 1
    assert tuned.policy.refiner is None


def test_sb3_action_groups_split_coarse_to_fine_and_reload_split(env, tmp_path):
    from agents.algos.sb3 import GroupedMultiCategoricalDistribution
    from agents.ppo import PPOAgent

    n = env.graph.n_ops
    agent = PPOAgent(seed=0, n_steps=8, batch_size=8, n_groups=2, **hybrid_options(PPOAgent, split_patience=4))
    agent.learn(env, budget=40)
    policy = agent.model.policy
    assert policy.n_groups is None or policy.n_groups > 2  # it split at least once
    obs, _ = env.reset(seed=0)
    assert agent.predict(obs).tolist() == agent.run_summary.placement.tolist()  # refit and distilled: its best
    loaded = PPOAgent.load(agent.save(tmp_path / "ppo.pt"))
    assert loaded.model.policy.n_groups == policy.n_groups  # reloads with its groups
    assert loaded.predict(obs).tolist() == agent.predict(obs).tolist()
    # The split itself: 2 groups -> 4 -> ... -> per node (None), then no further.
    fresh = PPOAgent(seed=0, n_steps=8, batch_size=8, n_groups=2)
    fresh.learn(env, budget=8)
    grouped = fresh.model.policy
    assert isinstance(grouped.action_dist, GroupedMultiCategoricalDistribution)
    assert grouped.split_action_groups() and grouped.n_groups == min(4, n) or grouped.n_groups is None
    while grouped.split_action_groups():
        pass
    assert grouped.n_groups is None and not isinstance(grouped.action_dist, GroupedMultiCategoricalDistribution)


def test_self_imitation_keeps_the_elites_of_one_graph():
    # Elites are placements of the graph they were measured on: imitating them on another graph (or over many)
    # would score placements of the wrong size. A run over many graphs keeps none; another graph starts afresh.
    from agents.hsdag import HSDAGAgent

    agent = HSDAGAgent(seed=0, **hybrid_options(HSDAGAgent, imitation_coef=0.5, distill_seconds=None))
    agent.learn(DevicePlacementEnv("tiny_branch", backend="simulated", features=agent.feature_families), budget=8)
    elites = agent.trainer.elites
    assert elites.members and all(len(p) == 24 for p in elites.placements)
    fastest = elites.latencies[0]
    agent.learn(DevicePlacementEnv("tiny_branch", backend="simulated", features=agent.feature_families), budget=4)
    assert elites.latencies[0] <= fastest  # resumed on the same graph: the elites are kept
    agent.learn(DevicePlacementEnv(["tiny_chain", "tiny_branch"], backend="simulated",
                                   features=agent.feature_families), budget=8)
    assert not elites.members
    agent.learn(DevicePlacementEnv("tiny_chain", backend="simulated", features=agent.feature_families), budget=8)
    assert elites.members and all(len(p) == 9 for p in elites.placements)


# ------------------------------------------------------------------ HSDAG: one pooling level fewer per split
def test_hsdag_split_parses_one_level_fewer_nested_and_survives_save_load(tiny_branch_graph):
    from agents.hsdag import HSDAGAgent
    from agents.hsdag.policy import HSDAGPolicy

    agent = HSDAGAgent(seed=0, hidden_channels=16, max_levels=2, search="hybrid")
    env = DevicePlacementEnv(tiny_branch_graph, backend="simulated", features=agent.feature_families)
    spec = PolicySpec.from_env(env, agent.feature_families)
    policy = agent._setup(spec, 0)
    obs, _ = env.reset(seed=0)
    n = tiny_branch_graph.n_ops
    levels = [agent.groups(obs).numpy()]
    while policy.split():
        levels.append(agent.groups(obs).numpy())
    assert [len(set(g)) for g in levels][-1] == n and len(levels) == 3  # 2 levels, 1, then one group per op
    assert len(set(levels[0])) < n  # the coarsest level merged something
    for coarse, fine in zip(levels, levels[1:]):  # every finer group lies inside one coarser group
        assert all(len(set(coarse[fine == j])) == 1 for j in set(fine.tolist()))
    assert policy.pool.max_levels == 0 and not policy.split()
    restored = HSDAGPolicy(spec, hidden_channels=16, max_levels=2, refine=True, refine_boundary=True)  # the hybrid's
    restored.load_state_dict(policy.state_dict())
    assert restored.pool.max_levels == 0 and float(restored.explore) == float(policy.explore)
    # A checkpoint from before the level cap and the exploration share were saved loads as the policy was built.
    old = {k: v for k, v in policy.state_dict().items() if not k.endswith(("level_cap", "explore"))}
    built = HSDAGPolicy(spec, hidden_channels=16, max_levels=2, refine=True, refine_boundary=True, explore=0.0)
    built.load_state_dict(old)
    assert built.pool.max_levels == 2 and float(built.explore) == 0.0


def test_hsdag_reaches_the_chain_optimum_coarse_to_fine_and_reloads_its_level(tmp_path):
    from agents.hsdag import HSDAGAgent

    agent = HSDAGAgent(seed=0, hidden_channels=16, place="group", max_levels=4, **hybrid_options(HSDAGAgent, split_patience=20))
    env = DevicePlacementEnv(chain_graph(12), backend=SplitBackend(), features=agent.feature_families)
    agent.learn(env, budget=300)
    assert agent.best_latency_s == pytest.approx(optimum_latency_s(12))
    assert agent.run_summary.predict_placement.tolist() == optimum(12)
    assert agent.policy.pool.max_levels < 3  # it split
    loaded = HSDAGAgent.load(agent.save(tmp_path / "hsdag.pt"))
    assert loaded.policy.pool.max_levels == agent.policy.pool.max_levels
    assert loaded.predict(env.reset(seed=0)[0]).tolist() == optimum(12)


def test_uniform_share_keeps_the_mode_and_a_floor_per_decision():
    from agents.nn.policy import with_uniform_share

    logits = torch.tensor([[30.0, -30.0, 0.0]]).repeat(8, 1)  # 8 sure decisions over 3 devices
    assert with_uniform_share(logits, 0.0) is logits
    mixed = with_uniform_share(logits, 2.0)  # about 2 of the 8 decisions drawn uniformly
    p = mixed.exp()
    assert torch.allclose(p.sum(-1), torch.ones(8))
    assert torch.equal(mixed.argmax(-1), logits.argmax(-1))  # predict unchanged
    assert torch.allclose(p[:, 1], torch.full((8,), 0.25 / 3), atol=1e-6)  # share 2/8, over 3 devices
    # Decisions counted per parse when several parses are scored together (HSDAG's stochastic parsing).
    assert torch.allclose(with_uniform_share(logits, 2.0, decisions=4).exp()[:, 1], torch.full((8,), 0.5 / 3),
                          atol=1e-6)
