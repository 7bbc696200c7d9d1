"""The README's leaderboard tables from the results of `benchmarks/leaderboard.sh` (SIMULATED figures).

    python benchmarks/leaderboard_table.py [benchmarks/results/leaderboard] > docs/leaderboard.md
    python benchmarks/leaderboard_table.py --summary [benchmarks/results/leaderboard]     # the README's table

One markdown table per (preset, objective): per model, each agent's mean seconds per inference over seeds
(latency, or 1 / throughput) as its gap to the best placement anyone in the table found (never negative), at
budget 100 (read from the run's best-so-far curve) and at the run's budget, and its deterministic policy's gap
(``predict``, for agents that learn a policy, pure or hybrid); then, per model, the headroom
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
LEARNED = ("hsdag", "placeto", "rnn", "post", "go", "ppo", "ppo-node")
MODELS = ("resnet", "inception", "bert")
#: Budgets below the run's own read from the best-so-far curves.
EARLY_BUDGETS = (100,)


def is_learned(agent: str) -> bool:
    """A learned agent, pure or hybrid (``hybrid:hsdag``)."""
    return agent.removeprefix("hybrid:") in LEARNED


def _best_within(record: dict, budget: int) -> float | None:
    """The best latency `record`'s run had found after `budget` placements (its curve), None before any."""
    found = [latency for placements, latency in record.get("curve") or [] if placements <= budget]
    return min(found) if found else None


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
    budgets = [b for b in EARLY_BUDGETS if b < data["budget"]] + [data["budget"]]
    header = "| agent | " + " | ".join(f"{m} gap % at {' / '.join(map(str, budgets))} (predict)" for m in models) + " |"
    lines = [f"**{preset}, {objective}** (SIMULATED; seconds per inference: "
             f"{'1 / throughput' if objective == 'throughput' else 'one inference'}; gap to the best found, "
             f"mean over {len({r['seed'] for r in records})} seed(s); the smaller budgets read from the same runs' "
             f"best-so-far curves)", "", header, "|" + "---|" * (len(models) + 1)]
    for a in agents:
        cells = []
        for m in models:
            rs = by.get((m, a), [])
            lat = mean([r["latency_s"] for r in rs])
            pred = mean([r.get("predict_latency_s") for r in rs])
            failed = sum(not r.get("ok", True) for r in rs)
            if lat is None:
                cells.append("failed")
                continue
            early = [mean([_best_within(r, b) for r in rs]) for b in budgets[:-1]]
            cell = " / ".join(_fmt(None if v is None else 100 * (v / best[m] - 1)) for v in early + [lat])
            if pred is not None and is_learned(a):
                cell += f" ({_fmt(100 * (pred / best[m] - 1))})"
            if failed:
                cell += f" [{failed} failed]"
            cells.append(cell)
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines.append(_headroom_row(cases))
    # Sample efficiency: placements each searching agent needed to get within 5 / 2 / 1% of the best known value
    # (the optimum where proven, else the best any record reached), and its own compute per placement.
    summary = {(r["model"], r["agent"]): r for r in data.get("summary", [])}
    lines += ["", "placements to within 5 / 2 / 1% of the best known (median over the seeds that got there; "
              "never = no seed did) and agent ms per placement:", "",
              "| agent | " + " | ".join(models) + " |", "|" + "---|" * (len(models) + 1)]
    for a in [a for a in agents if is_learned(a) or a in ("random", "local-search")]:
        cells = []
        for m in models:
            row = summary.get((m, a)) or {}
            reached = [(row.get("to_within") or {}).get(k) for k in ("5", "2", "1")]
            text = " / ".join("-" if not w else "never" if not w["reached"] else f"{w['median']:.0f}" for w in reached)
            ms = row.get("agent_ms_per_placement")
            cells.append(text + ("" if ms is None else f"; {ms:.1f} ms"))
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
