"""A placement problem with a known, mixed optimum, for the learning tests of the placement agents.

`SplitBackend` is a deterministic cost function (not a latency model): on a chain of N ops, op ``i`` costs 1 ms
on its preferred device and 2 ms on the other, where the first half prefers device 0 and the second half
device 1, plus 0.1 ms per edge whose ends are on different devices. The unique optimum puts the first half on
device 0 and the second half on device 1 (one cut): an agent has to learn a decision that depends on the op,
not just a preference for one device. The reference placement (all on device 0) is 1.5x slower.
"""
from __future__ import annotations

import numpy as np

from placement_gym.backends.base import Backend, Measurement
from placement_gym.graph import ComputationGraph


def chain_graph(n: int = 12) -> ComputationGraph:
    edges = np.array([np.arange(n - 1), np.arange(1, n)])
    return ComputationGraph("chain", tuple(f"op{i}" for i in range(n)), ("MatMul",) * n, (((4, 4),),) * n,
                            np.full(n, 64), np.full(n, 1e3), edges, np.full(n - 1, 64))


def optimum(n: int = 12) -> list[int]:
    return [0] * (n // 2) + [1] * (n - n // 2)


class SplitBackend(Backend):
    """See the module docstring. Implements the `placement_gym.backends.Backend` protocol."""

    name, simulated = "split", True
    device_names, virtual_devices = ["A", "B"], [False, False]

    def measure(self, graph, placement, *, use_cache=True):
        p = np.asarray(placement)
        preferred = np.asarray(optimum(graph.n_ops))
        cuts = int((p[graph.edge_index[0]] != p[graph.edge_index[1]]).sum())
        return Measurement(latency_s=1e-3 * float(np.where(p == preferred, 1.0, 2.0).sum()) + 1e-4 * cuts, simulated=True)

    def describe(self):
        return {"backend": self.name}

    def close(self):
        pass


def optimum_latency_s(n: int = 12) -> float:
    return 1e-3 * n + 1e-4


class CostedSplitBackend(SplitBackend):
    """`SplitBackend` that also tells each op's cost per device (``node_device_cost``, what it charges), so a
    learned agent's heuristic start ("every op on its cheapest device") measures the optimum itself."""

    def node_device_cost(self, graph):
        preferred = np.asarray(optimum(graph.n_ops))
        return np.where(preferred[:, None] == np.arange(2)[None, :], 1e-3, 2e-3)
