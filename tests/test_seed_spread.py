"""benchmarks/seed_spread.py: the median over every seed subset, "never" ranked above any count, seeds pooled
across files (the last file's run of a seed wins)."""
from __future__ import annotations

import json
import math

from .conftest import load_benchmark

spread = load_benchmark("seed_spread")


def test_every_subset_median_is_enumerated_and_never_ranks_above_any_count():
    medians = spread.subset_medians([10.0, 20.0, 30.0, math.inf], 3)
    assert sorted(medians.tolist()) == [20.0, 20.0, 30.0, 30.0]  # C(4, 3) subsets, one median each
    assert spread.placements_to_within({"placements_to_within": {"2": 7, "1": None}}, 2.0) == 7.0
    assert spread.placements_to_within({"placements_to_within": {"2": 7, "1": None}}, 1.0) == math.inf


def test_files_pool_their_seeds_and_the_report_reads_the_subset_medians(tmp_path, capsys):
    def write(name, seeds_and_counts):
        records = [{"agent": "hsdag", "model": "resnet", "seed": seed, "placements_to_within": {"2": count}}
                   for seed, count in seeds_and_counts]
        path = tmp_path / name
        path.write_text(json.dumps({"records": records}))
        return str(path)

    first = write("a.json", [(0, 50), (1, 500), (2, None)])
    second = write("b.json", [(2, 90), (3, 120)])  # seed 2 again: this run wins
    assert spread.main([first, second, "--subset", "3", "--target", "100"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    # seeds 50, 500, 90, 120: subset medians 90, 120, 90, 120 -> 5-95% 90-120, at most 100 in half of them
    assert "4 seeds, median 105" in line and "4 subsets: 90-120, at most 100 in 50%" in line
