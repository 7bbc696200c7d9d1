"""Sample efficiency of the learned agents, from `placement-gym compare` results files, as markdown tables.

For every (preset, model) the reference is the best latency known across ALL the given files of that preset (an
`optimal` row's, which takes the other rows' placements as warm starts, or any agent's if faster), so files
measured apart (e.g. some agents re-run after a change) share one reference and no gap is negative. Per agent
and model: the best placement's gap to that reference (median [min-max] over the seeds) and the placements
needed to get within 5 / 2 / 1 % of it, read from each run's best-so-far `curve` (median over the seeds that got
there, "(k/n)" where not all did, "never" where none did). Where an agent appears in several files of a preset,
the last file given wins (list the re-run last).

    python benchmarks/leaderboard/efficiency_table.py benchmarks/results/efficiency_ai_pc_500x5.json \
        benchmarks/results/efficiency_ai_pc_c2f_500x5.json
"""
from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from placement_gym.files import load_json

THRESHOLDS = (5, 2, 1)


def placements_to_within(curve: list, reference_s: float, percent: float) -> int | None:
    """First placement count at which the best-so-far latency is within `percent` % of `reference_s`."""
    for placements, best_s in curve:
        if best_s is not None and best_s <= reference_s * (1 + percent / 100):
            return int(placements)
    return None


def summarise(values: list[int | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "never"
    text = f"{statistics.median(got):.0f}"
    return text if len(got) == len(values) else f"{text} ({len(got)}/{len(values)})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="compare results JSON files")
    args = parser.parse_args(argv)
    best: dict[tuple[str, str], float] = {}
    runs: dict[tuple[str, str, str], list[dict]] = {}  # (preset, agent, model) -> records of the last file
    for path in args.files:
        data = load_json(path)  # x.json or x.json.gz
        preset = data["arguments"].get("profile") or "default"
        latest: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
        for record in data["records"]:
            key = (preset, record["model"])
            for value in (record.get("best_known_latency_s"), record["latency_s"] if record["ok"] else None):
                if value is not None:
                    best[key] = min(best.get(key, float("inf")), value)
            if record["agent"] != "optimal":
                latest[(preset, record["agent"], record["model"])].append(record)
        runs.update(latest)
    for preset in dict.fromkeys(p for p, _, _ in runs):
        models = list(dict.fromkeys(m for p, _, m in runs if p == preset))
        agents = list(dict.fromkeys(a for p, a, _ in runs if p == preset))
        print(f"\n{preset}: gap % to the best known (median [range]) | placements to within 5 / 2 / 1 %")
        print("| agent | " + " | ".join(f"{m} gap % | {m} to 5 / 2 / 1 %" for m in models) + " |")
        print("|---|" + "---|---|" * len(models))
        for agent in agents:
            cells = [agent]
            for model in models:
                records, reference = runs.get((preset, agent, model), []), best.get((preset, model))
                if not records or reference is None:
                    cells += ["-", "-"]
                    continue
                gaps = [(r["latency_s"] / reference - 1) * 100 if r["ok"] else float("inf") for r in records]
                finite = [g for g in gaps if g != float("inf")]
                failed = len(gaps) - len(finite)
                gap = (f"{statistics.median(gaps):.1f} [{min(finite):.1f}-{max(finite):.1f}]" if finite and not failed
                       else f"failed ({failed}/{len(gaps)})" if not finite
                       else f"{statistics.median(finite):.1f} ({failed}/{len(gaps)} failed)")
                reach = " / ".join(summarise([placements_to_within(r["curve"], reference, t) if r["ok"] else None
                                              for r in records]) for t in THRESHOLDS)
                cells += [gap, reach]
            print("| " + " | ".join(cells) + " |")
        print("reference ms: " + ", ".join(f"{m} {best[(preset, m)] * 1e3:.3f}" for m in models))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
