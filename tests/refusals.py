"""What the refusal tests share: backends that count how often they are asked to measure, the state a refused
action must leave as it was and the check of one refusal (`test_fuzz_actions`, `test_reliability_envs`), and the
bound on the memory a refused file may cost (`test_trust`, `test_reliability_files`)."""
from __future__ import annotations

import resource
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import data_equivalence

from placement_gym.backends.openvino import OpenVINOBackend
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.vector_env import DevicePlacementVectorEnv
from placement_gym.wrappers import NodePlacementWrapper

#: How much refusing a crafted file may raise the process's peak memory: far below what the file's declared sizes
#: would build (gigabytes), far above the noise of reading a small file. Memory, not time: a busy machine slows a
#: refusal, it does not make it bigger.
BUILT_NOTHING_BYTES = 256 * 2**20


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class CountingMeasurements:
    """Mixin for a backend class: ``calls`` counts the times it is asked to measure (``measure`` or
    ``measure_many``; a batch counts once, a reference re-measurement too), so a test can tell that nothing was
    measured."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    def measure(self, graph, placement, *, use_cache=True):
        self.calls += 1
        return super().measure(graph, placement, use_cache=use_cache)

    def measure_many(self, graph, placements, *, use_cache=True):
        self.calls += 1
        return super().measure_many(graph, placements, use_cache=use_cache)


class CountingSimulatedBackend(CountingMeasurements, SimulatedBackend):
    """The simulated backend, counting its measurement requests."""


class CountingOpenVINOBackend(CountingMeasurements, OpenVINOBackend):
    """The real OpenVINO backend, counting its measurement requests."""


def node_wrapper(env: gym.Env) -> NodePlacementWrapper | None:
    """The `NodePlacementWrapper` in `env`'s wrapper stack (e.g. under ``gym.make``'s checkers), or None."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, NodePlacementWrapper):
            return env
        env = env.env
    return None


def env_state(env: Any) -> dict:
    """Everything a step may change, as plain data to compare: per `DevicePlacementEnv` its observation, episode
    step, placements measured, reference state (drift re-measurements, placements since the last one, the current
    reference latency) and random generator; a vector env's for every sub-env; a node-by-node env's node step,
    placement, latency, incumbent and observation too. Call it after a reset (the reference is measured then)."""
    if isinstance(env, DevicePlacementVectorEnv):
        return {"sub_envs": [env_state(sub) for sub in env.envs]}
    node = node_wrapper(env)
    if node is not None:
        return {"node_step": node._t, "placement": node.placement, "latency_s": node._latency,
                "incumbent": node.incumbent, "observation": node._observation(), "base": env_state(node.base)}
    base = env.unwrapped
    return {"observation": base.observation(), "steps": base._steps, "placements_measured": base.placements_measured,
            "reference_remeasures": base.reference_remeasures, "since_reference": base._g.since_reference,
            "current_reference_s": base.current_reference_s, "rng": base.np_random.bit_generator.state}


def refusal(env: Any, backend: CountingMeasurements, action: Any) -> str | None:
    """Step `env` with `action`, which it must refuse; returns what was wrong with the refusal (None if nothing):
    the refusal must be a ValueError or TypeError with a one-line message saying what is expected, and leave the
    env as it was (`env_state`) with nothing measured. A step that goes through is reported, not undone."""
    before, calls = env_state(env), backend.calls
    try:
        env.step(action)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        if "\n" in message or "expected" not in message:
            return f"{type(exc).__name__} without a one-line 'expected ...': {message!r}"
    except Exception as exc:  # anything else is a defect of the env's action check
        return f"{type(exc).__name__} (not ValueError/TypeError): {exc}"
    else:
        return "accepted"
    if backend.calls != calls:
        return f"measured {backend.calls - calls} time(s) for a refused action"
    if not data_equivalence(env_state(env), before, exact=True):
        return "the env's state changed"
    return None


def assert_refused(env: Any, backend: CountingMeasurements, action: Any, match: str) -> None:
    """`refusal` finds nothing wrong with `env` refusing `action`, and the message matches the regex `match`."""
    problem = refusal(env, backend, action)
    assert problem is None, problem
    with pytest.raises((ValueError, TypeError), match=match):
        env.step(action)
