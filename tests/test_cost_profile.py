"""Planners on the real backend plan on a device profile (``cost_profile``) and their placements are measured.

Real parts: a profile calibrated here (`placement_gym.backends.calibration.calibrate`) on this machine's two devices
(`placement_gym.two_cpu_devices()`), the tiny zoo models measured with real OpenVINO, the CLI's own entry point.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import placement_gym
from agents.baselines import ContiguousDP, ExactOptimum, GreedyETF, MetisPartition, TopoBalance, contiguous_dp
from agents.baselines.costs import planning_backend
from placement_gym import DevicePlacementEnv, cli
from placement_gym.backends.calibration import calibrate
from placement_gym.backends.profiles import Profile
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.evaluation import evaluate

DEVICES = placement_gym.two_cpu_devices()
REAL = ["--backend", "openvino", "--devices", *DEVICES, "--warmup", "1", "--repeats", "3"]


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory):
    """A profile of this machine's two devices, measured on tiny_branch with few runs (as `placement-gym calibrate`)."""
    path = tmp_path_factory.mktemp("profile") / "calibrated.json"
    calibrate(DEVICES, ["tiny_branch"], runs=3, warmup=1, placements=2, name="calibrated").save(path)
    return path


@pytest.fixture(scope="module")
def real_env():
    env = DevicePlacementEnv("tiny_branch", backend="openvino", devices=DEVICES, warmup=1, repeats=3)
    yield env
    env.close()


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    return lines[0]


def test_dp_plans_on_the_cost_profile_and_its_placement_is_measured_on_the_real_devices(profile_file, real_env):
    record, = evaluate(lambda: ContiguousDP(cost_profile=str(profile_file)), real_env, budget=1, seeds=1)
    assert record["ok"] and record["latency_s"] > 0 and record["placements_measured"] == 1
    assert record["backend"] == "openvino" and record["settings"] == {"cost_profile": str(profile_file)}
    # The plan is the program's on the profile's tables for the env's devices (or a single device where that is
    # cheaper by the same tables: `ContiguousDP` ranks them), and the record says so.
    planner, graph = SimulatedBackend(Profile.load(profile_file)), real_env.unwrapped.graph
    planned, _ = contiguous_dp(planner, graph)
    singles = [np.full(graph.n_ops, d, dtype=np.int64) for d in range(len(planner.device_names))]
    expected = min([planned, *singles], key=lambda p: planner.measure(graph, p).latency_s)
    assert record["placement"] == expected.tolist()
    source = record["extra"]["plan"]["cost_model"]
    assert "'calibrated'" in source and "cost_profile" in source and "measured on the 'openvino' backend" in source


@pytest.mark.parametrize("planner", [GreedyETF, TopoBalance, ExactOptimum])
def test_every_cost_model_planner_takes_a_cost_profile_on_the_real_backend(planner, profile_file, real_env):
    # the exact solver with a short limit: what is checked is the profile it plans on, not how long it may solve
    options = {"time_limit_s": 5} if planner is ExactOptimum else {}
    agent = planner(cost_profile=str(profile_file), **options).learn(real_env, 1, 0)
    assert agent.run_summary.steps == 1 and agent.best_latency_s > 0
    assert "measured on the 'openvino' backend" in agent.plan_info["cost_model"]


def test_metis_weighs_by_the_cost_profile_on_the_real_backend(profile_file, real_env):
    agent = MetisPartition(cost_profile=str(profile_file)).learn(real_env, 1, 0)
    assert agent.run_summary.steps == 1 and "'calibrated'" in agent.plan_info["weights"]
    with pytest.raises(ValueError, match="use_costs=False"):
        MetisPartition(use_costs=False, cost_profile=str(profile_file))


def test_a_profiles_devices_stand_for_the_envs_by_name_else_in_order(profile_file, real_env):
    reversed_profile = Profile.load(profile_file)
    reversed_profile.devices.reverse()
    assert planning_backend(real_env, reversed_profile).device_names == real_env.unwrapped.device_names
    other = planning_backend(real_env, Profile.preset("paper"))  # two other devices: in order, and said so
    assert other.device_names == Profile.preset("paper").device_names


def test_place_dp_with_a_cost_profile_writes_a_folder_that_says_what_planned_it(profile_file, tmp_path, capsys):
    out, run = tmp_path / "placed", tmp_path / "run.json"
    assert cli.main(["place", "--model", "tiny_branch", "--agent", "dp", "--agent-option",
                     f"cost_profile={profile_file}", *REAL, "--seed", "0", "--json", str(run), "--out", str(out),
                     "--no-progress"]) == 0
    document = json.loads((out / "placement.json").read_text())
    assert document["agent"] == "dp" and document["simulated"] is False
    assert document["latency_kind"].startswith("measured") and document["latency_s"] > 0
    assert "'calibrated'" in document["planned_on"] and document["agent_settings"]["cost_profile"] == str(profile_file)
    assert "vs CPU alone" in capsys.readouterr().out


def test_a_cost_profile_with_another_device_count_is_refused_in_one_line(real_env, tmp_path, capsys):
    with pytest.raises(ValueError, match="describes 3 device"):
        ContiguousDP(cost_profile="ai_pc").learn(real_env, 1, 0)
    assert cli.main(["place", "--model", "tiny_branch", "--agent", "dp", "--agent-option", "cost_profile=ai_pc",
                     *REAL, "--seed", "0", "--out", str(tmp_path / "p"), "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "cost_profile 'ai_pc' describes 3 device(s)" in line and "the env has 2" in line
    assert not (tmp_path / "p").exists()


def test_without_a_cost_profile_the_real_backend_refusal_names_the_option(real_env, tmp_path, capsys):
    for planner in (ContiguousDP, GreedyETF, TopoBalance, ExactOptimum):
        with pytest.raises(ValueError, match="no cost model to plan with; .*cost_profile=FILE.json"):
            planner().learn(real_env, 1, 0)
    assert cli.main(["place", "--model", "tiny_branch", "--agent", "dp", *REAL, "--seed", "0", "--out",
                     str(tmp_path / "p"), "--no-progress"]) == 2
    assert "--agent-option cost_profile=" in one_line(capsys.readouterr().err)


def test_a_bad_cost_profile_is_refused_when_the_planner_is_built(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"devices": [{"name": "CPU"}]}))
    with pytest.raises(ValueError, match="bad.json"):
        ContiguousDP(cost_profile=str(bad))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ContiguousDP(cost_profile=str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="neither a preset"):
        ContiguousDP(cost_profile="no-such-preset")


def test_a_planner_with_a_cost_profile_saves_and_loads_it(profile_file, tmp_path):
    path = ExactOptimum(time_limit_s=5, cost_profile=str(profile_file)).save(tmp_path / "optimal.json")
    loaded = ExactOptimum.load(path)
    assert loaded.cost_profile == str(profile_file) and loaded.profile.name == "calibrated"
    assert ContiguousDP().hyperparameters() == {}  # no profile: the settings as before
