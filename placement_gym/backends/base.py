"""What every latency backend provides: `measure(graph, placement, *, use_cache=True) -> Measurement` and its
batched form `measure_many(graph, placements, *, use_cache=True) -> list[Measurement]`.

Backends never raise into the env loop for a placement that fails to compile or run: that is a measured
outcome (``ok=False`` with the error text), which the env turns into a penalty reward.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from ..graph import ComputationGraph

#: What a backend measures per placement (``objective=`` of the env, the backends and the CLI):
#: ``"latency"``: one synchronous inference, start to end (the paper's objective);
#: ``"throughput"``: inferences streaming through the placement with several requests in flight, each device
#: working on its submodels of one request while the others work on other requests (Tarnawski et al. 2020's
#: objective). Both are reported as *seconds per inference* (`Measurement.latency_s`): for throughput that is
#: the steady-state time between completed inferences, 1 / throughput, so every "lower is better" formula
#: (speedup, regret, gap to the optimum) reads the same under both objectives.
OBJECTIVES = ("latency", "throughput")

#: Columns of a backend's ``device_features()`` (D, K) array, in order (log10 of SI units, so that devices of
#: very different size stay comparable): peak FLOP/s, memory bandwidth (B/s), memory capacity (bytes; 12 =
#: 1 TB when unknown/unbounded), bandwidth of the link to the other devices (B/s; 12 when shared memory or
#: unknown), launch overhead per op (log10 microseconds + 1, so 0 = 0.1 us).
DEVICE_FEATURES = ("log10_peak_flops", "log10_memory_bandwidth_Bps", "log10_memory_bytes", "log10_link_Bps",
                   "log10_launch_us")


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    return objective


def median_interval(samples: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of `samples`: the order statistics x_(j) and
    x_(n+1-j), with j the largest rank such that P(B < j) <= (1 - level) / 2 for B ~ Binomial(n, 1/2) (n = 20 at
    95%: x_(6) and x_(15)). Needs no assumption about the shape of the timing distribution; with too few samples
    for `level` (fewer than 6 at 95%) it is their whole range."""
    x = sorted(float(v) for v in samples)
    n = len(x)
    if n == 0:
        raise ValueError("median_interval needs at least one sample")
    tail, j, below = (1.0 - level) / 2.0, 0, 0.0
    for k in range(n + 1):  # below = P(B <= k - 1) after step k
        below += math.comb(n, k) / 2.0 ** n
        if below > tail:
            break
        j = k + 1
    return (x[0], x[-1]) if j == 0 else (x[j - 1], x[n - j])


def timing_ratio(timed: Sequence[float], reference: Sequence[float], *,
                 paired: bool) -> tuple[float, tuple[float, float]]:
    """How many times the seconds of `reference` those of `timed` are, with its 95% interval: ``(ratio, (low,
    high))``, a ratio below 1 when `timed` is the faster.

    Paired (latency: the same number of runs, run i of each back to back, `profiling.timed_pairs`): the median of
    the per-pair ratios ``timed[i] / reference[i]``, with the distribution-free interval of that median
    (`median_interval`); load from other processes slows both runs of a pair alike and cancels in the ratio.
    Unpaired (throughput: steady-state periods of each, `profiling.timed_periods`): the ratio of the two medians,
    its interval the ends of the medians' intervals divided crosswise (low / reference's high, high / reference's
    low): conservative."""
    if paired:
        ratios = np.divide(timed, reference)
        low, high = median_interval(ratios)
        return float(np.median(ratios)), (float(low), float(high))
    (low, high), (r_low, r_high) = median_interval(timed), median_interval(reference)
    return float(np.median(timed)) / float(np.median(reference)), (float(low / r_high), float(high / r_low))


@dataclass(frozen=True)
class Measurement:
    """The outcome of measuring one placement.

    Attributes:
        latency_s: seconds per inference under `objective` (``inf`` when ``ok`` is False): the median latency of
            one inference (``"latency"``), or the steady-state time between completed inferences, 1 /
            throughput (``"throughput"``; `throughput_per_s`).
        ok: False when the placement failed to compile or run.
        samples: the individual timed runs (seconds), empty for the simulated backend.
        error: the error text when ``ok`` is False.
        compile_s: compile time in seconds, never part of the latency.
        n_submodels: how many single-device pieces the placement was cut into.
        cached: True when the result was reused for a placement measured before.
        simulated: True when the latency comes from a cost model, not a measurement.
        breakdown: backend-specific parts of the latency (simulated: compute per device, transfer, overhead).
        objective: ``"latency"`` or ``"throughput"`` (`OBJECTIVES`): what `latency_s` is the seconds of.
        reference_samples: paired timing (`placement_gym.backends.profiling.timed_pairs`): the reference
            placement's run right after each of `samples`; empty when the runs were not paired.
        reference_baseline_s: paired timing: the reference's latency the ratios are scaled by (measured once
            per graph), so `latency_s` = median(samples / reference_samples) x this; None when not paired.
    """

    latency_s: float
    ok: bool = True
    samples: tuple[float, ...] = ()
    error: str | None = None
    compile_s: float = 0.0
    n_submodels: int = 1
    cached: bool = False
    simulated: bool = False
    breakdown: Mapping[str, float] = field(default_factory=dict)
    objective: str = "latency"
    reference_samples: tuple[float, ...] = ()
    reference_baseline_s: float | None = None

    @property
    def timed_latencies_s(self) -> np.ndarray:
        """(R,) the per-run latencies `latency_s` is the median of: the timed runs, or with paired timing each
        run's ratio to its reference run times the reference baseline (so a burst of load cancels out)."""
        samples = np.asarray(self.samples, dtype=np.float64)
        if self.reference_samples and self.reference_baseline_s is not None:
            return samples / np.asarray(self.reference_samples, dtype=np.float64) * self.reference_baseline_s
        return samples

    @property
    def raw_latency_s(self) -> float:
        """The median of the timed runs as timed (no pairing correction); `latency_s` without timed runs."""
        return float(np.median(self.samples)) if self.samples and self.ok else self.latency_s

    @property
    def throughput_per_s(self) -> float:
        """Inferences per second: 1 / `latency_s` (0 for a failed placement)."""
        return 1.0 / self.latency_s if self.ok and self.latency_s > 0 else 0.0

    @property
    def interval_s(self) -> tuple[float, float]:
        """95% confidence interval of `latency_s` from the timed runs (`median_interval` of
        `timed_latencies_s`); the latency itself at both ends when there are no runs (a simulated latency is
        exact)."""
        if not self.samples:
            return (self.latency_s, self.latency_s)
        return median_interval(self.timed_latencies_s)

    @property
    def spread_s(self) -> float:
        """Interquartile range of `timed_latencies_s` (0 when there is one sample or none)."""
        if len(self.samples) < 2:
            return 0.0
        q75, q25 = np.percentile(self.timed_latencies_s, [75, 25])
        return float(q75 - q25)

    @classmethod
    def failure(cls, error: str, **kwargs) -> "Measurement":
        return cls(latency_s=float("inf"), ok=False, error=error, **kwargs)


#: The `Measurement` values a step's info reports, the columns of a `MeasurementBatch`.
BATCH_COLUMNS = ("latency_s", "ok", "raw_latency_s", "interval_s", "spread_s", "compile_s", "n_submodels", "error",
                 "simulated")


def info_column(values: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """One value per placement (or sub-env), None where it has none, as Gymnasium's ``VectorEnv._add_info`` batches
    an info key: ``(values (B,), present (B,) bool)``, the array typed by the first value present (float64, int64,
    bool or another numpy scalar type; any other type, None included where no value is numeric: an object array,
    every entry present), zeros where a numeric column has no value."""
    b = len(values)
    example = next((v for v in values if v is not None), None)
    if example is not None and (type(example) in (int, float, bool) or isinstance(example, np.number)):
        if any(v is None for v in values):  # zeros where a placement has no value, masked out
            present = np.array([v is not None for v in values])
            array = np.zeros(b, dtype=type(example))
            array[present] = [v for v in values if v is not None]
            return array, present
        return np.array(values, dtype=type(example)), np.ones(b, dtype=bool)
    # objects (None included: `_add_info` stores it and marks the entry as present)
    return np.fromiter(values, dtype=object, count=b), np.ones(b, dtype=bool)


class MeasurementBatch:
    """The measurements of a batch of placements in columns, for a caller that reads them a column at a time (the
    vector env builds its step's infos so): a backend that prices in arrays (the simulated one) fills the columns
    straight from them, and the B `Measurement` objects are only built when `measurements` is called.

    Attributes:
        columns: per name of `BATCH_COLUMNS`, a (B,) array of each placement's value (that `Measurement`
            attribute), typed as `info_column` types it: float64 (latencies, seconds), bool (``ok``,
            ``simulated``), int64 (``n_submodels``), object (``interval_s`` tuples, ``error`` str or None).
        breakdown: per breakdown key (in the order the measurements' breakdowns first name them), a (B,) array of
            each placement's value, 0 where its breakdown lacks the key; `breakdown_present`: per key, (B,) bool
            where it has it.
    """

    def __init__(self, columns: dict[str, np.ndarray], breakdown: dict[str, np.ndarray],
                 breakdown_present: dict[str, np.ndarray], build: Callable[[], list[Measurement]]) -> None:
        self.columns, self.breakdown, self.breakdown_present = columns, breakdown, breakdown_present
        self._build = build
        self._measurements: list[Measurement] | None = None

    @classmethod
    def of(cls, measurements: Sequence[Measurement]) -> "MeasurementBatch":
        """The columns of `measurements` (what any backend's ``measure_many`` returns), read from each."""
        measurements = list(measurements)
        columns = {name: info_column([getattr(m, name) for m in measurements])[0] for name in BATCH_COLUMNS}
        by_key: dict[str, list] = {}
        for i, m in enumerate(measurements):
            for key, value in m.breakdown.items():
                by_key.setdefault(key, [None] * len(measurements))[i] = value
        breakdown, present = {}, {}
        for key, values in by_key.items():
            breakdown[key], present[key] = info_column(values)
        return cls(columns, breakdown, present, lambda: measurements)

    def __len__(self) -> int:
        return len(self.columns["ok"])

    def measurements(self) -> list[Measurement]:
        """The B `Measurement` objects, in order (built on the first call)."""
        if self._measurements is None:
            self._measurements = self._build()
        return self._measurements


@runtime_checkable
class Backend(Protocol):
    """A latency backend for the devices it was built with.

    A backend subclasses this protocol (as both shipped backends do) or provides every member itself. Subclasses
    inherit `measure_many` as a loop over `measure`; a backend that can price or time many placements at once (the
    simulated one prices a whole batch with array operations) overrides it.

    Attributes:
        name: ``"openvino"``, ``"simulated"``, ...
        simulated: whether latencies come from a model rather than a measurement.
        device_names: the devices a placement indexes, in order (placement value ``d`` = ``device_names[d]``).
        virtual_devices: one bool per device: is it a virtual copy of a real device.

    Optional (both shipped backends have them; `describe_devices` fills in for a backend without them)::

        objective: ``"latency"`` (assumed when absent) or ``"throughput"``.
        action_mask(graph) -> (N, D) bool: ``True`` where device ``d`` can run op ``i`` (operator support;
            memory is a property of a whole placement, checked by `measure`).
        device_features() -> (D, K) float32: each device, columns `DEVICE_FEATURES`.
        node_device_cost(graph) -> (N, D) float64: estimated seconds of op ``i`` alone on device ``d`` (``inf``
            where it cannot run).
        submodel_overhead_s() -> float: estimated seconds each HETERO submodel beyond the first adds to a
            placement (dispatching a sub-request, synchronising; transfers not included); 0 when unknown.
        hetero_devices() -> (D,) bool: the devices OpenVINO's HETERO plugin can place ops on; any other (the NPU)
            runs a whole model or nothing (`shareable_devices`; every device when absent).
    """

    name: str
    simulated: bool
    device_names: Sequence[str]
    virtual_devices: Sequence[bool]

    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Seconds per inference (`objective`) of `graph` with op ``i`` on device ``placement[i]``; `placement`
        is (N,) int. An op on a device that cannot run it, or a device whose memory the placement exceeds, is a
        failed placement (``ok=False``, the error says which op / device), not an exception.

        ``use_cache=False`` measures afresh even if the backend keeps earlier measurements (how final
        placements are reported: a new measurement, not the luckiest of many noisy draws); a backend that
        keeps none accepts the flag and ignores it."""
        ...

    def measure_many(self, graph: ComputationGraph, placements: "np.ndarray | Sequence[np.ndarray]", *,
                     use_cache: bool = True) -> list[Measurement]:
        """`measure` of each placement of `placements` ((B, N) int, or B arrays of shape (N,)), in order: B
        measurements, each the same as `measure` would return for that placement alone at that point of the
        sequence (a failing placement is a failed `Measurement`, the others are still measured).

        This default measures them one after another; a backend that can do better overrides it."""
        return [self.measure(graph, placement, use_cache=use_cache) for placement in placements]

    def describe(self) -> dict:
        """Settings and versions worth recording in results files."""
        ...

    def close(self) -> None:
        ...


#: Per backend class: whether `measure_batch` may call its own ``measure_batch`` (see there).
_HAS_OWN_MEASURE_BATCH: dict[type, bool] = {}


def measure_batch(backend: Backend, graph: ComputationGraph, placements: np.ndarray) -> MeasurementBatch:
    """``backend.measure_many(graph, placements)`` as a `MeasurementBatch`: the backend's own ``measure_batch``
    where it has one (the simulated backend prices straight into columns), else its measurements' columns. Not a
    `Backend` member, so that backends written for the protocol without it keep working.

    A subclass that overrides ``measure_many`` (to count, log or cache its batches) without its own
    ``measure_batch`` gets its ``measure_many`` called: the inherited ``measure_batch`` would bypass it."""
    cls = type(backend)
    if cls not in _HAS_OWN_MEASURE_BATCH:  # decided once per class
        owner = next((c for c in cls.__mro__ if "measure_batch" in vars(c)), None)
        _HAS_OWN_MEASURE_BATCH[cls] = owner is not None and cls.measure_many is vars(owner).get("measure_many")
    if _HAS_OWN_MEASURE_BATCH[cls]:
        return backend.measure_batch(graph, placements)
    return MeasurementBatch.of(backend.measure_many(graph, placements))


def describe_devices(backend: Backend, graph: ComputationGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(action_mask (N, D) bool, device_features (D, K) float32, node_device_cost (N, D) float64)`` from the
    backend's optional methods; a backend without them (a user's own that only measures) gets every op allowed
    everywhere and zeros for the unknown features and costs."""
    n, d = graph.n_ops, len(backend.device_names)
    mask = backend.action_mask(graph) if hasattr(backend, "action_mask") else np.ones((n, d), dtype=bool)
    features = backend.device_features() if hasattr(backend, "device_features") else \
        np.zeros((d, len(DEVICE_FEATURES)), dtype=np.float32)
    cost = backend.node_device_cost(graph) if hasattr(backend, "node_device_cost") else np.zeros((n, d))
    return np.asarray(mask, dtype=bool), np.asarray(features, dtype=np.float32), np.asarray(cost, dtype=np.float64)


def submodel_overhead(backend: Backend) -> float:
    """Seconds each submodel beyond the first costs (the backend's optional ``submodel_overhead_s()``), 0 when
    the backend does not say (what ``obs["submodel_overhead"]`` holds)."""
    seconds = float(backend.submodel_overhead_s()) if hasattr(backend, "submodel_overhead_s") else 0.0
    if not (np.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"backend {backend.name!r} reports a submodel overhead of {seconds} s; expected a finite "
                         "number >= 0 (0: unknown)")
    return seconds


def shareable_devices(backend: Backend) -> np.ndarray:
    """(D,) bool: the devices a placement over several devices may use: the backend's optional
    ``hetero_devices()`` (OpenVINO's HETERO plugin does not run on the NPU, which runs a whole model or nothing),
    every device when the backend does not say; every device when there is only one."""
    d = len(backend.device_names)
    hetero = np.asarray(backend.hetero_devices(), dtype=bool) if hasattr(backend, "hetero_devices") else \
        np.ones(d, dtype=bool)
    return hetero if d > 1 else np.ones(d, dtype=bool)
