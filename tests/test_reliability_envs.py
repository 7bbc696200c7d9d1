"""Refused actions change nothing: a vector-env batch is checked whole before any sub-env steps (so the rows ahead
of a bad one cannot re-measure their reference), and the node-by-node env takes exactly one device index (not a
one-element sequence, a bool or a timedelta). Real parts: simulated envs on tiny graphs, and the real OpenVINO
backend for the claim that a refused batch measures nothing."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.spaces import Discrete

from placement_gym.vector_env import DevicePlacementVectorEnv

from .conftest import TWO_DEVICES
from .refusals import CountingOpenVINOBackend, CountingSimulatedBackend, assert_refused, node_wrapper

K = 3  # sub-envs of the vector envs here


def _vector_env(graph, backend, **kwargs) -> DevicePlacementVectorEnv:
    """A vector env mid-episode with the drift correction due on its next step: horizon 3 and a reference
    re-measurement every placement, one step taken, so a batch that reaches a sub-env makes it re-measure."""
    venv = DevicePlacementVectorEnv(num_envs=K, model=graph, backend=backend, horizon=3, reference_every=1, **kwargs)
    venv.reset(seed=0)
    venv.step(np.zeros((K, graph.n_ops), dtype=np.int64))
    return venv


def _bad_last_rows(n: int, d: int) -> dict:
    """Batches of K-1 good rows and a bad last row, by what is wrong with it."""
    rows = [[i % d for i in range(n)] for _ in range(K - 1)]
    return {
        "out of range": np.array(rows + [[d] * n]),
        "negative": np.array(rows + [[-1] * n]),
        "too short (ragged)": rows + [[0] * (n - 1)],
        "too long (ragged)": rows + [[0] * (n + 1)],
        "floats": rows + [[0.0] * n],
        "NaN": rows + [[np.nan] * n],
        "None": rows + [[None] * n],
        "strings": rows + [["0"] * n],
        "huge ints": rows + [[2 ** 70] * n],
    }


@pytest.mark.parametrize("what", list(_bad_last_rows(4, 2)))  # (only the names)
def test_a_refused_vector_batch_changes_no_sub_env(tiny_branch_graph, what):
    backend = CountingSimulatedBackend()
    venv = _vector_env(tiny_branch_graph, backend)
    n, d = tiny_branch_graph.n_ops, venv.envs[0].n_devices
    assert_refused(venv, backend, _bad_last_rows(n, d)[what], match=rf"^actions .*; expected an integer array of "
                                                                  rf"shape \({K}, {n}\) with values in 0\.\.{d - 1}")
    # The next valid batch steps every sub-env as if nothing had been refused.
    calls = backend.calls
    _, _, terminated, _, _ = venv.step(np.ones((K, n), dtype=np.int64))
    assert not terminated.any() and [env._steps for env in venv.envs] == [2] * K
    assert [env.reference_remeasures for env in venv.envs] == [1] * K and backend.calls > calls
    assert all(np.array_equal(info["placement"], np.ones(n)) for info in venv.step_infos)


def test_a_refused_vector_batch_names_its_first_bad_row(tiny_branch_graph):
    backend = CountingSimulatedBackend()
    venv = _vector_env(tiny_branch_graph, backend)
    n = tiny_branch_graph.n_ops
    batch = np.zeros((K, n), dtype=np.int64)
    batch[1, 3] = 5
    assert_refused(venv, backend, batch, match=r"actions has values in 0\.\.5 \(first in row 1\); expected")


def test_a_ragged_vector_batch_says_the_expected_shape(tiny_branch_graph):
    backend = CountingSimulatedBackend()
    venv = _vector_env(tiny_branch_graph, backend)
    n = tiny_branch_graph.n_ops
    ragged = [[0] * n] * (K - 1) + [[0] * (n - 1)]
    assert_refused(venv, backend, ragged, match=rf"^actions cannot be read as one array \(.*inhomogeneous.*\); "
                                                rf"expected an integer array of shape \({K}, {n}\)")


def test_a_refused_vector_batch_measures_nothing_on_the_real_backend(tiny_chain_graph):
    """On the real backend a reference re-measurement is a compile and a benchmark: a refused batch must not
    cause one, in the rows ahead of the bad one either."""
    backend = CountingOpenVINOBackend(TWO_DEVICES, warmup=1, repeats=3)
    venv = _vector_env(tiny_chain_graph, backend)
    n = tiny_chain_graph.n_ops
    bad = np.zeros((K, n), dtype=np.int64)
    bad[-1] = 2  # two devices: 2 is out of range
    assert_refused(venv, backend, bad, match=r"actions has values in 0\.\.2 \(first in row 2\); expected")
    venv.close()


# ================================================================================ node-by-node env
def _node_env():
    backend = CountingSimulatedBackend()
    env = gym.make("DevicePlacementNode-v0", model="tiny_branch", backend=backend)
    env.reset(seed=0)
    return env, backend


#: Each accepted form of device 1, and whether Gymnasium's ``Discrete(2).contains`` accepts it too.
ACCEPTED = {
    "Python int": (1, True),
    "numpy int64": (np.int64(1), True),
    "numpy int8": (np.int8(1), True),
    "0-d int array": (np.array(1), True),
    "0-d uint8 array": (np.array(1, dtype=np.uint8), True),
    # Accepted as the whole-placement env accepts any integer dtype and torch tensors; Discrete refuses these.
    "numpy uint64": (np.uint64(1), False),
    "0-d torch tensor": (torch.tensor(1), False),
}


@pytest.mark.parametrize("what", list(ACCEPTED))
def test_the_node_env_takes_one_device_index(what):
    """One integer in every form Gymnasium's ``Discrete.contains`` accepts (and unsigned integers and 0-d torch
    tensors, as the whole-placement env does) places the current node on that device."""
    env, _ = _node_env()
    node = node_wrapper(env)
    action, discrete_accepts = ACCEPTED[what]
    assert Discrete(2).contains(action) is discrete_accepts
    obs, _, _, _, info = env.step(action)
    assert np.all(obs["placement"][node.node_mask(info["node"])] == 1)
    assert node.placements_measured == 1 and node.current_node == 1


REFUSED = {
    "[c]": ([1], r"shape \(1,\)"),
    "[[c]]": ([[1]], r"shape \(1, 1\)"),
    "np.array([c])": (np.array([1]), r"shape \(1,\)"),
    "torch.tensor([c])": (torch.tensor([1]), r"shape \(1,\)"),
    "np.timedelta64": (np.timedelta64(1), "dtype timedelta64"),
    "np.datetime64": (np.datetime64(1, "s"), r"dtype datetime64\[s\]"),
    "Python bool": (True, "dtype bool"),  # Discrete takes True as 1; a bool is not a device index
    "numpy bool": (np.True_, "dtype bool"),
    "whole float": (1.0, "dtype float64"),
    "NaN": (np.nan, "dtype float64"),
    "0-d float tensor": (torch.tensor(1.0), "dtype float32"),
    "string": ("1", "dtype <U1"),
    "None": (None, "dtype object"),
    "huge int": (2 ** 70, "dtype object"),
    "out of range": (2, "value 2"),
    "negative": (-1, "value -1"),
    "empty list": ([], r"shape \(0,\)"),
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_the_node_env_refuses_anything_but_one_device_index(what):
    env, backend = _node_env()
    action, wrong = REFUSED[what]
    assert_refused(env, backend, action, match=rf"^action has {wrong}; expected one integer device index in 0\.\.1 "
                                               r"\(the current node's device\) as a Python int, a numpy integer or "
                                               r"a 0-d integer array$")
    # and the episode goes on from where it was
    obs, _, _, _, info = env.step(0)
    assert info["node"] == 0 and node_wrapper(env).placements_measured == 1

