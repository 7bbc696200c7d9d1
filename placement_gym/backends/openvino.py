"""The real backend: compile the placement with OpenVINO's HETERO plugin and time inference.

Per measurement:
1. every op of the model gets an ``affinity`` rt_info entry (compute ops from the placement, Constants /
   Parameters / Results from the compute op they are attached to; HETERO refuses a partial map);
2. the model is compiled on ``HETERO:<devices used>`` (or directly on the one device a single-device placement
   uses), with each device's properties under ``DEVICE_PROPERTIES``;
3. ``warmup`` untimed inferences (the first after compile is several times slower), then at least ``repeats``
   timed synchronous inferences, more while the 95% interval of their median is wider than +-1% (adaptive
   repeats, capped); the latency is their median, with that interval and the interquartile range.
   Under ``objective="throughput"`` instead: several asynchronous requests stay in flight (`timed_periods`), so
   HETERO can run one request's submodel on one device while another device runs another request's; the
   result is the median steady-state time between completed inferences (1 / throughput) over timed windows.
Compile time is reported on its own. Results are cached by placement.

The device observations (`action_mask`, `node_device_cost`, `device_features`) come from OpenVINO itself:
``query_model`` per device for operator support, and per-op profiling of the graph compiled on each device alone
for costs and the fitted roofline (`placement_gym.backends.calibration`), once per graph.
"""
from __future__ import annotations

import hashlib
import logging
import math
import time
import weakref
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import openvino as ov

from ..devices import Device, DeviceSpec, compile_properties, open_devices, openvino_error_text, shared_core
from ..graph import ComputationGraph
from .base import DEVICE_FEATURES, OBJECTIVES, Measurement, check_objective, median_interval

logger = logging.getLogger(__name__)

#: Timers for inference runs: wall-clock latency (what the backend reports by default) or the process's CPU time
#: (robust when other processes share the cores; meaningful only for one-thread devices, as threads add up).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed_runs(request: ov.InferRequest, runs: int, warmup: int, clock: "str | Callable[[], float]" = "wall", *,
               target_rel_halfwidth: float | None = None, max_runs: int | None = None,
               max_s: float = math.inf) -> list[float]:
    """`warmup` untimed then at least `runs` timed synchronous inferences of `request`; the seconds of each.

    With `target_rel_halfwidth` (adaptive repeats) timing goes on, `runs` more at a time, until the 95% interval
    of the median (`median_interval`) is within +-target of it, or `max_runs` runs or `max_s` seconds of timing
    are spent: steady placements cost `runs` inferences, noisy ones get more. `clock` is a `CLOCKS` name or a
    callable returning seconds."""
    now = clock if callable(clock) else CLOCKS.get(clock)
    if now is None:
        raise ValueError(f"unknown clock {clock!r}; choose one of {sorted(CLOCKS)}")
    for _ in range(warmup):
        request.infer()
    samples: list[float] = []
    cap = runs if target_rel_halfwidth is None else max(runs, max_runs or runs)
    started = now()
    while len(samples) < cap:
        for _ in range(min(runs, cap - len(samples))):
            start = now()
            request.infer()
            samples.append(now() - start)
        if target_rel_halfwidth is None or now() - started >= max_s:
            break
        low, high = median_interval(samples)
        if (high - low) / 2.0 <= target_rel_halfwidth * float(np.median(samples)):
            break
    return samples


def timed_periods(compiled: ov.CompiledModel, inputs: dict, requests_in_flight: int, warmup: int, *,
                  windows: int = 5, window_s: float = 0.2, window_inferences: int | None = None,
                  target_rel_halfwidth: float | None = None, max_windows: int | None = None,
                  max_s: float = math.inf) -> list[float]:
    """Steady-state seconds per inference of `compiled` with `requests_in_flight` asynchronous requests, one
    value per timed window.

    An ``ov.AsyncInferQueue`` of `requests_in_flight` requests is kept full (a new inference starts as soon as
    one completes), so a HETERO model can pipeline: device A runs request 2's first submodel while device B runs
    request 1's second. Completion times are taken in the queue's callback. The first ``max(1, warmup) *
    requests_in_flight`` completions are warm-up (each request's first inference after compile is slow, and the
    pipeline fills). Then completions are cut into consecutive windows of at least `window_s` seconds and
    `window_inferences` inferences (default ``max(4, 2 * requests_in_flight)``: every request completes at least
    twice, so a window spans whole turns of the queue); each window gives (its seconds) / (its completions).
    Windows share their boundary completion, so together they cover the timed stretch without gaps.

    At least `windows` windows; with `target_rel_halfwidth` (adaptive, like `timed_runs`) more until the 95%
    interval of their median is within +-target of it, or `max_windows` windows or `max_s` seconds of timing
    are spent. Always wall-clock time: with several requests in flight, CPU time adds up over threads.

    Args:
        compiled: a compiled model (HETERO or single device).
        inputs: input index -> ``ov.Tensor`` (shared read-only by every request).
        requests_in_flight: size of the request pool (1 = back-to-back asynchronous inferences, no overlap).

    Returns:
        (W,) seconds per inference of each window, W >= `windows`.
    """
    if requests_in_flight < 1 or windows < 1:
        raise ValueError(f"need requests_in_flight >= 1 and windows >= 1, got {requests_in_flight}, {windows}")
    per_window = window_inferences or max(4, 2 * requests_in_flight)
    skip = max(1, warmup) * requests_in_flight
    cap = windows if target_rel_halfwidth is None else max(windows, max_windows or windows)
    queue = ov.AsyncInferQueue(compiled, requests_in_flight)
    for request in queue:
        for index, tensor in inputs.items():
            request.set_input_tensor(index, tensor)
    done: list[float] = []  # completion times, appended by OpenVINO's callback thread (list.append is atomic)
    queue.set_callback(lambda request, userdata: done.append(time.perf_counter()))
    samples: list[float] = []
    first = None  # index into `done` of the current window's opening completion
    try:
        while len(samples) < cap:
            queue.start_async()  # blocks until a request is idle, which keeps the pool full
            last = len(done) - 1
            if first is None:
                if last + 1 >= skip:
                    first = opened = last
                continue
            if last - first >= per_window and done[last] - done[first] >= window_s:
                samples.append((done[last] - done[first]) / (last - first))
                first = last
                if len(samples) < windows:
                    continue
                if target_rel_halfwidth is None or done[last] - done[opened] >= max_s:
                    break
                low, high = median_interval(samples)
                if (high - low) / 2.0 <= target_rel_halfwidth * float(np.median(samples)):
                    break
    finally:
        queue.wait_all()  # never leave inferences running on a model that is about to be released
    return samples


@dataclass
class _PreparedGraph:
    """Per-graph state computed once: which compute op each IR op follows, and input tensors."""

    ops: list  # every op of graph.model
    follows: np.ndarray  # (len(ops),) index of the compute op whose device each op takes
    inputs: dict  # input index -> ov.Tensor with random data


class OpenVINOBackend:
    """Real compile-and-benchmark measurements on OpenVINO devices (see module docstring).

    Args:
        devices: device specs (``"CPU"``, ``"CPU[INFERENCE_NUM_THREADS=1]"``, ...) or ``"auto"``.
        warmup: untimed inferences after each compile.
        repeats: timed inferences (at least; see `target_rel_halfwidth`); the latency is their median.
        target_rel_halfwidth: adaptive repeats: time `repeats` more runs at a time until the 95% interval of the
            median is within +-this fraction of it (default 0.01: +-1%), or `max_repeats` runs or `max_timing_s`
            seconds of timing are spent; None times exactly `repeats` runs.
        max_repeats, max_timing_s: the caps of adaptive repeats.
        cache: reuse the measurement of a placement seen before (``measure(..., use_cache=False)`` forces).
        input_seed: seed of the random input data.
        clock: how timed runs are timed (`CLOCKS`): ``"wall"`` (default) or ``"cpu"``.
        inference_precision: ``"f32"`` (default) pins every device's ``INFERENCE_PRECISION_HINT`` unless its spec
            sets one, so latencies are comparable across processors (OpenVINO's CPU default is bf16 on CPUs with
            AVX-512 BF16 or AMX and f32 elsewhere); None keeps OpenVINO's per-device default.
    """

    name = "openvino"
    simulated = False

    def __init__(
        self,
        devices: "str | Sequence[str | DeviceSpec]" = "auto",
        *,
        warmup: int = 3,
        repeats: int = 20,
        target_rel_halfwidth: float | None = 0.01,
        max_repeats: int = 200,
        max_timing_s: float = 2.0,
        cache: bool = True,
        input_seed: int = 0,
        inference_precision: str | None = "f32",
        clock: str = "wall",
        core: ov.Core | None = None,
    ) -> None:
        if warmup < 0 or repeats < 1:
            raise ValueError(f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}")
        if clock not in CLOCKS:
            raise ValueError(f"unknown clock {clock!r}; choose one of {sorted(CLOCKS)}")
        self.clock = clock
        self.core = core or shared_core()
        defaults = {"INFERENCE_PRECISION_HINT": inference_precision} if inference_precision else {}
        self.devices: list[Device] = open_devices(devices, self.core, defaults)
        if target_rel_halfwidth is not None and not target_rel_halfwidth > 0:
            raise ValueError(f"target_rel_halfwidth must be > 0 or None (fixed repeats), got {target_rel_halfwidth}")
        self.warmup, self.repeats, self.use_cache, self.input_seed = warmup, repeats, cache, input_seed
        self.target_rel_halfwidth, self.max_repeats, self.max_timing_s = target_rel_halfwidth, max_repeats, max_timing_s
        # Keyed by the graph object itself (weakly), so a graph that is gone takes its entries with it.
        self._prepared: "weakref.WeakKeyDictionary[ComputationGraph, _PreparedGraph]" = weakref.WeakKeyDictionary()
        self._cache: "weakref.WeakKeyDictionary[ComputationGraph, dict[bytes, Measurement]]" = weakref.WeakKeyDictionary()

    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    @property
    def virtual_devices(self) -> list[bool]:
        return [d.virtual for d in self.devices]

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "openvino": ov.get_version(),
            "devices": [str(d) for d in self.devices],
            "device_full_names": {d.name: self.core.get_property(d.ov_name, "FULL_DEVICE_NAME") for d in self.devices},
            # The CPU plugin's default precision depends on the processor (bf16 where AVX-512 BF16 / AMX
            # exist, f32 otherwise): latencies are only comparable at the same precision.
            "inference_precision": {
                d.name: _type_name(d.properties.get("INFERENCE_PRECISION_HINT", self.core.get_property(d.ov_name, "INFERENCE_PRECISION_HINT")))
                for d in self.devices
            },
            "warmup": self.warmup,
            "repeats": self.repeats,
            "adaptive_repeats": None if self.target_rel_halfwidth is None else {
                "target_rel_halfwidth": self.target_rel_halfwidth, "max_repeats": self.max_repeats,
                "max_timing_s": self.max_timing_s},
            "clock": f"{self.clock} ({CLOCKS[self.clock].__name__})",
        }

    # --------------------------------------------------------------------------------------- measure
    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Latency of `placement`; an identical placement measured before is reused when `use_cache` and the
        backend keeps measurements (``cache=True``); ``use_cache=False`` measures afresh (and caches that)."""
        placement = np.asarray(placement, dtype=np.int64)
        key = hashlib.blake2b(placement.tobytes(), digest_size=16).digest()
        cache = self._cache.setdefault(graph, {})
        if self.use_cache and use_cache and key in cache:
            return replace(cache[key], cached=True)
        result = self._measure_uncached(graph, placement)
        cache[key] = result
        return result

    def compile_placement(self, graph: ComputationGraph, placement: np.ndarray) -> tuple[ov.CompiledModel, int]:
        """Compile `graph` with op ``i`` on device ``placement[i]``; returns the compiled model and its number
        of submodels. A single-device placement is compiled on that device directly (what a user would run)."""
        prepared = self._prepare(graph)
        used_devices = [self.devices[d] for d in sorted(set(np.asarray(placement).tolist()))]
        if len(used_devices) == 1:
            return self.core.compile_model(graph.model, used_devices[0].ov_name, used_devices[0].properties), 1
        ov_names = np.array([d.ov_name for d in self.devices], dtype=object)
        for op, device in zip(prepared.ops, ov_names[placement[prepared.follows]]):
            op.get_rt_info()["affinity"] = device
        compiled = self.core.compile_model(
            graph.model,
            "HETERO:" + ",".join(d.ov_name for d in used_devices),
            {"DEVICE_PROPERTIES": compile_properties(used_devices)},
        )
        return compiled, int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))

    def example_inputs(self, graph: ComputationGraph) -> dict[int, ov.Tensor]:
        """The input tensors every measurement of `graph` uses, by input index."""
        return self._prepare(graph).inputs

    def _measure_uncached(self, graph: ComputationGraph, placement: np.ndarray) -> Measurement:
        compile_s = 0.0
        try:
            start = time.perf_counter()
            compiled, n_submodels = self.compile_placement(graph, placement)
            compile_s = time.perf_counter() - start
            samples = self._time_inference(compiled, self._prepare(graph).inputs)
            del compiled  # release the compiled weights before the next placement
        except Exception as exc:  # a failing placement is a measured outcome, not a crash
            return Measurement.failure(f"{type(exc).__name__}: {openvino_error_text(exc)}", compile_s=compile_s)
        return Measurement(
            latency_s=float(np.median(samples)),
            samples=tuple(samples),
            compile_s=compile_s,
            n_submodels=n_submodels,
        )

    def _time_inference(self, compiled: ov.CompiledModel, inputs: dict) -> list[float]:
        request = compiled.create_infer_request()
        for index, tensor in inputs.items():
            request.set_input_tensor(index, tensor)
        return timed_runs(request, self.repeats, self.warmup, self.clock,
                          target_rel_halfwidth=self.target_rel_halfwidth, max_runs=self.max_repeats,
                          max_s=self.max_timing_s)

    def _prepare(self, graph: ComputationGraph) -> _PreparedGraph:
        prepared = self._prepared.get(graph)
        if prepared is not None:
            return prepared
        if graph.model is None:
            raise ValueError(f"graph {graph.name!r} has no ov.Model attached; the OpenVINO backend needs one")
        from ..models import example_inputs  # imported here: the model zoo pulls in more than a backend needs

        index = {name: i for i, name in enumerate(graph.op_names)}
        ops = list(graph.model.get_ordered_ops())
        follows = np.array(
            [index[op.get_friendly_name()] if op.get_friendly_name() in index else graph.attached[op.get_friendly_name()]
             for op in ops],
            dtype=np.int64,
        )
        inputs = {i: ov.Tensor(a) for i, a in enumerate(example_inputs(graph.model, seed=self.input_seed).values())}
        prepared = _PreparedGraph(ops, follows, inputs)
        self._prepared[graph] = prepared
        return prepared

    def close(self) -> None:
        self._prepared.clear()
        self._cache.clear()


def _type_name(value) -> str:
    """``ov.Type.bf16`` -> ``"bf16"``; strings pass through."""
    return value.get_type_name() if hasattr(value, "get_type_name") else str(value)
