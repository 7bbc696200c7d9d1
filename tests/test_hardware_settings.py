"""Hardware settings where placement pays: presets with three or more devices, op support and memory enforced,
the throughput objective, device observations, MaskablePPO, and the exact baselines (optimal, dp) under them.

Real parts: the simulated backend prices every placement; brute force over every placement of small graphs
checks the solvers; sb3-contrib's MaskablePPO trains on the env.
"""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from dataclasses import replace

from agents.baselines import ContiguousDP, ExactOptimum, RandomSearch, SingleDevice, contiguous_dp
from placement_gym import DevicePlacementEnv
from placement_gym.backends.profiles import PRESETS, Profile, device_memory_bytes, memory_need, weight_bytes
from placement_gym.backends.simulated import SimulatedBackend

from .known_optimum import chain_graph
from .test_baselines_optimal import brute_force, mixed_profile, random_dag
from .conftest import small_accelerator_profile


def with_device(profile: Profile, index: int, **changes) -> Profile:
    devices = list(profile.devices)
    devices[index] = replace(devices[index], **changes)
    return replace(profile, devices=devices)


# ------------------------------------------------------------------------------------------------ presets
@pytest.mark.parametrize("name", ["ai_pc", "server", "edge"])
def test_new_presets_have_three_or_more_described_devices(name):
    profile = Profile.preset(name)
    assert len(profile.devices) >= 3 and name in PRESETS
    assert "published benchmark figures" in profile.description and len(profile.sources) >= 3
    assert all(d.description and d.memory_bytes for d in profile.devices)
    assert Profile.from_dict(profile.to_dict()) == profile  # memory and op support survive a save


def test_the_ai_pc_npu_runs_a_whole_model_or_nothing(tiny_branch_graph):
    """OpenVINO's HETERO plugin does not run on the NPU: a placement sharing the model between the NPU and another
    device fails (a measured outcome naming the device); the whole model on the NPU alone runs."""
    backend = SimulatedBackend("ai_pc")
    assert backend.hetero_devices().tolist() == [True, True, False]
    n = tiny_branch_graph.n_ops
    alone = backend.measure(tiny_branch_graph, np.full(n, 2))
    mixed = np.full(n, 2)
    mixed[0] = 0
    failed = backend.measure(tiny_branch_graph, mixed)
    assert alone.ok and not failed.ok and "NPU cannot share a model" in failed.error
    cpu_gpu = np.arange(n) % 2  # CPU and GPU may share it
    assert backend.measure(tiny_branch_graph, cpu_gpu).ok


# ------------------------------------------------------------------------------------- support and memory
def test_an_op_on_a_device_that_cannot_run_it_fails_with_a_clear_error():
    graph = random_dag(8, 0)
    banned = graph.op_types[3]
    profile = with_device(mixed_profile(3, "sequential"), 0, unsupported_ops=[banned])
    backend = SimulatedBackend(profile)
    mask = backend.action_mask(graph)
    assert mask.shape == (8, 3) and mask.dtype == bool
    assert np.array_equal(mask[:, 0], [t != banned for t in graph.op_types]) and mask[:, 1:].all()
    m = backend.measure(graph, np.zeros(8, dtype=np.int64))
    assert not m.ok and f"{banned} is not supported on CPU" in m.error
    assert np.isinf(backend.node_device_cost(graph)[3, 0])

    env = DevicePlacementEnv(graph, backend=backend)
    env.reset(seed=0)
    assert env.reference_device == "GPU"  # the first device that runs every op
    assert np.array_equal(env.action_masks(), mask.reshape(-1))
    _, reward, _, _, info = env.step(np.zeros(8, dtype=np.int64))
    assert not info["ok"] and reward < 0 and "not supported" in info["error"]

    repairing = DevicePlacementEnv(graph, backend=backend, unsupported="repair")
    repairing.reset(seed=0)
    _, _, _, _, info = repairing.step(np.zeros(8, dtype=np.int64))
    moved = sum(t == banned for t in graph.op_types)
    assert info["ok"] and info["repaired_ops"] == moved and mask[np.arange(8), info["placement"]].all()
    with pytest.raises(ValueError, match="fail"):
        DevicePlacementEnv(graph, backend=backend, unsupported="ignore")


def test_a_device_out_of_memory_fails_and_the_reference_moves_on(tiny_branch_graph):
    graph = tiny_branch_graph
    need = device_memory_bytes(graph, np.zeros(graph.n_ops, dtype=np.int64), 1)[0]
    assert need > weight_bytes(graph).sum() > 0  # weights plus the largest working set
    profile = with_device(Profile.preset("paper"), 0, memory_bytes=need / 2)
    backend = SimulatedBackend(profile)
    m = backend.measure(graph, np.zeros(graph.n_ops, dtype=np.int64))
    assert not m.ok and m.error.startswith("out of memory on CPU:") and " > " in m.error
    env = DevicePlacementEnv(graph, backend=backend)
    env.reset(seed=0)
    assert env.reference_device == "GPU" and env.reference.ok


def test_the_observation_says_what_each_op_needs_in_memory_and_the_backend_checks_that(tiny_branch_graph):
    graph = tiny_branch_graph
    whole = device_memory_bytes(graph, np.zeros(graph.n_ops, dtype=np.int64), 1)[0]
    profile = with_device(Profile.preset("paper"), 1, memory_bytes=whole * 0.7)  # the GPU holds part of it
    env = DevicePlacementEnv(graph, backend=SimulatedBackend(profile))
    obs, _ = env.reset(seed=0)
    memory = obs["node_memory_bytes"]
    assert memory.shape == (graph.n_ops, 2) and memory.dtype == np.float32
    assert np.allclose(memory[:, 0], weight_bytes(graph)) and (memory[:, 1] > 0).all()  # weights, working set
    capacity = 10.0 ** obs["device_features"][:, 2].astype(np.float64)
    assert capacity[1] == pytest.approx(whole * 0.7, rel=1e-5)
    rng = np.random.default_rng(0)
    outcomes = set()
    for placement in rng.integers(0, 2, (40, graph.n_ops)):
        fits = bool((memory_need(memory, placement, 2) <= capacity * (1 - 1e-6)).all())
        _, _, _, _, info = env.step(placement)
        assert info["ok"] == fits, (placement, info["error"])
        outcomes.add(fits)
    assert outcomes == {True, False}  # both kinds were drawn


def test_no_device_for_an_op_is_a_clear_error():
    graph = random_dag(6, 1)
    profile = mixed_profile(2, "sequential")
    for k in range(2):
        profile = with_device(profile, k, unsupported_ops=[graph.op_types[0]])
    with pytest.raises(ValueError, match="no device"):
        DevicePlacementEnv(graph, backend=SimulatedBackend(profile))


# ------------------------------------------------------------------------------------------- throughput
def test_throughput_is_the_bottleneck_device_or_link():
    graph = random_dag(10, 2)
    profile = mixed_profile(3, "sequential")
    latency, throughput = SimulatedBackend(profile), SimulatedBackend(profile, objective="throughput")
    single = np.full(10, 1, dtype=np.int64)
    assert throughput.measure(graph, single).latency_s == pytest.approx(latency.measure(graph, single).latency_s)
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.integers(0, 3, 10)
        m = throughput.measure(graph, p)
        busiest = max(max(v for k, v in m.breakdown.items() if k.startswith("busy_s/")), m.breakdown["busiest_link_s"])
        assert m.objective == "throughput" and m.latency_s == pytest.approx(busiest + profile.split_overhead_s)
        assert m.throughput_per_s == pytest.approx(1 / m.latency_s)
        # Pipelining never loses to one synchronous inference of the same placement.
        assert m.latency_s <= latency.measure(graph, p).latency_s + 1e-12
    with pytest.raises(ValueError, match="throughput"):
        SimulatedBackend(profile, objective="fps")


def test_env_reports_the_objective():
    graph = random_dag(8, 3)
    env = DevicePlacementEnv(graph, backend="simulated", profile=mixed_profile(3, "sequential"), objective="throughput")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([0, 1, 2] * 2 + [0, 1]))
    assert info["objective"] == "throughput" == env.objective
    assert info["throughput_per_s"] == pytest.approx(1 / info["latency_s"])
    assert reward == pytest.approx(info["speedup"] - 1)  # relative throughput - 1


# ------------------------------------------------------------------------------------ device observations
def test_device_observations_permute_with_the_device_order():
    graph = random_dag(8, 4)
    profile = with_device(mixed_profile(3, "sequential"), 2, unsupported_ops=[graph.op_types[1]], memory_bytes=1e9)
    order = ["NPU", "CPU", "GPU"]
    a = DevicePlacementEnv(graph, backend=SimulatedBackend(profile))
    b = DevicePlacementEnv(graph, backend=SimulatedBackend(profile, devices=order))
    obs_a, _ = a.reset(seed=0)
    obs_b, _ = b.reset(seed=0)
    perm = [a.device_names.index(name) for name in order]
    for key in ("action_mask", "node_device_cost"):
        assert obs_a[key].shape == (8, 3)
        assert np.array_equal(obs_a[key][:, perm], obs_b[key])
    assert obs_a["device_features"].shape == (3, 5)
    assert np.array_equal(obs_a["device_features"][perm], obs_b["device_features"])
    assert not obs_a["action_mask"][1, 2] and obs_a["node_device_cost"][1, 2] == 1.0  # cannot run: the sentinel
    assert a.observation_space.contains(obs_a) and b.observation_space.contains(obs_b)
    # Device features tell devices apart (memory capacity is a column).
    assert obs_a["device_features"][2, 2] == pytest.approx(9.0) and obs_a["device_features"][0, 2] == pytest.approx(12.0)


def test_the_observation_says_what_a_submodel_costs():
    from placement_gym.backends.openvino import OpenVINOBackend
    from placement_gym.wrappers import CoarsenedPlacement

    for preset in ("paper", "ai_pc", "edge"):
        env = DevicePlacementEnv("tiny_branch", backend="simulated", profile=preset)
        obs, _ = env.reset(seed=0)
        assert obs["submodel_overhead"].dtype == np.float32 and env.observation_space.contains(obs)
        assert obs["submodel_overhead"][0] == pytest.approx(PRESETS[preset]().boundary_overhead_s)
    many = DevicePlacementEnv(["tiny_chain", "tiny_branch"], backend="simulated", profile="ai_pc")
    assert many.reset(seed=0)[0]["submodel_overhead"][0] == pytest.approx(PRESETS["ai_pc"]().boundary_overhead_s)
    coarse = CoarsenedPlacement(DevicePlacementEnv("tiny_branch", backend="simulated", profile="edge"), max_nodes=3)
    obs, _ = coarse.reset(seed=0)
    assert obs["submodel_overhead"][0] == pytest.approx(PRESETS["edge"]().boundary_overhead_s)
    assert coarse.observation_space.contains(obs)
    # the real backend does not measure it: 0 (unknown) unless given, e.g. from `placement-gym calibrate`
    assert OpenVINOBackend("CPU").submodel_overhead_s() == 0.0
    assert OpenVINOBackend("CPU", submodel_overhead_s=3e-4).describe()["submodel_overhead_s"] == 3e-4
    with pytest.raises(ValueError, match="submodel_overhead_s"):
        OpenVINOBackend("CPU", submodel_overhead_s=-1.0)


def test_maskable_ppo_trains_on_a_masked_env():
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    graph = random_dag(8, 5)
    banned = graph.op_types[0]
    profile = with_device(mixed_profile(3, "sequential"), 2, unsupported_ops=[banned])
    env = DevicePlacementEnv(graph, backend=SimulatedBackend(profile))
    model = MaskablePPO("MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")
    model.learn(64)
    obs, _ = env.reset(seed=0)
    for _ in range(10):
        action, _ = model.predict(obs, action_masks=get_action_masks(env), deterministic=False)
        assert env.action_masks().reshape(8, 3)[np.arange(8), action].all()  # never an unsupported device
        obs, _, _, _, info = env.step(action)
        assert info["ok"]


# -------------------------------------------------------------------------------- optimal and dp under it
@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_optimum_with_constraints_matches_brute_force(objective):
    graph = random_dag(7, 6)
    profile = with_device(mixed_profile(3, "sequential"), 2, unsupported_ops=[graph.op_types[2]])
    memory = device_memory_bytes(graph, np.zeros(7, dtype=np.int64), 1)[0]
    profile = with_device(profile, 0, memory_bytes=0.6 * memory)  # device 0 cannot hold everything
    backend = SimulatedBackend(profile, objective=objective)
    best_latency, _ = brute_force(backend, graph, 3)
    assert np.isfinite(best_latency)
    env = DevicePlacementEnv(graph, backend=backend)
    agent = ExactOptimum(time_limit_s=30).learn(env, budget=1, seed=0)
    assert agent.plan_info["status"] == "optimal" and agent.plan_info["label"] == "proven"
    assert agent.best_latency_s == pytest.approx(best_latency, rel=1e-9)


def test_optimum_keeps_its_time_limit_on_a_10k_op_graph():
    graph = random_dag(10_000, 8)
    for objective, schedule in [("latency", "parallel"), ("throughput", "sequential")]:
        env = DevicePlacementEnv(graph, backend=SimulatedBackend(mixed_profile(3, schedule), objective=objective))
        started = time.perf_counter()
        agent = ExactOptimum(time_limit_s=5).learn(env, budget=1, seed=0)
        # a ceiling, not a timing: the solver stops at its 5 s limit (the label says so); building the 10k-op
        # model around it takes what the machine gives, so the slack is wide
        assert time.perf_counter() - started < 60
        info = agent.plan_info
        assert 0 < info["lower_bound_s"] <= info["latency_s"] and info["label"].startswith("best found, bound")
        assert info["latency_s"] <= min(SingleDevice(d).learn(env, 1, 0).best_latency_s for d in range(3))


def test_dp_is_exact_on_a_chain_and_respects_constraints():
    graph = chain_graph(9)
    for objective in ("latency", "throughput"):
        backend = SimulatedBackend(mixed_profile(3, "sequential"), objective=objective)
        placement, info = contiguous_dp(backend, graph)
        # On a chain every tensor crosses one cut, so the program's cost is the simulator's.
        assert info["dp_estimate_s"] == pytest.approx(backend.measure(graph, placement).latency_s)
        contiguous = []
        for cuts in itertools.combinations(range(1, 9), 2):
            for devices in itertools.product(range(3), repeat=3):
                if objective == "throughput" and len(set(devices)) < 3:
                    continue  # a pipeline stage per device
                p = np.repeat(devices, np.diff([0, *cuts, 9]))
                contiguous.append(backend.measure(graph, p).latency_s)
        assert info["dp_estimate_s"] <= min(contiguous) + 1e-12
    profile = with_device(mixed_profile(3, "sequential"), 0, unsupported_ops=["MatMul"])
    env = DevicePlacementEnv(graph, backend=SimulatedBackend(profile))
    agent = ContiguousDP().learn(env, budget=1, seed=0)
    assert agent.best_placement is not None and not np.any(agent.best_placement == 0)


# -------------------------------------------------------------------------------------------------- CLI
def test_cli_lists_presets_and_compares_under_the_throughput_objective(tmp_path, capsys):
    import json

    from placement_gym import cli

    assert cli.main(["info", "--json"]) == 0
    presets = json.loads(capsys.readouterr().out)["presets"]
    assert {"paper", "ai_pc", "server", "edge"} <= set(presets)
    assert [d["name"] for d in presets["ai_pc"]["devices"]] == ["CPU", "GPU", "NPU"]
    assert [d["hetero"] for d in presets["ai_pc"]["devices"]] == [True, True, False]  # the NPU: a whole model or none

    out = tmp_path / "thr.json"
    argv = ["compare", "--models", "tiny_branch", "--agents", "single-device", "random", "dp",
            "--budget", "4", "--seeds", "1", "--profile", "ai_pc", "--objective", "throughput",
            "--unsupported", "repair", "--json", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "1/throughput" in printed and "NPU-only" in printed
    records = json.loads(out.read_text())["records"]
    assert all(r["backend_settings"]["objective"] == "throughput" for r in records)
    best_single = min(r["latency_s"] for r in records if r["agent"].endswith("-only"))
    assert next(r for r in records if r["agent"] == "dp")["latency_s"] < best_single  # a pipeline beats one device


def test_optimal_never_reports_worse_than_a_placement_in_its_table():
    # A time limit too short to solve anything: the solver's own best is a heuristic start. Given a better
    # placement found by another row (compare's warm starts), it reports that one, says whose, keeps its bound.
    from placement_gym import evaluation

    graph = random_dag(9, 3)
    backend = SimulatedBackend(mixed_profile(3, "parallel"))
    optimum_s, best = brute_force(backend, graph, 3)
    env = DevicePlacementEnv(graph, backend=backend)
    solver = ExactOptimum(time_limit_s=0.0)
    assert isinstance(solver, evaluation.TakesWarmStarts)
    solver.learn(env, 1, 0)
    alone = solver.plan_info
    assert alone["best_from"] == "solver" and alone["status"] == "time_limit"
    assert alone["latency_s"] > optimum_s * (1 + 1e-9)  # the test needs a solver that did not find the optimum
    solver.warm_start([("someone", best)])
    solver.learn(env, 1, 0)
    assert solver.plan_info["best_from"] == "someone"
    assert solver.best_latency_s == pytest.approx(optimum_s)
    assert solver.plan_info["lower_bound_s"] == alone["lower_bound_s"] <= optimum_s * (1 + 1e-9)
    # And through compare: the table's other rows warm-start it.
    records, _ = evaluation.compare(
        [graph], {"random": RandomSearch, "optimal": lambda: ExactOptimum(time_limit_s=0.0)},
        lambda model, families: DevicePlacementEnv(model, backend=backend), budget=200, seeds=[0])
    by_agent = {r["agent"]: r["latency_s"] for r in records}
    assert by_agent["optimal"] <= by_agent["random"] * (1 + 1e-12)


@pytest.mark.slow
def test_dp_plans_within_memory_where_segments_share_a_device():
    # A small fast accelerator, ResNet-50, latency: the program's best contiguous plan puts several segments on its
    # 64 MB, each fitting alone but not together; the baseline re-plans with one segment per device.
    from placement_gym.models import load_graph

    graph = load_graph("resnet")
    backend = SimulatedBackend(small_accelerator_profile())
    first, _ = contiguous_dp(backend, graph)
    assert not backend.measure(graph, first).ok and "out of memory" in backend.measure(graph, first).error
    env = DevicePlacementEnv(graph, backend=backend)
    dp = ContiguousDP().learn(env, 1, 0)
    singles = [backend.measure(graph, np.full(graph.n_ops, d, dtype=np.int64)) for d in range(3)]
    assert dp.run_summary.final.ok and dp.plan_info["one_segment_per_device"]
    assert dp.best_latency_s < min(m.latency_s for m in singles if m.ok)
