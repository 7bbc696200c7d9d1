"""Fit the simulated presets to OpenVINO's published benchmark figures, and write the table that compares them.

    python benchmarks/published/fit_presets.py --write     # fit, write placement_gym/data/presets.json and
                                                          # docs/results/presets.md
    python benchmarks/published/fit_presets.py             # print the comparison of the shipped presets only

Each device of a preset (`placement_gym.backends.profiles.PRESET_SPECS`) is a real part with spec-sheet figures
(peak FLOP/s at the precision OpenVINO runs it in, memory bandwidth). Its simulated latency on one model alone is
linear in three figures the spec sheet does not give::

    latency = launch_overhead_s * launches + matrix_ideal_s / matrix_efficiency + other_ideal_s / default_efficiency

(`DeviceProfile.roofline_terms`: launches and ideal seconds of each op, summed over the model's matrix ops and the
others). The fit chooses them, per device, so that the device's simulated latencies of ResNet-50, BERT-base and
MobileNet-V2 match the published figures mapped to batch-1 latency at its precision
(`placement_gym.backends.published_figures.published_latency`): least squares on the relative error, with the
efficiencies at most 1 (the spec's peak is a ceiling) and the launch overhead between 0 and 1 ms. The table then
measures every preset device on each model with the simulated backend itself and sets it beside the published
figure: the ratio, and whether the devices rank as published.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from placement_gym.backends.profiles import (MATRIX_OPS, PRESET_SPECS, PRESETS_FILE, Profile, build_preset,
                                             spec_device)
from placement_gym.backends.published_figures import PUBLISHED_CSV, precision_exponent, published_latency
from placement_gym.backends.simulated import COST_MODEL_VERSION, SimulatedBackend
from placement_gym.models import load_graph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file: import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

#: Published model name -> the zoo model that stands for it.
MODELS = {"resnet-50": "resnet", "bert-base-cased": "bert", "mobilenet-v2": "mobilenet"}
#: The largest efficiency the fit may choose. Above 1 an op runs faster than its roofline at the spec's DRAM
#: bandwidth: batch-1 activations mostly stay in caches, which the roofline does not model.
MAX_EFFICIENCY = 10.0
#: The bound every preset device meets on every published figure (ratio of simulated to published latency).
TOLERANCE = 0.35
TABLE_PAGE = REPOSITORY / "docs" / "results" / "presets.md"
COMMAND = "python benchmarks/published/fit_presets.py --write"


def _terms(part, graph) -> np.ndarray:
    """(3,) launches, matrix ideal seconds, other ideal seconds of `graph` on `part` alone."""
    device = spec_device(part)
    launches, ideal = device.roofline_terms(graph)
    matrix = np.array([t in MATRIX_OPS for t in graph.op_types])
    return np.array([launches.sum(), ideal[matrix].sum(), ideal[~matrix].sum()])


def fit_part(part, graphs: dict[str, object]) -> dict:
    """The three fitted figures of `part` from the published latencies of `graphs` (published name -> graph)."""
    from scipy.optimize import lsq_linear

    rows, targets, residuals = [], [], {}
    for published, graph in graphs.items():
        target = published_latency(published, part.platform, part.published_device, part.precision).seconds
        if target is None:
            continue
        rows.append(_terms(part, graph) / target)
        targets.append(published)
    if not rows:
        raise ValueError(f"no published latency for {part.part}")
    a = np.array(rows)
    # x = (launch_overhead_s, 1 / matrix_efficiency, 1 / default_efficiency); each row wants a @ x = 1.
    solution = lsq_linear(a, np.ones(len(rows)), bounds=([0.0, 1.0 / MAX_EFFICIENCY, 1.0 / MAX_EFFICIENCY], [1e-3, 1e6, 1e6]))
    launch, inverse_matrix, inverse_other = solution.x.tolist()
    for model, row in zip(targets, a):
        residuals[model] = round(float(row @ solution.x) - 1.0, 4)
    return {"launch_overhead_s": launch, "matrix_efficiency": 1.0 / inverse_matrix,
            "default_efficiency": 1.0 / inverse_other, "residuals": residuals}


def fit_all(graphs: dict[str, object]) -> dict:
    """The presets file's content: every preset's fit, with how it was made."""
    fitted = {name: {part.name: fit_part(part, graphs) for part in spec.parts} for name, spec in PRESET_SPECS.items()}
    return {"command": COMMAND, "cost_model_version": COST_MODEL_VERSION, "precision_exponent": precision_exponent(),
            "sources": [f"{PUBLISHED_CSV.relative_to(REPOSITORY)}: OpenVINO's published benchmark data, OV-2024.1"],
            "presets": fitted}


def comparison(profiles: "dict[str, Profile]", graphs: dict[str, object]) -> list[dict]:
    """One row per (preset, model, device): the simulated single-device latency beside the published figure, and
    each model's device ranks under both (1 = fastest) where the figure is published."""
    out = []
    for name, profile in profiles.items():
        backend = SimulatedBackend(profile)
        for published, graph in graphs.items():
            rows = []
            for d, part in enumerate(PRESET_SPECS[name].parts):
                simulated = backend.measure(graph, np.full(graph.n_ops, d, dtype=np.int64))
                mapped = published_latency(published, part.platform, part.published_device, part.precision)
                rows.append({"preset": name, "model": published, "device": part.name, "part": part.part,
                             "precision": part.precision, "published_s": mapped.seconds, "how": mapped.how,
                             "simulated_s": simulated.latency_s if simulated.ok else None,
                             "error": None if simulated.ok else simulated.error})
            ranked = [r for r in rows if r["published_s"] is not None and r["simulated_s"] is not None]
            for key, rank in (("published_s", "published_rank"), ("simulated_s", "simulated_rank")):
                for position, row in enumerate(sorted(ranked, key=lambda r: r[key]), start=1):
                    row[rank] = position
            for row in rows:
                if row["published_s"] is not None and row["simulated_s"] is not None:
                    row["ratio"] = row["simulated_s"] / row["published_s"]
            out.extend(rows)
    return out


def markdown(rows: list[dict], exponent: float) -> str:
    """The generated page (docs/results/presets.md)."""
    lines = [
        "# The presets beside OpenVINO's published figures", "",
        f"Generated by `{COMMAND}`; do not edit. SIMULATED latencies of each preset device running the whole model "
        "alone (the simulated backend, cost model version "
        f"{COST_MODEL_VERSION}) beside OpenVINO's published benchmark figures (release OV-2024.1, "
        "`placement_gym/data/published/ov2024.1_benchmarks.csv`) mapped to batch-1 latency at the precision the "
        "preset runs the device in: the published latency at that precision where there is one (the Xeon's BF16), "
        f"else the INT8 latency times (INT8 throughput / that precision's throughput) ^ {exponent:.3f}, the exponent "
        "fitted on the rows that publish both an INT8 and a BF16 latency "
        "(`placement_gym.backends.published_figures`). Rank: 1 = the fastest device of the preset on that model, "
        f"among those with a published figure. Every ratio must lie within 1 +- {TOLERANCE} and the ranks agree "
        "(tests/test_presets.py).", "",
        "How much this shows: each device has three fitted figures (launch overhead per kernel, efficiency of matrix "
        "ops and of the others, `placement_gym/data/presets.json`) and at most three published latencies, so where "
        "all three are published the fit reproduces them by construction. What the table checks is that the cost "
        "model's structure (kernels as OpenVINO fuses them, the spec sheet's peaks and bandwidths, the precision) "
        "admits the published figures with physical values; it does not show that the presets predict a model "
        "OpenVINO publishes no figure for (Inception-V3, the dataset's graphs, synthetic graphs).", "",
        "| preset | model | device | part | precision | published ms | simulated ms | ratio | rank published / "
        "simulated | mapping |",
        "|---|---|---|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        published = "-" if r["published_s"] is None else f"{r['published_s'] * 1e3:.2f}"
        simulated = r["error"] if r["simulated_s"] is None else f"{r['simulated_s'] * 1e3:.2f}"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        rank = f"{r['published_rank']} / {r['simulated_rank']}" if "published_rank" in r else "-"
        lines.append(f"| `{r['preset']}` | {r['model']} | `{r['device']}` | {r['part']} | {r['precision']} | "
                     f"{published} | {simulated} | {ratio} | {rank} | {r['how']} |")
    return "\n".join(lines) + "\n"


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help=f"fit and write {PRESETS_FILE.relative_to(REPOSITORY)} and the table page")
    args = parser.parse_args(argv)
    graphs = {published: load_graph(zoo) for published, zoo in MODELS.items()}
    if args.write:
        data = fit_all(graphs)
        PRESETS_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        fitted = data["presets"]
        profiles = {name: build_preset(name, fitted[name]) for name in PRESET_SPECS}
    else:
        profiles = {name: build_preset(name) for name in PRESET_SPECS}
    page = markdown(comparison(profiles, graphs), precision_exponent())
    if args.write:
        TABLE_PAGE.write_text(page, encoding="utf-8")
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
