"""A seeded fuzz of actions: every action either steps correctly or gets our ValueError, and the env steps
correctly afterwards. Counts: 0 silent acceptances (an invalid action stepped), 0 foreign errors.

Real parts: the simulated env (thousands of actions) and the real OpenVINO env on a tiny model (a few dozen).
"""
from __future__ import annotations

import numpy as np

from placement_gym import DevicePlacementEnv

from .conftest import REAL


def _action(rng: np.random.Generator, n: int, d: int):
    """One random action and whether it is valid (a (n,) integer array with values in 0..d-1)."""
    kind = rng.integers(14)
    values = rng.integers(0, d, n)
    if kind == 0:
        return values.astype(rng.choice(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint64"])), True
    if kind == 1:
        return values.tolist(), True
    if kind == 2:  # out of range
        bad = values.copy()
        bad[rng.integers(n)] = rng.choice([-1, d, d + 7, -(2 ** 31)])
        return bad, False
    if kind == 3:  # wrong shapes
        shape = [(n + 1,), (n - 1,), (1, n), (n, 1), (), (0,)][rng.integers(6)]
        return rng.integers(0, d, shape), False
    if kind == 4:
        return values.astype("timedelta64[s]"), False
    if kind == 5:
        return values.astype("datetime64[s]"), False
    if kind == 6:
        return values.astype(object), False
    if kind == 7:
        return values.astype(str), False
    if kind == 8:
        return values.astype(float), False  # whole floats are refused, not rounded
    if kind == 9:
        bad = values.astype(float)
        bad[rng.integers(n)] = rng.choice([np.nan, np.inf, -np.inf])
        return bad, False
    if kind == 10:
        return values.astype(bool), False
    if kind == 11:  # ragged nested lists
        return [[0]] * (n - 1) + [[0, 1]], False
    if kind == 12:
        return [None] * n, False
    return values, True


def _fuzz(env: DevicePlacementEnv, count: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    n, d = env.graph.n_ops, env.n_devices
    counts = {"valid_stepped": 0, "refused": 0, "silently_accepted": 0, "foreign_error": 0, "wrong_step": 0}
    env.reset(seed=seed)
    for _ in range(count):
        action, valid = _action(rng, n, d)
        try:
            _, _, _, _, info = env.step(action)
        except ValueError as exc:
            counts["refused" if not valid and "expected" in str(exc) else "foreign_error"] += 1
        except Exception:  # anything but our ValueError is a defect
            counts["foreign_error"] += 1
        else:
            if not valid:
                counts["silently_accepted"] += 1
            elif not (info["ok"] and np.array_equal(info["placement"], np.asarray(action).astype(np.int64))):
                counts["wrong_step"] += 1
            else:
                counts["valid_stepped"] += 1
        env.reset()
    # The env still steps correctly afterwards.
    _, _, _, _, info = env.step(np.ones(n, dtype=np.int64))
    assert info["ok"] and np.array_equal(info["placement"], np.ones(n))
    return counts


def test_fuzzed_actions_on_the_simulated_env():
    counts = _fuzz(DevicePlacementEnv("tiny_branch", backend="simulated"), count=3000, seed=0)
    assert counts["silently_accepted"] == 0 and counts["foreign_error"] == 0 and counts["wrong_step"] == 0, counts
    assert counts["valid_stepped"] > 500 and counts["refused"] > 1500, counts


def test_fuzzed_actions_on_a_real_env():
    counts = _fuzz(DevicePlacementEnv("tiny_chain", **REAL), count=40, seed=1)
    assert counts["silently_accepted"] == 0 and counts["foreign_error"] == 0 and counts["wrong_step"] == 0, counts
    assert counts["valid_stepped"] > 0 and counts["refused"] > 0, counts
