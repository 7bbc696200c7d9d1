"""The per-op saving rule (`move_large_savings`, the learned agents' zero-shot override) moves exactly the ops whose
saving on their cheapest allowed device exceeds the threshold; benchmarks/learned_placer/transfer_saving_rule.py runs
end to end on a split, writing its JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest

from agents.search.heuristic_start import move_large_savings
from placement_gym.backends.profiles import Profile

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def rule():
    return load_benchmark("learned_placer.transfer_saving_rule")


def test_only_ops_saving_more_than_the_threshold_move():
    # seconds on (device 0, device 1, device 2); device 2 cannot run op 3
    cost = np.array([[10.0, 9.0, 1.0],   # saves 9 on device 2: moves there
                     [10.0, 7.0, 8.0],   # saves 3 on device 1: moves there
                     [10.0, 9.5, 9.9],   # saves 0.5: stays
                     [10.0, 8.0, 0.1],   # device 2 would save 9.9 but cannot run it; device 1 saves 2: stays
                     [1.0, 5.0, 5.0]])   # already cheapest on the base: stays
    mask = np.ones_like(cost, dtype=bool)
    mask[3, 2] = False
    on_0 = np.zeros(5, dtype=np.int64)
    assert move_large_savings(on_0, cost, mask, 2.5).tolist() == [2, 1, 0, 0, 0]
    assert move_large_savings(on_0, cost, mask, 1.5).tolist() == [2, 1, 0, 1, 0]
    assert move_large_savings(on_0, cost, mask, 100.0).tolist() == [0, 0, 0, 0, 0]
    # each op's saving is counted from where the placement puts it; one on a device that cannot run it always moves
    assert move_large_savings(np.array([2, 1, 1, 2, 0]), cost, mask, 2.5).tolist() == [2, 1, 1, 1, 0]
    # idempotent: what it returns, it returns again
    moved = move_large_savings(on_0, cost, mask, 1.5)
    assert np.array_equal(move_large_savings(moved, cost, mask, 1.5), moved)


def test_the_script_reports_each_graph_of_a_split(rule, tmp_path):
    out = tmp_path / "rule.json"
    rule.main(["--profile", "ai_pc", "--splits", "val", "--tau", "0", "8", "--base", "NPU", "GPU", "--json", str(out)])
    data = json.loads(out.read_text())
    overhead = Profile.preset("ai_pc").boundary_overhead_s
    assert data["boundary_overhead_s"] == pytest.approx(overhead) and data["base"] == ["NPU", "GPU"]
    assert len(data["rows"]) == 14 and all(len(row["rule"]) == 2 for row in data["rows"])
    from_npu = [row for row in data["rows"] if row["base_device"] == "NPU"]
    # from the NPU (every val graph's best single device on ai_pc), tau = 8 moves none of their ops
    assert len(from_npu) == 7 and all(row["best_single_device"] == "NPU" for row in from_npu)
    assert all(row["rule"][1]["ops_moved"] == 0 and row["rule"][1]["start_device"] == "NPU"
               and row["rule"][1]["vs_best_single_pct"] == pytest.approx(0.0) for row in from_npu)
    with pytest.raises(SystemExit):  # an existing output is refused
        rule.main(["--profile", "ai_pc", "--splits", "val", "--json", str(out)])
