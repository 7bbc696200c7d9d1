"""Calibration: measure a `Profile` of real OpenVINO devices for the simulated backend (``placement-gym calibrate``).

1. per-op times of each model on each device from OpenVINO's per-op profiling (``PERF_COUNT``), runtime entries
   mapped back to the original ops through ``originalLayersNames`` (`measure_op_times`);
2. a roofline per device fitted to those times, for graphs that were not profiled (`fit_roofline`);
3. link and boundary costs fitted to a few real split placements (`split_placements`, `fit_boundary_costs`).

The profile data model and the presets live in `placement_gym.backends.profiles`; this module measures.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..graph import ComputationGraph
from .openvino import OpenVINOBackend
from .profiles import LinkProfile, Profile
from .profiling import CLOCKS, STATISTICS, fit_roofline, latency_statistic, measure_op_times  # noqa: F401 (re-exported)

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
    ``extra_submodels`` (>= 1), ``transfers``, ``transfer_bytes``. Solves ``real - compute ~ s + a *
    extra_submodels + b * transfers + c * transfer_bytes`` with ``s, a, b, c >= 0`` by non-negative least squares
    on relative errors.

    Returns:
        (split_overhead_s, boundary_overhead_s, link, fit report with the mean absolute percentage error before
        and after).
    """
    from scipy.optimize import nnls

    real = np.array([r["real_s"] for r in rows])
    compute = np.array([r["compute_s"] for r in rows])
    features = np.array([[1.0, r["extra_submodels"], r["transfers"], r["transfer_bytes"]] for r in rows], dtype=np.float64)
    scale = np.maximum(features.max(axis=0), 1e-12)  # condition the columns
    weights = 1.0 / real
    coef, _ = nnls((features / scale) * weights[:, None], (real - compute) * weights)
    split, boundary, latency, per_byte = coef / scale
    link = LinkProfile(latency_s=float(latency), bandwidth_Bps=(float(1.0 / per_byte) if per_byte > 0 else None))
    predicted = compute + features @ (coef / scale)
    report = {
        "rows": len(rows),
        "mape_compute_only": float(np.mean(np.abs(compute - real) / real)),
        "mape_fitted": float(np.mean(np.abs(predicted - real) / real)),
    }
    return float(split), float(boundary), link, report


def _profile_versions() -> dict[str, str]:
    """Versions that shape a measured profile (not `results.versions()`, which imports torch: seconds)."""
    import platform
    import sys

    import openvino as ov

    from .._version import __version__

    return {"python": sys.version.split()[0], "platform": platform.platform(), "placement_gym": __version__,
            "openvino": ov.get_version(), "numpy": np.__version__}


def calibrate(devices: Sequence[str], models: Sequence[Any], *, runs: int = 20, warmup: int = 3,
              placements: int = 8, seed: int = 0, statistic: str = "median", clock: str = "wall", core=None,
              name: str = "calibrated", backend_options: Mapping[str, Any] | None = None,
              progress: Callable[[str], None] | None = None) -> Profile:
    """Measure a `Profile` for real OpenVINO `devices` on `models` (zoo names, paths or graphs).

    Per model and device: per-op times (`measure_op_times`). Per device: a roofline fitted to them
    (`fit_roofline`), used for graphs that were not profiled. Then `placements` split placements per model
    are measured on the real backend and the link and boundary costs fitted to them (`fit_boundary_costs`).
    Takes roughly (2 x devices + placements) compiles and ``runs`` inferences each, per model.

    Args:
        devices: device specs (at least two; e.g. ``["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]``).
        models: zoo names (``"resnet"``), model paths, or `ComputationGraph` objects with a model.
        runs, warmup: timed and untimed inferences per measurement.
        statistic: how a latency is taken from the timed runs: ``"median"`` (as the real backend reports) or
            ``"min"`` (robust to other load on a shared machine; use the same when comparing).
        clock: ``"wall"`` or ``"cpu"`` (`CLOCKS`: process CPU time, load-robust for one-thread devices).
        backend_options: more settings of the real backend (e.g. ``inference_precision``); the per-op profiling
            compiles each device with exactly the properties the real backend gives it.
        placements: split placements per model for the boundary fit (0 keeps link and boundary costs at 0).
        seed: seed of the split placements.
        progress: called with a line of text as each step finishes.
    """
    from .. import results
    from ..devices import shared_core
    from ..models import load_graph
    from .simulated import SimulatedBackend

    say = progress or (lambda text: logger.info(text))
    if len(devices) < 2 and placements:
        raise ValueError("calibrate needs at least two devices to fit boundary costs (or placements=0)")
    latency_statistic([1.0], statistic)  # clear errors for an unknown statistic or clock, before any work
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; choose one of {sorted(CLOCKS)}")
    if runs < 1 or warmup < 0 or placements < 0:
        raise ValueError(f"need runs >= 1, warmup >= 0, placements >= 0; got {runs}, {warmup}, {placements}")
    core = core or shared_core()
    # The real backend opens the devices: per-op profiling then uses its exact device properties (its default
    # inference precision included), so profile and real measurements describe the same devices.
    real = OpenVINOBackend(list(devices), clock=clock, warmup=warmup, repeats=runs, core=core, cache=False,
                          **dict(backend_options or {}))
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

    device_profiles = []
    for device in opened:
        fitted = fit_roofline(device.name, per_device[device.name],
                              description=f"measured on this machine ({results.machine()['processor']}), OpenVINO {device.name}")
        fitted.virtual = device.virtual
        for graph, times in per_device[device.name]:
            fitted.measured[graph.name] = {n: float(t) for n, t in zip(graph.op_names, times)}
            fitted.measured_wall_s[graph.name] = float(measurement_info[f"{graph.name}@{device.name}"]["wall_s"])
        device_profiles.append(fitted)

    profile = Profile(devices=device_profiles, link=LinkProfile(), boundary_overhead_s=0.0, schedule="sequential",
                      name=name)
    rows, fit_report = [], {"rows": 0}
    if placements:
        simulator = SimulatedBackend(profile)
        for graph in graphs:
            for placement in split_placements(graph, len(opened), placements, seed):
                measured = real.measure(graph, placement)
                if not measured.ok:
                    say(f"split placement of {graph.name} failed on the real backend ({measured.error}); skipped")
                    continue
                sim = simulator.measure(graph, placement)
                rows.append({
                    "model": graph.name,
                    "real_s": latency_statistic(measured.timed_latencies_s, statistic),
                    "compute_s": sim.breakdown["compute_s"],
                    "extra_submodels": sim.n_submodels - 1,
                    "real_submodels": measured.n_submodels,
                    "transfers": sim.breakdown["transfers"],
                    "transfer_bytes": sim.breakdown["transfer_bytes"],
                })
                say(f"measured a split of {graph.name}: {rows[-1]['real_s'] * 1e3:.2f} ms, {measured.n_submodels} "
                    f"submodels (simulated compute {sim.breakdown['compute_s'] * 1e3:.2f} ms)")
        if rows:
            profile.split_overhead_s, profile.boundary_overhead_s, profile.link, fit_report = fit_boundary_costs(rows)
            say(f"fitted split overhead {profile.split_overhead_s * 1e6:.1f} us, boundary "
                f"{profile.boundary_overhead_s * 1e6:.1f} us/submodel, link latency "
                f"{profile.link.latency_s * 1e6:.1f} us, bandwidth "
                f"{'unlimited' if profile.link.bandwidth_Bps is None else f'{profile.link.bandwidth_Bps / 1e9:.2f} GB/s'}; "
                f"MAPE on the fit placements {fit_report['mape_compute_only']:.1%} -> {fit_report['mape_fitted']:.1%}")

    profile.description = (
        f"measured on this machine: per-op OpenVINO profiling of {', '.join(g.name for g in graphs)} on "
        f"{', '.join(d.name for d in opened)}; link and boundary costs fitted to {len(rows)} real split placements. "
        "Figures are simulated from these measurements."
    )
    profile.sources = ["placement-gym calibrate"]
    profile.calibration = {
        "devices": [str(d) for d in opened],
        "real_backend": real.describe(),
        "models": [g.name for g in graphs],
        "runs": runs,
        "warmup": warmup,
        "placements_per_model": placements,
        "statistic": statistic,
        "clock": clock,
        "seed": seed,
        "op_profiling": measurement_info,
        "boundary_fit": fit_report,
        "boundary_rows": rows,
        "wall_s": time.perf_counter() - started,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "versions": _profile_versions(),
        "machine": results.machine(),
    }
    real.close()
    return profile

__all__ = [
    "CLOCKS", "STATISTICS", "calibrate", "fit_boundary_costs", "fit_roofline", "latency_statistic",
    "measure_op_times", "split_placements",
]
