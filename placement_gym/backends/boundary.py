"""What one more HETERO submodel costs on the real backend: the segment sweep.

A model is cut into ``k`` contiguous segments of equal op counts in topological order (`segment_placement`),
the segments alternating between two devices, for several ``k``; each placement is measured on the real backend
(`placement_gym.backends.openvino.OpenVINOBackend`: its warm-up, repeats and timing, paired or not), in
``rounds`` interleaved rounds (every ``k`` once per round, the order reversed every other round so that a drifting
machine affects the ``k`` alike), and the fastest round counts per ``k``. HETERO's own submodel count of each
compiled placement (``Measurement.n_submodels``) is kept beside ``k``. A least-squares line

    latency = a + b * (submodels - 1)

gives ``b``, the seconds per extra submodel (`fit_submodel_overhead`; also with a term per crossing tensor, to see
whether the tensors crossing the cuts explain anything the submodel count does not).

On two devices with identical settings every op runs alike wherever it is placed, so only the boundaries differ
between the ``k``. On devices that differ, pass ``compute_s`` (the cost model's compute time of a placement): the
fit is then of the measured latency minus that compute time.

One implementation for both users: ``benchmarks/fidelity/hetero_boundary.py`` (the sweep on its own, several
rounds, results file) and `placement_gym.backends.calibration.calibrate` (a short sweep on the model being
calibrated, fitted with split placements for the profile's boundary costs).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from ..graph import ComputationGraph
from .profiling import latency_statistic, real_latency

#: The sweep ``benchmarks/fidelity/hetero_boundary.py`` runs by default (ResNet-50 has 176 ops: 31 segments of ~6).
DEFAULT_SEGMENTS = (1, 2, 4, 8, 16, 31)
#: The short sweep `calibrate` runs on each model (a few compiles more than the split placements).
CALIBRATION_SEGMENTS = (1, 2, 4, 8, 16)


def segment_placement(n_ops: int, k: int, devices: Sequence[int] = (0, 1)) -> np.ndarray:
    """(n_ops,) int64: ops cut into `k` contiguous segments of equal op counts (within one) in topological order,
    segment ``j`` on ``devices[j % len(devices)]``."""
    if not 1 <= k <= n_ops:
        raise ValueError(f"need 1 <= k <= {n_ops} segments (one op each at most), got k={k}")
    segment = (np.arange(n_ops, dtype=np.int64) * k) // n_ops
    return np.asarray(devices, dtype=np.int64)[segment % len(devices)]


def segment_crossings(graph: ComputationGraph, k: int) -> tuple[int, int]:
    """Tensors crossing the cuts of `graph` in `k` segments, counted as the simulator and HETERO count them (once
    per producer and consuming segment), and their bytes."""
    segment = (np.arange(graph.n_ops, dtype=np.int64) * k) // graph.n_ops
    src, dst = graph.edge_index
    crossing = segment[src] != segment[dst]
    pairs: dict[tuple[int, int], int] = {}
    for s, d, nbytes in zip(src[crossing].tolist(), segment[dst[crossing]].tolist(),
                            np.asarray(graph.edge_bytes)[crossing].tolist()):
        pairs.setdefault((s, d), int(nbytes))
    return len(pairs), int(sum(pairs.values()))


def fit_submodel_overhead(rows: Sequence[Mapping[str, float]], *, target: str = "latency_s") -> dict:
    """Least squares ``y = a + b * extra_submodels`` over `rows` (each: ``extra_submodels``, ``crossings``,
    ``crossing_bytes`` and `target`, minus ``compute_s`` where rows have one), and ``y = a + b * extra + c *
    crossings`` beside it.

    Returns a dict: ``per_submodel_s`` (b), ``intercept_s`` (a), ``residual_rms_s``, ``max_abs_residual_s``,
    ``points``; ``with_crossings``: the same with ``per_crossing_s`` (None where the crossings are a multiple of
    the submodels, or there are too few points), and ``crossing_term_helps`` (its residual at most 3/4 of the
    first fit's, with non-negative coefficients); ``bytes_only``: ``y = a + c * crossing_bytes`` instead (rows
    with ``crossing_bytes``), ``per_byte_s`` and its residual, for comparison. ``intercept_s`` and
    ``per_submodel_s`` are None with fewer than two distinct submodel counts."""
    extra = np.array([float(r["extra_submodels"]) for r in rows])
    crossings = np.array([float(r.get("crossings", 0.0)) for r in rows])
    crossing_bytes = np.array([float(r.get("crossing_bytes", 0.0)) for r in rows])
    y = np.array([float(r[target]) - float(r.get("compute_s", 0.0)) for r in rows])

    def lstsq(columns: list[np.ndarray]) -> tuple[np.ndarray | None, np.ndarray]:
        x = np.column_stack([np.ones_like(y), *columns])
        if len(y) < x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
            return None, y - y.mean()
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        return coef, y - x @ coef

    def rms(residual: np.ndarray) -> float:
        return float(np.sqrt(np.mean(residual ** 2))) if residual.size else None

    coef, residual = lstsq([extra])
    fit = {
        "model": "latency = a + b * (submodels - 1)"
                 + (" (minus the cost model's compute)" if any("compute_s" in r for r in rows) else ""),
        "intercept_s": None if coef is None else float(coef[0]),
        "per_submodel_s": None if coef is None else float(coef[1]),
        "residual_rms_s": rms(residual),
        "max_abs_residual_s": float(np.abs(residual).max()) if residual.size else None,
        "points": len(rows),
    }
    coef2, residual2 = lstsq([extra, crossings])
    helps = bool(coef2 is not None and coef is not None and np.all(coef2[1:] >= 0)
                 and rms(residual2) <= 0.75 * rms(residual))
    fit["with_crossings"] = {
        "model": "latency = a + b * (submodels - 1) + c * crossing tensors",
        "intercept_s": None if coef2 is None else float(coef2[0]),
        "per_submodel_s": None if coef2 is None else float(coef2[1]),
        "per_crossing_s": None if coef2 is None else float(coef2[2]),
        "residual_rms_s": None if coef2 is None else rms(residual2),
        "crossing_term_helps": helps,
    }
    coef3, residual3 = lstsq([crossing_bytes])
    fit["bytes_only"] = {
        "model": "latency = a + c * crossing bytes (no term per submodel)",
        "intercept_s": None if coef3 is None else float(coef3[0]),
        "per_byte_s": None if coef3 is None else float(coef3[1]),
        "residual_rms_s": None if coef3 is None else rms(residual3),
    }
    return fit


def segment_sweep(backend, graph: ComputationGraph, ks: Sequence[int] = DEFAULT_SEGMENTS, *, rounds: int = 3,
                  statistic: str = "median", devices: Sequence[int] = (0, 1),
                  compute_s: Callable[[np.ndarray], float] | None = None,
                  progress: Callable[[str], None] | None = None) -> dict:
    """Measure `graph` cut into each of `ks` segments alternating between `devices` (indices into the real
    `backend`'s devices) in `rounds` interleaved rounds, and fit the seconds per extra submodel.

    A measurement's latency is `statistic` (``"median"``, as the backend reports, or ``"min"``) of its timed runs
    (`Measurement.timed_latencies_s`: paired with the backend's reference where it pairs); each ``k``'s latency is
    the fastest of its rounds. ``k`` larger than the graph's op count are left out.

    Args:
        backend: a real `OpenVINOBackend` (measured with ``use_cache=False``: every round compiles afresh).
        compute_s: the cost model's compute seconds of a placement; given, each row records it and the fit is of
            latency minus compute (for devices that differ).
        progress: called with a line of text per measurement.

    Returns:
        ``{"model", "ks", "rounds", "statistic", "devices", "rows", "fit"}``: a row per ``k`` with ``k``,
        ``submodels`` (HETERO's count; the largest seen if rounds disagree), ``extra_submodels``, ``crossings``,
        ``crossing_bytes``, ``latency_s`` (fastest round), ``rounds_s``, ``compile_s``, ``compute_s`` (when
        given), ``per_submodel_from_first_s`` (the slope from the first ``k`` to this one); ``fit``:
        `fit_submodel_overhead` of the rows.

    Raises:
        RuntimeError: a placement failed on the real backend (its error).
    """
    if rounds < 1:
        raise ValueError(f"need rounds >= 1, got {rounds}")
    if len(set(devices)) < 2 or len(devices) > len(backend.devices) or max(devices) >= len(backend.devices):
        raise ValueError(f"the sweep alternates two or more of the backend's {len(backend.devices)} devices; "
                         f"got {list(devices)}")
    latency_statistic([1.0], statistic)  # an unknown statistic fails before any work
    ks = sorted({int(k) for k in ks if 1 <= int(k) <= graph.n_ops})
    if not ks:
        raise ValueError(f"no segment count fits {graph.name} ({graph.n_ops} ops)")
    say = progress or (lambda text: None)
    placements = {k: segment_placement(graph.n_ops, k, devices) for k in ks}
    measured: dict[int, list[tuple[float, int, float]]] = {k: [] for k in ks}
    for r in range(rounds):
        for k in (ks if r % 2 == 0 else ks[::-1]):
            m = backend.measure(graph, placements[k], use_cache=False)
            if not m.ok:
                raise RuntimeError(f"{graph.name} in {k} segments failed on the real backend: {m.error}")
            latency = real_latency(m, statistic)
            measured[k].append((latency, int(m.n_submodels), float(m.compile_s)))
            say(f"{graph.name}, {k} segments (round {r + 1}/{rounds}): {latency * 1e3:.2f} ms, "
                f"{m.n_submodels} submodels")
    rows = []
    for k in ks:
        crossings, crossing_bytes = segment_crossings(graph, k)
        submodels = max(n for _, n, _ in measured[k])
        row = {
            "k": k,
            "submodels": submodels,
            "extra_submodels": submodels - 1,
            "crossings": crossings,
            "crossing_bytes": crossing_bytes,
            "latency_s": min(t for t, _, _ in measured[k]),
            "rounds_s": [t for t, _, _ in measured[k]],
            "compile_s": [c for _, _, c in measured[k]],
        }
        if compute_s is not None:
            row["compute_s"] = float(compute_s(placements[k]))
        rows.append(row)
    first = rows[0]
    for row in rows[1:]:  # the slope from the fewest segments to each k: is the cost linear in the submodels?
        extra = row["extra_submodels"] - first["extra_submodels"]
        rise = (row["latency_s"] - row.get("compute_s", 0.0)) - (first["latency_s"] - first.get("compute_s", 0.0))
        row["per_submodel_from_first_s"] = rise / extra if extra else None
    return {
        "model": graph.name,
        "ks": ks,
        "rounds": rounds,
        "statistic": f"{statistic} of each measurement's timed runs, fastest of {rounds} round(s) per k",
        "devices": [backend.devices[d].name for d in devices],
        "rows": rows,
        "fit": fit_submodel_overhead(rows),
    }


__all__ = ["CALIBRATION_SEGMENTS", "DEFAULT_SEGMENTS", "fit_submodel_overhead", "segment_crossings",
           "segment_placement", "segment_sweep"]
