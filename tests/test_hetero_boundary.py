"""What an extra HETERO submodel costs: the segment sweep (`placement_gym.backends.boundary`) that
``benchmarks/fidelity/hetero_boundary.py`` and ``placement-gym calibrate`` share, on the real two-CPU backend."""
from __future__ import annotations

import numpy as np
import pytest

from placement_gym.backends.boundary import (
    fit_submodel_overhead, segment_crossings, segment_placement, segment_sweep,
)
from placement_gym.backends.calibration import fit_boundary_costs, sweep_transfer_check

from .conftest import TWO_DEVICES


def test_segment_placement_cuts_equal_contiguous_segments_alternating_devices():
    placement = segment_placement(10, 4)
    assert placement.tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    assert segment_placement(7, 1).tolist() == [0] * 7
    assert segment_placement(6, 6, devices=(1, 0)).tolist() == [1, 0, 1, 0, 1, 0]
    with pytest.raises(ValueError, match="segments"):
        segment_placement(5, 6)


def test_segment_crossings_count_each_tensor_once_per_consuming_segment(tiny_branch_graph):
    assert segment_crossings(tiny_branch_graph, 1) == (0, 0)
    counts = [segment_crossings(tiny_branch_graph, k)[0] for k in (2, 4, 8)]
    assert 0 < counts[0] < counts[1] < counts[2]


def test_fit_submodel_overhead_recovers_a_known_slope():
    rows = [{"extra_submodels": e, "crossings": c, "latency_s": 0.040 + 5e-4 * e + 1e-4 * c}
            for e, c in [(0, 0), (1, 2), (3, 4), (7, 11), (15, 19), (30, 41)]]
    fit = fit_submodel_overhead(rows)
    both = fit["with_crossings"]
    assert both["per_submodel_s"] == pytest.approx(5e-4, rel=1e-6)
    assert both["per_crossing_s"] == pytest.approx(1e-4, rel=1e-6)
    assert both["residual_rms_s"] < 1e-9 and both["crossing_term_helps"]
    # minus a compute time the rows carry (devices that differ): the slope of what is left
    rows = [{"extra_submodels": e, "latency_s": 0.040 + 3e-4 * e + 0.001 * (e % 2), "compute_s": 0.001 * (e % 2)}
            for e in range(5)]
    fit = fit_submodel_overhead(rows)
    assert fit["per_submodel_s"] == pytest.approx(3e-4) and fit["intercept_s"] == pytest.approx(0.040)
    assert fit["with_crossings"]["per_crossing_s"] is None  # no crossings given: no second fit
    assert fit_submodel_overhead([{"extra_submodels": 0, "latency_s": 0.04}])["per_submodel_s"] is None


def test_sweep_transfer_check_tells_which_term_carries_over_to_other_placements():
    """Costs per crossing byte: along contiguous segments submodels and bytes grow together, so each term fits
    the sweep, but only the per-byte one carries over to placements of many small submodels."""
    def row(kind, extra, transfers, nbytes):
        return {"kind": kind, "real_s": 0.040 + nbytes / 4e9, "compute_s": 0.040, "extra_submodels": extra,
                "transfers": transfers, "transfer_bytes": nbytes}

    rows = [row("segments", k - 1, 2 * (k - 1), 2e6 * (k - 1)) for k in (2, 4, 8, 16)]
    rows += [row("split", 89, 120, 1e8), row("split", 39, 45, 5e7), row("split", 10, 25, 2e7)]
    check = sweep_transfer_check(rows)
    assert set(check) == {"per_extra_submodel", "per_crossing_tensor", "per_crossing_byte"}
    assert all(c["mape_segments"] < 1e-9 for c in check.values())  # the sweep alone cannot tell them apart
    assert check["per_crossing_byte"]["mape_split"] < 1e-9 < check["per_extra_submodel"]["mape_split"]
    assert check["per_crossing_byte"]["coefficient_s"] == pytest.approx(1 / 4e9)
    split, boundary, link, report = fit_boundary_costs(rows)  # the joint fit finds the byte cost
    assert link.bandwidth_Bps == pytest.approx(4e9, rel=1e-6) and report["mape_fitted"] < 1e-6
    assert set(report["mape_fitted_by_kind"]) == {"segments", "split"}
    assert sweep_transfer_check([r for r in rows if r["kind"] == "split"]) == {}


def test_segment_sweep_on_tiny_branch_with_the_real_two_cpu_backend(tiny_branch_graph):
    from placement_gym.backends.openvino import OpenVINOBackend

    backend = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=3, cache=False, paired_reference=False)
    lines = []
    sweep = segment_sweep(backend, tiny_branch_graph, (1, 2, 4, 8, 100), rounds=1, progress=lines.append)
    backend.close()
    rows = sweep["rows"]
    assert [r["k"] for r in rows] == [1, 2, 4, 8] and sweep["ks"] == [1, 2, 4, 8]  # k above the op count left out
    counts = [r["submodels"] for r in rows]  # HETERO's own count of each compiled placement
    assert counts[0] == 1 and all(a < b for a, b in zip(counts, counts[1:]))
    assert all(r["latency_s"] > 0 and len(r["rounds_s"]) == 1 for r in rows) and len(lines) == 4
    assert np.isfinite(sweep["fit"]["per_submodel_s"]) and np.isfinite(sweep["fit"]["intercept_s"])
    assert sweep["fit"]["points"] == 4 and sweep["devices"] == TWO_DEVICES
