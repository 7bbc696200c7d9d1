"""How well does the simulated backend predict the real one? Rank correlation and error on real placements.

    python benchmarks/fidelity/simulator_fidelity.py --model resnet --placements 30 \
        --json benchmarks/results/fidelity_resnet.json

1. Calibrates a measured profile for two local devices (default `placement_gym.two_cpu_devices()`: ``CPU`` and
   a virtual ``CPU[INFERENCE_PRECISION_HINT=bf16]`` where the CPU runs bf16, else a one-thread copy): per-op
   OpenVINO profiling plus the segment sweep and a few split placements for the boundary fit (``--profile PATH``
   loads one instead; the calibration's placements are contiguous segments and other seeds than the
   evaluation's).
2. Measures ``--placements`` placements on the real backend: both single-device ones, contiguous splits, random
   ones (several device shares), blocks in topological order, and structured ones (by op type, by depth).
   Each is measured in ``--passes`` passes (each pass in a fresh random order, ``--runs`` timed runs after
   ``--warmup``). ``--statistic median`` takes the smallest of the pass medians (discarding passes slowed by
   other load); ``--statistic min`` the fastest of all timed runs, robust on a busy shared machine, where other
   load only ever adds time. ``--clock cpu`` times runs by process CPU time instead of wall time: for devices
   with one inference thread it equals the latency on an idle machine and does not grow with other load
   (with several threads it adds them up, so use it with one-thread devices only). Calibration uses the same
   statistic and clock.
3. Simulates the same placements and writes ``{"spearman", "mape", "pairs": [[sim, real], ...], ...}`` to
   ``--json`` and a scatter plot (PNG) next to it. `pass_spearman` reads the rank correlation of the first two
   real passes from it: the measurement's own repeatability, which bounds the Spearman any cost model can reach.

One real backend calibrates and measures (`calibrate`'s ``backend``): its paired latencies are ratios to one
reference times one baseline, so the profile and the measurements share a scale (two backends time two baselines,
which differ on a busy machine: docs/results/simulator.md).

Real timings depend on what else runs on the machine: record where and when you ran it (the JSON does).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from placement_gym import files, load_graph, two_cpu_devices
from placement_gym.backends.openvino import OpenVINOBackend
from placement_gym.backends.calibration import calibrate, real_latency
from placement_gym.backends.profiles import Profile
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.graph import ComputationGraph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import refuse_existing_outputs  # noqa: E402



def evaluation_placements(graph: ComputationGraph, count: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """`count` two-device placements of varied kinds (single-device ones first), deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    n = graph.n_ops
    heavy = np.isin(np.array(graph.op_types), ["Convolution", "GroupConvolution", "MatMul"])
    depth = np.zeros(n, dtype=np.int64)
    for s, d in graph.edge_index.T.tolist():  # topological order: longest path from a source
        depth[d] = max(depth[d], depth[s] + 1)

    def contiguous() -> np.ndarray:
        cut = int(rng.integers(1, n))
        first = int(rng.integers(0, 2))
        return np.where(np.arange(n) < cut, first, 1 - first)

    def random_share() -> np.ndarray:
        share = float(rng.choice([0.5, 0.2, 0.8, 0.35, 0.65]))
        return (rng.random(n) < share).astype(np.int64)

    def blocks() -> np.ndarray:
        size = int(rng.choice([2, 4, 8, 16, 32, 64]))
        return np.repeat(rng.integers(0, 2, n // size + 1), size)[:n]

    def structured() -> np.ndarray:
        kind = int(rng.integers(0, 4))
        if kind == 0:
            return heavy.astype(np.int64)  # heavy ops on device 1, the rest on device 0
        if kind == 1:
            return (~heavy).astype(np.int64)
        period = int(rng.choice([2, 4, 8, 16]))
        return ((depth // period) % 2).astype(np.int64) if kind == 2 else (1 - (depth // period) % 2).astype(np.int64)

    makers = [("contiguous", contiguous), ("random", random_share), ("blocks", blocks), ("structured", structured)]
    placements = [("single", np.zeros(n, dtype=np.int64)), ("single", np.ones(n, dtype=np.int64))]
    seen = {p.tobytes() for _, p in placements}
    attempts = 0
    while len(placements) < count and attempts < 50 * count:
        attempts += 1
        kind, make = makers[len(placements) % len(makers)]
        p = make().astype(np.int64)
        if p.tobytes() in seen:
            continue
        seen.add(p.tobytes())
        placements.append((kind, p))
    return placements[:count]


def measure_real(backend: OpenVINOBackend, graph: ComputationGraph, placements, passes: int, seed: int,
                 statistic: str, progress: bool = True) -> tuple[list[list[float]], list[int]]:
    """Per placement, the latency (`statistic` of its timed runs) of each pass, and HETERO's submodel count
    (passes visit placements in fresh random orders)."""
    rng = np.random.default_rng(seed)
    per_pass: list[list[float]] = [[] for _ in placements]
    submodels = [0] * len(placements)
    for p in range(passes):
        for done, i in enumerate(rng.permutation(len(placements))):
            m = backend.measure(graph, placements[i][1], use_cache=False)
            if not m.ok:
                raise RuntimeError(f"placement {i} ({placements[i][0]}) failed on the real backend: {m.error}")
            per_pass[i].append(real_latency(m, statistic))
            submodels[i] = m.n_submodels
            if progress:
                print(f"\rpass {p + 1}/{passes}: {done + 1}/{len(placements)} placements", end="", flush=True)
    if progress:
        print()
    return per_pass, submodels


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def pass_spearman(report: dict) -> float | None:
    """The rank correlation of a results report's first two real passes over its placements (None with one pass):
    how well the real measurement ranks the placements against itself."""
    passes = [r["real_passes_s"] for r in report["placements"]]
    if min(len(p) for p in passes) < 2:
        return None
    return spearman(np.array([p[0] for p in passes]), np.array([p[1] for p in passes]))


def plot(path: Path, records: list[dict], title: str, measured_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for kind in sorted({r["kind"] for r in records}):
        rows = [r for r in records if r["kind"] == kind]
        ax.scatter([r["real_s"] * 1e3 for r in rows], [r["sim_s"] * 1e3 for r in rows], label=kind, s=22, alpha=0.8)
    values = [v * 1e3 for r in records for v in (r["real_s"], r["sim_s"])]
    lo, hi = min(values) * 0.95, max(values) * 1.05
    ax.plot([lo, hi], [lo, hi], color="gray", linewidth=1, linestyle="--", label="simulated = measured")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(measured_label)
    ax.set_ylabel("simulated latency (ms, calibrated profile)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files.save_figure(path, fig, overwrite=True)  # main() refused existing outputs unless --overwrite


def plot_report(path: Path, report: dict) -> None:
    """The scatter plot of a results report (see `main`)."""
    settings = report["settings"]
    title = (f"{report['model']}: {len(report['placements'])} placements; Spearman {report['spearman']:.3f}, "
             f"MAPE {report['mape']:.1%}\n" + "\n+ ".join(report["devices"]))
    label = (f"measured latency (ms; real OpenVINO, {settings.get('clock', 'wall')} clock, "
             f"{settings.get('statistic', 'median')} of runs)")
    plot(path, report["placements"], title, label)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet", help="zoo name or model file (default resnet)")
    parser.add_argument("--devices", nargs=2, help="two device specs (default: placement_gym.two_cpu_devices())")
    parser.add_argument("--placements", type=int, default=30, help="placements to compare (default 30)")
    parser.add_argument("--profile", help="load this profile instead of calibrating")
    parser.add_argument("--save-profile", help="where to save the calibrated profile (default: <json>.profile.json)")
    parser.add_argument("--calibration-placements", type=int, default=8, help="split placements for the boundary fit")
    parser.add_argument("--runs", type=int, default=20, help="timed inferences per measurement")
    parser.add_argument("--warmup", type=int, default=3, help="untimed inferences after each compile")
    parser.add_argument("--passes", type=int, default=2, help="measurement passes over all placements (the fastest pass counts)")
    parser.add_argument("--statistic", choices=["median", "min"], default="min",
                        help="latency of a pass's timed runs: min (default; robust on a shared machine) or median")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall time (default, as the real backend) or process CPU time (one-thread devices only)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the evaluated placements")
    parser.add_argument("--json", required=True, help="results JSON path")
    parser.add_argument("--plot", help="scatter plot PNG (default: the JSON path with .png)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files")
    parser.add_argument("--replot", action="store_true", help="only redraw the plot from an existing --json file")
    args = parser.parse_args(argv)
    args.devices = args.devices or two_cpu_devices()
    if args.replot:
        report = files.load_json(args.json)
        plot_path = Path(args.plot) if args.plot else Path(args.json).with_suffix(".png")
        plot_report(plot_path, report)
        print(f"wrote {plot_path}")
        return 0

    out = Path(args.json)
    plot_path = Path(args.plot) if args.plot else out.with_suffix(".png")
    profile_path = Path(args.save_profile) if args.save_profile else out.with_suffix(".profile.json")
    outputs = [out, plot_path] + ([] if args.profile else [profile_path])
    refuse_existing_outputs(parser, outputs, args.overwrite)
    if args.placements < 3:
        parser.error("--placements must be at least 3 (a rank correlation needs several points)")

    started = time.perf_counter()
    graph = load_graph(args.model)
    # One real backend calibrates and measures: paired latencies are ratios to one reference times its baseline,
    # timed once per backend, so the profile and the measurements it is compared with share one scale.
    real = OpenVINOBackend(args.devices, clock=args.clock, warmup=args.warmup, repeats=args.runs, cache=False)
    if args.profile:
        profile = Profile.load(args.profile)
        print(f"loaded profile {args.profile} ({profile.describe()['measured_models']} measured)")
    else:
        print(f"calibrating {args.devices} on {graph.name} ...")
        profile = calibrate(args.devices, [graph], runs=args.runs, warmup=args.warmup,
                            placements=args.calibration_placements, seed=args.seed + 1000, statistic=args.statistic,
                            clock=args.clock, progress=print, backend=real)
        profile.save(profile_path, overwrite=args.overwrite)
        print(f"wrote {profile_path}")
    calibrate_s = time.perf_counter() - started

    simulator = SimulatedBackend(profile, devices=args.devices)
    placements = evaluation_placements(graph, args.placements, args.seed)
    print(f"measuring {len(placements)} placements x {args.passes} passes on the real backend ...")
    pass_medians, real_submodels = measure_real(real, graph, placements, args.passes, args.seed, args.statistic)

    records = []
    for (kind, placement), medians, real_sub in zip(placements, pass_medians, real_submodels):
        sim = simulator.measure(graph, placement)
        records.append({
            "kind": kind,
            "sim_s": sim.latency_s,
            "real_s": float(min(medians)),
            "real_passes_s": medians,
            "sim_submodels": sim.n_submodels,
            "real_submodels": real_sub,
            "device1_share": float(placement.mean()),
            "placement": "".join(map(str, placement.tolist())),  # device index of each op, in graph order
            "sim_breakdown": dict(sim.breakdown),
        })
    sim_s = np.array([r["sim_s"] for r in records])
    real_s = np.array([r["real_s"] for r in records])
    errors = np.abs(sim_s - real_s) / real_s
    per_kind = {k: float(np.mean([e for e, r in zip(errors, records) if r["kind"] == k])) for k in sorted({r["kind"] for r in records})}
    pass_spread = [float((max(m) - min(m)) / min(m)) for m in pass_medians] if args.passes > 1 else []
    report = {
        "model": graph.name,
        "spearman": spearman(sim_s, real_s),
        "mape": float(errors.mean()),
        "pairs": [[float(s), float(r)] for s, r in zip(sim_s, real_s)],
        "pearson": float(np.corrcoef(sim_s, real_s)[0, 1]),
        "mape_by_kind": per_kind,
        "submodel_count_exact": float(np.mean([r["sim_submodels"] == r["real_submodels"] for r in records])),
        "median_pass_spread": float(np.median(pass_spread)) if pass_spread else None,
        "placements": records,
        "devices": args.devices,
        "real_backend": real.describe(),
        "profile": profile.describe(),
        "profile_file": args.profile or str(profile_path),
        "profile_calibration": {k: v for k, v in profile.calibration.items() if k not in ("boundary_rows", "op_profiling")},
        "settings": {"placements": args.placements, "runs": args.runs, "warmup": args.warmup, "passes": args.passes,
                     "seed": args.seed, "calibration_placements": args.calibration_placements,
                     "statistic": args.statistic, "clock": args.clock,
                     "real_latency": f"fastest pass; a pass's latency is the {args.statistic} of `runs` timed runs"},
        "command": "python " + " ".join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))),
        "wall_s": time.perf_counter() - started,
        "calibrate_s": calibrate_s,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "versions": files.versions(),
        "machine": files.machine(),
        "note": "real latencies measured on a shared machine; simulated ones from the calibrated profile",
    }
    files.write_json(out, report, overwrite=args.overwrite)
    plot_report(plot_path, report)
    repeatable = pass_spearman(report)
    repeatability = "" if repeatable is None else f"; the real passes' own Spearman {repeatable:.3f}"
    print(f"{graph.name}: Spearman {report['spearman']:.3f}{repeatability}, MAPE {report['mape']:.1%} "
          f"(by kind: {', '.join(f'{k} {v:.1%}' for k, v in per_kind.items())}); "
          f"submodel count exact for {report['submodel_count_exact']:.0%}")
    print(f"wrote {out} and {plot_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
