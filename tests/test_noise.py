"""Real measurements you can learn from: the interval of the median, adaptive repeats, drift correction.

Real parts: the interval on real timed runs of a tiny model; the stopping rule with a fake clock (so it is
exact); drift removed from a backend whose machine slows down as it runs.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_gym import DevicePlacementEnv
from placement_gym.backends.base import Backend, Measurement, median_interval
from placement_gym.backends.openvino import OpenVINOBackend, timed_runs

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
        in (40, 50)  # stops at the first check after 35 s of timing (runs take ~1 s)
    # Fixed repeats: exactly `runs`.
    request = FakeRequest(np.abs(1.0 + 0.5 * rng.standard_normal(100)))
    assert len(timed_runs(request, 7, 0, request.clock)) == 7


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
