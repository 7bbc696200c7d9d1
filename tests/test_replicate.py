"""Replicate: the whole model on every device, requests spread over them (OpenVINO's AUTO with
CUMULATIVE_THROUGHPUT), priced by the simulated backend, timed by the real one, and recorded as the ``replicate``
baseline beside the placements."""
from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

import placement_gym
from placement_gym import cli, registry, results
from placement_gym.backends.profiles import Profile
from placement_gym.backends.replicate import replicas, replicated_measurement
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.env import DevicePlacementEnv
from placement_gym.evaluation import RECORD_KEYS, evaluate

from .conftest import break_device

#: Short fixed windows keep a tiny-model real measurement well under a second (tests/test_openvino_throughput.py).
FAST = dict(warmup=1, repeats=3, target_rel_halfwidth=None, windows=3, window_s=0.01)


def _singles(backend, graph) -> list[float]:
    """Seconds per inference of each all-on-d placement (inf where it fails)."""
    out = []
    for d in range(len(backend.device_names)):
        m = backend.measure(graph, np.full(graph.n_ops, d, dtype=np.int64))
        out.append(m.latency_s if m.ok else np.inf)
    return out


def _with_device(profile: Profile, index: int, **changes) -> Profile:
    devices = list(profile.devices)
    devices[index] = dataclasses.replace(devices[index], **changes)
    return dataclasses.replace(profile, devices=devices)


# ------------------------------------------------------------------------------------------- simulated
def test_throughput_is_the_devices_throughputs_added(tiny_branch_graph):
    backend = SimulatedBackend("paper", objective="throughput")
    singles = _singles(backend, tiny_branch_graph)
    m = replicated_measurement(backend, tiny_branch_graph)
    assert m.ok and m.simulated and m.objective == "throughput" and m.n_submodels == 1
    assert m.latency_s == pytest.approx(1.0 / sum(1.0 / t for t in singles), rel=1e-12)
    assert m.latency_s < min(singles)  # two devices side by side beat the faster alone
    assert replicas(m) == pytest.approx(dict(zip(backend.device_names, singles)))
    assert m.breakdown["replicas"] == 2


def test_a_device_that_cannot_run_the_whole_graph_holds_no_replica(tiny_branch_graph):
    g = tiny_branch_graph
    profile = _with_device(Profile.preset("paper"), 1, unsupported_ops=[str(g.op_types[0])])
    backend = SimulatedBackend(profile, objective="throughput")
    assert not backend.measure(g, np.full(g.n_ops, 1, dtype=np.int64)).ok
    m = replicated_measurement(backend, g)
    cpu_alone = backend.measure(g, np.zeros(g.n_ops, dtype=np.int64)).latency_s
    assert m.ok and m.latency_s == pytest.approx(cpu_alone, rel=1e-12)
    assert list(replicas(m)) == [backend.device_names[0]] and m.breakdown["replicas"] == 1

    nowhere = SimulatedBackend(_with_device(profile, 0, memory_bytes=1.0), objective="throughput")
    failed = replicated_measurement(nowhere, g)
    assert not failed.ok and failed.latency_s == np.inf and "no device runs the whole graph alone" in failed.error
    assert all(name in failed.error for name in nowhere.device_names)


def test_under_the_latency_objective_replicate_is_the_best_single_device(tiny_branch_graph):
    backend = SimulatedBackend("paper", objective="latency")
    m = replicated_measurement(backend, tiny_branch_graph)
    assert m.ok and m.objective == "latency"
    assert m.latency_s == pytest.approx(min(_singles(backend, tiny_branch_graph)), rel=1e-12)


# ------------------------------------------------------------------------------------------- the agent
@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_the_agent_records_the_replicated_figure(tiny_branch_graph, objective):
    env = DevicePlacementEnv(tiny_branch_graph, backend="simulated", profile="paper", objective=objective)
    backend = env.unwrapped.backend
    singles = _singles(backend, tiny_branch_graph)
    factory = registry.agent_factories(["replicate"], backend.device_names)["replicate"]
    record = evaluate(factory, env, budget=10, seeds=[0], name="replicate")[0]
    assert set(RECORD_KEYS) <= set(record) and record["ok"]
    assert record["latency_s"] == pytest.approx(replicated_measurement(backend, tiny_branch_graph).latency_s)
    assert record["placements_measured"] == len(singles)  # each device alone, through the env
    best = int(np.argmin(singles))
    assert record["placement"] == [best] * tiny_branch_graph.n_ops  # its plan: the fastest single device
    assert record["predict_latency_s"] == pytest.approx(singles[best])
    assert record["speedup_vs_reference"] == pytest.approx(record["reference_latency_s"] / record["latency_s"])
    plan = record["extra"]["plan"]
    assert plan["objective"] == objective and plan["best_single_device"] == backend.device_names[best]
    assert plan["replicas"] == pytest.approx(dict(zip(backend.device_names, singles))) and plan["left_out"] == {}
    if objective == "throughput":
        assert plan["replicate"].startswith("replicate: whole model on 2 device(s)")
        assert "CUMULATIVE_THROUGHPUT" in plan["replicate"]
        assert record["latency_s"] < min(singles)
    else:
        assert "best single device" in plan["replicate"] and record["latency_s"] == pytest.approx(min(singles))


def test_compare_shows_replicate_beside_the_placements(tmp_path, capsys):
    assert "replicate" in registry.AGENTS  # compare's default agents are every registered one
    out = tmp_path / "thr.json"
    argv = ["compare", "--models", "tiny_branch", "--agents", "single-device", "replicate", "dp",
            "--backend", "simulated", "--objective", "throughput", "--budget", "6", "--seeds", "1", "--json", str(out),
            "--no-progress"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "replicate = no placement" in printed and "best placement vs replicate on tiny_branch:" in printed
    data = json.loads(out.read_text())
    rows = {row["agent"]: row for row in data["summary"]}
    assert set(rows) == {"CPU-only", "GPU-only", "replicate", "dp"}
    assert rows["replicate"]["latency_mean_s"] < min(rows[a]["latency_mean_s"] for a in ("CPU-only", "GPU-only"))
    [versus] = results.vs_replicate(data["summary"])
    assert versus["replicate_s"] == rows["replicate"]["latency_mean_s"]
    assert versus["latency_s"] == min(r["latency_mean_s"] for a, r in rows.items() if a != "replicate")
    assert f"x{versus['factor']:.2f}" in printed
    with open(tmp_path / "thr.csv", newline="") as table:  # the same CSV as every agent
        assert [r["latency_s"] for r in csv.DictReader(table) if r["agent"] == "replicate"] == \
            [str(rows["replicate"]["latency_mean_s"])]


def _record(agent: str, latency_s: float) -> dict:
    return {"model": "m", "agent": agent, "backend": "simulated", "seed": 0, "latency_s": latency_s, "ok": True,
            "reference_latency_s": 4.0, "placements_measured": 1, "wall_s": 0.0, "curve": [[1, latency_s]]}


def test_replicate_is_never_the_reference_of_the_gap_to_the_optimum():
    rows = {r["agent"]: r for r in results.summarize(
        [_record("CPU-only", 4.0), _record("replicate", 1.5), _record("dp", 2.5), _record("optimal", 2.0)])}
    assert rows["optimal"]["gap_to_optimal_pct"] == 0.0 and rows["dp"]["gap_to_optimal_pct"] == pytest.approx(25.0)
    assert rows["replicate"]["gap_to_optimal_pct"] == pytest.approx(-25.0)  # no placement: it may beat the optimum
    assert rows["replicate"]["best"] and not rows["optimal"]["best"]  # * = fastest, whatever it is
    [versus] = results.vs_replicate(list(rows.values()))
    assert versus == {"model": "m", "agent": "optimal", "latency_s": 2.0, "replicate_s": 1.5, "factor": 0.75}
    assert results.format_vs_replicate(list(rows.values())) == \
        "best placement vs replicate on m: optimal 2000.000 ms vs 1500.000 ms: x0.75 (replicate is faster)"
    assert results.format_vs_replicate([rows["dp"]]) == ""  # no replicate row, no line


# ------------------------------------------------------------------------------------------- real backend
def _real(objective: str):
    from placement_gym.backends.openvino import OpenVINOBackend

    return OpenVINOBackend(placement_gym.two_cpu_devices(), objective=objective, **FAST)


def test_real_replicas_run_side_by_side(tiny_branch_graph):
    backend = _real("throughput")
    try:
        m = replicated_measurement(backend, tiny_branch_graph)
        assert m.ok and not m.simulated and m.objective == "throughput", m.error
        assert np.isfinite(m.latency_s) and m.latency_s > 0 and len(m.samples) >= 3
        assert m.latency_s == pytest.approx(np.median(m.samples))
        assert m.breakdown["throughput_per_s"] == pytest.approx(1.0 / m.latency_s)
        assert set(replicas(m)) == set(backend.device_names) and m.breakdown["replicas"] == 2
        assert m.breakdown["requests_in_flight"] >= 2 and m.compile_s > 0

        break_device(backend, 1)  # the second device now refuses to compile anything: it holds no replica
        alone = replicated_measurement(backend, tiny_branch_graph)
        assert alone.ok and list(replicas(alone)) == [backend.device_names[0]] and alone.breakdown["replicas"] == 1
    finally:
        backend.close()


def test_real_replicate_under_latency_is_the_best_single_device(tiny_branch_graph):
    backend = _real("latency")
    try:
        m = replicated_measurement(backend, tiny_branch_graph)
        assert m.ok and m.objective == "latency"
        assert m.latency_s == pytest.approx(min(_singles(backend, tiny_branch_graph)))  # the same cached measurements
    finally:
        backend.close()


def test_the_leaderboard_ranks_placements_against_placements_and_replicate_against_the_best_of_them(tmp_path):
    """`benchmark.leaderboard` (the leaderboard's and the suites' ranking): replicate, no placement, is never the
    best known a placement's gap is taken to; its own row is its replicated figure against the best placement,
    below 0 where replicating is faster. Records of a real compare under throughput, where it is."""
    from placement_gym import benchmark
    out = tmp_path / "thr.json"
    assert cli.main(["compare", "--models", "tiny_branch", "--agents", "single-device", "replicate", "dp",
                     "--backend", "simulated", "--objective", "throughput", "--budget", "6", "--seeds", "1",
                     "--json", str(out), "--no-progress"]) == 0
    records = [{**r, "case": "paper:throughput"} for r in json.loads(out.read_text())["records"]]
    rows = {r["agent"]: r for r in benchmark.leaderboard(records, [6])}
    placements = [r["latency_s"] for r in records if r["agent"] != "replicate"]
    [replicated] = [r["latency_s"] for r in records if r["agent"] == "replicate"]
    assert replicated < min(placements)  # the premise: on this model replicating is faster
    assert rows["dp"]["best_known_s"] == pytest.approx(min(placements))
    assert min(r["gap_pct"][6] for a, r in rows.items() if a != "replicate") == pytest.approx(0.0)
    assert rows["replicate"]["gap_pct"][6] == pytest.approx(100 * (replicated / min(placements) - 1))
    assert rows["replicate"]["gap_pct"][6] < 0
    assert benchmark.format_gap(rows["replicate"]["gap_pct"][6]).startswith("-")
    assert benchmark.format_gap(rows["dp"]["gap_pct"][6]).startswith("+")
