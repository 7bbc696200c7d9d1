"""``placement-gym sim2real``: a learned agent trained on a simulated profile, trained on with real OpenVINO
measurements on this machine's two CPU devices, and both phases' placements timed for real in pairs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from placement_gym import cli, registry, two_cpu_devices
from placement_gym.commands.sim2real import DEFAULT_BUDGETS, budgets_of
from placement_gym.env import DevicePlacementEnv
from placement_gym.sim2real import format_comparison, paired_real_latencies, sim_to_real


def test_the_command_records_both_phases_and_times_their_placements_for_real(tmp_path, capsys):
    out = tmp_path / "s2r.json"
    assert cli.main(["sim2real", "--agent", "post", "--model", "tiny_branch", "--profile", "paper", "--sim-budget", "12",
                     "--real-budget", "3", "--repeats", "6", "--json", str(out), "--save", str(tmp_path / "a.pt")]) == 0
    printed = capsys.readouterr().out
    assert "simulated phase: 12 placements" in printed and "real phase: 3 placements" in printed
    data = json.loads(out.read_text())
    simulated, real = data["records"]
    assert (simulated["extra"]["phase"], simulated["simulated"], simulated["placements_measured"]) == \
        ("simulated", True, 12)
    assert (real["extra"]["phase"], real["simulated"], real["placements_measured"]) == ("real", False, 3)
    rows = data["sim2real"]["placements"]
    devices = real["devices"]
    assert list(rows) == ["simulated phase", "real phase", *(f"{d}-only" for d in devices),
                          "dp (planned on the profile)"]
    assert rows["simulated phase"]["ratio"] == 1.0
    for row in rows.values():  # every placement compiled and was timed: a latency inside its interval
        low, high = row["latency_interval_s"]
        assert low <= row["latency_s"] <= high and row["ratio_interval"][0] <= row["ratio"] <= row["ratio_interval"][1]
    gain = data["sim2real"]["real_phase_gain"]
    assert gain["faster_by"] == pytest.approx(1 - rows["real phase"]["ratio"])
    assert data["budget"] == {"simulated": 12, "real": 3}
    assert registry.load_agent_class("post").load(tmp_path / "a.pt") is not None


def test_the_real_phase_continues_the_simulated_phases_agent():
    """One agent learns in both phases: after the real phase its run counts the real placements, and the
    simulated phase's policy is where it started (a fine-tuning run of the same instance)."""
    make = registry.agent_factories(["post"], ["CPU", "CPU1"], {"seed": 0})["post"]
    families = make().feature_families
    sim = DevicePlacementEnv("tiny_chain", backend="simulated", profile="paper", features=families)
    real = DevicePlacementEnv("tiny_chain", backend="openvino", devices=two_cpu_devices(), features=families)
    try:
        agent, records, comparison = sim_to_real(make, "tiny_chain", sim_env=sim, real_env=real, sim_budget=10,
                                                 real_budget=2, repeats=5)
    finally:
        real.close()
    assert [r["extra"]["phase"] for r in records] == ["simulated", "real"]
    assert agent.run_summary.steps == 2 and agent.run_summary.budget == 2  # the last run is the real phase's
    assert set(comparison["placements"]) >= {"simulated phase", "real phase"}


@pytest.mark.parametrize("flags, expected", [
    ([], (200, 400)),  # DOPPLER's own schedule, its paper's stages at a tenth
    (["--sim-budget", "30"], (30, 400)),
    (["--real-budget", "5"], (200, 5)),
    (["--sim-budget", "30", "--real-budget", "5"], (30, 5)),
])
def test_the_command_takes_doppler_s_own_schedule_where_no_budget_flag_is_given(flags, expected):
    """The command's parser and its budget rule on the registered classes: ``doppler`` names its schedule
    (``SIM_TO_REAL_BUDGETS``), each flag given wins over its half; an agent that names none gets the defaults."""
    argv = ["sim2real", "--model", "tiny_chain", "--profile", "paper", *flags]
    doppler = registry.load_agent_class("doppler")
    assert doppler.SIM_TO_REAL_BUDGETS == (200, 400)
    assert budgets_of(cli.build_parser().parse_args([*argv, "--agent", "doppler"]), doppler) == expected
    post = registry.load_agent_class("post")
    assert not hasattr(post, "SIM_TO_REAL_BUDGETS")
    given = {"--sim-budget": 30, "--real-budget": 5}
    defaults = tuple(given[flag] if flag in flags else default
                     for flag, default in zip(("--sim-budget", "--real-budget"), DEFAULT_BUDGETS))
    assert budgets_of(cli.build_parser().parse_args([*argv, "--agent", "post"]), post) == defaults


@pytest.mark.parametrize("argv, message", [
    (["--agent", "dp"], "learns nothing"),
    (["--agent", "post", "--profile", "ai_pc"], "the simulated profile has 3 devices"),
    (["--agent", "post", "--sim-budget", "-1"], "argument --sim-budget: found -1; expected placements to measure"),
    (["--agent", "post", "--real-budget", "abc"], "argument --real-budget: 'abc' is not an integer"),
])
def test_bad_input_is_refused_in_one_line_before_any_work(argv, message, capsys):
    base = ["sim2real", "--model", "tiny_chain", "--profile", "paper", "--sim-budget", "2", "--real-budget", "1",
            "--baselines"]
    try:
        status = cli.main([*base, *argv])
    except SystemExit as exc:  # refused by the argument parser
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_paired_timing_refuses_an_unknown_reference():
    env = DevicePlacementEnv("tiny_chain", backend="openvino", devices=two_cpu_devices())
    try:
        with pytest.raises(ValueError, match="the reference 'x' is none of the placements"):
            paired_real_latencies(env.unwrapped, {"a": np.zeros(env.unwrapped.graph.n_ops, dtype=np.int64)}, "x")
    finally:
        env.close()


def test_the_summary_says_slower_where_the_real_phase_lost():
    # A real phase whose placement times slower than the simulated phase's is reported as slower, not "-x% faster".
    row = {"latency_s": 0.2, "ratio": 1.136, "ratio_interval": (1.084, 1.156)}
    comparison = {"objective": "latency", "reference": "simulated phase",
                  "placements": {"simulated phase": {"latency_s": 0.2, "ratio": 1.0, "ratio_interval": (1.0, 1.0)},
                                 "real phase": row},
                  "real_phase_gain": {"faster_by": -0.136, "interval": (-0.156, -0.084), "significant": True}}
    last = format_comparison(comparison).splitlines()[-1]
    assert last.startswith("the real phase's best is 13.6% slower than the simulated phase's placement"), last
    assert "(faster by -15.6% to -8.4%)" in last
