"""How much does a median over a few seeds say? The spread of "placements to within p%" medians over seed subsets.

    python benchmarks/seed_spread.py benchmarks/results/compare_paper_hsdag_fix_500x5.json \
        benchmarks/results/compare_paper_hsdag_fix_seeds5-9_500x5.json \
        benchmarks/results/compare_paper_hsdag_fix_seeds10-19_500x10.json --subset 5 --target 100

For every (agent, model) of the given `placement-gym compare` results files (their seeds pooled; a seed in two files
counts once, the last file's), each run's placements until its best-so-far latency was within ``--percent`` % of the
best latency known (the record's `placements_to_within`; a run that never got there counts as never, above any
number), then the median over all seeds and, over EVERY subset of ``--subset`` of those seeds (enumerated, no
sampling), the median of the subset: its 5th-95th percentile range and the share of subsets whose median is at most
``--target``. A target quoted on a few seeds' median (the convergence issue's "5 seeds, median") is then read with
the spread that the choice of seeds alone gives it.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import defaultdict

import numpy as np


def placements_to_within(record: dict, percent: float) -> float:
    """The record's placements to within `percent` % of the best known latency (inf: never)."""
    value = (record.get("placements_to_within") or {}).get(f"{percent:g}")
    return math.inf if value is None else float(value)


def subset_medians(values: list[float], size: int) -> np.ndarray:
    """The median of every `size`-subset of `values` (enumerated)."""
    return np.array([np.median(subset) for subset in itertools.combinations(values, size)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="placement-gym compare results JSON files")
    parser.add_argument("--percent", type=float, default=2.0, help="within this %% of the best known (default 2)")
    parser.add_argument("--subset", type=int, default=5, help="seeds per subset (default 5)")
    parser.add_argument("--target", type=float, default=100.0, help="placements the subset median is held to")
    args = parser.parse_args(argv)
    runs: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for path in args.files:
        with open(path) as f:
            for record in json.load(f)["records"]:
                runs[(record["agent"], record["model"])][record["seed"]] = placements_to_within(record, args.percent)
    print(f"placements to within {args.percent:g}%: median over all seeds; over every {args.subset}-seed subset, "
          f"the subset median's 5-95% range and the share of subsets at most {args.target:g}")
    for (agent, model), by_seed in sorted(runs.items()):
        values = [by_seed[seed] for seed in sorted(by_seed)]
        if len(values) < args.subset:
            print(f"{agent:>10} {model:>10}: {len(values)} seeds, fewer than --subset {args.subset}")
            continue
        medians = subset_medians(values, args.subset)
        low, high = np.percentile(medians, [5, 95])
        print(f"{agent:>10} {model:>10}: {len(values)} seeds, median {np.median(values):g}; {len(medians)} subsets: "
              f"{low:g}-{high:g}, at most {args.target:g} in {np.mean(medians <= args.target):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
