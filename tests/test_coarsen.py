"""Coarsening big graphs (`placement_gym.coarsen`, `CoarsenedPlacement`) and agents learning through it."""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from placement_gym import DevicePlacementEnv
from placement_gym.coarsen import Coarsening, cluster_starts
from placement_gym.wrappers import CoarsenedPlacement, NodePlacementWrapper
from agents.search.config import hybrid_options

N_OPS, MAX_NODES = 3000, 100


@pytest.fixture(scope="module")
def env() -> DevicePlacementEnv:
    return DevicePlacementEnv(f"synthetic:{N_OPS}", backend="simulated", profile="paper")


@pytest.fixture(scope="module")
def coarsening(env) -> Coarsening:
    return Coarsening.of(env.observation(), MAX_NODES)


def test_every_op_is_in_exactly_one_of_at_most_max_nodes_contiguous_clusters(coarsening):
    assert 1 < coarsening.n_clusters <= MAX_NODES
    assert coarsening.labels.shape == (N_OPS,)
    assert np.all(np.diff(coarsening.labels) >= 0)  # runs of the topological order, in order
    assert np.array_equal(np.bincount(coarsening.labels), coarsening.sizes)
    assert coarsening.sizes.min() >= 1 and coarsening.sizes.sum() == N_OPS


def test_the_cluster_graph_is_acyclic_and_covers_every_edge_between_clusters(env, coarsening):
    src, dst = coarsening.edge_index
    assert np.all(src < dst)  # every edge goes forward in cluster order: a topological order, so no cycle
    full = coarsening.labels[env.graph.edge_index]
    across = full[0] != full[1]
    assert {tuple(e) for e in full[:, across].T} == {tuple(e) for e in coarsening.edge_index.T}
    assert len(np.unique(coarsening.edge_index, axis=1).T) == coarsening.edge_index.shape[1]


def test_coarse_edges_carry_the_summed_bytes_in_the_envs_encoding(env, coarsening):
    obs = coarsening.observation(env.observation())
    full = coarsening.labels[env.graph.edge_index]
    a, b = coarsening.edge_index[:, 0]
    summed = env.graph.edge_bytes[(full[0] == a) & (full[1] == b)].sum()
    assert obs["edge_features"][0, 0] == pytest.approx(np.log10(1.0 + summed) / 10.0, rel=1e-5)


def test_cuts_move_to_narrow_tensors():
    # A chain 0 -> 1 -> ... -> 7 whose edge 3 -> 4 is tiny: two clusters are cut there, not in the middle of a
    # wide edge, even though the balanced cut (after op 4) is one op away.
    edge_index = np.array([np.arange(7), np.arange(1, 8)])
    edge_bytes = np.full(7, 1e6)
    edge_bytes[3] = 1.0
    starts = cluster_starts(8, edge_index, edge_bytes, np.ones(8), max_nodes=2)
    assert starts.tolist() == [0, 4]


def test_expanding_a_coarse_action_gives_every_op_its_clusters_device(coarsening):
    action = np.random.default_rng(0).integers(0, 2, coarsening.n_clusters)
    placement = coarsening.expand(action)
    assert placement.shape == (N_OPS,) and placement.dtype == np.int64
    assert np.array_equal(placement, action[coarsening.labels])
    assert np.array_equal(coarsening.majority(placement, 2), action)
    with pytest.raises(ValueError, match="device per cluster"):
        coarsening.expand(np.zeros(N_OPS, dtype=np.int64))


def test_coarsening_is_recomputed_identically_from_the_observation(env, coarsening):
    again = Coarsening.of(env.observation(), MAX_NODES)
    assert np.array_equal(again.starts, coarsening.starts)
    assert np.array_equal(again.edge_index, coarsening.edge_index)


def test_the_wrapper_passes_check_env_and_measures_full_placements(env):
    wrapped = CoarsenedPlacement(env, max_nodes=MAX_NODES)
    check_env(wrapped, skip_render_check=True)
    obs, _ = wrapped.reset(seed=0)
    m = wrapped.coarsening.n_clusters
    assert obs["node_features"].shape == (m, env.observation_space["node_features"].shape[1])
    assert obs["node_device_cost"].sum() == pytest.approx(env.observation()["node_device_cost"].sum(), rel=1e-4)
    action = np.ones(m, dtype=np.int64)
    action[: m // 2] = 0
    obs, _, _, _, info = wrapped.step(action)
    assert info["placement"].shape == (N_OPS,)
    assert np.array_equal(info["placement"], wrapped.coarsening.expand(action))
    assert np.array_equal(obs["placement"], action)


def test_the_node_by_node_wrapper_places_clusters_on_a_coarsened_env(env):
    node_env = NodePlacementWrapper(CoarsenedPlacement(env, max_nodes=MAX_NODES), groups=4, start="reference")
    check_env(node_env, skip_render_check=True)
    obs, _ = node_env.reset(seed=0)
    assert obs["current_node"].shape == (node_env.env.coarsening.n_clusters,)
    _, _, _, _, info = node_env.step(1)
    assert info["placement"].shape == (N_OPS,) and info["placement"].sum() > 0


def test_an_agent_learns_a_big_graph_coarsened_and_reports_full_placements(env):
    from agents.hsdag import HSDAGAgent

    agent = HSDAGAgent(hidden_channels=16, num_layers=1, samples_per_update=4, structure=False, seed=0, **hybrid_options(HSDAGAgent, distill_steps=20),
                       coarsen_above=1000, max_nodes=MAX_NODES)
    agent.learn(env, budget=8, seed=0)
    summary = agent.run_summary
    assert summary.details["coarsened"]["clusters"] <= MAX_NODES
    assert agent.trained_for["clusters"] == summary.details["coarsened"]["clusters"]
    assert agent.best_placement.shape == (N_OPS,) and summary.predict_placement.shape == (N_OPS,)
    obs, _ = env.reset(seed=0)
    placement = agent.predict(obs)
    assert placement.shape == (N_OPS,)
    assert env.measure(placement).ok
    # Every op has its cluster's device: the placement is an expanded coarse action.
    coarsening = Coarsening.of(obs, MAX_NODES)
    assert np.array_equal(coarsening.expand(coarsening.majority(placement, env.n_devices)), placement)


def test_coarsen_above_must_leave_a_coarse_graph_uncoarsened():
    from agents.hsdag import HSDAGAgent

    with pytest.raises(ValueError, match="coarsen_above"):
        HSDAGAgent(coarsen_above=100, max_nodes=200)
