"""The real backend: compile the placement with OpenVINO's HETERO plugin and time inference.

Per measurement:

1. every op of the model gets an ``affinity`` rt_info entry (compute ops from the placement, Constants /
   Parameters / Results from the compute op they are attached to; HETERO refuses a partial map);
2. the model is compiled on ``HETERO:<devices used>`` (or directly on the one device a single-device placement
   uses), with each device's properties under ``DEVICE_PROPERTIES``.
   Steps 1 and 2 are `placement_gym.backends.hetero`'s (`set_affinities`, `compile_with_affinities`): a placement
   deployed from there is compiled exactly as it was measured here;
3. ``warmup`` untimed inferences (the first after compile is several times slower), then at least ``repeats``
   timed synchronous inferences, more while the 95% interval of their median is wider than +-1% (adaptive
   repeats, capped); the latency is their median, with that interval and the interquartile range.
   With ``paired_reference`` (the default) each timed run is followed at once by a run of the *reference
   placement* (every op on the first device that can run them all), kept compiled per graph: the latency is
   the median of the ratios run / reference run times the reference's own latency, timed once per graph (its
   *baseline*). A burst of load from other processes slows both runs of a pair, so it cancels out; the raw
   runs are kept (`Measurement.samples`, ``raw_latency_s``). On a shared machine with other jobs running the
   paired ratios vary far less than the seconds themselves, at up to twice the timing (docs/results/real-measurement.md).
   Under ``objective="throughput"`` instead: several asynchronous requests stay in flight (`timed_periods`), so
   HETERO can run one request's submodel on one device while another device runs another request's; the
   result is the median steady-state time between completed inferences (1 / throughput) over timed windows.

Compile time is reported on its own. Results are cached by placement.

Replicate (`measure_replicated`, `placement_gym.backends.replicate`): not a placement but what a user would run
instead of one for throughput: the whole model compiled on every device, the requests spread over them
(`timed_replicas`), as ``AUTO`` with ``PERFORMANCE_HINT=CUMULATIVE_THROUGHPUT`` does.

The device observations (`action_mask`, `node_device_cost`, `device_features`) come from OpenVINO itself:
``query_model`` per device for operator support, and per-op profiling of the graph compiled on each device alone
for costs and the fitted roofline (`placement_gym.backends.profiling`), once per graph.
"""
from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import weakref
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import openvino as ov

from .hetero import compile_with_affinities, op_followers, set_affinities, support_mask, used_devices
from ..devices import Device, DeviceSpec, open_devices, openvino_error_text, shared_core
from ..graph import ComputationGraph
from .base import DEVICE_FEATURES, Backend, Measurement, check_objective, median_interval
from .profiling import CLOCKS, fit_roofline, measure_op_times, timed_pairs, timed_periods, timed_runs

logger = logging.getLogger(__name__)

#: Every device's ``INFERENCE_PRECISION_HINT`` unless its spec sets one (the ``inference_precision`` default; also
#: what ``placement-gym export`` compiles a measured placement with, so it runs as it was measured).
INFERENCE_PRECISION = "f32"


@dataclass
class _PreparedGraph:
    """Per-graph state computed once: which compute op each IR op follows, and input tensors."""

    ops: list  # every op of graph.model
    follows: np.ndarray  # (len(ops),) index of the compute op whose device each op takes
    inputs: dict  # input index -> ov.Tensor with random data


@dataclass
class _Reference:
    """Paired timing's reference for one graph: every op on `device`, compiled once and kept."""

    device: int
    compiled: ov.CompiledModel
    request: ov.InferRequest
    baseline_s: float  # its latency, timed once like any placement (median of its runs)


@dataclass
class _OpTimes:
    """Per-graph per-op profile on every device alone, measured once (`OpenVINOBackend.node_device_cost`)."""

    seconds: np.ndarray  # (N, D) float64 seconds of op i on device d; NaN where device d's profiling failed
    info: list  # per device: `measure_op_times`' info dict, or {"error": text}


class OpenVINOBackend(Backend):
    """Real compile-and-benchmark measurements on OpenVINO devices (see module docstring).

    Args:
        devices: device specs (``"CPU"``, ``"CPU[INFERENCE_NUM_THREADS=1]"``, ...) or ``"auto"``.
        warmup: untimed inferences after each compile.
        repeats: timed inferences (at least; see `target_rel_halfwidth`); the latency is their median.
        target_rel_halfwidth: adaptive repeats: time a quarter of `repeats` more runs at a time until the 95%
            interval of the median is within +-this fraction of it (default 0.01: +-1%), or `max_repeats` runs or
            `max_timing_s` seconds of timing are spent; None times exactly `repeats` runs.
        max_repeats, max_timing_s: the caps of adaptive repeats.
        cache: reuse the measurement of a placement seen before (``measure(..., use_cache=False)`` forces).
        input_seed: seed of the random input data.
        clock: how timed runs are timed (`CLOCKS`): ``"wall"`` (default) or ``"cpu"``.
        inference_precision: ``"f32"`` (default) pins every device's ``INFERENCE_PRECISION_HINT`` unless its spec
            sets one, so latencies are comparable across processors (OpenVINO's CPU default is bf16 on CPUs with
            AVX-512 BF16 or AMX and f32 elsewhere); None keeps OpenVINO's per-device default.
        objective: ``"latency"`` (default: synchronous inferences, `timed_runs`) or ``"throughput"``
            (`OBJECTIVES`: several asynchronous requests in flight, `timed_periods`; ``latency_s`` is then the
            median steady-state seconds between completed inferences and ``samples`` are per-window periods).
            The devices are compiled with the same properties under both objectives (no THROUGHPUT performance
            hint is added), so the two differ only in how requests are issued.
        requests_in_flight: throughput: the number of asynchronous requests kept in flight; None (default) =
            the number of devices the placement uses + 1, at least 2 (enough for every device of a pipeline to
            hold a request, plus one being handed over).
        windows, window_s, window_inferences: throughput: at least `windows` timed windows (then adaptive, like
            the repeats: `target_rel_halfwidth`, at most `max_repeats` windows or `max_timing_s`), each at least
            `window_s` seconds and `window_inferences` completed inferences (None: twice `requests_in_flight`,
            at least 4). `warmup` inferences per request come first.
        profile_runs: timed runs of the per-op profiling behind `node_device_cost` and `device_features` (per
            device, once per graph; after `warmup` untimed ones).
        paired_reference: latency objective: pair every timed run with a run of the reference placement and
            report the latency relative to it (module docstring; `timed_pairs`). Costs a second compiled model
            per graph and about twice the timed inferences; False times the placement alone. A graph with no
            device that runs every op, or whose reference fails to compile, is timed unpaired (logged).
        submodel_overhead_s: seconds each HETERO submodel beyond the first adds, as the observation's
            ``submodel_overhead`` reports it: not measured here (it takes split placements, not per-op
            profiles); ``placement-gym calibrate`` fits it (its profile's ``boundary_overhead_s``). 0 (default):
            unknown, and agents that read it act as if no cut cost anything extra (the learned agents' zero-shot
            override is off).
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
        inference_precision: str | None = INFERENCE_PRECISION,
        clock: str = "wall",
        core: ov.Core | None = None,
        objective: str = "latency",
        requests_in_flight: int | None = None,
        windows: int = 5,
        window_s: float = 0.2,
        window_inferences: int | None = None,
        profile_runs: int = 5,
        paired_reference: bool = True,
        submodel_overhead_s: float = 0.0,
    ) -> None:
        self.objective = check_objective(objective)
        if warmup < 0 or repeats < 1:
            raise ValueError(f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}")
        if clock not in CLOCKS:
            raise ValueError(f"unknown clock {clock!r}; choose one of {sorted(CLOCKS)}")
        if objective == "throughput" and clock != "wall":
            raise ValueError(f"objective='throughput' is timed by the wall clock (with several requests in flight "
                             f"the process's CPU time adds up over threads); got clock={clock!r}")
        if requests_in_flight is not None and requests_in_flight < 1:
            raise ValueError(f"requests_in_flight must be >= 1 or None (devices used + 1), got {requests_in_flight}")
        if windows < 1 or not window_s >= 0 or (window_inferences is not None and window_inferences < 1):
            raise ValueError(f"need windows >= 1, window_s >= 0, window_inferences >= 1 or None; got {windows}, "
                             f"{window_s}, {window_inferences}")
        if profile_runs < 1:
            raise ValueError(f"profile_runs must be >= 1, got {profile_runs}")
        if not (np.isfinite(submodel_overhead_s) and submodel_overhead_s >= 0):
            raise ValueError(f"submodel_overhead_s must be a finite number of seconds >= 0 (0: unknown), got "
                             f"{submodel_overhead_s}")
        self._submodel_overhead_s = float(submodel_overhead_s)
        self.requests_in_flight, self.windows, self.profile_runs = requests_in_flight, windows, profile_runs
        self.window_s, self.window_inferences = window_s, window_inferences
        self.clock = clock
        #: Whether latency measurements are paired with the reference (`timed_pairs`); never for throughput.
        self.paired_reference = bool(paired_reference) and self.objective == "latency"
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
        self._masks: "weakref.WeakKeyDictionary[ComputationGraph, np.ndarray]" = weakref.WeakKeyDictionary()
        self._op_times: "weakref.WeakKeyDictionary[ComputationGraph, _OpTimes]" = weakref.WeakKeyDictionary()
        self._references: "weakref.WeakKeyDictionary[ComputationGraph, _Reference | None]" = weakref.WeakKeyDictionary()
        self._device_features: np.ndarray | None = None  # fitted once (see device_features), then fixed

    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    @property
    def virtual_devices(self) -> list[bool]:
        return [d.virtual for d in self.devices]

    def hetero_devices(self) -> np.ndarray:
        """(D,) bool: the devices OpenVINO's HETERO plugin can place ops on: not an NPU (OpenVINO's supported-devices
        table lists heterogeneous execution for CPU and GPU only), which runs a whole model or nothing."""
        return np.array([not d.name.split(".")[0].upper().startswith("NPU") for d in self.devices], dtype=bool)

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
            "objective": self.objective,
            "paired_reference": None if not self.paired_reference else {
                "reference": "every op on the first device that runs them all",
                "baseline_s": {g.name: None if r is None else {"device": self.devices[r.device].name,
                                                               "latency_s": r.baseline_s}
                               for g, r in self._references.items()}},
            "profile_runs": self.profile_runs,
            "submodel_overhead_s": self._submodel_overhead_s or "unknown (0)",
            **({"throughput": {
                "requests_in_flight": self.requests_in_flight or "devices used + 1 (at least 2)",
                "windows": self.windows, "window_s": self.window_s,
                "window_inferences": self.window_inferences or "2 x requests_in_flight (at least 4)"}}
               if self.objective == "throughput" else {}),
        }

    # --------------------------------------------------------------------------------------- measure
    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        """Seconds per inference of `placement` ((N,) ints) under the backend's `objective`; an identical
        placement measured before is reused when `use_cache` and the backend keeps measurements
        (``cache=True``); ``use_cache=False`` measures afresh (and caches that)."""
        graph.require_model("the OpenVINO backend")  # a graph without a model is a usage error, not a measurement
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
        used = used_devices(placement, self.devices)
        if len(used) > 1:
            set_affinities(prepared.ops, prepared.follows, np.asarray(placement), [d.ov_name for d in self.devices])
        return compile_with_affinities(self.core, graph.model, used)

    def example_inputs(self, graph: ComputationGraph) -> dict[int, ov.Tensor]:
        """The input tensors every measurement of `graph` uses, by input index."""
        return self._prepare(graph).inputs

    def requests_for(self, placement: np.ndarray) -> int:
        """Asynchronous requests in flight when measuring `placement` under ``objective="throughput"``: the
        `requests_in_flight` setting, or the number of devices it uses + 1 (at least 2)."""
        if self.requests_in_flight is not None:
            return self.requests_in_flight
        return max(2, len(set(np.asarray(placement).tolist())) + 1)

    def _measure_uncached(self, graph: ComputationGraph, placement: np.ndarray) -> Measurement:
        compile_s = 0.0
        breakdown: dict[str, float] = {}
        reference_samples: list[float] = []
        baseline_s = None
        try:
            start = time.perf_counter()
            compiled, n_submodels = self.compile_placement(graph, placement)
            compile_s = time.perf_counter() - start
            inputs = self._prepare(graph).inputs
            reference = self._reference(graph) if self.paired_reference else None
            if self.objective == "throughput":
                jobs = self.requests_for(placement)
                samples = timed_periods(compiled, inputs, jobs, self.warmup, windows=self.windows,
                                        window_s=self.window_s, window_inferences=self.window_inferences,
                                        target_rel_halfwidth=self.target_rel_halfwidth, max_windows=self.max_repeats,
                                        max_s=self.max_timing_s)
                breakdown = {"throughput_per_s": 1.0 / float(np.median(samples)), "requests_in_flight": float(jobs)}
            elif reference is None:
                samples = self._timed_runs(self.infer_request(compiled, inputs))
            else:
                samples, reference_samples = timed_pairs(
                    self.infer_request(compiled, inputs), reference.request, self.repeats, self.warmup, self.clock,
                    target_rel_halfwidth=self.target_rel_halfwidth, max_runs=self.max_repeats,
                    max_s=self.max_timing_s)
                baseline_s = reference.baseline_s
                breakdown = {"raw_latency_s": float(np.median(samples)),
                             "reference_run_s": float(np.median(reference_samples)),
                             "reference_baseline_s": baseline_s}
            del compiled  # release the compiled weights before the next placement
        except Exception as exc:  # a failing placement is a measured outcome, not a crash
            return Measurement.failure(f"{type(exc).__name__}: {openvino_error_text(exc)}", compile_s=compile_s,
                                       objective=self.objective)
        measured = Measurement(
            latency_s=0.0,  # set below from the runs, paired or not (`timed_latencies_s`)
            samples=tuple(samples),
            reference_samples=tuple(reference_samples),
            reference_baseline_s=baseline_s,
            compile_s=compile_s,
            n_submodels=n_submodels,
            breakdown=breakdown,
            objective=self.objective,
        )
        return replace(measured, latency_s=float(np.median(measured.timed_latencies_s)))

    # ------------------------------------------------------------------------------------- replicate
    def measure_replicated(self, graph: ComputationGraph, *, hint: str | None = "THROUGHPUT") -> Measurement:
        """Replicate (`placement_gym.backends.replicate`): `graph` whole on every device, requests spread over them;
        seconds per inference under the backend's `objective`. Measured afresh each call (not cached).

        ``"latency"``: one request at a time, so the fastest single device: `measure` of each all-on-d placement
        (`replicate.combine`). ``"throughput"``: each device's replica compiled alone with its properties and the
        `hint` as ``PERFORMANCE_HINT`` unless its spec sets one (``THROUGHPUT``: what ``CUMULATIVE_THROUGHPUT``
        gives every device; None compiles them as placements are compiled, without a hint), then
        ``OPTIMAL_NUMBER_OF_INFER_REQUESTS`` requests kept in flight on every replica at once (`timed_replicas`,
        with this backend's `warmup`, windows and adaptive settings): ``latency_s`` is the median over timed windows
        of wall seconds per inference completed (``samples``, one per window), ``breakdown`` has
        ``replica_s:<device>`` (the timed stretch / the inferences that device completed in it), ``replicas``,
        ``requests_in_flight`` and ``throughput_per_s``. A device whose replica fails to compile is left out
        (logged); none compiling is a failed measurement.

        The spreading is done here rather than by ``AUTO`` itself: with the env's devices (a virtual copy
        registered as ``VCPU1``), ``AUTO:CPU,VCPU1`` with ``CUMULATIVE_THROUGHPUT`` compiles on one of the two only
        (``EXECUTION_DEVICES`` is ``['VCPU1']``; ``AUTO:VCPU1,CPU``: ``['CPU']``; OpenVINO 2026.4), so it would
        measure one device, not replicate. Spreading explicitly measures the same thing for every device set.
        """
        from .replicate import REPLICA_KEY, combine  # replicate.py reads this backend's results, not its module

        graph.require_model("the OpenVINO backend")
        if self.objective == "latency":
            singles = [self.measure(graph, np.full(graph.n_ops, d, dtype=np.int64)) for d in range(len(self.devices))]
            return combine(self.device_names, singles, self.objective, simulated=False)
        compiled, names, errors, compile_s = [], [], [], 0.0
        for device in self.devices:
            config = dict(device.properties)
            if hint is not None:
                config.setdefault("PERFORMANCE_HINT", hint)
            try:
                start = time.perf_counter()
                compiled.append(self.core.compile_model(graph.model, device.ov_name, config))
                compile_s += time.perf_counter() - start
                names.append(device.name)
            except Exception as exc:  # a device that cannot run the whole model holds no replica
                errors.append(f"{device.name}: {type(exc).__name__}: {openvino_error_text(exc)}")
                logger.warning("replicate: %s does not compile on %s alone (%s); it holds no replica", graph.name,
                               device.name, errors[-1])
        if not compiled:
            return Measurement.failure(f"replicate: no device runs the whole graph alone ({'; '.join(errors)})",
                                       objective=self.objective)
        try:
            requests = [max(1, int(c.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))) for c in compiled]
            samples, completed, span_s = timed_replicas(
                compiled, self._prepare(graph).inputs, requests, self.warmup, windows=self.windows,
                window_s=self.window_s, window_inferences=self.window_inferences,
                target_rel_halfwidth=self.target_rel_halfwidth, max_windows=self.max_repeats, max_s=self.max_timing_s)
        except Exception as exc:
            return Measurement.failure(f"replicate: {type(exc).__name__}: {openvino_error_text(exc)}",
                                       compile_s=compile_s, objective=self.objective)
        finally:
            del compiled  # release the replicas' weights
        seconds = float(np.median(samples))
        breakdown = {f"{REPLICA_KEY}{name}": span_s / n for name, n in zip(names, completed) if n > 0}
        breakdown.update(replicas=float(len(names)), requests_in_flight=float(sum(requests)),
                         throughput_per_s=1.0 / seconds)
        return Measurement(latency_s=seconds, samples=tuple(samples), compile_s=compile_s, n_submodels=1,
                           breakdown=breakdown, objective=self.objective)

    def _reference(self, graph: ComputationGraph) -> _Reference | None:
        """Paired timing's reference for `graph`: every op on the first device that can run them all, compiled
        and timed on first use (its median latency is the baseline), then kept; None when no device runs every
        op or the reference fails (the graph is then timed unpaired)."""
        if graph in self._references:
            return self._references[graph]
        reference = None
        usable = np.flatnonzero(self.action_mask(graph).all(axis=0))
        if usable.size == 0:
            logger.warning("%s: no device runs every op, so its placements are timed unpaired", graph.name)
        else:
            device = int(usable[0])
            try:
                compiled, _ = self.compile_placement(graph, np.full(graph.n_ops, device, dtype=np.int64))
                request = self.infer_request(compiled, self._prepare(graph).inputs)
                reference = _Reference(device, compiled, request, float(np.median(self._timed_runs(request))))
            except Exception as exc:
                logger.warning("%s: the reference for paired timing failed (%s), so its placements are timed "
                               "unpaired", graph.name, openvino_error_text(exc))
        self._references[graph] = reference
        return reference

    @staticmethod
    def infer_request(compiled: ov.CompiledModel, inputs: dict) -> ov.InferRequest:
        """An infer request of `compiled` with `inputs` (input index -> tensor) set on it."""
        request = compiled.create_infer_request()
        for index, tensor in inputs.items():
            request.set_input_tensor(index, tensor)
        return request

    def _timed_runs(self, request: ov.InferRequest) -> list[float]:
        """`request` timed alone with this backend's warm-up, repeats and adaptive settings (`timed_runs`)."""
        return timed_runs(request, self.repeats, self.warmup, self.clock,
                          target_rel_halfwidth=self.target_rel_halfwidth, max_runs=self.max_repeats,
                          max_s=self.max_timing_s)

    def _prepare(self, graph: ComputationGraph) -> _PreparedGraph:
        prepared = self._prepared.get(graph)
        if prepared is not None:
            return prepared
        model = graph.require_model("the OpenVINO backend")
        from ..models import example_inputs  # imported here: the model zoo pulls in more than a backend needs

        ops, follows = op_followers(graph)
        inputs = {i: ov.Tensor(a) for i, a in enumerate(example_inputs(model, seed=self.input_seed).values())}
        prepared = _PreparedGraph(ops, follows, inputs)
        self._prepared[graph] = prepared
        return prepared

    # ------------------------------------------------------------------------ device observations
    def action_mask(self, graph: ComputationGraph) -> np.ndarray:
        """(N, D) bool: ``True`` where device ``d`` can run compute op ``i``, from OpenVINO's own answer
        (``Core.query_model`` of the whole model on each device with its compile properties: the ops it names
        are the ones that device supports). Asked once per graph (a query per device, well under a second for
        ResNet-50), then cached; returns a copy.

        An op that no device's answer names at all is marked supported everywhere: a plugin may report a
        transformed op under another friendly name (fused or renamed while it checks support), and since no
        device claims it, the names say nothing about it; if it really cannot run, compiling a placement fails
        and `measure` reports that as a failed placement with OpenVINO's error text.
        """
        mask = self._masks.get(graph)
        if mask is None:
            graph.require_model("the OpenVINO backend")
            mask = support_mask(self.core, graph, self.devices)  # the one check deployment (`placement_gym.deploy`) makes too
            self._masks[graph] = mask
        return mask.copy()

    def node_device_cost(self, graph: ComputationGraph) -> np.ndarray:
        """(N, D) float64: measured seconds of op ``i`` on device ``d``; ``inf`` where `action_mask` is False.

        Measured, not estimated (the real backend has no spec sheet): on the first call for a graph, the graph is
        compiled on each device alone and profiled per op (`profiling.measure_op_times`: ``PERF_COUNT``, runtime
        entries mapped back to the original ops, scaled to the measured whole-model latency), with this backend's
        `warmup` and `profile_runs`. That costs two single-device compiles and 2 x (`warmup` + `profile_runs`)
        inferences per device, once per graph; later calls reuse it. A device on which the whole graph does not
        compile alone gets, for the ops it supports, the mean of the other devices' times (logged).
        """
        seconds = self._profile(graph).seconds
        return np.where(self.action_mask(graph), seconds, np.inf)

    def submodel_overhead_s(self) -> float:
        """The ``submodel_overhead_s`` given (0: unknown; the class docstring says why it is not measured)."""
        return self._submodel_overhead_s

    def device_features(self) -> np.ndarray:
        """(D, 5) float32, columns `DEVICE_FEATURES`, measured: a roofline per device (`profiling.fit_roofline`:
        peak FLOP/s, memory bandwidth, launch overhead) fitted to the per-op profiles of the graphs this backend
        has been asked about so far (`action_mask`, `node_device_cost`, `measure`; profiling each one not
        profiled yet, see `node_device_cost` for the cost), or of the zoo's ResNet-50 when it has seen none.
        Memory is the device's ``GPU_DEVICE_TOTAL_MEM_SIZE`` where OpenVINO reports one, else 1e12 (unknown);
        the link is 1e12 (12: CPU-attached and virtual devices share host memory; unknown for others).

        Fitted on the first call, then fixed for the backend's lifetime, so that observations of later graphs
        describe the devices the same way. Returns a copy.
        """
        if self._device_features is None:
            graphs = list({id(g): g for g in [*self._op_times.keys(), *self._masks.keys(), *self._prepared.keys()]}
                          .values())
            if not graphs:
                from ..models import load_graph  # the zoo pulls in more than a backend needs

                graphs = [load_graph("resnet")]
            profiles = [(g, self._profile(g)) for g in graphs]
            rows = []
            for d, device in enumerate(self.devices):
                measured = [(g, p.seconds[:, d]) for g, p in profiles if "error" not in p.info[d]]
                peak, bandwidth, launch = 1e11, 1e10, 0.0  # fit_roofline's own defaults when nothing was measured
                if measured:
                    roofline = fit_roofline(device.name, measured)
                    peak, bandwidth, launch = roofline.peak_flops, roofline.memory_bandwidth_Bps, roofline.launch_overhead_s
                rows.append([np.log10(peak), np.log10(bandwidth), np.log10(self._memory_bytes(device)), 12.0,
                             np.log10(launch * 1e6 + 0.1) + 1.0])
            self._device_features = np.asarray(rows, dtype=np.float32).reshape(len(self.devices), len(DEVICE_FEATURES))
        return self._device_features.copy()

    def _memory_bytes(self, device: Device) -> float:
        """Device memory in bytes where OpenVINO reports it (GPUs), else 1e12 (unknown / host memory)."""
        try:
            if "GPU_DEVICE_TOTAL_MEM_SIZE" in self.core.get_property(device.ov_name, "SUPPORTED_PROPERTIES"):
                return float(self.core.get_property(device.ov_name, "GPU_DEVICE_TOTAL_MEM_SIZE"))
        except Exception:  # a plugin that cannot answer: unknown, like a CPU
            pass
        return 1e12

    def _profile(self, graph: ComputationGraph) -> _OpTimes:
        """Per-op seconds of `graph` on every device alone (see `node_device_cost`), measured once per graph."""
        cached = self._op_times.get(graph)
        if cached is not None:
            return cached
        seconds = np.full((graph.n_ops, len(self.devices)), np.nan)
        info: list = []
        for d, device in enumerate(self.devices):
            try:
                seconds[:, d], device_info = measure_op_times(graph, device, core=self.core, runs=self.profile_runs,
                                                              warmup=self.warmup, input_seed=self.input_seed)
                info.append(device_info)
            except Exception as exc:  # e.g. an op the device cannot run: the whole graph does not compile there
                info.append({"error": f"{type(exc).__name__}: {openvino_error_text(exc)}"})
                logger.warning("per-op profiling of %s on %s failed (%s); its node_device_cost uses the other "
                               "devices' times", graph.name, device.name, info[-1]["error"])
        failed = np.isnan(seconds).all(axis=0)
        if failed.all():
            raise RuntimeError(f"per-op profiling of {graph.name!r} failed on every device: "
                               + "; ".join(f"{dev.name}: {i['error']}" for dev, i in zip(self.devices, info)))
        seconds[:, failed] = seconds[:, ~failed].mean(axis=1, keepdims=True)
        profile = _OpTimes(seconds, info)
        self._op_times[graph] = profile
        return profile

    def close(self) -> None:
        self._prepared.clear()
        self._cache.clear()
        self._masks.clear()
        self._op_times.clear()
        self._references.clear()


def timed_replicas(compiled: Sequence[ov.CompiledModel], inputs: dict, requests: Sequence[int], warmup: int, *,
                   windows: int = 5, window_s: float = 0.2, window_inferences: int | None = None,
                   target_rel_halfwidth: float | None = None, max_windows: int | None = None,
                   max_s: float = math.inf) -> tuple[list[float], list[int], float]:
    """Steady-state seconds per inference of several compiled models (replicas of one model on different devices)
    serving one stream of requests together: ``(samples, completed, span_s)``.

    Each model gets a thread that keeps its ``requests[k]`` requests busy the way `timed_periods` keeps one pool
    busy (restarted as soon as they complete, oldest first; plain requests, not ``ov.AsyncInferQueue``: see
    `timed_periods`), so every device works all the time, a fast one completing more inferences than a slow one.
    ``wait`` releases the GIL, so the threads only take it to stamp a completion. A model's first
    ``max(1, warmup) * requests[k]`` completions are its warm-up; completions count from the moment every model
    has warmed up. They are cut into windows (at least `window_s` seconds and `window_inferences` completions,
    default ``max(4, 2 * sum(requests))``), each giving its seconds / its completions, at least `windows` of
    them and then adaptive as in `timed_periods`.

    Returns:
        samples: (W,) seconds per inference of each window, W >= `windows`.
        completed: per model, the inferences it completed over the timed windows.
        span_s: the seconds those windows cover.
    """
    if len(compiled) != len(requests) or not compiled or min(requests) < 1 or windows < 1:
        raise ValueError(f"need one request count >= 1 per compiled model and windows >= 1, got {list(requests)} "
                         f"for {len(compiled)} models, windows={windows}")
    per_window = window_inferences or max(4, 2 * sum(requests))
    cap = windows if target_rel_halfwidth is None else max(windows, max_windows or windows)
    changed = threading.Condition()
    done: list[tuple[float, int]] = []  # (completion time, model) since every model warmed up
    warmed = [False] * len(compiled)
    failures: list[BaseException] = []
    stop = threading.Event()

    def serve(k: int) -> None:
        pool = [compiled[k].create_infer_request() for _ in range(requests[k])]
        for request in pool:
            for index, tensor in inputs.items():
                request.set_input_tensor(index, tensor)
        finished, skip = 0, max(1, warmup) * len(pool)
        try:
            for request in pool:
                request.start_async()
            while not stop.is_set():
                request = pool[finished % len(pool)]  # the oldest in flight
                request.wait()
                now = time.perf_counter()
                finished += 1
                request.start_async()
                with changed:
                    warmed[k] = warmed[k] or finished >= skip
                    if all(warmed):
                        done.append((now, k))
                        changed.notify()
        except BaseException as exc:  # reported by the caller's thread
            with changed:
                failures.append(exc)
                changed.notify()
        finally:
            for request in pool:  # never release a model with inferences still running on it
                request.wait()

    threads = [threading.Thread(target=serve, args=(k,), name=f"replica-{k}", daemon=True)
               for k in range(len(compiled))]
    samples: list[float] = []
    first = opened = 0  # indices into `done`: the current window's opening completion, the first window's
    last = 0
    try:
        for thread in threads:
            thread.start()
        with changed:
            while len(samples) < cap and not failures:
                changed.wait_for(lambda: failures or len(done) > last + 1)
                while not failures and last + 1 < len(done) and len(samples) < cap:
                    last += 1
                    if last - first < per_window or done[last][0] - done[first][0] < window_s:
                        continue
                    samples.append((done[last][0] - done[first][0]) / (last - first))
                    first = last
                    if len(samples) < windows:
                        continue
                    if target_rel_halfwidth is None or done[last][0] - done[opened][0] >= max_s:
                        cap = len(samples)
                        break
                    low, high = median_interval(samples)
                    if (high - low) / 2.0 <= target_rel_halfwidth * float(np.median(samples)):
                        cap = len(samples)
                        break
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    completed = np.bincount([k for _, k in done[opened + 1:first + 1]], minlength=len(compiled)).tolist()
    return samples, completed, done[first][0] - done[opened][0]


def _type_name(value) -> str:
    """``ov.Type.bf16`` -> ``"bf16"``; strings pass through."""
    return value.get_type_name() if hasattr(value, "get_type_name") else str(value)
