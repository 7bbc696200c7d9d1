"""The SimPy re-implementation of our cost model (benchmarks/performance/simpy_reference.py) gives the latencies of
`SimulatedBackend` to 1e-9 relative, for both schedules: what makes its speed comparison meaningful."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from placement_gym import load_graph
from placement_gym.backends.profiles import DeviceProfile, LinkProfile, Profile
from placement_gym.backends.simulated import SimulatedBackend

from .conftest import load_benchmark

TOLERANCE = 1e-9


@pytest.fixture(scope="module")
def reference():
    """benchmarks/performance/simpy_reference.py as a module."""
    return load_benchmark("performance.simpy_reference")


def relative_differences(reference, backend, graph, placements) -> np.ndarray:
    ours = np.array([backend.measure(graph, p, use_cache=False).latency_s for p in placements])
    theirs = np.array([reference.simpy_latency(backend, graph, p) for p in placements])
    assert np.all(ours > 0) and np.all(np.isfinite(theirs))
    return np.abs(theirs - ours) / ours


@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize("model", ["tiny_branch", "tiny_chain"])
def test_agrees_on_tiny_models(reference, model, schedule):
    graph = load_graph(model)
    backend = SimulatedBackend("paper", schedule=schedule)
    placements = reference.placements_for(graph, 100, 0, seed=0)  # + every op on each device
    placements += reference.placements_for(graph, 0, 10, seed=1, block=4)
    assert relative_differences(reference, backend, graph, placements).max() <= TOLERANCE


@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
def test_agrees_on_resnet(reference, schedule):
    graph = load_graph("resnet")
    backend = SimulatedBackend("paper", schedule=schedule)
    placements = reference.placements_for(graph, 4, 2, seed=2)
    assert relative_differences(reference, backend, graph, placements).max() <= TOLERANCE


def three_device_profile(schedule: str) -> Profile:
    """Three devices, per-pair links (one between two submodels on the same device), a split overhead."""
    paper = Profile.resolve("paper")
    npu = DeviceProfile(name="NPU", peak_flops=5e12, memory_bandwidth_Bps=100e9, launch_overhead_s=20e-6)
    return dataclasses.replace(paper, devices=[*paper.devices, npu], split_overhead_s=123e-6, schedule=schedule,
                               links={"CPU->CPU": LinkProfile(5e-6, 50e9), "NPU->GPU": LinkProfile(40e-6, 8e9)})


@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize("shuffled", [False, True])
def test_agrees_with_three_devices_and_uneven_tensors(reference, schedule, shuffled):
    # Every edge carries its own number of bytes (so which edge pays for a tensor sent once per (producer,
    # consumer submodel) matters); shuffled: the edges are not listed in (source, target) order.
    graph = reference.synthetic_graph(300, seed=3)
    rng = np.random.default_rng(0)
    order = rng.permutation(graph.n_edges) if shuffled else np.arange(graph.n_edges)
    graph = dataclasses.replace(graph, name="uneven", edge_index=graph.edge_index[:, order],
                                edge_bytes=rng.integers(1_000, 5_000_000, graph.n_edges))
    backend = SimulatedBackend(three_device_profile(schedule))
    placements = reference.placements_for(graph, 15, 5, seed=4, devices=3)
    assert relative_differences(reference, backend, graph, placements).max() <= TOLERANCE


def test_the_schedules_differ(reference, tiny_branch_graph):
    # Not a tautology: the parallel schedule overlaps devices (never slower than the sequential one, faster on
    # some placement), and the SimPy reference finds the same overlaps.
    placements = reference.placements_for(tiny_branch_graph, 30, 0, seed=5)
    sequential = [reference.simpy_latency(SimulatedBackend("paper", schedule="sequential"), tiny_branch_graph, p)
                  for p in placements]
    parallel = [reference.simpy_latency(SimulatedBackend("paper", schedule="parallel"), tiny_branch_graph, p)
                for p in placements]
    assert all(p <= s * (1 + 1e-12) for p, s in zip(parallel, sequential))
    assert sum(p < s * (1 - 1e-6) for p, s in zip(parallel, sequential)) >= 3


def test_rejects_bad_placements(reference, tiny_chain_graph):
    backend = SimulatedBackend("paper")
    with pytest.raises(ValueError):
        reference.simpy_latency(backend, tiny_chain_graph, np.full(tiny_chain_graph.n_ops, 2))
    with pytest.raises(ValueError):
        reference.simpy_latency(backend, tiny_chain_graph, np.zeros(tiny_chain_graph.n_ops + 1, dtype=np.int64))
