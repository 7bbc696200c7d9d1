"""benchmarks/leaderboard/seed_spread.py: the median over every seed subset, "never" ranked above any count, seeds
pooled across files (the last file's run of a seed wins) against one reference per model."""
from __future__ import annotations

import json
import math

from .conftest import load_benchmark

spread = load_benchmark("leaderboard.seed_spread")


def test_every_subset_median_is_enumerated_and_never_ranks_above_any_count():
    medians = spread.subset_medians([10.0, 20.0, 30.0, math.inf], 3)
    assert sorted(medians.tolist()) == [20.0, 20.0, 30.0, 30.0]  # C(4, 3) subsets, one median each


def test_files_pool_their_seeds_and_the_report_reads_the_subset_medians(tmp_path, capsys):
    def write(name, seeds_and_counts, best_known, preset="paper"):
        # each run: best so far 1.5 (not within 2% of the reference 1.0), then 1.0 after `count` placements (None: never)
        records = [{"agent": "hsdag", "model": "resnet", "seed": seed, "ok": True, "best_known_latency_s": best_known,
                    "backend_settings": {"profile": preset},
                    "latency_s": 1.5 if count is None else 1.0,
                    "curve": [[1, 1.5]] + ([] if count is None else [[count, 1.0]])}
                   for seed, count in seeds_and_counts]
        path = tmp_path / name
        path.write_text(json.dumps({"records": records}))
        return str(path)

    first = write("a.json", [(0, 50), (1, 500), (2, None)], best_known=1.01)
    second = write("b.json", [(2, 90), (3, 120)], best_known=1.0)  # seed 2 again: this run wins; 1.0 the reference
    other = write("c.json", [(0, None), (1, None), (2, 30)], best_known=1.0, preset="edge")  # reported apart
    assert spread.main([first, second, other, "--subset", "3", "--target", "100"]) == 0
    edge, paper = capsys.readouterr().out.splitlines()[1:]
    # seeds 50, 500, 90, 120: subset medians 90, 120, 90, 120 -> 5-95% 90-120, at most 100 in half of them
    assert "paper" in paper and "4 seeds, median 105" in paper and "4 subsets: 90-120, at most 100 in 50%" in paper
    assert "edge" in edge and "3 seeds, median never; 1 subsets: never-never, at most 100 in 0%" in edge
