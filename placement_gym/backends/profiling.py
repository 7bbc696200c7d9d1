"""Timing and per-op profiling of OpenVINO compiled models: the measuring pieces that the real backend
(`placement_gym.backends.openvino`) and calibration (`placement_gym.backends.calibration`) share.

- `timed_runs`: synchronous inferences, optionally adaptive (until the median's 95% interval is narrow enough);
- `timed_pairs`: the same, each run followed by a run of a reference (latency relative to it, robust to load);
- `timed_periods`: steady-state seconds per inference with several asynchronous requests in flight;
- `measure_op_times`: per-op seconds of a graph on one device from ``PERF_COUNT`` profiling, mapped back to the
  original ops; `fit_roofline`: a roofline `DeviceProfile` fitted to such times.

Kept apart from both users so neither imports the other to reach them.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import openvino as ov

from ..graph import ComputationGraph
from .base import median_interval
from .fusion import fusion_parent, runtime_groups
from .profiles import DeviceProfile, op_bytes

#: Timers for inference runs: wall-clock latency (what the backend reports by default) or the process's CPU time
#: (robust when other processes share the cores; meaningful only for one-thread devices, as threads add up).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed_runs(request: ov.InferRequest, runs: int, warmup: int, clock: "str | Callable[[], float]" = "wall", *,
               target_rel_halfwidth: float | None = None, max_runs: int | None = None,
               max_s: float = math.inf) -> list[float]:
    """`warmup` untimed then at least `runs` timed synchronous inferences of `request`; the seconds of each.

    With `target_rel_halfwidth` (adaptive repeats) timing goes on, a quarter of `runs` more at a time, until the
    95% interval of the median (`median_interval`) is within +-target of it, or `max_runs` runs or `max_s` seconds
    of timing are spent: steady placements cost `runs` inferences, noisy ones get more. `clock` is a `CLOCKS` name or a
    callable returning seconds."""
    now = _clock(clock)
    for _ in range(warmup):
        request.infer()
    samples: list[float] = []

    def time_one() -> None:
        samples.append(_time_inference(request, now))

    _repeat_until_steady(time_one, lambda: samples, runs, now, target_rel_halfwidth, max_runs, max_s)
    return samples


def timed_pairs(request: ov.InferRequest, reference: ov.InferRequest, runs: int, warmup: int,
                clock: "str | Callable[[], float]" = "wall", *, target_rel_halfwidth: float | None = None,
                max_runs: int | None = None, max_s: float = math.inf) -> tuple[list[float], list[float]]:
    """Timed runs of `request`, each followed at once by a timed run of `reference`: (run seconds, reference
    seconds), one pair per run.

    A burst of load on a shared machine slows both runs of a pair alike, so the ratio run / reference keeps the
    placement's latency relative to the reference while the seconds themselves jump (docs/results/real-measurement.md
    says how much steadier the ratios are on a shared machine). Adaptive repeats
    (`target_rel_halfwidth`, `max_runs` pairs, `max_s` seconds) as in `timed_runs`, on the median of the ratios.

    Warm-up: `warmup` untimed runs of `request` (the first runs after compile are slow), then one of
    `reference`, which is resident and warm already (one run brings its weights back into the caches)."""
    now = _clock(clock)
    for _ in range(warmup):
        request.infer()
    reference.infer()
    samples: list[float] = []
    reference_samples: list[float] = []

    def time_pair() -> None:
        samples.append(_time_inference(request, now))
        reference_samples.append(_time_inference(reference, now))

    _repeat_until_steady(time_pair, lambda: np.divide(samples, reference_samples), runs, now, target_rel_halfwidth,
                         max_runs, max_s)
    return samples, reference_samples


def _clock(clock: "str | Callable[[], float]") -> Callable[[], float]:
    now = clock if callable(clock) else CLOCKS.get(clock)
    if now is None:
        raise ValueError(f"unknown clock {clock!r}; choose one of {sorted(CLOCKS)}")
    return now


def _time_inference(request: ov.InferRequest, now: Callable[[], float]) -> float:
    start = now()
    request.infer()
    return now() - start


def _repeat_until_steady(time_one: Callable[[], None], values: Callable[[], Sequence[float]], runs: int,
                         now: Callable[[], float], target_rel_halfwidth: float | None, max_runs: int | None,
                         max_s: float) -> None:
    """Call `time_one` `runs` times; when adaptive (`target_rel_halfwidth`), a quarter of `runs` (at least one)
    more at a time until the 95% interval of the median of `values()` is within +-target of it, or `max_runs`
    calls or `max_s` seconds. (Small steps: a measurement just short of the target stops soon after reaching it
    instead of paying for another `runs`.)"""
    cap = runs if target_rel_halfwidth is None else max(runs, max_runs or runs)
    started, done, step = now(), 0, runs
    while done < cap:
        for _ in range(min(step, cap - done)):
            time_one()
            done += 1
        step = max(1, runs // 4)
        if target_rel_halfwidth is None or now() - started >= max_s:
            break
        current = values()
        low, high = median_interval(current)
        if (high - low) / 2.0 <= target_rel_halfwidth * float(np.median(current)):
            break


def timed_periods(compiled: ov.CompiledModel, inputs: dict, requests_in_flight: int, warmup: int, *,
                  windows: int = 5, window_s: float = 0.2, window_inferences: int | None = None,
                  target_rel_halfwidth: float | None = None, max_windows: int | None = None,
                  max_s: float = math.inf) -> list[float]:
    """Steady-state seconds per inference of `compiled` with `requests_in_flight` asynchronous requests, one
    value per timed window.

    `requests_in_flight` infer requests are kept busy: each is restarted as soon as it completes, oldest first
    (``start_async`` / ``wait``), so a HETERO model can pipeline: device A runs request 2's first submodel while
    device B runs request 1's second. Completions are stamped when ``wait`` returns. The first ``max(1, warmup)
    * requests_in_flight`` completions are warm-up (each request's first inference after compile is slow, and
    the pipeline fills). Then completions are cut into consecutive windows of at least `window_s` seconds and
    `window_inferences` inferences (default ``max(4, 2 * requests_in_flight)``: every request completes at least
    twice, so a window spans whole turns of the pool); each window gives (its seconds) / (its completions).
    Windows share their boundary completion, so together they cover the timed stretch without gaps.

    At least `windows` windows; with `target_rel_halfwidth` (adaptive, like `timed_runs`) more until the 95%
    interval of their median is within +-target of it, or `max_windows` windows or `max_s` seconds of timing
    are spent. Always wall-clock time: with several requests in flight, CPU time adds up over threads.

    Plain requests rather than ``ov.AsyncInferQueue``: the queue's Python completion callback runs on
    OpenVINO's threads and needs the GIL, and releasing a HETERO compiled model right after ``wait_all`` then
    deadlocks (its executor joins a thread still waiting for the GIL; seen with OpenVINO 2026.4 on a tiny model).
    Waiting oldest-first assumes completions in submission order, which holds for a pipeline and for one
    stream; a request that finishes early merely idles until its turn.

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
    requests = [compiled.create_infer_request() for _ in range(requests_in_flight)]
    for request in requests:
        for index, tensor in inputs.items():
            request.set_input_tensor(index, tensor)
    samples: list[float] = []
    done: list[float] = []  # completion times
    first = opened = None  # indices into `done`: the current window's opening completion, the first window's
    try:
        for request in requests:
            request.start_async()
        while len(samples) < cap:
            request = requests[len(done) % requests_in_flight]  # the oldest in flight
            request.wait()
            done.append(time.perf_counter())
            request.start_async()
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
        for request in requests:  # never release a model with inferences still running on it
            request.wait()
    return samples


#: FLOPs per byte used to weigh compute against memory traffic when a fused group's time is shared among its
#: ops (a typical CPU balance point; only the *ratio* between ops of one group matters).
_GROUP_SHARE_FLOPS_PER_BYTE = 8.0


def _device_ov_config(device, extra: Mapping[str, Any]) -> dict:
    return {**device.properties, **extra}


#: How a latency is taken from timed runs: the median (what the real backend reports) or the minimum (robust
#: on a shared machine, where other load only ever adds time).
STATISTICS = ("median", "min")


def latency_statistic(samples: Sequence[float], statistic: str = "median") -> float:
    """The latency of timed runs `samples` by `statistic` (`STATISTICS`)."""
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; choose one of {STATISTICS}")
    return float(np.median(samples) if statistic == "median" else np.min(samples))


def real_latency(measured, statistic: str) -> float:
    """The latency of a real `Measurement` by `statistic` (`STATISTICS`).

    Unpaired: `latency_statistic` of its timed runs. Paired with the reference (`Measurement.reference_samples`):
    ``"median"`` is the median of the per-pair ratios times the reference's baseline (`timed_latencies_s`, as the
    real backend reports); ``"min"`` is the placement's fastest run over the reference's fastest run, times the
    baseline. Each side's fastest run is the one least slowed by other load; the minimum of the per-pair ratios
    instead picks the pair where noise made the placement's run fast and the reference's slow, far below the
    ratio's median on a noisy machine even for a placement identical to the reference (docs/results/simulator.md).
    """
    if statistic == "min" and measured.reference_samples and measured.reference_baseline_s is not None:
        latency_statistic([1.0], statistic)
        return float(min(measured.samples) / min(measured.reference_samples) * measured.reference_baseline_s)
    return latency_statistic(measured.timed_latencies_s, statistic)


def measure_op_times(graph: ComputationGraph, device, *, core=None, runs: int = 20, warmup: int = 3,
                     input_seed: int = 0, statistic: str = "median",
                     clock: str = "wall") -> tuple[np.ndarray, dict[str, Any]]:
    """Per-op times of `graph` on one real OpenVINO device, from the plugin's per-op profiling.

    1. compile with ``PERF_COUNT`` and run `warmup` + `runs` inferences, keeping each runtime entry's median
       ``real_time``;
    2. map runtime entries to original ops (`fusion.runtime_groups`); a fused group's time is shared among its ops in
       proportion to their work (FLOPs + bytes);
    3. scale all times so that they sum to the model's latency measured without profiling (`statistic` of
       `runs` timed runs by `clock`; the entries' sum differs from the wall time, the more so with several
       threads).

    Args:
        graph: a graph with its ``ov.Model`` (`placement_gym.load_graph`).
        device: a `placement_gym.devices.Device` (from `open_devices`).

    Returns:
        times: (N,) float64 seconds per op.
        info: ``wall_s`` (latency without profiling), ``profiled_sum_s``, ``entries``, ``unmapped_s``.
    """
    import openvino as ov

    from ..devices import shared_core
    from ..models import example_inputs

    graph.require_model("per-op profiling")
    core = core or shared_core()
    inputs = [ov.Tensor(a) for a in example_inputs(graph.model, seed=input_seed).values()]

    def request_for(compiled):
        request = compiled.create_infer_request()
        for i, tensor in enumerate(inputs):
            request.set_input_tensor(i, tensor)
        return request

    compiled = core.compile_model(graph.model, device.ov_name, _device_ov_config(device, {"PERF_COUNT": True}))
    request = request_for(compiled)
    for _ in range(warmup):
        request.infer()
    per_entry: dict[str, list[float]] = {}
    for _ in range(runs):
        request.infer()
        for entry in request.profiling_info:
            per_entry.setdefault(entry.node_name, []).append(entry.real_time.total_seconds())
    entry_s = {name: float(np.median(v)) for name, v in per_entry.items()}
    groups = runtime_groups(compiled.get_runtime_model(), graph)
    del request, compiled

    work = graph.flops + _GROUP_SHARE_FLOPS_PER_BYTE * op_bytes(graph)
    times = np.zeros(graph.n_ops)
    unmapped = 0.0
    for name, seconds in entry_s.items():
        ops = groups.get(name)
        if not ops:
            unmapped += seconds
            continue
        weights = work[ops] + 1e-9
        times[ops] += seconds * weights / weights.sum()
    profiled_sum = float(sum(entry_s.values()))

    plain = core.compile_model(graph.model, device.ov_name, _device_ov_config(device, {}))
    wall = latency_statistic(timed_runs(request_for(plain), runs, warmup, clock), statistic)
    del plain
    mapped = float(times.sum())
    if mapped > 0:
        times *= wall / mapped
    return times, {"wall_s": wall, "profiled_sum_s": profiled_sum, "unmapped_s": unmapped, "entries": len(entry_s)}


def fit_roofline(name: str, graphs_and_times: Sequence[tuple[ComputationGraph, np.ndarray]], *,
                 description: str = "", prior_ops: float = 3.0) -> DeviceProfile:
    """A roofline `DeviceProfile` fitted to measured per-op times (the fallback for graphs not profiled).

    Peak FLOP/s and bandwidth are the best rates any op reached (90th percentile, so one outlier does not set
    them); the launch overhead is half the 5th percentile of op times (below what the cheapest ops cost); the
    efficiency of each op type makes the roofline's total for that type equal the measured total, shrunk
    towards the median efficiency for types seen only a few times (weight `prior_ops` ops, geometric mean), so
    one odd op does not decide how every op of its type is priced on other graphs.
    """
    flops = np.concatenate([g.flops for g, _ in graphs_and_times])
    nbytes = np.concatenate([op_bytes(g) for g, _ in graphs_and_times])
    types = [t for g, _ in graphs_and_times for t in g.op_types]
    times = np.concatenate([t for _, t in graphs_and_times])
    # Kernels, as the roofline prices them: an op fused into its producer's kernel pays no launch of its own.
    launches = np.concatenate([(fusion_parent(g) < 0).astype(np.float64) for g, _ in graphs_and_times])
    positive = times > 0
    launch = 0.5 * float(np.percentile(times[positive], 5)) if positive.any() else 0.0
    busy = np.maximum(times - launch * launches, 1e-9)
    peak = float(np.percentile(flops[positive] / busy[positive], 90)) if positive.any() else 1e11
    bandwidth = float(np.percentile(nbytes[positive] / busy[positive], 90)) if positive.any() else 1e10
    profile = DeviceProfile(name=name, peak_flops=max(peak, 1e6), memory_bandwidth_Bps=max(bandwidth, 1e6),
                            launch_overhead_s=launch, description=description)
    ideal = np.concatenate([profile.roofline_terms(g)[1] for g, _ in graphs_and_times])
    raw, counts = {}, {}
    for op_type in sorted(set(types)):
        mask = np.array([t == op_type for t in types])
        measured, estimated = busy[mask].sum(), ideal[mask].sum()
        if measured > 0 and estimated > 0:
            raw[op_type], counts[op_type] = float(estimated / measured), int(mask.sum())
    default = float(np.median(list(raw.values()))) if raw else 0.5
    profile.efficiency = {
        t: float(np.exp((counts[t] * np.log(e) + prior_ops * np.log(default)) / (counts[t] + prior_ops)))
        for t, e in raw.items()
    }
    profile.default_efficiency = default
    return profile
