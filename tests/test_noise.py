"""Real measurements you can learn from: the interval of the median, adaptive repeats, paired timing against
the reference, drift correction.

Real parts: the interval and paired timing on real timed runs of a tiny model; the stopping rule and the pairing
arithmetic with a fake clock (so they are exact); drift removed from a backend whose machine slows down as it
runs.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_gym import DevicePlacementEnv
from placement_gym.backends.base import Backend, Measurement, median_interval, timing_ratio
from placement_gym.backends.openvino import OpenVINOBackend, timed_pairs, timed_runs
from placement_gym.env import DRIFT_EVERY

from .conftest import TWO_DEVICES


def test_median_interval_is_the_order_statistic_interval():
    assert median_interval(range(1, 21)) == (6.0, 15.0)  # n = 20 at 95%: x_(6) .. x_(15)
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few samples for 95%: the whole range
    rng = np.random.default_rng(0)
    covered = sum(lo <= 1.0 <= hi for lo, hi in (median_interval(rng.lognormal(0, 0.3, 25)) for _ in range(2000)))
    assert 0.93 <= covered / 2000 <= 0.98  # it covers the true median (1.0) about 95% of the time
    assert Measurement(latency_s=1e-3).interval_s == (1e-3, 1e-3)  # a simulated latency is exact
    with pytest.raises(ValueError):
        median_interval([])


def test_a_timing_ratio_is_paired_per_run_or_the_ratio_of_medians_with_a_conservative_interval():
    """`timing_ratio`, what sim2real's paired comparison and deploy's comparison with single devices both report."""
    timed, reference = [1.0, 2.0, 4.0, 8.0, 16.0], [2.0, 2.0, 2.0, 2.0, 2.0]
    # Paired: the median of the per-pair ratios, its interval the order statistics of those ratios.
    assert timing_ratio(timed, reference, paired=True) == (2.0, (0.5, 8.0))
    # A burst of load that slows both runs of a pair alike cancels in a paired ratio.
    loaded = [10.0, 1.0, 1.0, 1.0, 1.0]
    assert timing_ratio(np.multiply([2.0] * 5, loaded), loaded, paired=True) == (2.0, (2.0, 2.0))
    # Unpaired (steady-state periods, of any counts): the ratio of the medians; the interval divides the ends of
    # the medians' intervals crosswise, so it holds every ratio of a value of one interval to one of the other.
    assert timing_ratio(timed, [1.0, 2.0, 4.0], paired=False) == (2.0, (1.0 / 4.0, 16.0 / 1.0))
    ratio, (low, high) = timing_ratio(list(range(1, 21)), list(range(11, 31)), paired=False)
    assert ratio == 10.5 / 20.5 and (low, high) == (6.0 / 25.0, 15.0 / 16.0)


class FakeRequest:
    """An inference request whose runs take scripted times on a fake clock."""

    def __init__(self, durations) -> None:
        self.durations, self.now, self.calls = iter(durations), 0.0, 0

    def infer(self) -> None:
        self.calls += 1
        self.now += next(self.durations)

    def clock(self) -> float:
        return self.now


def test_adaptive_repeats_stop_when_the_interval_is_narrow_enough():
    rng = np.random.default_rng(1)
    # 10 noisy runs (+-30%), then steady ones (+-0.1%): more runs until +-1%, not all 200.
    noisy = list(1.0 + 0.3 * rng.standard_normal(10)) + list(1.0 + 0.001 * rng.standard_normal(1000))
    request = FakeRequest(np.abs(noisy))
    samples = timed_runs(request, 10, 2, request.clock, target_rel_halfwidth=0.01, max_runs=200)
    lo, hi = median_interval(samples)
    assert 10 < len(samples) < 200 and (hi - lo) / 2 <= 0.01 * np.median(samples)
    assert request.calls == 2 + len(samples)  # warm-up runs are not timed
    # Steady from the start: the minimum number of runs.
    request = FakeRequest([1.0] * 100)
    assert len(timed_runs(request, 10, 0, request.clock, target_rel_halfwidth=0.01, max_runs=200)) == 10
    # Always noisy: the caps stop it (runs, then seconds of timing).
    request = FakeRequest(np.abs(1.0 + 0.5 * rng.standard_normal(10_000)))
    assert len(timed_runs(request, 10, 0, request.clock, target_rel_halfwidth=0.001, max_runs=50)) == 50
    request = FakeRequest(np.abs(1.0 + 0.5 * rng.standard_normal(10_000)))
    assert len(timed_runs(request, 10, 0, request.clock, target_rel_halfwidth=0.001, max_runs=10_000, max_s=35.0)) \
        in range(35, 45)  # stops at the first check (every 2 runs) after 35 s of timing (runs take ~1 s)
    # Fixed repeats: exactly `runs`.
    request = FakeRequest(np.abs(1.0 + 0.5 * rng.standard_normal(100)))
    assert len(timed_runs(request, 7, 0, request.clock)) == 7


class LoadedMachine:
    """A fake machine whose load changes: the k-th inference on it (counting every request's, from 0) takes its
    request's base seconds times `slowdown(k)`."""

    def __init__(self, slowdown) -> None:
        self.now, self.calls, self.slowdown = 0.0, 0, slowdown

    def request(self, seconds: float):
        machine = self

        class Request:
            def infer(self) -> None:
                machine.now += seconds * machine.slowdown(machine.calls)
                machine.calls += 1

        return Request()

    def clock(self) -> float:
        return self.now


def test_paired_runs_cancel_load_bursts_and_drift():
    # Bursts: every other stretch of 10 pairs runs 1.5x slower; the placement takes 1 s, the reference 2 s.
    bursts = LoadedMachine(lambda k: 1.5 if ((k - 3) // 20) % 2 else 1.0)  # after 3 warm-ups
    samples, reference_samples = timed_pairs(bursts.request(1.0), bursts.request(2.0), 30, 2, bursts.clock)
    assert len(samples) == len(reference_samples) == 30 and bursts.calls == 2 + 1 + 2 * 30  # warm-ups untimed
    assert max(samples) / min(samples) == pytest.approx(1.5)  # the runs themselves jump by 50%
    assert np.divide(samples, reference_samples) == pytest.approx(0.5)  # their ratios to the reference do not
    # Drift: the machine slows down 1% per inference, 80% over the run; the ratios move by one inference's 1%.
    drifting = LoadedMachine(lambda k: 1.01 ** k)
    samples, reference_samples = timed_pairs(drifting.request(1.0), drifting.request(2.0), 30, 0, drifting.clock)
    assert samples[-1] / samples[0] > 1.7
    assert np.divide(samples, reference_samples) == pytest.approx(0.5 / 1.01)
    # Adaptive repeats judge the ratios: noisy seconds with steady ratios stop at the minimum number of runs ...
    rng = np.random.default_rng(2)
    levels = np.abs(1.0 + 0.3 * rng.standard_normal(10_000))
    machine = LoadedMachine(lambda k: levels[(k - 1) // 2])  # a new load level for every pair (after 1 warm-up)
    samples, _ = timed_pairs(machine.request(1.0), machine.request(1.0), 10, 0, machine.clock,
                             target_rel_halfwidth=0.01, max_runs=200)
    lo, hi = median_interval(samples)
    assert len(samples) == 10 and (hi - lo) / 2 > 0.05 * np.median(samples)  # alone they would need many more
    # ... and noisy ratios go on to the cap.
    machine = LoadedMachine(lambda k: levels[k])  # every inference its own load
    assert len(timed_pairs(machine.request(1.0), machine.request(1.0), 10, 0, machine.clock,
                           target_rel_halfwidth=0.001, max_runs=50)[0]) == 50


def test_paired_measurements_on_a_real_model(tiny_chain_graph):
    n = tiny_chain_graph.n_ops
    backend = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=10)  # paired by default
    m = backend.measure(tiny_chain_graph, (np.arange(n) >= n // 2).astype(np.int64))
    assert m.ok and len(m.reference_samples) == len(m.samples) >= 10 and m.reference_baseline_s > 0
    ratios = np.divide(m.samples, m.reference_samples)
    assert m.latency_s == pytest.approx(float(np.median(ratios)) * m.reference_baseline_s)
    assert m.raw_latency_s == pytest.approx(float(np.median(m.samples)))
    assert m.interval_s[0] <= m.latency_s <= m.interval_s[1]
    assert m.breakdown["reference_baseline_s"] == m.reference_baseline_s
    baselines = backend.describe()["paired_reference"]["baseline_s"]
    assert baselines == {tiny_chain_graph.name: {"device": "CPU", "latency_s": m.reference_baseline_s}}
    # The env relies on the pairing instead of re-measuring the reference, and reports raw and corrected.
    env = DevicePlacementEnv(tiny_chain_graph, backend=backend)
    assert env.reference_every == 0
    env.reset(seed=0)
    info = env.step(np.zeros(n, dtype=np.int64))[4]
    assert info["latency_raw_s"] > 0 and info["breakdown"]["raw_latency_s"] == info["latency_raw_s"]
    # Unpaired: timed alone; the env then re-measures the reference to correct drift.
    alone = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=10, paired_reference=False)
    m = alone.measure(tiny_chain_graph, np.zeros(n, dtype=np.int64))
    assert m.reference_samples == () and m.reference_baseline_s is None and m.latency_s == m.raw_latency_s
    assert alone.describe()["paired_reference"] is None
    assert DevicePlacementEnv(tiny_chain_graph, backend=alone).reference_every == DRIFT_EVERY
    assert not OpenVINOBackend(TWO_DEVICES, objective="throughput").paired_reference  # windows are not paired


def test_real_measurements_carry_their_interval(tiny_chain_graph):
    backend = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=10)
    m = backend.measure(tiny_chain_graph, np.ones(tiny_chain_graph.n_ops, dtype=np.int64))
    lo, hi = m.interval_s
    assert m.ok and len(m.samples) >= 10 and lo <= m.latency_s <= hi
    assert backend.describe()["adaptive_repeats"] == {"target_rel_halfwidth": 0.01, "max_repeats": 200,
                                                      "max_timing_s": 2.0}
    fixed = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=10, target_rel_halfwidth=None)
    assert len(fixed.measure(tiny_chain_graph, np.zeros(tiny_chain_graph.n_ops, dtype=np.int64)).samples) == 10
    with pytest.raises(ValueError, match="target_rel_halfwidth"):
        OpenVINOBackend(TWO_DEVICES, target_rel_halfwidth=0)


class SlowingMachine(Backend):
    """A backend whose machine slows down steadily: every measurement takes 1% longer than the one before.
    Placement cost: 1 ms per op on device 0, 0.5 ms on device 1."""

    name, simulated = "slowing", False
    device_names, virtual_devices = ["a", "b"], [False, False]

    def __init__(self) -> None:
        self.calls = 0

    def measure(self, graph, placement, *, use_cache=True):
        self.calls += 1
        p = np.asarray(placement)
        return Measurement(latency_s=1e-3 * float(np.where(p == 0, 1.0, 0.5).sum()) * 1.01 ** self.calls)

    def describe(self):
        return {"backend": self.name}

    def close(self):
        pass


def test_drift_correction_removes_a_machine_slowing_down(tiny_chain_graph):
    n = tiny_chain_graph.n_ops
    half = (np.arange(n) >= n // 2).astype(np.int64)
    raw_env = DevicePlacementEnv(tiny_chain_graph, backend=SlowingMachine(), reference_every=0)
    env = DevicePlacementEnv(tiny_chain_graph, backend=SlowingMachine(), reference_every=1)
    for e in (raw_env, env):
        e.reset(seed=0)
    raw, corrected, speedups = [], [], []
    for _ in range(60):
        raw.append(raw_env.step(half)[4]["latency_s"])
        info = env.step(half)[4]
        corrected.append(info["latency_corrected_s"])
        speedups.append(info["speedup"])
    assert raw[-1] / raw[0] > 1.7  # the same placement looks ~80% slower at the end without correction
    assert max(corrected) / min(corrected) < 1.02  # and within 2% with it
    true_speedup = n / (n // 2 + 0.5 * (n - n // 2))  # ops below n // 2 on the slower device
    assert np.allclose(speedups, true_speedup, rtol=0.02)  # the reward does not drift either
    assert env.reference_remeasures == 59 and env.placements_measured == 60  # not counted as placements
    assert DevicePlacementEnv(tiny_chain_graph, backend="simulated").reference_every == 0  # nothing to correct
    with pytest.raises(ValueError, match="reference_every"):
        DevicePlacementEnv(tiny_chain_graph, backend="simulated", reference_every=-1)
