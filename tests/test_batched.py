"""Batched simulation (`SimulatedBackend.measure_many`) and the native vector env (`DevicePlacementVectorEnv`).

Real parts only: the simulated backend prices every placement; the vector env's sub-envs are real
`DevicePlacementEnv`s; Gymnasium's own `SyncVectorEnv` is the reference for the vector env's outputs.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode

from placement_gym import ComputationGraph, DevicePlacementEnv, load_graph
from placement_gym.backends import Backend, Measurement
from placement_gym.backends.base import MeasurementBatch
from placement_gym.backends.profiles import PRESETS, Profile, device_memory_bytes
from placement_gym.backends import simulated
from placement_gym.backends.simulated import HeteroCutter, SimulatedBackend
from placement_gym.vector_env import DevicePlacementVectorEnv

from .test_baselines_optimal import mixed_profile, random_dag
from agents.search.config import hybrid_options
from .conftest import load_example


def failing_profile(graph: ComputationGraph, schedule: str = "sequential") -> Profile:
    """Three devices of `mixed_profile`: the second holds 40% of what the whole graph needs (placements putting
    most ops there run out of memory), the third cannot run the graph's most common op type."""
    base = mixed_profile(3, schedule)
    whole = float(device_memory_bytes(graph, np.zeros(graph.n_ops, dtype=np.int64), 1)[0])
    types, counts = np.unique(graph.op_types, return_counts=True)
    cpu, gpu, npu = base.devices
    return dataclasses.replace(base, devices=[
        cpu, dataclasses.replace(gpu, memory_bytes=0.4 * whole),
        dataclasses.replace(npu, unsupported_ops=[str(types[counts.argmax()])])], name=f"failing-{schedule}")


def placements_to_price(n_ops: int, n_devices: int, seed: int) -> np.ndarray:
    """(B, N): random, blocky (runs of 3 ops), contiguous splits, every single-device one and a repeat."""
    rng = np.random.default_rng(seed)
    blocky = np.repeat(rng.integers(0, n_devices, (8, n_ops // 3 + 1)), 3, axis=1)[:, :n_ops]
    contiguous = (np.arange(n_ops)[None, :] >= rng.integers(1, n_ops, (6, 1))) * rng.integers(1, n_devices, (6, 1))
    single = np.repeat(np.arange(n_devices)[:, None], n_ops, axis=1)
    random = rng.integers(0, n_devices, (24, n_ops))
    return np.concatenate([random, blocky, contiguous, single, random[:2]]).astype(np.int64)


def graphs(tiny_branch_graph, tiny_chain_graph) -> list[ComputationGraph]:
    return [tiny_branch_graph, tiny_chain_graph, random_dag(9, 2), random_dag(14, 3)]


# ================================================================================ measure_many == measure
@pytest.mark.parametrize("objective", ["latency", "throughput"])
@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize("profile", [*PRESETS, "mixed2", "mixed3", "failing"])
def test_batched_prices_equal_one_at_a_time(profile, schedule, objective, tiny_branch_graph, tiny_chain_graph):
    for k, graph in enumerate(graphs(tiny_branch_graph, tiny_chain_graph)):
        if profile == "failing":
            resolved = failing_profile(graph, schedule)
        elif profile.startswith("mixed"):
            resolved = mixed_profile(int(profile[-1]), schedule)
        else:
            resolved = profile
        backend = SimulatedBackend(resolved, schedule=schedule, objective=objective)
        placements = placements_to_price(graph.n_ops, len(backend.device_names), seed=k)
        one_at_a_time = [backend.measure(graph, p) for p in placements]
        # The same placements priced as one batch, shuffled, and in uneven pieces: each price is its own.
        assert backend.measure_many(graph, placements) == one_at_a_time
        order = np.random.default_rng(k).permutation(len(placements))
        assert backend.measure_many(graph, placements[order]) == [one_at_a_time[i] for i in order]
        pieces = [backend.measure_many(graph, list(placements[a:b])) for a, b in ((0, 1), (1, 6), (6, len(placements)))]
        assert sum(pieces, []) == one_at_a_time
        assert all(m.simulated and m.objective == objective for m in one_at_a_time)
        if profile == "failing":  # both failure kinds are among them, as measured outcomes with their reasons
            errors = [m.error for m in one_at_a_time if not m.ok]
            assert any(e.startswith("out of memory on GPU") for e in errors)
            assert any("is not supported on NPU" in e for e in errors)


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_a_batch_priced_by_several_threads_is_priced_as_one_at_a_time(objective, monkeypatch, tiny_branch_graph):
    """Shares of a batch priced at once on threads (forced here: no minimum time per share) give each placement
    the price it gets alone, in order, whatever the number of threads or shares (uneven ones included)."""
    monkeypatch.setattr(simulated, "MIN_SECONDS_PER_THREAD", 0.0)
    for k, graph in enumerate((tiny_branch_graph, random_dag(300, 4))):
        placements = placements_to_price(graph.n_ops, 3, seed=k)
        one_at_a_time = [SimulatedBackend(failing_profile(graph), objective=objective, threads=1).measure(graph, p)
                         for p in placements]
        for threads in (2, 3, 7):
            backend = SimulatedBackend(failing_profile(graph), objective=objective, threads=threads)
            backend.measure_many(graph, placements[:9])  # the kernel's time per placement, which sizes the shares
            assert backend.measure_many(graph, placements) == one_at_a_time
    with pytest.raises(ValueError, match="threads must be a positive integer or None"):
        SimulatedBackend("paper", threads=0)


def _price_on_threads_and_exit(graph: ComputationGraph, placements: np.ndarray, expected: list) -> None:
    """In a forked child (the parent's monkeypatched `MIN_SECONDS_PER_THREAD` of 0 comes with it)."""
    backend = SimulatedBackend("paper", threads=2)
    backend.measure_many(graph, placements[:9])
    os._exit(0 if backend.measure_many(graph, placements) == expected else 3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_prices_on_threads_of_its_own(monkeypatch, tiny_branch_graph):
    """The parent's pricing threads are not copied into a forked child (a subprocess vector env, a worker pool):
    the child starts its own instead of handing work to threads that do not exist in it (which would hang)."""
    monkeypatch.setattr(simulated, "MIN_SECONDS_PER_THREAD", 0.0)
    placements = placements_to_price(tiny_branch_graph.n_ops, 2, seed=0)
    backend = SimulatedBackend("paper", threads=2)
    backend.measure_many(tiny_branch_graph, placements[:9])
    expected = backend.measure_many(tiny_branch_graph, placements)  # the parent's pool threads are running now
    child = multiprocessing.get_context("fork").Process(target=_price_on_threads_and_exit,
                                                        args=(tiny_branch_graph, placements, expected))
    child.start()
    child.join(30)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0


def test_batched_failures_keep_their_text_and_the_rest_are_priced(tiny_branch_graph):
    backend = SimulatedBackend(failing_profile(tiny_branch_graph))
    n = tiny_branch_graph.n_ops
    on_gpu, on_npu, on_cpu = np.full(n, 1), np.full(n, 2), np.zeros(n, dtype=np.int64)
    batch = backend.measure_many(tiny_branch_graph, np.stack([on_gpu, on_cpu, on_npu]))
    assert [m.ok for m in batch] == [False, True, False]
    assert batch[0].error == backend.check_feasible(tiny_branch_graph, on_gpu)
    assert batch[0].error.startswith("out of memory on GPU: ")
    assert batch[2].error == backend.check_feasible(tiny_branch_graph, on_npu)
    assert batch[1] == backend.measure(tiny_branch_graph, on_cpu) and batch[1].latency_s > 0


def test_measure_many_takes_the_use_cache_flag_and_empty_batches(tiny_chain_graph):
    backend = SimulatedBackend("paper")
    p = np.array([0, 1] * 4 + [0])
    assert backend.measure_many(tiny_chain_graph, [p], use_cache=False) == [backend.measure(tiny_chain_graph, p, use_cache=False)]
    assert backend.measure_many(tiny_chain_graph, np.zeros((0, tiny_chain_graph.n_ops), dtype=np.int64)) == []
    with pytest.raises(ValueError, match=r"shape \(B, 9\)"):
        backend.measure_many(tiny_chain_graph, np.zeros((2, 8), dtype=np.int64))
    with pytest.raises(ValueError, match="device indices"):
        backend.measure_many(tiny_chain_graph, np.full((2, 9), 5))


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_measure_batch_columns_are_those_of_the_measurements(objective, tiny_branch_graph):
    """The simulated backend's columns (filled from its arrays) equal the columns read from its `Measurement`s,
    failures and the throughput objective's partial breakdowns included (keys in the same order)."""
    backend = SimulatedBackend(failing_profile(tiny_branch_graph), objective=objective)
    n = tiny_branch_graph.n_ops
    few_on_gpu = np.zeros(n, dtype=np.int64)
    few_on_gpu[10:13] = 1
    # Random and blocky placements, then one on the CPU alone followed by a split one (whose busy keys come last).
    placements = np.concatenate([placements_to_price(n, 3, seed=2), np.stack([np.zeros(n, dtype=np.int64), few_on_gpu])])
    for rows in (slice(None), slice(len(placements) - 2, None), slice(0, 1)):
        batch = backend.measure_batch(tiny_branch_graph, placements[rows])
        read = MeasurementBatch.of(backend.measure_many(tiny_branch_graph, placements[rows]))
        for columns, read_columns in ((batch.columns, read.columns), (batch.breakdown, read.breakdown),
                                      (batch.breakdown_present, read.breakdown_present)):
            assert list(columns) == list(read_columns)  # the same keys in the same order
            for key, column in columns.items():
                assert column.dtype == read_columns[key].dtype and column.tolist() == read_columns[key].tolist(), key
        assert batch.measurements() == read.measurements() and len(batch) == len(placements[rows])
    assert not all(backend.measure_batch(tiny_branch_graph, placements).columns["ok"])  # failures among them
    assert len(backend.measure_batch(tiny_branch_graph, placements[:0])) == 0


def test_cut_of_a_batch_is_the_cut_of_each_placement():
    """On a graph big enough for both ways of finding each subgraph's downstream ops (`words > 32`)."""
    for graph in (random_dag(40, 7), random_dag(2200, 8)):
        cutter = HeteroCutter(graph)
        placements = placements_to_price(graph.n_ops, 2, seed=9)[:12]
        counts, labels = cutter.cut_many(placements)
        for p, count, label in zip(placements, counts, labels):
            alone = cutter.cut(p)
            assert alone[0] == count and np.array_equal(alone[1], label)
        assert counts.min() >= 1 and counts.max() > 2


def reference_cut_and_crossings(graph: ComputationGraph, placement: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """HETERO's cut and the crossing tensors of one placement, in plain Python sets (slow, obviously the rule):
    labels (N,) (smallest op of each submodel) and the crossing edges in the order the simulator adds them (by
    producer op, then consumer submodel label; the lowest edge of each (producer, consumer submodel))."""
    n = graph.n_ops
    edges = list(zip(graph.edge_index[0].tolist(), graph.edge_index[1].tolist()))
    descendants = [{v} for v in range(n)]
    for v in range(n - 1, -1, -1):
        for s, d in edges:
            if s == v:
                descendants[v] |= descendants[d]
    keep = {k for k, (s, d) in enumerate(edges) if placement[s] == placement[d]}

    def components() -> list[int]:
        label = list(range(n))
        changed = True
        while changed:
            changed = False
            for k in keep:
                s, d = edges[k]
                low = min(label[s], label[d])
                if label[s] != low or label[d] != low:
                    label[s] = label[d] = low
                    changed = True
        return label

    label = components()
    while True:
        reach: dict[int, set[int]] = {}
        for s, d in edges:
            if label[s] != label[d]:
                reach.setdefault(label[s], set()).update(descendants[d])
        late = {v for v in range(n) if v in reach.get(label[v], ())}
        cut = {k for k in keep if edges[k][0] not in late and edges[k][1] in late}
        if not cut:
            break
        keep -= cut
        label = components()
    first: dict[tuple[int, int], int] = {}
    for k, (s, d) in enumerate(edges):
        if label[s] != label[d]:
            first.setdefault((s, label[d]), k)
    return np.array(label), [first[key] for key in sorted(first)]


def test_compiled_cut_and_sums_match_a_plain_python_reference():
    """The kernel's cut, crossing tensors and sums, on graphs taking each of its ways of finding the ops downstream
    of a subgraph's exits (descendant bitsets up to 32 words; pairs or sparse rows beyond)."""
    for graph, count in ((random_dag(40, 7), 30), (random_dag(300, 3), 12), (random_dag(2200, 8), 3)):
        backend = SimulatedBackend(mixed_profile(3, "sequential"))
        prepared = backend.prepare(graph)
        placements = placements_to_price(graph.n_ops, 3, seed=4)[:count]
        measurements = backend.measure_many(graph, placements)
        counts, labels = prepared.cutter.cut_many(placements)
        for placement, m, n_submodels, label in zip(placements, measurements, counts, labels):
            expected_labels, crossing = reference_cut_and_crossings(graph, placement)
            assert np.array_equal(label, expected_labels)
            if len(set(placement.tolist())) > 1:
                assert m.n_submodels == n_submodels == len(set(expected_labels.tolist()))
            transfer_s = 0.0
            for k in crossing:
                s, d = graph.edge_index[:, k]
                transfer_s += prepared.edge_seconds[placement[s] * 3 + placement[d], k]
            assert m.breakdown["transfer_s"] == transfer_s and m.breakdown["transfers"] == len(crossing)
            compute = [0.0] * 3
            for i, device in enumerate(placement):
                compute[device] += prepared.op_seconds[i, device]
            # a fused op separated from its producer by a device boundary is a kernel of its own
            for k, (op, parent) in enumerate(zip(prepared.fused.tolist(), prepared.fused_parent.tolist())):
                if placement[op] != placement[parent]:
                    compute[placement[op]] += prepared.unfused_s[k, placement[op]]
            assert [m.breakdown[f"compute_s/{name}"] for name in backend.device_names] == \
                pytest.approx(compute, rel=1e-12, abs=0)


def test_cut_of_a_real_model_matches_the_plain_python_reference():
    """ResNet-50: runs of consecutive ops on one device leave no exit that can lead back into its own subgraph
    (the kernel then finishes the cut without a bitset round), random placements need several rounds."""
    graph = load_graph("resnet")
    cutter = HeteroCutter(graph)
    rng = np.random.default_rng(5)
    n = graph.n_ops
    runs = np.repeat(rng.integers(0, 2, (6, n // 16 + 1)), 16, axis=1)[:, :n]
    placements = np.concatenate([runs, rng.integers(0, 2, (6, n)), rng.integers(0, 3, (4, n))])
    counts, labels = cutter.cut_many(placements)
    for placement, count, label in zip(placements, counts, labels):
        expected, _ = reference_cut_and_crossings(graph, placement)
        assert np.array_equal(label, expected) and count == len(set(expected.tolist()))


def test_a_backend_without_its_own_measure_many_inherits_the_loop(tiny_chain_graph):
    class Ops(Backend):  # a user's backend: latency = 1 + the number of ops on device 0, in ms
        name, simulated, device_names, virtual_devices = "ops", True, ["a", "b"], [False, False]

        def measure(self, graph, placement, *, use_cache=True):
            return Measurement(latency_s=1e-3 * float(np.sum(np.asarray(placement) == 0) + 1), simulated=True)

        def describe(self):
            return {}

        def close(self):
            pass

    placements = np.eye(2, tiny_chain_graph.n_ops, dtype=np.int64)
    assert [m.latency_s for m in Ops().measure_many(tiny_chain_graph, placements)] == pytest.approx([9e-3, 9e-3])
    assert isinstance(Ops(), Backend) and isinstance(SimulatedBackend(), Backend)


def test_a_backend_without_measure_many_is_refused_with_how_to_get_it(tiny_chain_graph):
    class OnlyMeasures:  # structurally a backend of the old protocol: no measure_many, no Backend base class
        name, simulated, device_names, virtual_devices = "old", True, ["a", "b"], [False, False]

        def measure(self, graph, placement, *, use_cache=True):
            return Measurement(latency_s=1e-3)

        def describe(self):
            return {}

        def close(self):
            pass

    with pytest.raises(TypeError, match=r"'measure_many', .*\(subclass placement_gym.backends.Backend"):
        DevicePlacementEnv(tiny_chain_graph, backend=OnlyMeasures())


# ================================================================================ the native vector env
class CountingSimulatedBackend(SimulatedBackend):
    """The simulated backend, recording the size of every batch it prices and every single measurement."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []
        self.singles = 0

    def measure(self, graph, placement, *, use_cache=True):
        self.singles += 1
        return super().measure(graph, placement, use_cache=use_cache)

    def measure_many(self, graph, placements, *, use_cache=True):
        self.batches.append(len(placements))
        return super().measure_many(graph, placements, use_cache=use_cache)


def test_make_vec_builds_the_native_vector_env_with_same_step_autoreset():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. make_vec's warning about missing autoreset metadata
        venv = gym.make_vec("DevicePlacement-v0", num_envs=3, vectorization_mode="vector_entry_point",
                            model="tiny_branch", backend="simulated")
    assert isinstance(venv, DevicePlacementVectorEnv) and venv.num_envs == 3
    assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert venv.single_observation_space == DevicePlacementEnv("tiny_branch", backend="simulated").observation_space
    assert venv.observation_space["placement"].shape == (3, venv.graph.n_ops)
    # Without a vectorization mode, make_vec takes the native one too.
    assert isinstance(gym.make_vec("DevicePlacement-v0", num_envs=2, model="tiny_chain", backend="simulated"),
                      DevicePlacementVectorEnv)
    venv.close()


def test_every_step_measures_one_placement_per_sub_env_in_one_batch(tiny_branch_graph):
    backend = CountingSimulatedBackend("paper")
    venv = gym.make_vec("DevicePlacement-v0", num_envs=4, vectorization_mode="vector_entry_point",
                        model=tiny_branch_graph, backend=backend)
    venv.reset(seed=0)
    venv.action_space.seed(0)
    singles = backend.singles  # each sub-env's reference placement
    rewards = []
    for _ in range(500):
        _, reward, terminated, truncated, info = venv.step(venv.action_space.sample())
        rewards.append(reward)
        assert terminated.all() and not truncated.any() and info["_final_info"].all()
    assert backend.batches == [4] * 500 and backend.singles == singles  # one measure_many per step, nothing else
    assert venv.unwrapped.placements_measured == 2000
    assert np.all(np.array(rewards) != 0.0)  # no step was a reset that dropped its action (NEXT_STEP's reward 0)


@pytest.mark.parametrize("horizon, extra", [
    (1, {}), (3, {}),
    # the batched step of one-step episodes, with partial breakdowns (throughput), other rewards, repairs
    (1, {"objective": "throughput", "reward": "neg_latency"}), (1, {"reward": "inv_latency", "unsupported": "repair"})])
def test_native_vector_env_matches_gymnasiums_sync_vector_env(horizon, extra, tiny_branch_graph):
    """Same observations, rewards, ends and infos as SyncVectorEnv over the same sub-envs in SAME_STEP mode,
    failures included."""
    kwargs = dict(model=tiny_branch_graph, backend="simulated", profile=failing_profile(tiny_branch_graph),
                  horizon=horizon, **extra)
    native = gym.make_vec("DevicePlacement-v0", num_envs=3, vectorization_mode="vector_entry_point", **kwargs)
    sync = gym.make_vec("DevicePlacement-v0", num_envs=3, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kwargs)
    assert data_equivalence(native.reset(seed=11), sync.reset(seed=11))
    single = DevicePlacementEnv(**{**kwargs, "horizon": 10 ** 6})
    single.reset(seed=0)
    native.action_space.seed(1)
    failures = 0
    for _ in range(7):
        actions = native.action_space.sample()
        ours, theirs = native.step(actions), sync.step(actions)
        assert data_equivalence(ours, theirs, exact=True)
        assert native.observation_space.contains(ours[0])
        if "final_info" in ours[4]:
            failures += int((~ours[4]["final_info"]["ok"][ours[4]["_final_info"]]).sum())
        # what a run loop records per placement: the info a lone env's step gives
        assert data_equivalence(native.unwrapped.step_infos, [single.step(a)[4] for a in actions], exact=True)
    assert failures > 0 or extra.get("unsupported") == "repair"


def test_reset_seeds_sub_env_i_with_seed_plus_i_and_returns_fresh_arrays(tiny_chain_graph):
    venv = DevicePlacementVectorEnv(num_envs=3, model=tiny_chain_graph, backend="simulated")
    first, _ = venv.reset(seed=7)
    assert [env.np_random_seed for env in venv.envs] == [7, 8, 9]
    again, _ = venv.reset(seed=7)
    assert data_equivalence(first, again, exact=True)
    assert all(first[key] is not again[key] for key in first)
    venv.reset(seed=[1, 5, 2])
    assert [env.np_random_seed for env in venv.envs] == [1, 5, 2]


def test_writing_into_a_steps_info_arrays_changes_nothing_the_env_reports_later(tiny_branch_graph):
    """The batched step hands on the batch's columns; those that `step_infos` (built on first read) reads from are
    copies, so a caller writing into the info it got changes neither `step_infos` nor the next step."""
    kwargs = dict(model=tiny_branch_graph, backend="simulated", objective="throughput")
    venv = DevicePlacementVectorEnv(num_envs=3, **kwargs)
    venv.reset(seed=0)
    single = DevicePlacementEnv(**{**kwargs, "horizon": 10 ** 6})
    single.reset(seed=0)
    rng = np.random.default_rng(4)
    actions = rng.integers(0, 2, (3, tiny_branch_graph.n_ops))
    final = venv.step(actions)[4]["final_info"]
    for column in (final["n_submodels"], final["latency_s"], final["ok"], *final["breakdown"].values()):
        column[...] = 0
    assert data_equivalence(venv.step_infos, [single.step(a)[4] for a in actions], exact=True)
    again = venv.step(actions)[4]["final_info"]
    assert again["n_submodels"].min() >= 1 and again["breakdown"]["compute_s"].min() > 0


@pytest.mark.parametrize("horizon", [1, 3])
def test_copy_false_shares_the_fixed_arrays_read_only_and_gives_the_same_values(horizon, tiny_branch_graph):
    kwargs = dict(num_envs=3, model=tiny_branch_graph, backend="simulated", horizon=horizon)
    fresh = DevicePlacementVectorEnv(**kwargs)
    shared = gym.make_vec("DevicePlacement-v0", copy=False, **kwargs)
    assert shared.copy is False and fresh.copy is True
    outputs = [(fresh.reset(seed=3), shared.reset(seed=3))]
    fresh.action_space.seed(0)
    for _ in range(4):
        actions = fresh.action_space.sample()
        outputs.append((fresh.step(actions), shared.step(actions)))
    for ours, theirs in outputs:
        assert data_equivalence(ours, theirs, exact=True)
    (first, _), (last, *_, info) = outputs[0][1], outputs[-1][1]
    for key in first:
        if key == "placement":  # always fresh
            assert first[key] is not last[key] and last[key].flags.writeable
        else:  # the same memory on every call, read-only
            assert np.shares_memory(first[key], last[key]) and not last[key].flags.writeable
            with pytest.raises(ValueError, match="read-only"):
                last[key][...] = 0
            assert outputs[-1][0][0][key].flags.writeable  # copy=True: writeable copies
    if horizon == 1:
        final = info["final_obs"][0]
        assert not final["node_features"].flags.writeable and final["placement"].flags.writeable
        assert np.shares_memory(final["node_features"], last["node_features"])
        # the info arrays that never change and the measured placements (step_infos is built from them later) are
        # handed out read-only; the step's small columns are fresh copies
        fresh_info = outputs[-1][0][4]
        for path, shared_read_only in [(("_final_obs",), True), (("reference_latency_s",), True),
                                       (("final_info", "placement"), True), (("final_info", "model"), True),
                                       (("final_info", "n_submodels"), False),
                                       (("final_info", "breakdown", "compute_s"), False)]:
            ours, theirs = info, fresh_info
            for key in path:
                ours, theirs = ours[key], theirs[key]
            assert ours.flags.writeable is not shared_read_only and theirs.flags.writeable, path
        assert all(step["placement"].flags.writeable for step in shared.unwrapped.step_infos)


def test_same_seed_same_trajectory(tiny_branch_graph):
    def run(seed: int) -> list:
        venv = DevicePlacementVectorEnv(num_envs=2, model=tiny_branch_graph, backend="simulated", horizon=2)
        venv.reset(seed=seed)
        venv.action_space.seed(seed)
        return [venv.step(venv.action_space.sample())[:4] for _ in range(5)]

    assert data_equivalence(run(3), run(3), exact=True)
    assert not data_equivalence(run(3), run(4))


def test_vector_step_rejects_a_wrong_number_of_placements(tiny_chain_graph):
    venv = DevicePlacementVectorEnv(num_envs=2, model=tiny_chain_graph, backend="simulated")
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="one placement per sub-env"):
        venv.step(np.zeros((3, tiny_chain_graph.n_ops), dtype=np.int64))


# ================================================================================ REINFORCE on the vector env
def test_reinforce_bandit_on_a_vector_env_measures_in_batches_and_learns_the_same(tiny_branch_graph):
    """K samples per update, measured K at a time by the vector env: the same run as on a single env."""
    from agents.hsdag import HSDAGAgent

    features = HSDAGAgent().feature_families
    backend = CountingSimulatedBackend("paper")
    venv = gym.make_vec("DevicePlacement-v0", num_envs=4, model=tiny_branch_graph, backend=backend, features=features)
    # Without the cost-guided proposals: they are measured one at a time, through the first sub-env.
    batched = HSDAGAgent(seed=0, samples_per_update=4, measure_argmax=False, **hybrid_options(HSDAGAgent, heuristic_start="off", search_proposals=0)).learn(venv, budget=22)
    assert backend.batches == [4] * 5  # 20 placements in 5 steps of the vector env; the last 2 one by one
    single = HSDAGAgent(seed=0, samples_per_update=4, measure_argmax=False, **hybrid_options(HSDAGAgent, heuristic_start="off", search_proposals=0)).learn(
        DevicePlacementEnv(tiny_branch_graph, backend="simulated", profile="paper", features=features), budget=22)
    assert batched.run_summary.steps == single.run_summary.steps == 22
    assert batched.run_summary.curve == single.run_summary.curve
    assert np.array_equal(batched.best_placement, single.best_placement)
    assert [h["reward_mean"] for h in batched.history] == [h["reward_mean"] for h in single.history]


def test_the_vector_env_example_runs_end_to_end(capsys):
    """examples/vector_env.py: random runs of ops priced K per step, then Post learning on a vector env."""
    load_example("vector_env").main(["--model", "tiny_branch", "--num-envs", "4", "--steps", "3", "--budget", "20"])
    out = capsys.readouterr().out
    assert "4 sub-envs" in out and "part 1: 12 placements" in out
    assert "part 2: Post measured 20 placements" in out and "20 per vector step" in out
