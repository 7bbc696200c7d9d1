"""DevicePlacement-v0 on the real OpenVINO backend with two devices (the CPU and a virtual copy)."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym import DevicePlacementEnv

from .conftest import REAL
from .conftest import TWO_DEVICES, break_device


@pytest.fixture()
def env():
    env = gym.make("DevicePlacement-v0", model="tiny_branch", **REAL)
    yield env
    env.close()


def test_spaces_and_step(env):
    obs, info = env.reset(seed=0)
    graph = env.unwrapped.graph
    n, e = graph.n_ops, graph.n_edges
    assert obs["node_features"].shape[0] == n and obs["node_features"].dtype == np.float32
    assert obs["edge_index"].shape == (2, e) and obs["edge_index"].dtype == np.int64
    assert obs["edge_features"].shape == (e, 1)
    assert np.array_equal(obs["placement"], np.zeros(n))
    assert env.action_space.nvec.tolist() == [2] * n
    assert info["devices"] == TWO_DEVICES and info["reference_latency_s"] > 0

    env.action_space.seed(0)
    action = env.action_space.sample()
    obs, reward, terminated, truncated, info = env.step(action)
    assert terminated and not truncated  # horizon 1
    assert np.array_equal(obs["placement"], action)
    assert np.array_equal(info["placement"], action) and info["placement"].dtype == np.int64  # what was measured
    assert info["ok"] and info["latency_s"] > 0 and info["n_submodels"] >= 2 and not info["simulated"]
    assert reward == pytest.approx(info["speedup"] - 1.0)
    assert info["speedup"] == pytest.approx(info["reference_latency_s"] / info["latency_s"])
    assert env.unwrapped.placements_measured == 1


def test_reference_placement_has_zero_speedup_reward(env):
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.zeros(env.unwrapped.graph.n_ops, dtype=np.int64))
    assert reward == 0.0 and info["speedup"] == 1.0 and env.unwrapped.last_measurement.cached


@pytest.mark.parametrize("reward", ["neg_latency", "inv_latency"])
def test_other_rewards(reward):
    env = DevicePlacementEnv("tiny_chain", reward=reward, **REAL)
    env.reset(seed=0)
    _, r, _, _, info = env.step(np.ones(env.graph.n_ops, dtype=np.int64))
    assert r == pytest.approx(-info["latency_s"] if reward == "neg_latency" else 1.0 / info["latency_s"])


def test_horizon_and_observation_copies():
    env = DevicePlacementEnv("tiny_chain", horizon=3, **REAL)
    obs, _ = env.reset(seed=0)
    obs["node_features"][:] = 123.0  # the agent scribbles on what it got
    ones = np.ones(env.graph.n_ops, dtype=np.int64)
    for step in range(3):
        obs2, _, terminated, _, _ = env.step(ones)
        assert terminated == (step == 2)
    assert not np.any(obs2["node_features"] == 123.0)
    assert obs2["placement"] is not env.step(ones)[0]["placement"]


def test_features_none_is_the_default_families():
    """``features=agent.feature_families`` for an agent that asks for no particular features (None)."""
    from placement_gym.features import DEFAULT_FAMILIES
    from agents.baselines.simple import RandomSearch

    env = DevicePlacementEnv("tiny_chain", backend="simulated", features=RandomSearch.feature_families)
    assert RandomSearch.feature_families is None and env.feature_families == tuple(DEFAULT_FAMILIES)
    assert env.reset(seed=0)[0]["node_features"].shape[1] == \
        DevicePlacementEnv("tiny_chain", backend="simulated").reset(seed=0)[0]["node_features"].shape[1]


def test_checkers_pass(env):
    gym_check_env(env.unwrapped, skip_render_check=False)
    sb3_check_env(env.unwrapped, warn=False)


def test_reset_is_deterministic_with_a_seed(env):
    a, _ = env.reset(seed=7)
    b, _ = env.reset(seed=7)
    for key in a:
        assert np.array_equal(a[key], b[key])
    env.action_space.seed(3)
    first = env.action_space.sample()
    env.action_space.seed(3)
    assert np.array_equal(first, env.action_space.sample())


def test_reset_to_a_given_placement(env):
    start = np.ones(env.unwrapped.graph.n_ops, dtype=np.int64)
    obs, _ = env.reset(seed=0, options={"placement": start})
    assert np.array_equal(obs["placement"], start)


@pytest.mark.parametrize(
    "make_bad, message",
    [
        (lambda n: np.zeros(n + 1, dtype=np.int64), r"shape \(\d+,\); expected"),
        (lambda n: np.zeros((1, n), dtype=np.int64), r"shape \(1, \d+\)"),
        (lambda n: np.zeros(n, dtype=np.float32), "dtype float32"),
        (lambda n: np.full(n, 2, dtype=np.int64), r"values in 2\.\.2; expected .* 0\.\.1"),
        (lambda n: np.full(n, -1, dtype=np.int64), r"values in -1\.\.-1"),
    ],
)
def test_bad_actions_raise_and_leave_env_usable(env, make_bad, message):
    env.reset(seed=0)
    n = env.unwrapped.graph.n_ops
    with pytest.raises(ValueError, match=message):
        env.step(make_bad(n))
    _, _, _, _, info = env.step(np.zeros(n, dtype=np.int64))
    assert info["ok"]


def test_failing_placement_is_penalised_not_raised():
    env = DevicePlacementEnv("tiny_chain", backend="openvino", devices=TWO_DEVICES, warmup=0, repeats=1,
                             failure_penalty=5.0)
    break_device(env.backend)  # OpenVINO now refuses to compile anything placed on the second device
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(np.ones(env.graph.n_ops, dtype=np.int64))
    assert not info["ok"] and "NOT_A_HINT" in info["error"]
    assert info["latency_s"] == pytest.approx(5.0 * info["reference_latency_s"])
    assert reward == pytest.approx(1 / 5.0 - 1.0) and terminated
    env.reset(seed=0)
    assert env.step(np.zeros(env.graph.n_ops, dtype=np.int64))[4]["ok"]


def test_render_draws_the_placement_as_an_rgb_array(tiny_branch_graph):
    env = gym.make("DevicePlacement-v0", model=tiny_branch_graph, backend="simulated", render_mode="rgb_array")
    env.reset(seed=0)
    before = env.render()  # nothing measured yet: the reference placement
    assert before.ndim == 3 and before.shape[2] == 3 and before.dtype == np.uint8
    env.step(np.arange(tiny_branch_graph.n_ops) % 2)
    after = env.render()
    assert after.shape[2] == 3 and after.dtype == np.uint8 and not np.array_equal(before, after)
    gym_check_env(env.unwrapped, skip_render_check=False)


def test_render_describes_devices(env):
    env.reset(seed=0)
    env.step(np.arange(env.unwrapped.graph.n_ops) % 2)
    text = env.unwrapped.render()
    assert "tiny_branch" in text and "(virtual)" in text and "submodels" in text and "measured" in text


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown reward"):
        DevicePlacementEnv("tiny_chain", reward="fast", **REAL)
    with pytest.raises(ValueError, match="does not exist"):
        DevicePlacementEnv("tiny_chain", backend="openvino", devices=["CPU", "TPU"])
    with pytest.raises(ValueError, match="unknown backend"):
        DevicePlacementEnv("tiny_chain", backend="cuda")
    with pytest.raises(ValueError, match="horizon"):
        DevicePlacementEnv("tiny_chain", horizon=0, **REAL)


def test_backend_settings_are_given_one_way(tiny_chain_graph):
    env = DevicePlacementEnv(tiny_chain_graph, backend="openvino", devices=TWO_DEVICES, repeats=4)
    assert env.backend.describe()["repeats"] == 4 and env.backend.describe()["warmup"] == 3  # the backend's default
    with pytest.raises(ValueError, match="given both"):
        DevicePlacementEnv(tiny_chain_graph, backend="openvino", devices=TWO_DEVICES, repeats=4,
                           backend_options={"repeats": 5})
    # A ready backend has its devices and settings: anything else given with it is refused, not ignored.
    with pytest.raises(ValueError, match="already has its settings"):
        DevicePlacementEnv(tiny_chain_graph, backend=env.backend, repeats=3)
    with pytest.raises(ValueError, match="not on the devices given"):
        DevicePlacementEnv(tiny_chain_graph, backend=env.backend, devices=["CPU"])
    shared = DevicePlacementEnv(tiny_chain_graph, backend=env.backend, devices=TWO_DEVICES)
    assert shared.backend is env.backend
    # backend="auto" on a one-device machine simulates and drops the real backend's settings.
    simulated = DevicePlacementEnv(tiny_chain_graph, backend="auto", repeats=4)
    assert simulated.backend.simulated or simulated.backend.describe()["repeats"] == 4


def test_unknown_model_lists_the_zoo():
    with pytest.raises(ValueError, match="resnet"):
        gym.make("DevicePlacement-v0", model="resnet-9000", **REAL)


def test_model_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.xml"):
        DevicePlacementEnv(str(tmp_path / "missing.xml"), **REAL)
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"this is not a model")
    with pytest.raises(ValueError, match="corrupt.onnx"):
        DevicePlacementEnv(str(corrupt), **REAL)


def test_user_ir_file_and_ov_model(tmp_path, tiny_chain_graph):
    import openvino as ov

    from placement_gym.models import load_model

    model = load_model("tiny_chain")
    path = tmp_path / "mine.xml"
    ov.save_model(model, path)
    from_file = DevicePlacementEnv(str(path), **REAL)
    from_object = DevicePlacementEnv(model, **REAL)
    assert from_file.graph.op_names == from_object.graph.op_names == tiny_chain_graph.op_names
    from_file.reset(seed=0)
    assert from_file.step(np.ones(from_file.graph.n_ops, dtype=np.int64))[4]["ok"]


@pytest.mark.slow
def test_resnet_on_two_real_devices():
    env = gym.make("DevicePlacement-v0", model="resnet", backend="openvino", devices=TWO_DEVICES, warmup=1, repeats=3)
    env.reset(seed=0)
    env.action_space.seed(0)
    _, _, _, _, info = env.step(env.action_space.sample())
    assert info["ok"] and info["n_submodels"] >= 2 and info["latency_s"] > 0
