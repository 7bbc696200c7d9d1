"""What every latency backend provides: `measure(graph, placement, *, use_cache=True) -> Measurement`.

Backends never raise into the env loop for a placement that fails to compile or run: that is a measured
outcome (``ok=False`` with the error text), which the env turns into a penalty reward.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from ..graph import ComputationGraph


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


@dataclass(frozen=True)
class Measurement:
    """The outcome of measuring one placement.

    Attributes:
        latency_s: median inference latency in seconds (``inf`` when ``ok`` is False).
        ok: False when the placement failed to compile or run.
        samples: the individual timed runs (seconds), empty for the simulated backend.
        error: the error text when ``ok`` is False.
        compile_s: compile time in seconds, never part of the latency.
        n_submodels: how many single-device pieces the placement was cut into.
        cached: True when the result was reused for a placement measured before.
        simulated: True when the latency comes from a cost model, not a measurement.
        breakdown: backend-specific parts of the latency (simulated: compute per device, transfer, overhead).
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

    @property
    def interval_s(self) -> tuple[float, float]:
        """95% confidence interval of the median latency from the timed runs (`median_interval`); the latency
        itself at both ends when there are no runs (a simulated latency is exact)."""
        if not self.samples:
            return (self.latency_s, self.latency_s)
        return median_interval(self.samples)

    @property
    def spread_s(self) -> float:
        """Interquartile range of the timed runs (0 when there is one sample or none)."""
        if len(self.samples) < 2:
            return 0.0
        q75, q25 = np.percentile(self.samples, [75, 25])
        return float(q75 - q25)

    @classmethod
    def failure(cls, error: str, **kwargs) -> "Measurement":
        return cls(latency_s=float("inf"), ok=False, error=error, **kwargs)


@runtime_checkable
class Backend(Protocol):
    """A latency backend for the devices it was built with.

    Attributes:
        name: ``"openvino"``, ``"simulated"``, ...
        simulated: whether latencies come from a model rather than a measurement.
        device_names: the devices a placement indexes, in order (placement value ``d`` = ``device_names[d]``).
        virtual_devices: one bool per device: is it a virtual copy of a real device.
    """

    name: str
    simulated: bool
    device_names: Sequence[str]
    virtual_devices: Sequence[bool]

    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Latency of `graph` with op ``i`` on device ``placement[i]``; `placement` is (N,) int.

        ``use_cache=False`` measures afresh even if the backend keeps earlier measurements (how final
        placements are reported: a new measurement, not the luckiest of many noisy draws); a backend that
        keeps none accepts the flag and ignores it."""
        ...

    def describe(self) -> dict:
        """Settings and versions worth recording in results files."""
        ...

    def close(self) -> None:
        ...

