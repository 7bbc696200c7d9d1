"""How much does a median over a few seeds say? The spread of "placements to within p%" medians over seed subsets.

    python benchmarks/leaderboard/seed_spread.py benchmarks/results/compare_paper_hsdag_fix_500x5.json \
        benchmarks/results/compare_paper_hsdag_fix_seeds5-9_500x5.json \
        benchmarks/results/compare_paper_hsdag_fix_seeds10-19_500x10.json --subset 5 --target 100

For every (preset, agent, model) of the given `placement-gym compare` results files (their seeds pooled: give files of
one setting; a seed in two files counts once, the last file's), each run's placements until its best-so-far latency
was within ``--percent`` % of the best latency known for that preset and model in ALL the files (the lowest of their records' best-known and measured latencies,
so files run apart share one reference, as in efficiency_table.py; a run that never got there counts as never,
above any number), then the median over all seeds and, over EVERY subset of ``--subset`` of those seeds
(enumerated, no sampling), the median of the subset: its 5th-95th percentile range and the share of subsets whose
median is at most ``--target``. A target quoted on a few seeds' median (the convergence issue's "5 seeds, median") is then read with
the spread that the choice of seeds alone gives it.
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from placement_gym.files import load_json

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks.leaderboard.efficiency_table import placements_to_within  # noqa: E402



def setting(record: dict) -> tuple[str, str]:
    """(preset, model) of a run: what one reference latency belongs to."""
    return (record.get("backend_settings") or {}).get("profile", "?"), record["model"]


def best_known(records: list[dict]) -> dict[tuple[str, str], float]:
    """Per (preset, model), the lowest best-known or measured latency (seconds) among `records`."""
    best: dict[tuple[str, str], float] = {}
    for record in records:
        for latency in (record.get("best_known_latency_s"), record.get("latency_s") if record.get("ok") else None):
            if latency:
                best[setting(record)] = min(best.get(setting(record), math.inf), latency)
    return best


def count(value: float) -> str:
    """A placement count as printed ("never" for inf)."""
    return "never" if math.isinf(value) else f"{value:g}"


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
    records = []
    for path in args.files:
        records += load_json(path)["records"]  # x.json or x.json.gz
    reference = best_known(records)
    runs: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for record in records:  # in file order: a seed's run in a later file replaces it
        placements = placements_to_within(record["curve"], reference[setting(record)], args.percent)
        preset, model = setting(record)
        runs[(preset, record["agent"], model)][record["seed"]] = math.inf if placements is None else float(placements)
    print(f"placements to within {args.percent:g}%: median over all seeds; over every {args.subset}-seed subset, "
          f"the subset median's 5-95% range and the share of subsets at most {args.target:g}")
    for (preset, agent, model), by_seed in sorted(runs.items()):
        values = [by_seed[seed] for seed in sorted(by_seed)]
        name = f"{preset:>7} {agent:>10} {model:>10}"
        if len(values) < args.subset:
            print(f"{name}: {len(values)} seeds, fewer than --subset {args.subset}")
            continue
        medians = subset_medians(values, args.subset)
        # nearest ranks, no interpolation: a percentile between a count and "never" is not a number
        low, high = np.percentile(medians, [5, 95], method="nearest")
        print(f"{name}: {len(values)} seeds, median {count(float(np.median(values)))}; {len(medians)} subsets: "
              f"{count(low)}-{count(high)}, at most {args.target:g} in {np.mean(medians <= args.target):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
