"""What every latency backend provides: `measure(graph, placement, *, use_cache=True) -> Measurement`.

Backends never raise into the env loop for a placement that fails to compile or run: that is a measured
outcome (``ok=False`` with the error text), which the env turns into a penalty reward.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from ..graph import ComputationGraph


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

