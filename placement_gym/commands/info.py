"""``info``: OpenVINO's devices, the zoo, the simulated presets, a model's graph statistics and the dataset."""
from __future__ import annotations

import argparse
import json
import sys


def cmd_info(args: argparse.Namespace) -> int:
    from ..devices import available_devices
    from ..graph import format_stats_table
    from ..models import load_graph, zoo_names

    from ..backends.profiles import PRESETS, Profile

    presets = {}
    for name in PRESETS:
        profile = Profile.preset(name)
        presets[name] = {"description": profile.description, "schedule": profile.schedule, "devices": [
            {"name": d.name, "description": d.description, "memory_bytes": d.memory_bytes, "precision": d.precision,
             "hetero": d.hetero, "unsupported_ops": list(d.unsupported_ops)} for d in profile.devices]}
    report: dict = {"devices": available_devices(), "models": zoo_names(), "presets": presets}
    if args.model:
        report["graph"] = load_graph(args.model).stats()
    if args.dataset:
        report["dataset"] = _dataset_rows(load_graph)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"OpenVINO devices: {', '.join(report['devices'])}")
    print(f"zoo models: {', '.join(report['models'])}")
    print("simulated presets (--profile NAME):")
    for name, preset in presets.items():
        print(f"  {name}: " + ", ".join(d["name"] + (f" ({d['memory_bytes'] / 1e9:g} GB)" if d["memory_bytes"] else "")
                                      + ("" if d["hetero"] else ", whole model only")
                                      for d in preset["devices"]))
    if args.model:
        s = report["graph"]
        print("\n" + format_stats_table([s]))
        top = list(s["compute"]["op_types"].items())[:8]
        print("  most common compute ops: " + ", ".join(f"{t} {c}" for t, c in top))
    if args.dataset:
        rows = report["dataset"]
        print(f"\ndataset ({len(rows)} graphs; model=NAME, or model='dataset:train|val|test|all' for a multi-graph env):")
        print(f"  {'name':<14} {'family':<10} {'split':<6} {'ops':>6} {'edges':>6}  description")
        for r in rows:
            print(f"  {r['name']:<14} {r['family']:<10} {r['split']:<6} {r['compute_ops']:>6} {r['edges']:>6}  "
                  f"{r['description']}")
    return 0


def _dataset_rows(load_graph) -> list[dict]:
    """One row per dataset entry with its graph's size; entries not cached yet are built first (seconds each,
    once), which is said on stderr."""
    from ..models.dataset import dataset_entries
    from ..models.zoo import dataset_is_cached as is_cached

    rows = []
    for entry in dataset_entries():
        if not is_cached(entry.name):
            print(f"building dataset graph {entry.name} (once; cached after)...", file=sys.stderr, flush=True)
        graph = load_graph(entry.name)
        rows.append({"name": entry.name, "family": entry.family, "split": entry.split, "compute_ops": graph.n_ops,
                     "edges": graph.n_edges, "description": entry.description, "inputs": entry.inputs})
    return rows
