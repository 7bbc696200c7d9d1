"""The measurement farm on Ray: a local 2-worker Ray instance (the `local_ray` fixture), real workers, real
backends (the simulator and OpenVINO on a tiny model), and ``compare --ray`` against the serial compare; workers
really killed (``ray.kill``, a job's SIGKILL to its own process) for the farm's and compare's recovery."""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import ray  # the README's test command installs it (the "test" extra includes the "distributed" one)

from placement_gym import DevicePlacementEnv, cli
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.distributed import BENCH_RESOURCE, FarmBackend, GraphPayload, connect, local_core_shares

from .conftest import TWO_DEVICES


def test_local_address_offers_one_bench_unit_per_worker(local_ray):
    assert local_ray.slots == 2 and ray.cluster_resources()[BENCH_RESOURCE] == 2
    with pytest.raises(ValueError, match="local:N"):
        connect("local:0")


def test_graphs_cross_processes_intact(tiny_branch_graph):
    back = GraphPayload.of(tiny_branch_graph).load()
    assert back.op_names == tiny_branch_graph.op_names and back.name == tiny_branch_graph.name
    assert np.array_equal(back.edge_index, tiny_branch_graph.edge_index)
    assert np.array_equal(back.flops, tiny_branch_graph.flops)


def test_farm_measures_a_batch_in_order_as_one_backend_would(local_ray, tiny_branch_graph):
    g = tiny_branch_graph
    farm = FarmBackend("simulated", "auto", address="local:2", profile="ai_pc", objective="throughput")
    local = SimulatedBackend("ai_pc", objective="throughput")
    rng = np.random.default_rng(0)
    placements = [rng.integers(0, 3, g.n_ops) for _ in range(9)]
    placements.append(placements[2].copy())  # a repeat is measured once
    got = farm.measure_many(g, placements)
    assert len(got) == len(placements) and farm.simulated and farm.device_names == local.device_names
    for placement, m in zip(placements, got):
        expected = local.measure(g, placement)
        assert (m.ok, m.latency_s, m.error, m.n_submodels) == (expected.ok, expected.latency_s, expected.error,
                                                                expected.n_submodels)
    assert got[-1].cached and not got[2].cached
    assert farm.measure(g, placements[0]).cached and not farm.measure(g, placements[0], use_cache=False).cached
    assert np.array_equal(farm.action_mask(g), local.action_mask(g))
    assert np.allclose(farm.device_features(), local.device_features())
    assert farm.describe()["farm"]["workers"] == 2
    farm.close()


def test_local_workers_are_pinned_to_their_own_cores(local_ray):
    """Each local worker runs on its own share of this machine's cores (two unpinned OpenVINO workers on 2 cores
    slow each other down); a worker per core at most, and no pinning when asked not to."""
    cores = sorted(os.sched_getaffinity(0))
    assert local_core_shares(2) == [cores[:len(cores) // 2], cores[len(cores) // 2:]] or len(cores) < 2
    assert local_core_shares(len(cores) + 1) == [None] * (len(cores) + 1)
    farm = FarmBackend("simulated", "auto", address="local:2")
    if len(cores) >= 2:
        assert farm.pinned and farm.cores == local_core_shares(2)
        assert not set(farm.cores[0]) & set(farm.cores[1])
    assert farm.describe()["farm"]["cores"] == farm.cores
    farm.close()
    free = FarmBackend("simulated", "auto", address="local:2", pin=False)
    assert not free.pinned and free.cores == [cores, cores]
    free.close()


def test_farm_measures_real_placements_and_drives_the_env(local_ray, tiny_branch_graph):
    g = tiny_branch_graph
    farm = FarmBackend("openvino", TWO_DEVICES, address="local:2", warmup=1, repeats=3, target_rel_halfwidth=None)
    env = DevicePlacementEnv(g, backend=farm)
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].shape == (g.n_ops, 2) and obs["device_features"].shape[0] == 2
    split = (np.arange(g.n_ops) >= g.n_ops // 2).astype(np.int64)
    _, _, _, _, info = env.step(split)
    assert info["ok"] and info["n_submodels"] >= 2 and not info["simulated"] and info["latency_s"] > 0
    many = farm.measure_many(g, [np.zeros(g.n_ops, dtype=np.int64), np.ones(g.n_ops, dtype=np.int64), split])
    assert all(m.ok and m.latency_s > 0 for m in many) and many[2].cached
    env.close()


def test_compare_on_ray_gives_the_serial_records(local_ray, tmp_path):
    common = ["compare", "--models", "tiny_branch", "tiny_chain", "--agents", "single-device", "random", "post",
              "optimal", "--backend", "simulated", "--profile", "ai_pc", "--budget", "12", "--seeds", "2",
              "--no-progress", "--agent-option", "post:n_groups=4"]
    assert cli.main([*common, "--json", str(tmp_path / "serial.json")]) == 0
    assert cli.main([*common, "--json", str(tmp_path / "ray.json"), "--ray", "local:2"]) == 0
    serial, farmed = (json.loads((tmp_path / f).read_text())["records"] for f in ("serial.json", "ray.json"))
    same = ("model", "agent", "seed", "latency_s", "placement", "predict_latency_s", "curve", "placements_to_within")
    assert [[r[k] for k in same] for r in farmed] == [[r[k] for k in same] for r in serial]
    assert len(serial) == 2 * (3 + 1 + 1 + 1) * 2  # models x (3 single devices, random, post, optimal) x seeds
    # resumed on Ray from the first half of the runs: the others run, the optimum warm-started as before
    half = json.loads((tmp_path / "serial.json").read_text())
    half = dict(half, incomplete=True, records=half["records"][:len(serial) // 2 + 1])
    (tmp_path / "resumed.json").write_text(json.dumps(half))
    assert cli.main([*common, "--json", str(tmp_path / "resumed.json"), "--ray", "local:2", "--resume"]) == 0
    resumed = json.loads((tmp_path / "resumed.json").read_text())["records"]
    assert [[r[k] for k in same] for r in resumed] == [[r[k] for k in same] for r in serial]
    for records in (serial, farmed):  # the workers build the agents with the same --agent-option settings
        post = [r for r in records if r["agent"] == "post"]
        assert post and all(r["extra"]["hyperparameters"]["n_groups"] == 4 and r["search"] == [] for r in post)


def test_compare_on_ray_keeps_every_other_record_when_a_job_kills_its_worker(local_ray, tmp_path, capsys):
    """A job whose worker dies on every try (Ray's retries used up) is reported as skipped, with the reason, and
    every other run's record is written; the command succeeds, as it does for a skipped run. The exact optimum,
    which waits for every other job of its model (warm starts), still runs."""
    killer = "tests.ray_agents:WorkerKiller"
    path = tmp_path / "ray.json"
    assert cli.main(["compare", "--models", "tiny_chain", "--agents", "single-device", killer, "random", "optimal",
                     "--agent-option", f"{killer}:die=true", "--backend", "simulated", "--profile", "server",
                     "--budget", "4", "--seeds", "1", "--no-progress", "--ray", "local:2", "--json", str(path)]) == 0
    saved = json.loads(path.read_text())
    singles = [f"{name}-only" for name in SimulatedBackend("server").device_names]
    assert [r["agent"] for r in saved["records"]] == [*singles, "random", "optimal"]
    assert all(r["ok"] for r in saved["records"])
    [skip] = saved["skipped"]
    assert {k: skip[k] for k in ("model", "agent", "seeds")} == {"model": "tiny_chain", "agent": "worker-killer",
                                                                  "seeds": [0]}
    assert skip["reason"].startswith("WorkerCrashedError: ")
    assert f"skipped worker-killer on tiny_chain: {skip['reason']}" in capsys.readouterr().out


def test_labels_computed_on_ray_are_the_in_process_ones_and_each_is_cached(local_ray, tmp_path):
    """The imitation placer's labels (`agents.imitation.labels.labels_for`) as Ray tasks: the same labels as one
    process computes, in the order asked, each written to the cache; a failing task raises on the driver once
    the others are done and cached."""
    from agents.imitation.labels import LabelCache, LabelSettings, labels_for

    fast = LabelSettings(planners=("cheapest", "dp", "topo"), local_search_budget=0, optimal_time_limit_s=0.0)
    graphs = ["synthetic:20:2", "synthetic:12:0", "synthetic:16:1"]
    farmed = labels_for(graphs, "ai_pc", "throughput", fast, LabelCache(tmp_path / "ray"), ray="local:2")
    here = labels_for(graphs, "ai_pc", "throughput", fast, LabelCache(tmp_path / "here"), workers=1)
    assert [label.graph for label in farmed] == graphs
    assert [(label.placement.tolist(), label.latency_s, label.source) for label in farmed] == \
        [(label.placement.tolist(), label.latency_s, label.source) for label in here]
    assert len(list((tmp_path / "ray").iterdir())) == 3

    with pytest.raises(ValueError, match="N must be >= 1"):
        labels_for(["synthetic:12:0", "synthetic:0:0"], "ai_pc", "throughput", fast, LabelCache(tmp_path / "bad"),
                   ray="local:2")
    assert [p.name.split("-")[0] for p in (tmp_path / "bad").iterdir()] == ["synthetic_12_0"]


def _wait_until_dead(worker) -> None:
    """Block until actor `worker`, just given to ``ray.kill`` (asynchronous: a call may still be answered), is
    gone, so that a test's next call finds it dead."""
    deadline = time.monotonic() + 300  # a ceiling, not a timer: the loop ends when the worker is gone
    with pytest.raises(ray.exceptions.RayActorError):
        while time.monotonic() < deadline:
            ray.get(worker.info.remote(), timeout=300)


def _same(got, expected) -> bool:
    return (got.ok, got.latency_s, got.error, got.n_submodels) == (expected.ok, expected.latency_s, expected.error,
                                                                   expected.n_submodels)


def test_a_new_graph_after_worker_0_died_is_served_by_a_live_worker(local_ray, tiny_chain_graph, tiny_branch_graph):
    """An env on a graph the farm has not seen, after worker 0 died: its device observations and steps come from
    the live workers (and worker 0's replacement), as a healthy farm's would."""
    farm = FarmBackend("simulated", "auto", address="local:2", profile="ai_pc")
    local = SimulatedBackend("ai_pc")
    assert farm.measure(tiny_chain_graph, np.zeros(tiny_chain_graph.n_ops, dtype=np.int64)).ok
    ray.kill(farm.workers[0])
    _wait_until_dead(farm.workers[0])
    g = tiny_branch_graph
    env = DevicePlacementEnv(g, backend=farm)
    obs, _ = env.reset(seed=0)
    assert np.array_equal(obs["action_mask"], local.action_mask(g))
    placement = (np.arange(g.n_ops) % 2).astype(np.int64)
    _, _, _, _, info = env.step(placement)
    assert info["ok"] and info["latency_s"] == local.measure(g, placement).latency_s
    farm.close()


def test_a_placement_sent_to_a_dead_worker_is_measured_by_a_live_one(local_ray, tiny_branch_graph):
    """Both workers' placements are measured, equal to what one healthy backend gives, though worker 0 is dead
    when they are sent; the dead worker is replaced (on its cores) and the farm has its two workers again."""
    g = tiny_branch_graph
    farm = FarmBackend("simulated", "auto", address="local:2", profile="ai_pc")
    local = SimulatedBackend("ai_pc")
    rng = np.random.default_rng(1)
    first = rng.integers(0, 2, g.n_ops)  # CPU and GPU: the NPU runs a whole model or nothing
    assert _same(farm.measure(g, first), local.measure(g, first))  # the graph is on worker 0 before it dies
    cores, dead = list(farm.cores), farm.workers[0]
    ray.kill(dead)
    _wait_until_dead(dead)
    placements = [rng.integers(0, 2, g.n_ops) for _ in range(4)]
    got = farm.measure_many(g, placements)
    assert all(m.ok and not m.cached for m in got)
    assert all(_same(m, local.measure(g, p)) for m, p in zip(got, placements))
    assert farm.live_workers == [0, 1] and farm.replaced == 1 and farm.workers[0] is not dead
    assert farm.cores == cores  # the replacement runs where the dead worker ran
    assert [info["name"] for info in ray.get([w.info.remote() for w in farm.workers])] == [local.name] * 2
    farm.close()


@ray.remote(resources={BENCH_RESOURCE: 1}, num_cpus=0)
class _BenchHolder:
    """Holds one bench unit, so that no measurement worker can start while it lives."""

    def ready(self) -> bool:
        return True


def test_a_placement_is_a_failed_measurement_only_when_no_worker_can_start(local_ray, tiny_chain_graph):
    """Every worker dead and their replacements unable to start (every bench unit taken): the placements are
    failed measurements, not a crash, and not remembered as results; what was measured before stays known."""
    g = tiny_chain_graph
    farm = FarmBackend("simulated", "auto", address="local:2", start_timeout_s=1.0)
    placements = [np.full(g.n_ops, d, dtype=np.int64) for d in range(2)]
    assert all(m.ok for m in farm.measure_many(g, placements))
    for worker in farm.workers:  # every node goes down
        ray.kill(worker)
    for worker in farm.workers:
        _wait_until_dead(worker)
    holders = [_BenchHolder.remote() for _ in range(local_ray.slots)]  # and their bench units go to others
    ray.get([h.ready.remote() for h in holders])
    fresh = [np.arange(g.n_ops, dtype=np.int64) % 2, 1 - np.arange(g.n_ops, dtype=np.int64) % 2]
    after = farm.measure_many(g, fresh)
    assert [m.ok for m in after] == [False, False] and all("no measurement worker left" in m.error for m in after)
    assert farm.live_workers == [] and farm.replaced == 0
    assert all(m.cached for m in farm.measure_many(g, placements))  # what was measured before stays known
    assert not farm.measure(g, fresh[0]).cached  # a lost measurement is not remembered as a result
    for holder in holders:
        ray.kill(holder)
    farm.close()


def test_the_ray_session_lives_in_a_temporary_folder(local_ray):
    """The test Ray instance's session folder (its sockets, logs) is under the fixture's temporary folder, which
    the fixture removes (and asserts removed) at the end, instead of under /tmp/ray, where Ray leaves it."""
    [node] = ray.nodes()
    assert node["ObjectStoreSocketName"].startswith(str(local_ray.temp_dir) + os.sep)
