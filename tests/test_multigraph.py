"""A multi-graph DevicePlacement-v0 (``model=[...]`` / ``"dataset:SPLIT"``): one graph drawn per reset, padded
observations with node and edge masks, per-graph references, and the run loop's per-graph bests."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym import DevicePlacementEnv

MODELS = ["tiny_chain", "tiny_branch"]
SIM = dict(backend="simulated", profile="paper")


@pytest.fixture()
def env():
    env = DevicePlacementEnv(MODELS, **SIM)
    yield env
    env.close()


def test_observation_is_padded_to_the_largest_graph_with_masks(env):
    chain, branch = env.graphs["tiny_chain"], env.graphs["tiny_branch"]
    n_max, e_max = max(chain.n_ops, branch.n_ops), max(chain.n_edges, branch.n_edges)
    obs, info = env.reset(options={"model": "tiny_chain"})
    assert info["model"] == "tiny_chain" and env.graph is chain and env.models == MODELS
    n, e = chain.n_ops, chain.n_edges
    assert obs["node_features"].shape[0] == n_max and obs["edge_index"].shape == (2, e_max)
    assert obs["node_mask"].tolist() == [1] * n + [0] * (n_max - n) and obs["node_mask"].dtype == np.int8
    assert obs["edge_mask"].tolist() == [1] * e + [0] * (e_max - e)
    assert np.array_equal(obs["edge_index"][:, :e], chain.edge_index) and not obs["edge_index"][:, e:].any()
    assert (obs["action_mask"][n:] == [1, 0]).all() and not obs["node_device_cost"][n:].any()
    assert not obs["node_features"][n:].any() and not obs["placement"][n:].any()
    assert env.observation_space.contains(obs)
    assert env.action_space.nvec.tolist() == [env.n_devices] * n_max


def test_single_graph_observation_has_no_masks():
    obs, _ = DevicePlacementEnv("tiny_chain", **SIM).reset(seed=0)
    assert "node_mask" not in obs and "edge_mask" not in obs


def test_draws_are_seeded_and_options_pick_the_graph(env):
    def draws(seed):
        names = [env.reset(seed=seed)[1]["model"]]
        return names + [env.reset()[1]["model"] for _ in range(11)]

    first = draws(3)
    assert first == draws(3) and set(first) == set(MODELS)
    for name in MODELS:
        assert env.reset(options={"model": name})[1]["model"] == name and env.graph.name == name
    with pytest.raises(ValueError, match="tiny_chain"):
        env.reset(options={"model": "resnet"})


def test_actions_of_the_graph_length_and_of_the_padded_length_both_work(env):
    env.reset(options={"model": "tiny_chain"})
    n = env.graph.n_ops
    ones = np.ones(n, dtype=np.int64)
    _, _, _, _, info = env.step(ones)
    assert info["ok"] and info["model"] == "tiny_chain" and np.array_equal(info["placement"], ones)
    padded = np.zeros(env.action_space.shape, dtype=np.int64)
    padded[:n] = 1
    padded[n:] = 0
    _, _, _, _, info2 = env.step(padded)
    assert np.array_equal(info2["placement"], ones) and info2["latency_s"] == info["latency_s"]
    with pytest.raises(ValueError, match=r"shape \(9,\) or the padded \(24,\)"):
        env.step(np.ones(n + 1, dtype=np.int64))


def test_reference_and_measurement_cache_are_per_graph():
    env = DevicePlacementEnv(MODELS, backend="openvino", devices=["CPU", "CPU[INFERENCE_NUM_THREADS=1]"],
                             warmup=1, repeats=3)
    chain = env.reset(options={"model": "tiny_chain"})[1]["reference_latency_s"]
    branch = env.reset(options={"model": "tiny_branch"})[1]["reference_latency_s"]
    assert env.reference_of("tiny_chain").latency_s == chain and env.reference_of("tiny_branch").latency_s == branch
    assert env.reference_placement.shape == (env.graphs["tiny_branch"].n_ops,)
    env.reset(options={"model": "tiny_chain"})
    _, reward, _, _, info = env.step(np.zeros(env.graph.n_ops, dtype=np.int64))
    # The reference placement of tiny_chain, measured at its first reset, comes from the backend's cache.
    assert env.last_measurement.cached and reward == 0.0 and info["reference_latency_s"] == chain
    env.close()


def test_check_env_passes():
    env = DevicePlacementEnv(MODELS, render_mode="ansi", **SIM)
    gym_check_env(env, skip_render_check=False)
    sb3_check_env(env, warn=False)


def test_gym_make_and_refusals():
    env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
    assert env.unwrapped.multi_graph and env.unwrapped.models == MODELS
    with pytest.raises(ValueError, match="several"):
        gym.make_vec("DevicePlacement-v0", num_envs=2, model=MODELS, **SIM)
    with pytest.raises(ValueError, match="distinct"):
        DevicePlacementEnv(["tiny_chain", "tiny_chain"], **SIM)
    with pytest.raises(ValueError, match="single-graph"):
        gym.make("DevicePlacementNode-v0", model=MODELS, **SIM)


def test_obs_to_batch_drops_the_padding(env):
    from agents.nn.graph_batch import obs_to_batch

    obs, _ = env.reset(options={"model": "tiny_chain"})
    batch = obs_to_batch(obs)
    chain = env.graph
    assert batch.num_nodes == chain.n_ops and batch.num_edges == chain.n_edges
    assert np.array_equal(batch.edge_index.numpy(), chain.edge_index)
    assert np.array_equal(batch.x.numpy(), obs["node_features"][:chain.n_ops])


def test_run_loop_keeps_the_best_of_each_graph():
    from agents.baselines.simple import RandomSearch

    env = gym.make("DevicePlacement-v0", model=MODELS, **SIM)
    agent = RandomSearch().learn(env, budget=10, seed=0)
    summary = agent.run_summary
    graphs = summary.details["graphs"]
    assert set(graphs) == set(MODELS) and summary.steps == 10
    for name, row in graphs.items():
        assert row["reference_latency_s"] > 0 and row["predict_latency_s"] is not None
        if row["best_step"] is not None:
            assert row["ok"] and row["speedup"] == pytest.approx(row["reference_latency_s"] / row["latency_s"])
    # The curve is unitless (mean best / reference latency over the graphs seen), one entry per change.
    assert summary.curve and all(v > 0 for _, v in summary.curve)
    assert agent.trained_for["graph"] == MODELS
