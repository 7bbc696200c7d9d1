"""The exact optimum on the simulated backend: checked against brute force over every placement.

Real parts: the simulated backend itself (its HETERO cut, its schedules) prices every one of the D^N placements
of small graphs; the solver is SciPy's HiGHS. Profiles are chosen so the optimum mixes devices (with the paper
preset the whole model on the GPU is usually best, which would make the check easy).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from agents.baselines import (
    ExactOptimum, GreedyETF, MetisPartition, RandomSearch, SingleDevice, TopoBalance, cost_model,
)
from placement_gym import ComputationGraph, DevicePlacementEnv
from placement_gym.backends.profiles import DeviceProfile, LinkProfile, Profile
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.evaluation import evaluate

OP_TYPES = ("MatMul", "Add", "Convolution", "Multiply")


def random_dag(n: int, seed: int) -> ComputationGraph:
    """A connected random DAG with branches and joins; some producers feed several consumers."""
    rng = np.random.default_rng(seed)
    edges = set()
    for v in range(1, n):
        for u in rng.choice(v, size=min(v, int(rng.integers(1, 3))), replace=False):
            edges.add((int(u), v))
    edge_index = np.array(sorted(edges), dtype=np.int64).T
    return ComputationGraph(
        name=f"dag{n}_{seed}",
        op_names=tuple(f"op{i}" for i in range(n)),
        op_types=tuple(OP_TYPES[int(t)] for t in rng.integers(0, len(OP_TYPES), n)),
        output_shapes=tuple(((1, 64),) for _ in range(n)),
        bytes_out=rng.integers(1_000, 400_000, n),
        flops=rng.uniform(1e6, 4e8, n),
        edge_index=edge_index,
        edge_bytes=rng.integers(1_000, 400_000, edge_index.shape[1]),
    )


def mixed_profile(n_devices: int, schedule: str) -> Profile:
    """Devices good at different op types, a moderately priced link: optimal placements mix devices."""
    specialities = [("MatMul", "Convolution"), ("Add", "Multiply"), ("Convolution", "Add")]
    devices = [
        DeviceProfile(name=name, peak_flops=2e11, memory_bandwidth_Bps=5e10, launch_overhead_s=2e-6,
                      efficiency={t: (0.9 if t in specialities[k] else 0.15) for t in OP_TYPES})
        for k, name in enumerate(["CPU", "GPU", "NPU"][:n_devices])
    ]
    return Profile(devices=devices, link=LinkProfile(latency_s=5e-6, bandwidth_Bps=2e10),
                   boundary_overhead_s=20e-6, schedule=schedule, name=f"test-{schedule}")


def brute_force(backend: SimulatedBackend, graph: ComputationGraph, n_devices: int) -> tuple[float, np.ndarray]:
    latencies = {}
    for placement in itertools.product(range(n_devices), repeat=graph.n_ops):
        p = np.array(placement, dtype=np.int64)
        latencies[placement] = backend.measure(graph, p).latency_s
    best = min(latencies, key=latencies.get)
    return latencies[best], np.array(best)


CASES = [  # (ops, devices, schedule, seed): 2^10, 2^9 and 3^6 placements
    (10, 2, "sequential", 0),
    (10, 2, "sequential", 1),
    (9, 2, "parallel", 2),
    (9, 2, "parallel", 3),
    (6, 3, "sequential", 4),
    (6, 3, "parallel", 5),
]


@pytest.mark.parametrize("n_ops, n_devices, schedule, seed", CASES)
def test_optimum_matches_brute_force_and_beats_every_baseline(n_ops, n_devices, schedule, seed):
    graph = random_dag(n_ops, seed)
    backend = SimulatedBackend(mixed_profile(n_devices, schedule))
    optimum_latency, _ = brute_force(backend, graph, n_devices)
    env = DevicePlacementEnv(graph, backend=backend)

    agent = ExactOptimum(time_limit_s=30).learn(env, budget=1, seed=0)
    info = agent.plan_info
    assert info["status"] == "optimal", info
    assert agent.best_latency_s == pytest.approx(optimum_latency, rel=1e-9)
    assert info["lower_bound_s"] <= optimum_latency * (1 + 1e-9)
    assert info["lower_bound_s"] == pytest.approx(optimum_latency, rel=1e-5)  # the bound proves it

    others = [SingleDevice(d) for d in range(n_devices)] + [GreedyETF(), TopoBalance(), MetisPartition(),
                                                           RandomSearch()]
    for other in others:
        other.learn(env, budget=8, seed=seed)
        assert agent.best_latency_s <= other.best_latency_s * (1 + 1e-12), type(other).__name__


def test_optimum_is_not_trivially_single_device():
    mixed = 0
    for n_ops, n_devices, schedule, seed in CASES:
        graph = random_dag(n_ops, seed)
        backend = SimulatedBackend(mixed_profile(n_devices, schedule))
        _, best = brute_force(backend, graph, n_devices)
        mixed += len(set(best.tolist())) > 1
    assert mixed >= len(CASES) // 2


def test_optimum_refuses_the_real_backend(tiny_chain_graph):
    from .conftest import TWO_DEVICES

    env = DevicePlacementEnv(tiny_chain_graph, devices=TWO_DEVICES, backend="openvino", warmup=0, repeats=1)
    with pytest.raises(ValueError, match="simulated"):
        ExactOptimum().learn(env, 1, 0)


def test_time_limit_reports_a_valid_bound():
    graph = random_dag(40, 7)
    backend = SimulatedBackend(mixed_profile(2, "parallel"))
    env = DevicePlacementEnv(graph, backend=backend)
    agent = ExactOptimum(time_limit_s=0.5).learn(env, 1, 0)
    info = agent.plan_info
    assert info["status"] in ("optimal", "time_limit")
    assert 0 <= info["lower_bound_s"] <= info["latency_s"] == pytest.approx(agent.best_latency_s)
    assert info["latency_s"] <= min(SingleDevice(d).learn(env, 1, 0).best_latency_s for d in range(2))
    record = evaluate(ExactOptimum(time_limit_s=0.5), env, budget=1, seeds=1, name="optimal")[0]
    assert record["simulated"] and record["placements_measured"] == 1


def test_a_failing_mip_solver_ends_the_run_with_the_best_placement_found_not_a_crash(monkeypatch):
    """HiGHS has raised from inside its search (``ValueError: vector::reserve``, while labelling 663 graphs): the
    optimum then keeps its best start placement and its bound, says "solver_error", and the run goes on."""
    import scipy.optimize

    def failing_milp(*args, **kwargs):
        raise ValueError("vector::reserve")

    monkeypatch.setattr(scipy.optimize, "milp", failing_milp)
    graph = random_dag(12, 3)
    backend = SimulatedBackend(mixed_profile(2, "parallel"))
    env = DevicePlacementEnv(graph, backend=backend)
    agent = ExactOptimum(time_limit_s=5.0).learn(env, 1, 0)
    info = agent.plan_info
    assert info["status"] == "solver_error" and "vector::reserve" in " ".join(info["notes"])
    assert info["iterations"] == 0 and info["latency_s"] == pytest.approx(agent.best_latency_s)
    assert 0 <= info["lower_bound_s"] <= info["latency_s"]
    assert info["latency_s"] <= min(SingleDevice(d).learn(env, 1, 0).best_latency_s for d in range(2))


def test_cost_model_matches_the_simulator():
    graph = random_dag(8, 11)
    backend = SimulatedBackend(mixed_profile(2, "sequential"))
    env = DevicePlacementEnv(graph, backend=backend)
    costs = cost_model(env)
    assert costs.op_time_s.shape == (8, 2) and costs.edge_time_s.shape == (graph.n_edges, 2, 2)
    for d in range(2):  # one device: latency = the sum of its op times
        assert backend.measure(graph, np.full(8, d)).latency_s == pytest.approx(costs.op_time_s[:, d].sum())
    assert np.all(costs.edge_time_s[:, 0, 0] == 0) and np.all(costs.edge_time_s[:, 0, 1] > 0)


def test_above_the_mip_size_the_optimum_says_it_stopped_for_the_size_and_proves_only_a_start_at_the_bound():
    from agents.baselines.optimal import MAX_OPS_FOR_MIP, solve_optimum

    n = MAX_OPS_FOR_MIP + 1
    op_time = np.random.default_rng(0).uniform(1e-4, 1e-3, (n, 2))
    edge_index = np.array([np.arange(n - 1), np.arange(1, n)])

    def simulate(p: np.ndarray) -> float:  # compute only: the sequential closed-form bound is then attainable
        return float(op_time[np.arange(n), p].sum())

    result = solve_optimum(op_time, np.zeros((n - 1, 2, 2)), edge_index, 0.0, "sequential", simulate, time_limit_s=5.0)
    assert result.status == "size_limit" and result.label.startswith("best found, bound")
    assert result.lower_bound_s <= result.latency_s
    fastest = op_time.argmin(axis=1)
    proven = solve_optimum(op_time, np.zeros((n - 1, 2, 2)), edge_index, 0.0, "sequential", simulate,
                           start=[fastest], time_limit_s=5.0)
    assert proven.status == "optimal" and proven.label == "proven"
