"""The real backend's throughput objective (several requests in flight) and its measured device observations
(action mask from ``query_model``, per-op costs and device features from per-op profiling)."""
import numpy as np
import pytest

from placement_gym.backends.base import DEVICE_FEATURES, OBJECTIVES
from placement_gym.backends.openvino import OpenVINOBackend, timed_periods

from .conftest import TWO_DEVICES

#: Short fixed windows keep a tiny-model throughput measurement at ~0.1 s.
FAST = dict(warmup=1, repeats=3, target_rel_halfwidth=None, windows=3, window_s=0.01)


@pytest.fixture(scope="module")
def throughput_backend():
    backend = OpenVINOBackend(TWO_DEVICES, objective="throughput", **FAST)
    yield backend
    backend.close()


def test_throughput_measurement_of_one_device(throughput_backend, tiny_branch_graph):
    g = tiny_branch_graph
    m = throughput_backend.measure(g, np.zeros(g.n_ops, dtype=np.int64))
    assert m.ok and m.error is None and m.objective == "throughput" and not m.simulated
    assert np.isfinite(m.latency_s) and m.latency_s > 0 and m.n_submodels == 1
    assert len(m.samples) >= 3 and m.latency_s == pytest.approx(np.median(m.samples))
    assert m.breakdown["throughput_per_s"] == pytest.approx(1.0 / m.latency_s)
    assert m.throughput_per_s == pytest.approx(m.breakdown["throughput_per_s"])
    assert m.breakdown["requests_in_flight"] == 2  # one device used: 1 + 1, at least 2
    low, high = m.interval_s
    assert low <= m.latency_s <= high
    assert throughput_backend.measure(g, np.zeros(g.n_ops, dtype=np.int64)).cached  # same cache as latency


def test_throughput_of_a_split_across_two_devices(throughput_backend, tiny_branch_graph):
    g = tiny_branch_graph
    placement = (np.arange(g.n_ops) >= g.n_ops // 2).astype(np.int64)
    m = throughput_backend.measure(g, placement)
    assert m.ok and m.objective == "throughput" and m.n_submodels >= 2
    assert np.isfinite(m.latency_s) and m.latency_s > 0
    assert m.breakdown["requests_in_flight"] == 3  # two devices used: 2 + 1
    assert m.breakdown["throughput_per_s"] == pytest.approx(1.0 / m.latency_s)


def test_requests_in_flight_setting(tiny_chain_graph):
    backend = OpenVINOBackend(TWO_DEVICES, objective="throughput", requests_in_flight=1, **FAST)
    m = backend.measure(tiny_chain_graph, np.arange(tiny_chain_graph.n_ops, dtype=np.int64) % 2)
    assert m.ok and m.breakdown["requests_in_flight"] == 1
    assert backend.describe()["objective"] == "throughput"
    assert backend.describe()["throughput"]["requests_in_flight"] == 1
    with pytest.raises(ValueError, match="requests_in_flight"):
        OpenVINOBackend(TWO_DEVICES, objective="throughput", requests_in_flight=0)


def test_timed_periods_windows(tiny_chain_graph):
    backend = OpenVINOBackend(TWO_DEVICES, **FAST)
    compiled, _ = backend.compile_placement(tiny_chain_graph, np.zeros(tiny_chain_graph.n_ops, dtype=np.int64))
    periods = timed_periods(compiled, backend.example_inputs(tiny_chain_graph), 2, 1, windows=4, window_s=0.005)
    assert len(periods) == 4 and all(np.isfinite(p) and p > 0 for p in periods)


def test_latency_objective_is_the_default_and_recorded(tiny_chain_graph):
    backend = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=3)
    assert backend.objective == "latency" and backend.describe()["objective"] == "latency"
    m = backend.measure(tiny_chain_graph, np.zeros(tiny_chain_graph.n_ops, dtype=np.int64))
    assert m.ok and m.objective == "latency" and "throughput_per_s" not in m.breakdown


def test_failed_throughput_placement_carries_the_objective(tiny_chain_graph):
    from .conftest import break_device

    backend = OpenVINOBackend(TWO_DEVICES, objective="throughput", **FAST)
    break_device(backend)
    m = backend.measure(tiny_chain_graph, np.ones(tiny_chain_graph.n_ops, dtype=np.int64))
    assert not m.ok and m.latency_s == float("inf") and m.objective == "throughput" and m.error


def test_bad_objective_names_the_accepted_ones():
    with pytest.raises(ValueError, match="latency.*throughput"):
        OpenVINOBackend(TWO_DEVICES, objective="energy")
    with pytest.raises(ValueError, match="wall clock"):
        OpenVINOBackend(TWO_DEVICES, objective="throughput", clock="cpu")
    assert OBJECTIVES == ("latency", "throughput")


def test_action_mask_from_query_model(throughput_backend, tiny_branch_graph, tiny_chain_graph):
    for g in (tiny_branch_graph, tiny_chain_graph):
        mask = throughput_backend.action_mask(g)
        assert mask.shape == (g.n_ops, 2) and mask.dtype == bool and mask.all()  # CPUs run every op
        mask[0, 0] = False  # a copy: the cached mask stays as it was
        assert throughput_backend.action_mask(g).all()


def test_node_device_cost_is_measured_per_op(throughput_backend, tiny_branch_graph):
    g = tiny_branch_graph
    cost = throughput_backend.node_device_cost(g)
    assert cost.shape == (g.n_ops, 2) and cost.dtype == np.float64
    assert np.isfinite(cost).all() and (cost > 0).all()
    # Scaled to each device's whole-model latency: the column sums are a tiny model's latency (well under 1 s).
    assert (cost.sum(axis=0) < 1.0).all()
    assert throughput_backend.node_device_cost(g) is not cost  # cached profile, fresh array


def test_device_features_shape_and_values(throughput_backend, tiny_branch_graph):
    throughput_backend.action_mask(tiny_branch_graph)  # a graph seen: features are fitted on its profile
    features = throughput_backend.device_features()
    assert features.shape == (2, len(DEVICE_FEATURES)) and features.dtype == np.float32
    assert np.isfinite(features).all()
    np.testing.assert_array_equal(features[:, 2], 12.0)  # CPU memory: unknown -> 1e12
    np.testing.assert_array_equal(features[:, 3], 12.0)  # shared host memory between the CPU copies
    np.testing.assert_array_equal(throughput_backend.device_features(), features)  # fixed once fitted
