"""Calibration: measure a `Profile` of real OpenVINO devices for the simulated backend (``placement-gym calibrate``).

1. per-op times of each model on each device from OpenVINO's per-op profiling (``PERF_COUNT``), runtime entries
   mapped back to the original ops through ``originalLayersNames`` (`measure_op_times`);
2. each device's whole-model latency measured again on the real backend (each model all on one device, devices
   interleaved, paired with the backend's reference where it pairs), and its per-op times scaled to it, so that
   the devices' relative speeds and the split placements below are on one scale;
3. a roofline per device fitted to those times, for graphs that were not profiled (`fit_roofline`);
4. a segment sweep of each model (`placement_gym.backends.boundary.segment_sweep`, the measurement behind
   ``benchmarks/fidelity/hetero_boundary.py``): k contiguous segments alternating between the first two devices,
   measured on the real backend;
5. a few split placements of varied shape (`split_placements`: blocks and random ones, up to ~90 small
   submodels on ResNet-50) measured too, and the boundary costs (split overhead, ``boundary_overhead_s`` per
   extra submodel, the link's latency per crossing tensor and bandwidth per crossing byte) fitted to the sweep's
   and the split placements' latencies minus the profile's compute, together (`fit_boundary_costs`).

   Why together: along the sweep the submodels, the crossing tensors and their bytes grow together, so the sweep
   alone cannot say which of them costs. Fitted to the sweep alone, a cost per extra submodel overpredicted
   placements with 40-90 small submodels 2-3x (ResNet-50, this project's two-CPU machine); a cost per crossing
   byte carried over to them far better. Each calibration records that check (`sweep_transfer_check`).

The profile data model and the presets live in `placement_gym.backends.profiles`; this module measures.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..devices import DeviceSpec
from ..graph import ComputationGraph
from .boundary import CALIBRATION_SEGMENTS, segment_placement, segment_sweep
from .openvino import OpenVINOBackend
from .profiles import LinkProfile, Profile
from .profiling import (CLOCKS, STATISTICS, fit_roofline, latency_statistic, measure_op_times,  # noqa: F401 (re-exported)
                        real_latency)

logger = logging.getLogger(__name__)

def split_placements(graph: ComputationGraph, n_devices: int, count: int, seed: int) -> list[np.ndarray]:
    """`count` multi-device placements of varied shape for fitting boundary costs: contiguous splits (few
    boundaries), random blocks of 32, 8 and 2 ops in topological order (tens of boundaries), and uniformly
    random ones (the most)."""
    rng = np.random.default_rng(seed)
    n = graph.n_ops
    kinds = ["contiguous", "blocks32", "blocks8", "random", "blocks2", "contiguous", "blocks8", "random"]
    placements = []
    for k in range(count):
        kind = kinds[k % len(kinds)]
        if kind == "contiguous":
            cut = int(rng.integers(max(1, n // 5), max(2, 4 * n // 5)))
            first, second = rng.choice(n_devices, size=2, replace=False) if n_devices > 1 else (0, 0)
            p = np.where(np.arange(n) < cut, first, second)
        elif kind.startswith("blocks"):
            size = int(kind[len("blocks"):])
            p = np.repeat(rng.integers(0, n_devices, n // size + 1), size)[:n]
        else:
            p = rng.integers(0, n_devices, n)
        if len(set(p.tolist())) < min(2, n_devices):  # make sure it is a real split
            p[rng.integers(0, n)] = (p[0] + 1) % n_devices
        placements.append(p.astype(np.int64))
    return placements


def fit_boundary_costs(rows: Sequence[Mapping[str, float]]) -> tuple[float, float, LinkProfile, dict]:
    """Fit the split and boundary overheads and the link (latency, bandwidth) to measured split placements.

    Each row: ``real_s`` (measured latency), ``compute_s`` (the profile's compute time of that placement),
    ``extra_submodels`` (>= 1), ``transfers``, ``transfer_bytes`` and optionally ``kind`` (`calibrate`: the
    segment sweep's placements, ``"segments"``, and the random split placements, ``"split"``). Solves
    ``real - compute ~ s + a * extra_submodels + b * transfers + c * transfer_bytes`` with ``s, a, b, c >= 0`` by
    non-negative least squares on relative errors.

    Returns:
        (split_overhead_s, boundary_overhead_s, link, fit report with the mean absolute percentage error before
        and after, also per kind of row).
    """
    real, compute, features = _boundary_arrays(rows)
    coef = _nnls_relative(features, real - compute, real)
    split, boundary, latency, per_byte = coef
    link = LinkProfile(latency_s=float(latency), bandwidth_Bps=(float(1.0 / per_byte) if per_byte > 0 else None))
    errors = np.abs(compute + features @ coef - real) / real
    kinds = [str(r.get("kind", "split")) for r in rows]
    report = {
        "rows": len(rows),
        "mape_compute_only": float(np.mean(np.abs(compute - real) / real)),
        "mape_fitted": float(np.mean(errors)),
        "mape_fitted_by_kind": {k: float(np.mean([e for e, kind in zip(errors, kinds) if kind == k]))
                                for k in sorted(set(kinds))},
    }
    return float(split), float(boundary), link, report


#: The boundary terms `sweep_transfer_check` tries one at a time: the row field each one multiplies.
BOUNDARY_TERMS = {"per_extra_submodel": "extra_submodels", "per_crossing_tensor": "transfers",
                  "per_crossing_byte": "transfer_bytes"}


def sweep_transfer_check(rows: Sequence[Mapping[str, float]]) -> dict:
    """Which boundary term, fitted to the segment sweep alone, predicts the other split placements?

    For each term of `BOUNDARY_TERMS`: ``real - compute ~ c * term`` (``c >= 0``, relative errors) fitted to the
    rows of kind ``"segments"`` (contiguous segments: few large submodels), and its mean absolute percentage
    error on those rows and on the rows of kind ``"split"`` (blocks and random placements: many small ones).
    On contiguous segments the submodels, the crossing tensors and their bytes grow together, so the sweep alone
    cannot tell the terms apart; the split placements can. Empty where either kind is missing."""
    sweep = [r for r in rows if r.get("kind") == "segments"]
    split = [r for r in rows if r.get("kind", "split") == "split"]
    if not sweep or not split:
        return {}
    check = {}
    for term, field in BOUNDARY_TERMS.items():
        real, compute, _ = _boundary_arrays(sweep)
        x = np.array([[float(r[field])] for r in sweep])
        c = float(_nnls_relative(x, real - compute, real)[0])

        def mape(subset: Sequence[Mapping[str, float]]) -> float:
            real, compute, _ = _boundary_arrays(subset)
            return float(np.mean(np.abs(compute + c * np.array([float(r[field]) for r in subset]) - real) / real))

        check[term] = {"coefficient_s": c, "mape_segments": mape(sweep), "mape_split": mape(split)}
    return check


def _boundary_arrays(rows: Sequence[Mapping[str, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(real, compute, features [1, extra submodels, transfers, transfer bytes]) of boundary-fit rows."""
    real = np.array([float(r["real_s"]) for r in rows])
    compute = np.array([float(r["compute_s"]) for r in rows])
    features = np.array([[1.0, r["extra_submodels"], r["transfers"], r["transfer_bytes"]] for r in rows],
                        dtype=np.float64).reshape(len(rows), 4)
    return real, compute, features


def _nnls_relative(features: np.ndarray, target: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Non-negative least squares of ``features @ coef ~ target`` on errors relative to `real`."""
    from scipy.optimize import nnls

    scale = np.maximum(np.abs(features).max(axis=0), 1e-12)  # condition the columns
    weights = 1.0 / real
    coef, _ = nnls((features / scale) * weights[:, None], target * weights)
    return coef / scale


def _profile_versions() -> dict[str, str]:
    """Versions that shape a measured profile (not `files.versions()`, which imports torch: seconds)."""
    import platform
    import sys

    import openvino as ov

    from .._version import __version__

    return {"python": sys.version.split()[0], "platform": platform.platform(), "placement_gym": __version__,
            "openvino": ov.get_version(), "numpy": np.__version__}


def calibrate(devices: Sequence[str], models: Sequence[Any], *, runs: int = 20, warmup: int = 3,
              placements: int = 8, seed: int = 0, statistic: str = "median", clock: str = "wall", core=None,
              name: str = "calibrated", backend_options: Mapping[str, Any] | None = None,
              segments: Sequence[int] = CALIBRATION_SEGMENTS, segment_rounds: int = 2,
              progress: Callable[[str], None] | None = None, backend: OpenVINOBackend | None = None) -> Profile:
    """Measure a `Profile` for real OpenVINO `devices` on `models` (zoo names, paths or graphs).

    Per model and device: per-op times (`measure_op_times`), scaled to the device's whole-model latency measured
    on the real backend (module docstring, step 2). Per device: a roofline fitted to them (`fit_roofline`), used
    for graphs that were not profiled. Per model: the segment sweep (`segments`) and `placements` split
    placements measured on the real backend, and the boundary, link and split costs fitted to both
    (`fit_boundary_costs`). Takes roughly (3 x devices + segments x segment_rounds + placements) compiles and
    ``runs`` inferences each (twice that where the backend pairs), per model.

    Args:
        devices: device specs (at least two; e.g. ``["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]``).
        models: zoo names (``"resnet"``), model paths, or `ComputationGraph` objects with a model.
        runs, warmup: timed and untimed inferences per measurement.
        statistic: how a latency is taken from the timed runs (`real_latency`; paired with the real backend's
            reference where it pairs): ``"median"`` (as the real backend reports) or ``"min"`` (robust to other
            load on a shared machine; use the same when comparing).
        clock: ``"wall"`` or ``"cpu"`` (`CLOCKS`: process CPU time, load-robust for one-thread devices).
        backend_options: more settings of the real backend (e.g. ``inference_precision``, ``paired_reference``);
            the per-op profiling compiles each device with exactly the properties the real backend gives it.
        placements: split placements per model for the boundary fit.
        seed: seed of the split placements.
        segments: segment counts k of the boundary sweep (`placement_gym.backends.boundary.segment_sweep`; those
            above a model's op count are left out; empty: no sweep, the costs are fitted to the split placements
            alone). With neither, link and boundary costs stay 0.
        segment_rounds: interleaved rounds of the sweep (the fastest counts per k); also the rounds of the
            whole-model latency per device.
        progress: called with a line of text as each step finishes.
        backend: an open real backend over `devices` to measure with (left open), in place of the one built from
            `clock`, `warmup`, `runs` and `backend_options`. A caller that measures placements afterwards with the
            same backend compares them on one scale: paired latencies are ratios to the reference times its
            baseline, which each backend times once, and on a busy machine two such baselines differ (docs/results/simulator.md).
    """
    from .. import files
    from ..devices import shared_core
    from ..models import load_graph
    from .simulated import SimulatedBackend

    say = progress or (lambda text: logger.info(text))
    if len(devices) < 2 and placements:
        raise ValueError("calibrate needs at least two devices to fit boundary costs (or placements=0)")
    latency_statistic([1.0], statistic)  # clear errors for an unknown statistic or clock, before any work
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; choose one of {sorted(CLOCKS)}")
    if runs < 1 or warmup < 0 or placements < 0 or segment_rounds < 1:
        raise ValueError(f"need runs >= 1, warmup >= 0, placements >= 0, segment_rounds >= 1; got {runs}, {warmup}, "
                         f"{placements}, {segment_rounds}")
    if any(int(k) < 1 for k in segments):
        raise ValueError(f"segment counts must be >= 1, got {list(segments)}")
    core = core or shared_core()
    # The real backend opens the devices: per-op profiling then uses its exact device properties (its default
    # inference precision included), so profile and real measurements describe the same devices.
    if backend is None:
        real = OpenVINOBackend(list(devices), clock=clock, warmup=warmup, repeats=runs, core=core, cache=False,
                               **dict(backend_options or {}))
    elif [d.spec for d in backend.devices] != [DeviceSpec.parse(d) for d in devices]:
        raise ValueError(f"the backend's devices {[d.name for d in backend.devices]} are not the devices to "
                         f"calibrate {[str(d) for d in devices]}")
    else:
        real = backend
    opened = real.devices
    graphs = [m if isinstance(m, ComputationGraph) else load_graph(m) for m in models]
    if not graphs:
        raise ValueError("calibrate needs at least one model")

    started = time.perf_counter()
    per_device: dict[str, list[tuple[ComputationGraph, np.ndarray]]] = {d.name: [] for d in opened}
    measurement_info: dict[str, dict] = {}
    for graph in graphs:
        for device in opened:
            times, info = measure_op_times(graph, device, core=core, runs=runs, warmup=warmup, statistic=statistic,
                                           clock=clock)
            per_device[device.name].append((graph, times))
            measurement_info[f"{graph.name}@{device.name}"] = info
            say(f"profiled {graph.name} on {device.name}: {info['wall_s'] * 1e3:.2f} ms "
                f"({info['entries']} runtime entries, per-op sum {info['profiled_sum_s'] * 1e3:.2f} ms)")
        # Each device's whole-model latency once more, on the real backend, the devices interleaved: profiling timed
        # each device alone at its own moment, so on a busy machine two identical devices came out 15-25% apart, and
        # the cost model then ranked placements by their share of the "faster" one. Paired (statistic median),
        # these are ratios to one reference, on the scale of every real measurement below.
        walls: dict[str, list[float]] = {d.name: [] for d in opened}
        for _ in range(segment_rounds):
            for d, device in enumerate(opened):
                measured = real.measure(graph, np.full(graph.n_ops, d, dtype=np.int64), use_cache=False)
                if not measured.ok:
                    raise RuntimeError(f"{graph.name} all on {device.name} failed on the real backend: "
                                       f"{measured.error}")
                walls[device.name].append(real_latency(measured, statistic))
        for device in opened:
            times = next(t for g, t in per_device[device.name] if g is graph)  # scaled in place
            info = measurement_info[f"{graph.name}@{device.name}"]
            wall = min(walls[device.name])
            if times.sum() > 0:
                times *= wall / times.sum()
            info["profiled_wall_s"], info["wall_s"], info["backend_wall_s"] = info["wall_s"], wall, walls[device.name]
            say(f"{graph.name} on {device.name} on the real backend: {wall * 1e3:.2f} ms (profiling timed "
                f"{info['profiled_wall_s'] * 1e3:.2f} ms); per-op times scaled to it")

    device_profiles = []
    for device in opened:
        fitted = fit_roofline(device.name, per_device[device.name],
                              description=f"measured on this machine ({files.machine()['processor']}), OpenVINO {device.name}")
        fitted.virtual = device.virtual
        for graph, times in per_device[device.name]:
            fitted.measured[graph.name] = {n: float(t) for n, t in zip(graph.op_names, times)}
            fitted.measured_wall_s[graph.name] = float(measurement_info[f"{graph.name}@{device.name}"]["wall_s"])
        device_profiles.append(fitted)

    profile = Profile(devices=device_profiles, link=LinkProfile(), boundary_overhead_s=0.0, schedule="sequential",
                      name=name)
    simulator = SimulatedBackend(profile)  # compute only (no link or boundary costs yet)

    def fit_row(graph: ComputationGraph, placement: np.ndarray, kind: str, real_s: float, real_submodels: int) -> dict:
        sim = simulator.measure(graph, placement)  # the cut, crossing tensors and compute the simulator will price
        return {"model": graph.name, "kind": kind, "real_s": real_s, "compute_s": sim.breakdown["compute_s"],
                "extra_submodels": sim.n_submodels - 1, "real_submodels": real_submodels,
                "transfers": sim.breakdown["transfers"], "transfer_bytes": sim.breakdown["transfer_bytes"]}

    rows: list[dict] = []
    sweeps: dict[str, dict] = {}
    if len(opened) >= 2 and len(segments):
        for graph in graphs:
            sweep = segment_sweep(real, graph, segments, rounds=segment_rounds, statistic=statistic,
                                  compute_s=lambda p, g=graph: simulator.measure(g, p).breakdown["compute_s"],
                                  progress=say)
            sweeps[graph.name] = sweep
            rows += [fit_row(graph, segment_placement(graph.n_ops, row["k"]), "segments", row["latency_s"],
                             row["submodels"]) for row in sweep["rows"] if row["submodels"] > 1]
            slope = sweep["fit"]["per_submodel_s"]
            say(f"segment sweep of {graph.name} (k = {sweep['ks']}): "
                + ("no slope" if slope is None else f"{slope * 1e6:.1f} us per extra submodel, all costs of a cut "
                   f"counted (minus the profile's compute)"))
    n_segment_rows = len(rows)
    if placements:
        for graph in graphs:
            for placement in split_placements(graph, len(opened), placements, seed):
                measured = real.measure(graph, placement)
                if not measured.ok:
                    say(f"split placement of {graph.name} failed on the real backend ({measured.error}); skipped")
                    continue
                rows.append(fit_row(graph, placement, "split", real_latency(measured, statistic), measured.n_submodels))
                say(f"measured a split of {graph.name}: {rows[-1]['real_s'] * 1e3:.2f} ms, {measured.n_submodels} "
                    f"submodels (simulated compute {rows[-1]['compute_s'] * 1e3:.2f} ms)")
    fit_report: dict = {"rows": 0}
    if rows:
        profile.split_overhead_s, profile.boundary_overhead_s, profile.link, fit_report = fit_boundary_costs(rows)
        fit_report["sweep_transfer_check"] = sweep_transfer_check(rows)
        say(f"fitted to {n_segment_rows} segment-sweep and {len(rows) - n_segment_rows} split placements: split "
            f"overhead {profile.split_overhead_s * 1e6:.1f} us, boundary {profile.boundary_overhead_s * 1e6:.1f} "
            f"us/submodel, link latency {profile.link.latency_s * 1e6:.1f} us, bandwidth "
            f"{'unlimited' if profile.link.bandwidth_Bps is None else f'{profile.link.bandwidth_Bps / 1e9:.2f} GB/s'}; "
            f"MAPE on them {fit_report['mape_compute_only']:.1%} -> {fit_report['mape_fitted']:.1%}")
        for term, check in fit_report["sweep_transfer_check"].items():
            say(f"  {term} alone, fitted to the sweep: MAPE {check['mape_segments']:.1%} on it, "
                f"{check['mape_split']:.1%} on the split placements")

    sweep_text = (f"the segment sweep (k = {', '.join(str(k) for k in segments)}, {segment_rounds} round(s)) and "
                  if sweeps else "")
    profile.description = (
        f"measured on this machine: per-op OpenVINO profiling of {', '.join(g.name for g in graphs)} on "
        f"{', '.join(d.name for d in opened)}, scaled to each device's latency on the real backend; boundary, link "
        f"and split costs fitted to {sweep_text}{len(rows) - n_segment_rows} real split placements. Figures are "
        "simulated from these measurements."
    )
    profile.sources = ["placement-gym calibrate"]
    if sweeps:
        profile.sources.append(
            "boundary costs (boundary_overhead_s, split_overhead_s, link): fitted to the segment sweep on the real "
            "backend (placement_gym.backends.boundary.segment_sweep, as benchmarks/fidelity/hetero_boundary.py) "
            "with the split placements; "
            + "; ".join(f"{m} in k = {sw['ks']} segments alternating {' / '.join(sw['devices'])}: "
                        + ("no slope" if sw["fit"]["per_submodel_s"] is None else
                           f"{sw['fit']['per_submodel_s'] * 1e6:.1f} us per extra submodel, all costs of a cut counted")
                        for m, sw in sweeps.items()))
    profile.calibration = {
        "devices": [str(d) for d in opened],
        "real_backend": real.describe(),
        "models": [g.name for g in graphs],
        "runs": runs,
        "warmup": warmup,
        "placements_per_model": placements,
        "segments": [int(k) for k in segments],
        "segment_rounds": segment_rounds,
        "statistic": statistic,
        "clock": clock,
        "seed": seed,
        "op_profiling": measurement_info,
        "boundary_sweep": sweeps,
        "boundary_fit": fit_report,
        "boundary_rows": rows,
        "wall_s": time.perf_counter() - started,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "versions": _profile_versions(),
        "machine": files.machine(),
    }
    if backend is None:
        real.close()
    return profile

__all__ = [
    "BOUNDARY_TERMS", "CLOCKS", "STATISTICS", "calibrate", "fit_boundary_costs", "fit_roofline",
    "latency_statistic", "measure_op_times", "real_latency", "split_placements", "sweep_transfer_check",
]
