"""A seeded fuzz of actions on the whole-placement env, the node-by-node env and the vector env: every action either
steps correctly or is refused with a one-line ValueError/TypeError saying what is expected, leaving the env's state
as it was and nothing measured (`refusals.refusal`); the env steps correctly afterwards. Counts: 0 silent
acceptances (an invalid action stepped), 0 bad refusals, 0 wrong steps.

Real parts: simulated envs on tiny graphs (thousands of actions) and the real OpenVINO env on a tiny model (a few
dozen).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from placement_gym import DevicePlacementEnv
from placement_gym.vector_env import DevicePlacementVectorEnv
from placement_gym.wrappers import make_node_env

from .conftest import TWO_DEVICES
from .refusals import CountingMeasurements, CountingOpenVINOBackend, CountingSimulatedBackend, refusal

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
TORCH_INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
#: Things that are no array of numbers at all.
NOT_ARRAYS = [None, "0", "", {}, {"a": 1}, object(), print, b"\x00", 1j]


#: How many forms `_in_valid_form` gives an array of valid device indices in.
VALID_FORMS = 3


def _in_valid_form(rng: np.random.Generator, values: np.ndarray, form: int) -> Any:
    """`values` (device indices in range, of any shape) in form `form` (0..VALID_FORMS-1) of those an env takes:
    any numpy integer dtype, nested lists, a torch integer tensor. One place, so that a placement and a batch of
    them are fuzzed with the same valid forms."""
    if form == 0:
        return values.astype(rng.choice(INT_DTYPES))
    if form == 1:
        return values.tolist()
    return torch.tensor(values, dtype=TORCH_INTS[rng.integers(len(TORCH_INTS))])


def _action(rng: np.random.Generator, n: int, d: int) -> tuple[Any, bool]:
    """One random action for an env of `n` ops and `d` devices, and whether it is valid (an (n,) array of integers
    in 0..d-1: lists, any numpy or torch integer dtype)."""
    kind = rng.integers(20)
    values = rng.integers(0, d, n)
    if kind < VALID_FORMS:
        return _in_valid_form(rng, values, kind), True
    if kind == 3:  # out of range
        bad = values.copy()
        bad[rng.integers(n)] = rng.choice([-1, d, d + 7, -(2 ** 31), 2 ** 62])
        return bad, False
    if kind == 4:  # out of range beyond int64: a uint64 that wraps negative
        bad = values.astype(np.uint64)
        bad[rng.integers(n)] = np.uint64(2 ** 64 - 1)
        return bad, False
    if kind == 5:  # wrong shapes
        shape = [(n + 1,), (n - 1,), (1, n), (n, 1), (), (0,), (2, n)][rng.integers(7)]
        return rng.integers(0, d, shape), False
    if kind == 6:
        return values.astype(["timedelta64[s]", "datetime64[s]", object, str, complex][rng.integers(5)]), False
    if kind == 7:
        return values.astype(rng.choice(["float16", "float32", "float64"])), False  # whole floats: refused
    if kind == 8:
        bad = values.astype(float)
        bad[rng.integers(n)] = rng.choice([np.nan, np.inf, -np.inf])
        return bad, False
    if kind == 9:
        return [values.astype(bool), [bool(v) for v in values]][rng.integers(2)], False
    if kind == 10:  # ragged nested lists
        return [[0]] * (n - 1) + [[0, 1]], False
    if kind == 11:
        return [None] * n, False
    if kind == 12:
        return torch.tensor(values, dtype=[torch.float32, torch.bool][rng.integers(2)]), False
    if kind == 13:  # a Python int beyond 64 bits (numpy keeps it as an object)
        bad = values.tolist()
        bad[rng.integers(n)] = int(rng.choice([2 ** 64, 2 ** 70, -(2 ** 65)]))
        return bad, False
    if kind == 14:
        return NOT_ARRAYS[rng.integers(len(NOT_ARRAYS))], False
    if kind == 15:  # one device index where a placement is expected
        return int(values[0]), False
    return values, True


def _device(rng: np.random.Generator, d: int) -> tuple[Any, bool]:
    """One random action for the node-by-node env of `d` devices, and whether it is valid (one integer in 0..d-1
    as a Python int, a numpy integer scalar, a 0-d integer array or 0-d integer torch tensor)."""
    kind = rng.integers(14)
    c = int(rng.integers(d))
    if kind == 0:
        return np.dtype(rng.choice(INT_DTYPES)).type(c), True
    if kind == 1:
        return np.array(c, dtype=rng.choice(INT_DTYPES)), True
    if kind == 2:
        return torch.tensor(c, dtype=TORCH_INTS[rng.integers(len(TORCH_INTS))]), True
    if kind == 3:  # one-element sequences: not a device index
        return [[c], [[c]], (c,), np.array([c]), torch.tensor([c]), np.full((1, 1), c)][rng.integers(6)], False
    if kind == 4:  # out of range, huge
        return int(rng.choice([-1, d, d + 7, 2 ** 31, -(2 ** 63), 2 ** 64, 2 ** 70])), False
    if kind == 5:
        return np.uint64(2 ** 64 - 1), False
    if kind == 6:
        return [np.timedelta64(c), np.timedelta64(c, "s"), np.datetime64(c, "s")][rng.integers(3)], False
    if kind == 7:  # floats, whole or not
        return [float(c), np.float32(c), np.float64(c) + 0.5, np.nan, np.inf, -np.inf][rng.integers(6)], False
    if kind == 8:
        return [True, False, np.True_, np.array(True)][rng.integers(4)], False
    if kind == 9:
        return [torch.tensor(float(c)), torch.tensor(True), torch.tensor([[c]])][rng.integers(3)], False
    if kind == 10:
        return [str(c), np.array(str(c)), np.array(c, dtype=object), [], np.zeros(0, dtype=np.int64)][
            rng.integers(5)], False
    if kind == 11:
        return NOT_ARRAYS[rng.integers(len(NOT_ARRAYS))], False
    return c, True


def _batch(rng: np.random.Generator, k: int, n: int, d: int) -> tuple[Any, bool]:
    """One random action for a vector env of `k` sub-envs, `n` ops and `d` devices, and whether it is valid (a
    (k, n) array of integers in 0..d-1). Half are batches of k-1 good rows and a bad last row, so that a batch
    refused late would show in the first sub-envs' state."""
    kind = rng.integers(12)
    values = rng.integers(0, d, (k, n))
    if kind < VALID_FORMS:
        return _in_valid_form(rng, values, kind), True
    if kind < 8:  # the last row bad: a refused single-env action
        row, valid = _action(rng, n, d)
        while valid or _bools(row):  # next to integer rows a row of bools would read as integers 0 and 1
            row, valid = _action(rng, n, d)
        rows = list(values[:-1]) + [row]
        return (rows if rng.integers(2) else [r.tolist() for r in values[:-1]] + [row]), False
    if kind == 8:  # wrong shapes
        shape = [(k,), (n,), (k + 1, n), (k - 1, n), (k, n + 1), (k, n, 1), (), (0, n), (n, k)][rng.integers(9)]
        return rng.integers(0, d, shape), False
    if kind == 9:  # the whole batch of a wrong dtype
        return values.astype(rng.choice(["float32", "float64", "bool", "timedelta64[s]", "str", "object"])), False
    if kind == 10:  # out of range, in any row
        bad = values.copy()
        bad[rng.integers(k), rng.integers(n)] = rng.choice([-1, d, -(2 ** 63)])
        return bad, False
    return NOT_ARRAYS[rng.integers(len(NOT_ARRAYS))], False


def _bools(row: Any) -> bool:
    """Whether `row` reads as an array of bools."""
    try:
        return np.asarray(row).dtype == bool
    except (ValueError, TypeError):
        return False


def _fuzz(env: Any, backend: CountingMeasurements, draw: Callable[[np.random.Generator], tuple[Any, bool]],
          stepped_right: Callable[[Any, Any, dict], bool], count: int, seed: int) -> dict:
    """`count` actions from `draw` on `env` (reset with `seed` first, again whenever an episode ends); per action,
    which case it fell in. `stepped_right(action, obs, info)` says whether a valid action stepped as it should."""
    rng = np.random.default_rng(seed)
    counts = {"valid_stepped": 0, "refused": 0, "silently_accepted": 0, "bad_refusal": 0, "wrong_step": 0}
    env.reset(seed=seed)
    for _ in range(count):
        action, valid = draw(rng)
        if not valid:
            problem = refusal(env, backend, action)
            counts["refused" if problem is None else "silently_accepted" if problem == "accepted" else
                   "bad_refusal"] += 1
            if problem == "accepted":
                env.reset()
            continue
        obs, _, terminated, truncated, info = env.step(action)
        counts["valid_stepped" if stepped_right(action, obs, info) else "wrong_step"] += 1
        if not isinstance(env, DevicePlacementVectorEnv) and (terminated or truncated):
            env.reset()  # (the vector env resets its sub-envs itself)
    return counts


def _placed(action, obs, info) -> bool:
    """A whole-placement step measured `action` (as int64), and it worked."""
    return bool(info["ok"]) and np.array_equal(info["placement"], np.asarray(action).astype(np.int64))


def _assert_clean(counts: dict, valid: int, refused: int) -> None:
    assert counts["silently_accepted"] == 0 and counts["bad_refusal"] == 0 and counts["wrong_step"] == 0, counts
    assert counts["valid_stepped"] > valid and counts["refused"] > refused, counts


def test_fuzzed_actions_on_the_simulated_env():
    backend = CountingSimulatedBackend()
    env = DevicePlacementEnv("tiny_branch", backend=backend)
    n, d = env.graph.n_ops, env.n_devices
    counts = _fuzz(env, backend, lambda rng: _action(rng, n, d), _placed, count=2000, seed=0)
    _assert_clean(counts, valid=500, refused=1100)
    _, _, _, _, info = env.step(np.ones(n, dtype=np.int64))  # still steps correctly afterwards
    assert _placed(np.ones(n), None, info)


def test_fuzzed_actions_on_a_real_env():
    backend = CountingOpenVINOBackend(TWO_DEVICES, warmup=1, repeats=3)
    env = DevicePlacementEnv("tiny_chain", backend=backend)
    n, d = env.graph.n_ops, env.n_devices
    counts = _fuzz(env, backend, lambda rng: _action(rng, n, d), _placed, count=24, seed=1)
    _assert_clean(counts, valid=0, refused=0)
    _, _, _, _, info = env.step(np.ones(n, dtype=np.int64))
    assert _placed(np.ones(n), None, info)
    env.close()


def test_fuzzed_actions_on_the_node_env():
    """``DevicePlacementNode-v0``'s entry point: one device index per step, episodes of one step per op."""
    backend = CountingSimulatedBackend()
    env = make_node_env(model="tiny_branch", backend=backend)
    d = env.n_devices

    def placed_node(action, obs, info) -> bool:
        return bool(info["ok"]) and np.all(obs["placement"][env.node_mask(info["node"])] == int(np.asarray(action)))

    counts = _fuzz(env, backend, lambda rng: _device(rng, d), placed_node, count=1500, seed=2)
    _assert_clean(counts, valid=400, refused=800)
    env.reset()
    obs, _, _, _, info = env.step(1)
    assert placed_node(1, obs, info)


def test_fuzzed_actions_on_the_vector_env():
    """Horizon 3 with a reference re-measurement every 2 placements: a batch refused after touching a sub-env
    would change its step count or reference state."""
    backend = CountingSimulatedBackend()
    k = 3
    venv = DevicePlacementVectorEnv(num_envs=k, model="tiny_branch", backend=backend, horizon=3, reference_every=2)
    n, d = venv.graph.n_ops, venv.envs[0].n_devices

    def placed_all(action, obs, info) -> bool:
        rows = np.asarray(action).astype(np.int64)
        return all(_placed(row, None, step) for row, step in zip(rows, venv.step_infos))

    counts = _fuzz(venv, backend, lambda rng: _batch(rng, k, n, d), placed_all, count=1000, seed=3)
    _assert_clean(counts, valid=150, refused=600)
    venv.step(np.ones((k, n), dtype=np.int64))
    assert placed_all(np.ones((k, n)), None, {})
