"""What a placement must respect besides its cost: op support, device memory and devices outside HETERO.

Its own module because both exact planners read it: `dp` (contiguous splits) and `optimal` (the MIP, which also
starts from `dp`'s answer), and neither should import the other for it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_gym.backends.base import shareable_devices
from placement_gym.backends.simulated import SimulatedBackend


@dataclass(frozen=True)
class Constraints:
    """What a placement must respect besides its cost (`SimulatedBackend.check_feasible` checks the same).

    Attributes:
        supported: (N, D) bool, device d can run op i.
        weights: (N,) bytes of each op's weights; working: (N,) bytes of its inputs + output.
        capacity: (D,) bytes each device holds (``inf``: unbounded). A device needs the weights of its ops plus
            the largest working set among them.
    """

    supported: np.ndarray
    weights: np.ndarray
    working: np.ndarray
    capacity: np.ndarray

    @classmethod
    def none(cls, n: int, d: int) -> "Constraints":
        return cls(np.ones((n, d), dtype=bool), np.zeros(n), np.zeros(n), np.full(d, np.inf))

    @classmethod
    def of(cls, backend: SimulatedBackend, graph) -> "Constraints":
        from placement_gym.backends.profiles import op_bytes, weight_bytes

        weights = weight_bytes(graph)
        capacity = np.array([d.memory_bytes or np.inf for d in backend.profile.devices], dtype=float)
        return cls(backend.action_mask(graph) & shareable_devices(backend), weights, op_bytes(graph) - weights, capacity)
