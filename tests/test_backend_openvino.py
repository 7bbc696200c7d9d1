"""The real backend: HETERO placements on two devices (one virtual), caching, failures as measurements."""
import re

import numpy as np
import pytest

from placement_gym.backends.openvino import OpenVINOBackend

from .conftest import TWO_DEVICES, break_device


@pytest.fixture(scope="module")
def backend():
    return OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=5)


def _run(compiled, inputs):
    request = compiled.create_infer_request()
    for index, tensor in inputs.items():
        request.set_input_tensor(index, tensor)
    request.infer()
    return [request.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]


def test_split_placement_compiles_into_submodels_with_equal_outputs(backend, tiny_branch_graph):
    g = tiny_branch_graph
    # Alternate devices along the topological order: many cuts, both devices used.
    placement = np.arange(g.n_ops, dtype=np.int64) % 2
    split, n_submodels = backend.compile_placement(g, placement)
    assert n_submodels >= 2
    assert set(split.get_property("EXECUTION_DEVICES")) == {"CPU", backend.devices[1].ov_name}
    whole, n_whole = backend.compile_placement(g, np.zeros(g.n_ops, dtype=np.int64))
    assert n_whole == 1
    inputs = backend.example_inputs(g)
    for a, b in zip(_run(split, inputs), _run(whole, inputs)):
        # Cutting the graph stops OpenVINO fusing conv+bias+relu across the cut, so float32 rounding differs
        # slightly (~1e-3 relative, the same with equal thread counts); a mis-wired cut would differ wholesale.
        assert np.abs(b).max() > 0
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=2e-3 * np.abs(b).max())


def test_measurement_fields_and_cache(backend, tiny_chain_graph):
    g = tiny_chain_graph
    placement = np.zeros(g.n_ops, dtype=np.int64)
    placement[g.n_ops // 2:] = 1
    m = backend.measure(g, placement)
    assert m.ok and m.error is None and not m.cached and not m.simulated
    assert len(m.samples) >= 5 and m.latency_s == pytest.approx(np.median(m.timed_latencies_s))  # adaptive: at least 5
    assert len(m.reference_samples) == len(m.samples)  # paired with the reference by default
    assert m.latency_s > 0 and m.compile_s > 0 and m.spread_s >= 0
    assert m.n_submodels == 2
    again = backend.measure(g, placement)
    assert again.cached and again.latency_s == m.latency_s
    fresh = backend.measure(g, placement, use_cache=False)
    assert not fresh.cached and fresh.samples != m.samples


def test_bad_property_values_are_refused_with_openvinos_reason():
    for spec, reason in (("CPU[INFERENCE_NUM_THREADS=abc]", "non negative integer"),
                         ("CPU[INFERENCE_NUM_THREADS=-1]", "Got: -1"),
                         ("CPU[PERFORMANCE_HINT=NOT_A_HINT]", "LATENCY/THROUGHPUT")):
        with pytest.raises(ValueError, match=f"{re.escape(spec)}.*refuses.*{re.escape(reason)}"):
            OpenVINOBackend(["CPU", spec], warmup=0, repeats=1)


def test_failed_compile_is_a_measurement_not_an_exception(tiny_chain_graph):
    backend = OpenVINOBackend(TWO_DEVICES, warmup=0, repeats=1)
    break_device(backend)  # OpenVINO now refuses to compile anything placed on the second device
    m = backend.measure(tiny_chain_graph, np.ones(tiny_chain_graph.n_ops, dtype=np.int64))
    assert not m.ok and m.latency_s == float("inf")
    assert "PERFORMANCE_HINT" in m.error or "NOT_A_HINT" in m.error
    assert backend.measure(tiny_chain_graph, np.zeros(tiny_chain_graph.n_ops, dtype=np.int64)).ok


def test_bad_settings():
    with pytest.raises(ValueError, match="repeats"):
        OpenVINOBackend(TWO_DEVICES, repeats=0)


def test_describe_records_devices(backend):
    d = backend.describe()
    assert d["devices"][0] == "CPU" and "virtual" in d["devices"][1]
    assert d["repeats"] == 5 and d["openvino"]
