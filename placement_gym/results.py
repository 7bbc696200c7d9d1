"""Results: records as files and tables, and pictures of them (the application's; every file goes through
`placement_gym.files`' safe writer, and what was run on what comes from there too).

* `records_to_json` / `write_records`: the results-file object, records plus versions, machine and settings;
  a path ending in ``.gz`` is written gzip-compressed, and `placement_gym.files.load_json` (like every reader of
  `placement_gym.schema`) reads ``x.json`` from ``x.json.gz`` where only that is stored.
* `read_placements`: a results or placement file read back, checked (`placement_gym.schema`) before anything is
  built from it.
* `summarize` / `format_table`: the paper's Table 2 layout (mean ± std over seeds per model and agent).
* `write_csv`, `plot_summary` (bars: % vs the reference), `plot_curves` (best-so-far latency against
  placements measured: how fast each agent got there).
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .files import MAX_RESULTS_BYTES, machine, refuse_existing, save_figure, versions, write_json, write_text
from .schema import (
    MAX_DEVICES, MAX_OPS, NAME, Boolean, Integer, ListOf, Number, Optional, Record, Text, check, mismatch, read_json,
)

SCHEMA_VERSION = 2
#: The agent name whose latency `summarize` measures every other agent's gap against.
OPTIMAL_AGENT = "optimal"
#: The agent whose row is no placement (the whole model on every device, `agents.baselines.replicate`): never the
#: reference of the gap to the optimum, and what `format_vs_replicate` states the best placement against.
REPLICATE_AGENT = "replicate"
#: Keys a record must have to be written (design.md's contract).
REQUIRED_KEYS = ("model", "agent", "backend", "seed", "latency_s", "speedup_vs_reference", "placements_measured",
                 "wall_s")


# ------------------------------------------------------------------------------------------- results files
def records_to_json(records: Sequence[Mapping[str, Any]], **metadata: Any) -> dict:
    """The results-file object: ``{"schema", "created", "versions", "machine", ..., "records": [...]}``.

    `metadata` (e.g. ``command="placement-gym compare ..."``, ``budget=500``) is stored at the top level.
    """
    for i, r in enumerate(records):
        missing = [k for k in REQUIRED_KEYS if k not in r]
        if missing:
            raise ValueError(f"record {i} lacks {missing[0]!r}; build records with placement_gym.evaluation")
    return {
        "schema": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "machine": machine(),
        **metadata,
        "records": [dict(r) for r in records],
    }


def write_records(path, records: Sequence[Mapping[str, Any]], *, overwrite: bool = False, **metadata: Any) -> Path:
    """Write `records_to_json(records, **metadata)` to `path` (refuses to replace a file unless `overwrite`)."""
    return write_json(path, records_to_json(records, **metadata), overwrite=overwrite)


#: Record keys written to CSV (the per-op placements, the curve and nested settings stay in the JSON).
CSV_KEYS = (
    "model", "agent", "backend", "seed", "latency_s", "speedup_vs_reference", "latency_reduction_pct",
    "predict_latency_s", "reference_latency_s", "placements_measured", "placements_to_within", "budget", "wall_s",
    "agent_ms_per_placement", "ok", "n_submodels", "device_counts", "devices", "simulated", "placement_source",
    "model_path", "error",
)


def write_csv(path, records: Sequence[Mapping[str, Any]], *, overwrite: bool = False) -> Path:
    """One CSV row per record (`CSV_KEYS`; lists space-separated, dicts as ``key:value``); never overwrites
    unless `overwrite`."""
    def cell(value: Any) -> Any:
        if isinstance(value, Mapping):
            return " ".join(f"{k}:{'' if v is None else v}" for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return " ".join(map(str, value))
        return value

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_KEYS, extrasaction="ignore")
    writer.writeheader()
    for r in records:
        writer.writerow({k: cell(r.get(k)) for k in CSV_KEYS})
    return write_text(path, buffer.getvalue(), overwrite=overwrite)


#: The most records one results file may hold.
MAX_RECORDS = 100_000
_LATENCY = Optional(Number(positive=True))
#: The fields of a record (a results file's, or a placement file itself) that a placement is drawn from; other
#: fields are not read. Device indices below the length of ``devices`` and one per op of the graph are checked
#: by `read_placements` and `Placements.check_fits`.
PLACEMENT_RECORD = Record(
    {"model": NAME, "agent": NAME, "seed": Integer(0, 2**64 - 1),
     "devices": ListOf(Text(min_len=1, max_len=200), min_len=1, max_len=MAX_DEVICES),
     "placement": ListOf(Integer(0, MAX_DEVICES - 1), min_len=1, max_len=MAX_OPS)},
    {"model_path": Optional(Text(min_len=1, max_len=4096)), "latency_s": _LATENCY, "reference_latency_s": _LATENCY,
     "n_submodels": Optional(Integer(0, MAX_OPS)), "simulated": Optional(Boolean())})
#: A results file (`records_to_json`) as far as its placements are read back.
RESULTS_FILE = Record({"records": ListOf(PLACEMENT_RECORD, max_len=MAX_RECORDS)})
_TOP_LEVEL = Record({}, what="an object: a results file (with records) or a placement file")


@dataclass(frozen=True)
class Placements:
    """The checked placement records of a file read by `read_placements`.

    Attributes:
        path: the file.
        records: its records (`PLACEMENT_RECORD`), every device index within its ``devices``.
        results_file: True for a results file (``records``), False for a placement file (one record, the file).
    """

    path: Path
    records: list[dict]
    results_file: bool

    def field(self, index: int, key: str) -> str:
        """How error messages name field `key` of record `index`."""
        return f"records[{index}].{key}" if self.results_file else key

    def check_fits(self, index: int, n_ops: int) -> None:
        """`SchemaError` unless record `index` places every op of its graph (`n_ops` ops) once."""
        placement = self.records[index]["placement"]
        if len(placement) != n_ops:
            raise mismatch(self.path, self.field(index, "placement"), placement,
                           f"one device index per op of its graph ({n_ops} ops)")


def read_placements(path: "str | os.PathLike") -> Placements:
    """The placement records of a results file (``--json`` of train, evaluate, compare) or of a placement file
    (train's ``<stem>.placement.json``), checked against `PLACEMENT_RECORD` before anything is built from them.

    Raises:
        FileNotFoundError: nothing at `path`.
        SchemaError: anything else (too big, not JSON, a field missing, of the wrong type or out of range): one
            line naming the file, the field and what is accepted.
    """
    path = Path(path)
    data = read_json(path, _TOP_LEVEL, max_bytes=MAX_RESULTS_BYTES, what="results or placement file")
    results_file = "records" in data
    check(data, RESULTS_FILE if results_file else PLACEMENT_RECORD, path)
    placements = Placements(path, data["records"] if results_file else [data], results_file)
    for i, record in enumerate(placements.records):
        n_devices = len(record["devices"])
        for op, device in enumerate(record["placement"]):
            if device >= n_devices:
                raise mismatch(path, f"{placements.field(i, 'placement')}[{op}]", device,
                               f"an index into devices: an integer from 0 to {n_devices - 1}")
    return placements


# ------------------------------------------------------------------------------------------------ tables
def summarize(records: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Mean and std over seeds per (model, agent), in first-seen order.

    Each row: model, agent, backend, simulated, n_seeds, n_failed, latency_mean_s, latency_std_s,
    reduction_mean_pct, reduction_std_pct (the paper's speedup % vs the reference placement),
    reference_latency_s, placements_measured (mean), wall_mean_s, best (True for the fastest agent(s) of its
    model), gap_to_optimal_pct (latency / the best mean latency of the model - 1, in %, where the ``optimal``
    agent ran on that model: its optimum, or a faster placement an agent found where it was not proven; >= 0 for
    a placement, below 0 where replicate, which is none, beats the optimum),
    predict_latency_mean_s (the agents' own deterministic placements), agent_ms_per_placement (mean), and
    to_within: per threshold of ``placements_to_within`` the seeds that got there and their median, min and
    max count.
    Failed seeds are counted and left out of the means.
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["model"], r["agent"])].append(r)
    rows = []
    for (model_, agent_), rs in groups.items():
        ok = [r for r in rs if r.get("ok", r["latency_s"] is not None) and r["latency_s"] is not None]
        lat = np.array([r["latency_s"] for r in ok], dtype=float)
        ref = np.array([r.get("reference_latency_s") or np.nan for r in rs], dtype=float)
        red = 100.0 * (1.0 - lat / np.array([r["reference_latency_s"] for r in ok], dtype=float)) if ok else lat
        rows.append({
            "model": model_,
            "agent": agent_,
            "backend": rs[0]["backend"],
            "simulated": bool(rs[0].get("simulated", False)),
            "n_seeds": len(rs),
            "n_failed": len(rs) - len(ok),
            "latency_mean_s": float(lat.mean()) if ok else None,
            "latency_std_s": float(lat.std()) if ok else None,
            "reduction_mean_pct": float(red.mean()) if ok else None,
            "reduction_std_pct": float(red.std()) if ok else None,
            "reference_latency_s": float(np.nanmedian(ref)) if np.isfinite(ref).any() else None,
            "placements_measured": float(np.mean([r["placements_measured"] for r in rs])),
            "wall_mean_s": float(np.mean([r["wall_s"] for r in rs])),
            "predict_latency_mean_s": _mean([r.get("predict_latency_s") for r in rs]),
            "agent_ms_per_placement": _mean([r.get("agent_ms_per_placement") for r in rs]),
            "to_within": _to_within(rs),
            "best": False,
        })
    fastest: dict[str, float] = {}
    for row in rows:
        if row["latency_mean_s"] is not None:
            fastest[row["model"]] = min(fastest.get(row["model"], np.inf), row["latency_mean_s"])
    for row in rows:  # ties (e.g. GPU-only and the optimum being the same placement) are all marked
        best = fastest.get(row["model"])
        row["best"] = row["latency_mean_s"] is not None and row["latency_mean_s"] <= best * (1 + 1e-9)
    # Where the exact optimum of the cost model was run: how far each agent is from the best latency any placement
    # in the table reached. That is the optimum when it is proven; when its time limit stopped it with a worse
    # placement than an agent found, the agent's is the reference, so a placement's gap is never negative.
    # Replicate is no placement: never the reference (its own gap may be negative).
    placed: dict[str, float] = {}
    for row in rows:
        if row["latency_mean_s"] is not None and row["agent"] != REPLICATE_AGENT:
            placed[row["model"]] = min(placed.get(row["model"], np.inf), row["latency_mean_s"])
    optimum = {r["model"]: min(r["latency_mean_s"], placed[r["model"]])
               for r in rows if r["agent"] == OPTIMAL_AGENT and r["latency_mean_s"]}
    for row in rows:
        opt = optimum.get(row["model"])
        row["gap_to_optimal_pct"] = (
            100.0 * (row["latency_mean_s"] / opt - 1.0) if opt and row["latency_mean_s"] is not None else None
        )
    return rows


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _to_within(records: Sequence[Mapping[str, Any]]) -> dict[str, dict]:
    """Per threshold: how many seeds got within it (``reached``) and the median placements they needed."""
    out = {}
    for r in records:
        for pct, n in (r.get("placements_to_within") or {}).items():
            out.setdefault(pct, []).append(n)
    summary = {}
    for pct, ns in out.items():
        reached = [n for n in ns if n is not None]
        summary[pct] = {"reached": len(reached), "seeds": len(ns),
                        "median": float(np.median(reached)) if reached else None,
                        "min": min(reached) if reached else None, "max": max(reached) if reached else None}
    return summary


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table: the `header` cells, a separator and one line per row of cells (strings, as shown)."""
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(row) + " |" for row in rows])


def vs_replicate(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Per model with a replicate row (`REPLICATE_AGENT`, `summarize`'s rows): the fastest placement (any other
    agent's row) against it: ``{"model", "agent", "latency_s", "replicate_s", "factor"}``, ``factor`` = replicate's
    seconds per inference / the placement's (above 1: the placement is faster; below 1: replicating the whole model
    on every device beats every placement in the table)."""
    out = []
    for model_ in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model_ and r["latency_mean_s"] is not None]
        replicate = next((r for r in mine if r["agent"] == REPLICATE_AGENT), None)
        placements = [r for r in mine if r["agent"] != REPLICATE_AGENT]
        if replicate is None or not placements:
            continue
        best = min(placements, key=lambda r: r["latency_mean_s"])
        out.append({"model": model_, "agent": best["agent"], "latency_s": best["latency_mean_s"],
                    "replicate_s": replicate["latency_mean_s"],
                    "factor": replicate["latency_mean_s"] / best["latency_mean_s"]})
    return out


def format_vs_replicate(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per model of `vs_replicate`: ``best placement vs replicate on M: AGENT 1.234 ms vs 1.517 ms:
    x1.23 (the placement is faster)``; empty without a replicate row."""
    lines = []
    for c in vs_replicate(rows):
        verdict = ("the placement is faster" if c["factor"] > 1 + 1e-9 else
                   "replicate is faster" if c["factor"] < 1 - 1e-9 else "the same")
        lines.append(f"best placement vs replicate on {c['model']}: {c['agent']} {c['latency_s'] * 1e3:.3f} ms vs "
                     f"{c['replicate_s'] * 1e3:.3f} ms: x{c['factor']:.2f} ({verdict})")
    return "\n".join(lines)


def format_learning_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """How the agents that measured more than one placement learned: the best placement found next to the
    agent's own deterministic placement (``predict``), the placements needed to get within 5/2/1 % of the
    best known latency (median [range] over the seeds that got there, and how many did when not all), and the
    agent's compute."""
    lines = []
    header = ("model", "agent", "best ms", "predict ms", "to 5%", "to 2%", "to 1%", "agent ms/pl")
    body = []
    for r in rows:
        if r["placements_measured"] <= 1 or r["agent"] == REPLICATE_AGENT:  # replicate: single devices, no search
            continue

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v * 1e3:.3f}"

        def within(pct: str) -> str:
            w = r["to_within"].get(pct)
            if not w:
                return "-"
            if w["median"] is None:
                return "never"
            spread = f" [{w['min']}-{w['max']}]" if w.get("min") is not None and w["min"] != w["max"] else ""
            cell = f"{w['median']:.0f}{spread}"
            return cell if w["reached"] == w["seeds"] else f"{cell} ({w['reached']}/{w['seeds']})"

        agent_ms = r.get("agent_ms_per_placement")
        body.append((r["model"], r["agent"], ms(r["latency_mean_s"]), ms(r.get("predict_latency_mean_s")),
                     within("5"), within("2"), within("1"), "-" if agent_ms is None else f"{agent_ms:.2f}"))
    if not body:
        return ""
    widths = [max(len(row[k]) for row in [header] + body) for k in range(len(header))]
    for row in [header] + body:
        lines.append("  ".join(f"{v:<{w}}" if k < 2 else f"{v:>{w}}" for k, (v, w) in enumerate(zip(row, widths))))
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def format_table(rows: Sequence[Mapping[str, Any]], *, reference_label: str = "reference") -> str:
    """The paper's Table 2 layout: one line per agent; per model the latency (ms) and the speedup % vs the
    reference placement (``100 * (1 - latency / reference)``, the paper's definition), plus, when the exact
    optimum was run, each agent's gap to it (``latency / optimum - 1``, %).

    Cells read ``mean±std`` over seeds (no std for a single seed); ``*`` marks the fastest agent per model.
    """
    models = list(dict.fromkeys(r["model"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    by_cell = {(r["model"], r["agent"]): r for r in rows}
    with_gap = {m: any(r.get("gap_to_optimal_pct") is not None for r in rows if r["model"] == m) for m in models}
    headers = {m: ["latency ms", f"% vs {reference_label}"] + (["gap to opt %"] if with_gap[m] else []) for m in models}

    def cells(row: Mapping[str, Any] | None, model_: str) -> list[str]:
        n = len(headers[model_])
        if row is None:
            return ["-"] * n
        if row["latency_mean_s"] is None:
            return ["failed"] + ["-"] * (n - 1)
        several = row["n_seeds"] - row["n_failed"] > 1
        lat = f"{row['latency_mean_s'] * 1e3:.3f}" + (f"±{row['latency_std_s'] * 1e3:.3f}" if several else "")
        red = f"{row['reduction_mean_pct']:+.1f}" + (f"±{row['reduction_std_pct']:.1f}" if several else "")
        if row["best"]:
            lat = "*" + lat
        if row["n_failed"]:
            lat += f" ({row['n_failed']} failed)"
        out = [lat, red]
        if with_gap[model_]:
            gap = row.get("gap_to_optimal_pct")
            out.append("-" if gap is None else f"{gap:+.1f}")
        return out

    table = {(m, a): cells(by_cell.get((m, a)), m) for m in models for a in agents}
    widths = {m: [max([len(headers[m][k])] + [len(table[m, a][k]) for a in agents]) for k in range(len(headers[m]))]
              for m in models}
    agent_w = max([len("agent")] + [len(a) for a in agents])

    def join(model_: str, values: Sequence[str]) -> str:
        return "  ".join(f"{v:>{w}}" for v, w in zip(values, widths[model_]))

    block_w = {m: sum(widths[m]) + 2 * (len(widths[m]) - 1) for m in models}
    lines = [" " * agent_w + "".join(f" | {m:^{block_w[m]}}" for m in models),
             f"{'agent':<{agent_w}}" + "".join(f" | {join(m, headers[m])}" for m in models)]
    lines.append("-" * len(lines[1]))
    for a in agents:
        lines.append(f"{a:<{agent_w}}" + "".join(f" | {join(m, table[m, a])}" for m in models))
    return "\n".join(lines)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt


def _agent_colours(agents: Sequence[str]) -> dict[str, tuple]:
    """A distinct colour per agent, the same in every plot of one file set: tab20's ten strong colours first,
    then its ten light ones."""
    plt = _pyplot()
    tab20 = plt.get_cmap("tab20").colors
    palette = list(tab20[0::2]) + list(tab20[1::2])
    return {a: palette[i % len(palette)] for i, a in enumerate(agents)}


def _kind(rows_or_records: Sequence[Mapping[str, Any]]) -> str:
    backend = ", ".join(sorted({str(r.get("backend")) for r in rows_or_records}))
    simulated = any(r.get("simulated") for r in rows_or_records)
    return f"{backend} backend, {'SIMULATED' if simulated else 'measured'} latencies"


def plot_summary(path, rows: Sequence[Mapping[str, Any]], *, reference_label: str = "reference",
                 title: str | None = None, overwrite: bool = False) -> Path:
    """A grouped bar chart (PNG): latency reduction % vs the reference per model and agent (higher is faster),
    std over seeds as error bars."""
    plt = _pyplot()
    refuse_existing(path, overwrite)
    models = list(dict.fromkeys(r["model"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    by_cell = {(r["model"], r["agent"]): r for r in rows}
    width = 0.8 / max(len(agents), 1)
    colour_of = _agent_colours(agents)
    fig, ax = plt.subplots(figsize=(max(7.0, 2.8 + len(models) * len(agents) * 0.3), 4.0))
    for k, a in enumerate(agents):
        means = [by_cell.get((m, a), {}).get("reduction_mean_pct") for m in models]
        stds = [by_cell.get((m, a), {}).get("reduction_std_pct") for m in models]
        xs = [i + (k - (len(agents) - 1) / 2) * width for i in range(len(models))]
        ax.bar(xs, [v if v is not None else 0.0 for v in means], width,
               yerr=[v if v is not None else 0.0 for v in stds], label=a, capsize=2, color=colour_of[a])
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel(f"latency reduction % vs {reference_label} (higher = faster)")
    ax.set_title(title or f"latency reduction vs {reference_label} ({_kind(rows)})")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return save_figure(path, fig, overwrite=overwrite)


def _best_so_far(curve: Sequence[Sequence[float]], xs: np.ndarray) -> np.ndarray:
    """The best-so-far latency of a `curve` (``[[placements, latency_s], ...]``) at placement counts `xs`
    (nan before its first point)."""
    out = np.full(len(xs), np.nan)
    for steps, latency in curve:
        out[xs >= steps] = latency  # a curve only ever improves, so the last point at or before x is its value
    return out


def plot_curves(path, records: Sequence[Mapping[str, Any]], *, title: str | None = None,
                overwrite: bool = False, optima: Mapping[str, float] | None = None,
                columns: int | None = None, within_pct: float = 2.0) -> Path:
    """Best-so-far latency (ms) against placements measured (PNG), one panel per model.

    Agents that measured more than one placement are drawn as their median over seeds with the min-max band
    of the seeds; one-shot planners (single devices, OpenVINO's choice, greedy, METIS, the optimum: at most one
    placement) and replicate (no placement) as dashed horizontal lines at their mean latency.

    Args:
        optima: model -> a known optimum latency (s): its panel shows the gap (%) to it instead of milliseconds,
            with a dotted line at `within_pct` (the learning sanity suite's curves).
        columns: panels per row (default: every panel in one row).
    """
    plt = _pyplot()
    refuse_existing(path, overwrite)
    models = list(dict.fromkeys(r["model"] for r in records))
    columns = columns or len(models)
    rows = -(-len(models) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns + 2.5, 4.5 * rows), squeeze=False)
    colour_of = _agent_colours(list(dict.fromkeys(r["agent"] for r in records)))
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    for ax, model_ in zip(axes.flat, models):
        mine = [r for r in records if r["model"] == model_]
        optimum = (optima or {}).get(model_)

        def scale(seconds):  # what the panel's y axis shows
            return 1e3 * seconds if optimum is None else 100.0 * (seconds / optimum - 1.0)

        horizon = max([r["placements_measured"] for r in mine] + [2])
        xs = np.arange(1, horizon + 1)
        for agent_ in dict.fromkeys(r["agent"] for r in mine):
            runs = [r for r in mine if r["agent"] == agent_]
            colour = colour_of[agent_]
            if max(r["placements_measured"] for r in runs) <= 1 or agent_ == REPLICATE_AGENT:  # no placement
                latencies = [r["latency_s"] for r in runs if r["latency_s"] is not None]
                if latencies:
                    ax.axhline(scale(float(np.mean(latencies))), color=colour, linestyle="--", linewidth=1.0,
                               label=agent_)
                continue
            curves = scale(np.array([_best_so_far(r.get("curve") or [], xs) for r in runs]))
            with np.errstate(all="ignore"):
                seen = ~np.isnan(curves).all(axis=0)
                if not seen.any():
                    continue
                ax.fill_between(xs[seen], np.nanmin(curves[:, seen], axis=0), np.nanmax(curves[:, seen], axis=0),
                                color=colour, alpha=0.2, linewidth=0)
                ax.step(xs[seen], np.nanmedian(curves[:, seen], axis=0), where="post", color=colour,
                        label=f"{agent_} ({len(runs)} seed{'s' if len(runs) > 1 else ''})")
        ax.set_xscale("log")
        ax.set_xlabel("placements measured")
        if optimum is None:
            ax.set_ylabel("best latency so far (ms)")
        else:
            ax.axhline(within_pct, color="black", linestyle=":", linewidth=1.0)
            ax.set_yscale("symlog", linthresh=within_pct)
            ax.set_ylim(bottom=0.0)  # a best-so-far latency is never below the optimum
            ax.set_ylabel("best so far: gap % to the optimum")
        ax.set_title(model_)
        ax.grid(True, alpha=0.3)
    handles = {label: h for ax in axes.flat for h, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(handles.values()), list(handles.keys()), fontsize="small", loc="center left",
               bbox_to_anchor=(0.995, 0.5), frameon=False)
    fig.suptitle(title or f"best latency so far ({_kind(records)}); bands: min-max over seeds; dashed: one-shot")
    fig.tight_layout()
    return save_figure(path, fig, overwrite=overwrite)


__all__ = [
    "CSV_KEYS", "MAX_RECORDS", "OPTIMAL_AGENT", "PLACEMENT_RECORD", "Placements", "REPLICATE_AGENT", "REQUIRED_KEYS",
    "RESULTS_FILE", "SCHEMA_VERSION", "format_learning_table", "format_table", "format_vs_replicate", "markdown_table",
    "plot_curves", "plot_summary", "read_placements", "records_to_json", "summarize", "vs_replicate", "write_csv",
    "write_records",
]
