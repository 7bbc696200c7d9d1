"""The SimPy event-loop implementation of our cost model (benchmarks/simpy_simulator.py) agrees with
`SimulatedBackend` to 1e-9 relative, for both schedules (what makes its speed comparison meaningful)."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from placement_gym import load_graph
from placement_gym.backends.simulated import SimulatedBackend

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def reference():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its sibling modules
    try:
        spec = importlib.util.spec_from_file_location("simpy_simulator", BENCHMARKS / "simpy_simulator.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def backend_with(schedule: str, devices="auto") -> SimulatedBackend:
    backend = SimulatedBackend("paper", devices)
    backend.profile = replace(backend.profile, schedule=schedule)
    return backend


@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize("model", ["tiny_branch", "tiny_chain", "resnet"])
def test_simpy_reference_agrees_with_our_simulator(reference, model, schedule):
    graph = load_graph(model)
    backend = backend_with(schedule)
    placements = reference.placements_for(graph, 20, 5, seed=0)
    assert reference.max_relative_difference(backend, graph, placements) <= 1e-9


def test_the_parallel_schedule_overlaps_devices(reference, tiny_branch_graph):
    # Not a tautology: on a branchy graph the parallel latency is below the sequential one for some placement,
    # and the SimPy loop finds the same overlap.
    placements = reference.placements_for(tiny_branch_graph, 30, 0, seed=1)
    sequential = [reference.simpy_latency(backend_with("sequential"), tiny_branch_graph, p) for p in placements]
    parallel = [reference.simpy_latency(backend_with("parallel"), tiny_branch_graph, p) for p in placements]
    assert all(p <= s + 1e-12 for p, s in zip(parallel, sequential)) and any(p < s for p, s in zip(parallel, sequential))
    assert np.isclose(parallel, [backend_with("parallel").measure(tiny_branch_graph, p).latency_s
                                 for p in placements], rtol=1e-9).all()
