"""The README's leaderboard tables from the results of `benchmarks/leaderboard.sh` (SIMULATED figures).

    python benchmarks/leaderboard_table.py [benchmarks/results/leaderboard] > docs/leaderboard.md
    python benchmarks/leaderboard_table.py --summary [benchmarks/results/leaderboard]     # the README's table

One markdown table per (preset, objective): per model, each agent's mean seconds per inference over seeds
(latency, or 1 / throughput) as its gap to the best placement anyone in the table found (never negative), and
its deterministic policy's gap (``predict``, for agents that learn a policy); then, per model, the headroom
(best single device / best found - 1: what placement can win), the best found and its lower bound (from the
``optimal`` row: "proven", or a bound the time limit left).
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

SINGLE_SUFFIX = "-only"
#: Agents that learn a policy: their deterministic placement (predict) is shown beside their best.
LEARNED = ("hsdag", "placeto", "rnn", "post", "ppo", "ppo-node")
MODELS = ("resnet", "inception", "bert")


def _fmt(value: float | None) -> str:
    """A gap in %: never negative (the best found is the minimum over the table; means over seeds can round
    a hair below it)."""
    return "-" if value is None else f"{max(value, 0.0):+.1f}"


def table(path: Path) -> tuple[str, list[dict]]:
    data = json.loads(path.read_text())
    records = data["records"]
    settings = data["backend_settings"] if isinstance(data["backend_settings"], dict) else records[0]["backend_settings"]
    preset, objective = settings.get("profile"), settings.get("objective", "latency")
    by = defaultdict(list)
    for r in records:
        by[r["model"], r["agent"]].append(r)
    agents = list(dict.fromkeys(r["agent"] for r in records))
    models = [m for m in MODELS if any(r["model"] == m for r in records)]

    def mean(values):
        values = [v for v in values if v is not None and np.isfinite(v)]
        return float(np.mean(values)) if values else None

    best, cases = {}, []
    for m in models:
        found = [v for (model, _), rs in by.items() if model == m for r in rs
                 for v in (r["latency_s"], r.get("predict_latency_s")) if v is not None and r.get("ok", True)]
        best[m] = min(found)
        single = min(mean([r["latency_s"] for r in by[m, a]]) for a in agents if a.endswith(SINGLE_SUFFIX)
                     and mean([r["latency_s"] for r in by[m, a]]) is not None)
        plan = next((r["extra"].get("plan", {}) for r in by.get((m, "optimal"), [])), {})
        bound = plan.get("lower_bound_s")
        cases.append({"preset": preset, "objective": objective, "model": m, "best_single_s": single,
                      "best_found_s": best[m], "headroom_pct": 100 * (single / best[m] - 1),
                      "lower_bound_s": bound, "proven": plan.get("status") == "optimal"})
    header = "| agent | " + " | ".join(f"{m} gap % (predict)" for m in models) + " |"
    lines = [f"**{preset}, {objective}** (SIMULATED; seconds per inference: "
             f"{'1 / throughput' if objective == 'throughput' else 'one inference'}; gap to the best found, "
             f"mean over {len({r['seed'] for r in records})} seeds, budget {data['budget']} placements)", "", header, "|" + "---|" * (len(models) + 1)]
    for a in agents:
        cells = []
        for m in models:
            rs = by.get((m, a), [])
            lat = mean([r["latency_s"] for r in rs])
            pred = mean([r.get("predict_latency_s") for r in rs])
            failed = sum(not r.get("ok", True) for r in rs)
            cell = "failed" if lat is None else _fmt(100 * (lat / best[m] - 1))
            if pred is not None and lat is not None and a in LEARNED:
                cell += f" ({_fmt(100 * (pred / best[m] - 1))})"
            if failed and lat is not None:
                cell += f" [{failed} failed]"
            cells.append(cell)
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines.append(_headroom_row(cases))
    # Sample efficiency: placements each learning agent (and random search) needed to get within 5% of the
    # best known value (the optimum where proven, else the best any record reached), from the summary rows.
    summary = {(r["model"], r["agent"]): r for r in data.get("summary", [])}
    lines += ["", "placements to within 5% (median over the seeds that got there; k/n seeds):", "",
              "| agent | " + " | ".join(models) + " |", "|" + "---|" * (len(models) + 1)]
    for a in [a for a in agents if a in LEARNED or a == "random"]:
        cells = []
        for m in models:
            w = (summary.get((m, a)) or {}).get("to_within", {}).get("5")
            cells.append("-" if not w else "never" if not w["reached"] else f"{w['median']:.0f} ({w['reached']}/{w['seeds']})")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines), cases, {a: [_gap(by, m, a, best) for m in models] for a in agents}


def _gap(by: dict, model: str, agent: str, best: dict) -> float | None:
    """Mean gap (%) of `agent`'s latency over seeds to the best found on `model`; None if it never ran."""
    values = [r["latency_s"] for r in by.get((model, agent), []) if r["latency_s"] is not None]
    return 100 * (float(np.mean(values)) / best[model] - 1) if values else None


def summary_table(tables: list[tuple[str, list[dict], dict]]) -> str:
    """One row per agent, one column per (preset, objective): the agent's gap to the best found, geometric mean
    of (1 + gap) over the models, and the headroom row beneath (best single device vs best found)."""
    def geomean(gaps: list) -> float | None:
        gaps = [g for g in gaps if g is not None]
        return 100 * (float(np.exp(np.mean(np.log1p(np.asarray(gaps) / 100)))) - 1) if gaps else None

    columns = [(cases[0]["preset"], cases[0]["objective"]) for _, cases, _ in tables]
    agents = list(dict.fromkeys(a for _, _, gaps in tables for a in gaps if not a.endswith(SINGLE_SUFFIX)))
    lines = ["| agent | " + " | ".join(f"{p} {o}" for p, o in columns) + " |", "|" + "---|" * (len(columns) + 1)]
    lines.append("| best single device | " + " | ".join(
        _fmt(geomean([100 * (c["best_single_s"] / c["best_found_s"] - 1) for c in cases])) for _, cases, _ in tables)
        + " |")
    for a in agents:
        lines.append(f"| {a} | " + " | ".join(_fmt(geomean(gaps.get(a, []))) for _, _, gaps in tables) + " |")
    return "\n".join(lines)


def _headroom_row(cases: list[dict]) -> str:
    return ("| **headroom** (best single device vs best found) | " + " | ".join(
        f"{c['headroom_pct']:.0f}% ({c['best_single_s'] * 1e3:.2f} -> {c['best_found_s'] * 1e3:.2f} ms; "
        + ("proven" if c["proven"] else f"bound {c['lower_bound_s'] * 1e3:.2f} ms" if c["lower_bound_s"] else "no bound")
        + ")" for c in cases) + " |")


def main(argv: list[str]) -> int:
    summary = "--summary" in argv
    argv = [a for a in argv if a != "--summary"]
    folder = Path(argv[0] if argv else "benchmarks/results/leaderboard")
    all_cases, tables = [], []
    for path in sorted(folder.glob("*.json")):
        text, cases, gaps = table(path)
        all_cases += cases
        tables.append((text, cases, gaps))
        if not summary:
            print(text + "\n")
    if summary:
        print(summary_table(tables) + "\n")
    big = [c for c in all_cases if c["headroom_pct"] >= 15]
    print(f"cases with headroom >= 15%: {len(big)} of {len(all_cases)}: "
          + ", ".join(f"{c['preset']}/{c['objective']}/{c['model']}" for c in all_cases if c["headroom_pct"] < 15)
          + (" below" if len(big) < len(all_cases) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
