"""Coarsening: a big graph's ops grouped into at most M clusters that move together, so an agent decides M devices
instead of N (the hierarchical planner's and GO's first step on graphs of tens of thousands of ops).

Clusters are **contiguous runs of the topological order** (ops are numbered in it, `ComputationGraph`): every
edge goes from an earlier cluster to the same or a later one, so the cluster graph is a DAG, and a device per
cluster expands to a device per op, a placement the simulator prices like any other (the cut between two
clusters is a cut between their ops). The runs are chosen in near-linear time:

1. each op weighs half "one op" (1/N) and half "its share of the compute" (its fastest allowed device's
   seconds, ``node_device_cost``, over the total), and the order is cut where the running weight crosses
   k/M, k = 1..M-1, so clusters are balanced in size and in work;
2. each cut then moves, within half a mean cluster length of where step 1 put it, to the position where the
   fewest tensor bytes cross it (the bytes of the edges from before to after it): a cut falls between blocks,
   at a narrow tensor, rather than inside a fan-out; a linear chain stays whole where the window allows.

Everything is computed from a `DevicePlacement-v0` observation (``edge_index``, ``edge_features``,
``node_device_cost``), so the same observation always gives the same clusters: an agent recomputes its
coarsening from the full observation it is shown (`Coarsening.of`), and a saved agent needs no stored mapping.

The coarse observation has the env's keys with M in place of N (`Coarsening.observation`)::

    node_features    (M, F)  mean over the cluster's ops (the features are encodings: one-hots become type
                             fractions, log-scaled sizes and positions their cluster average); the cluster's
                             cost is in node_device_cost
    edge_index       (2, E') cluster pairs (a, b), a < b, with at least one edge from an op of a to one of b,
                             sorted
    edge_features    (E', 1) the env's encoding, log10(1 + bytes) / 10, of the bytes summed over those edges
    placement        (M,)    the device most of the cluster's ops are on (lowest index on a tie)
    action_mask      (M, D)  1 where the device can run every op of the cluster; a cluster no device can run
                             whole (disjoint op support) allows the devices that run the most of its ops, and
                             the env's ``unsupported`` rule decides what happens to the rest
    device_features  (D, K)  unchanged
    submodel_overhead (1,)   unchanged
    node_device_cost (M, D)  summed over the cluster's ops (seconds)
    node_memory_bytes (M, 2) weights summed over the cluster's ops, the largest working set of one of them
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
from gymnasium import spaces

from .env import placement_observation_space
from .features import bytes_from_edge_features, edge_features

__all__ = ["COARSEN_ABOVE", "MAX_NODES", "Coarsening", "cluster_starts"]

#: Learned agents coarsen graphs with more ops than this (their ``coarsen_above``): the size above which the
#: structure features are estimated too (`placement_gym.features.EXACT_STRUCTURE_MAX_OPS`).
COARSEN_ABOVE = 4096
#: Clusters of a coarsened graph, at most (the agents' ``max_nodes``).
MAX_NODES = 1024

_KEYS = ("node_features", "edge_index", "edge_features", "placement", "action_mask", "device_features",
         "node_device_cost")


def cluster_starts(n_ops: int, edge_index: np.ndarray, edge_bytes: np.ndarray, op_seconds: np.ndarray,
                   max_nodes: int) -> np.ndarray:
    """(M,) int64 first op of each cluster, ascending, starting at 0, M <= `max_nodes` (the module docstring's
    two steps). Ops ``starts[k] .. starts[k+1]-1`` form cluster k.

    Args:
        n_ops: N, ops in topological order.
        edge_index: (2, E) int64 producer -> consumer, producer < consumer.
        edge_bytes: (E,) bytes of each edge's tensor.
        op_seconds: (N,) what each op costs (any non-negative unit).
        max_nodes: M, clusters at most.
    """
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    if n_ops <= max_nodes:
        return np.arange(n_ops, dtype=np.int64)
    cost = np.clip(np.asarray(op_seconds, dtype=np.float64), 0.0, None)
    total = cost.sum()
    weight = 0.5 / n_ops + (0.5 * cost / total if total > 0 else 0.5 / n_ops)
    ideal = np.searchsorted(np.cumsum(weight), np.arange(1, max_nodes) / max_nodes) + 1  # cut before op `ideal`
    # crossing[p]: bytes of the edges from an op before p to an op at or after p (a difference array, O(N + E)).
    src, dst = edge_index
    bytes_ = np.asarray(edge_bytes, dtype=np.float64)
    crossing = np.cumsum(np.bincount(src + 1, bytes_, minlength=n_ops + 1)
                         - np.bincount(dst + 1, bytes_, minlength=n_ops + 1))[:n_ops]
    half = max(n_ops // (2 * max_nodes), 0)
    starts, previous = [0], 0
    for cut in ideal.tolist():
        lo, hi = max(previous + 1, cut - half), min(cut + half, n_ops - 1)
        if lo > hi:  # the window lies inside the previous cluster: one cluster fewer
            continue
        previous = lo + int(np.argmin(crossing[lo:hi + 1]))
        starts.append(previous)
    return np.asarray(starts, dtype=np.int64)


@dataclass(frozen=True)
class Coarsening:
    """The clusters of one graph and how observations and actions map between the graph and them.

    Attributes:
        starts: (M,) int64 first op of each cluster (`cluster_starts`).
        n_ops: N, ops of the full graph.
        labels: (N,) int64 cluster of every op.
        edge_index: (2, E') int64 edges between clusters (module docstring).
        edge_cluster: (E,) int64 the coarse edge each full edge belongs to, -1 inside a cluster.
    """

    starts: np.ndarray
    n_ops: int
    labels: np.ndarray
    edge_index: np.ndarray
    edge_cluster: np.ndarray

    @classmethod
    def of(cls, obs: Mapping[str, np.ndarray], max_nodes: int = MAX_NODES) -> "Coarsening":
        """The coarsening of a full `DevicePlacement-v0` observation (only its static arrays are read)."""
        if "node_mask" in obs:
            raise ValueError("a padded multi-graph observation cannot be coarsened; coarsen one graph at a time")
        edge_index = np.asarray(obs["edge_index"], dtype=np.int64)
        mask = np.asarray(obs["action_mask"], dtype=bool)
        cost = np.asarray(obs["node_device_cost"], dtype=np.float64)
        op_seconds = np.where(mask, cost, np.inf).min(axis=1)  # on its fastest device that can run it
        n = int(mask.shape[0])
        starts = cluster_starts(n, edge_index, bytes_from_edge_features(obs["edge_features"]), op_seconds, max_nodes)
        labels = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, n)))
        src, dst = labels[edge_index[0]], labels[edge_index[1]]
        across = src != dst
        keys, inverse = np.unique(src[across] * len(starts) + dst[across], return_inverse=True)
        edge_cluster = np.full(edge_index.shape[1], -1, dtype=np.int64)
        edge_cluster[across] = inverse.reshape(-1)
        coarse_edges = np.stack([keys // len(starts), keys % len(starts)]).astype(np.int64).reshape(2, -1)
        return cls(starts, n, labels, coarse_edges, edge_cluster)

    @property
    def n_clusters(self) -> int:
        """M."""
        return int(len(self.starts))

    @property
    def sizes(self) -> np.ndarray:
        """(M,) int64 ops per cluster."""
        return np.diff(np.append(self.starts, self.n_ops))

    # ------------------------------------------------------------------ actions
    def expand(self, action) -> np.ndarray:
        """(N,) int64: every op on its cluster's device, for an (M,) integer `action`."""
        action = np.asarray(action)
        if action.shape != (self.n_clusters,) or action.dtype.kind not in "iu":
            raise ValueError(f"a coarse action is an integer array of shape ({self.n_clusters},) (a device per "
                             f"cluster), got {action.dtype} {action.shape}")
        return action.astype(np.int64)[self.labels]

    def majority(self, placement: np.ndarray, n_devices: int | None = None) -> np.ndarray:
        """(M,) int64: the device most of each cluster's ops have in the (N,) `placement` (lowest on a tie);
        exactly the coarse action for a placement `expand` made."""
        placement = np.asarray(placement, dtype=np.int64)
        d = int(placement.max()) + 1 if n_devices is None else int(n_devices)
        counts = np.bincount(self.labels * d + placement, minlength=self.n_clusters * d)
        return counts.reshape(self.n_clusters, d).argmax(axis=1).astype(np.int64)

    # ------------------------------------------------------------------ observations
    def observation(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The coarse observation (module docstring) of a full `DevicePlacement-v0` observation `obs`."""
        missing = [k for k in _KEYS if k not in obs]
        if missing or np.shape(obs["placement"]) != (self.n_ops,):
            raise ValueError(f"expected a DevicePlacement-v0 observation of {self.n_ops} ops with keys {_KEYS}; "
                             f"got {np.shape(obs['placement'])[0] if 'placement' in obs else '?'} ops, missing {missing}")
        sizes = self.sizes.astype(np.float64)
        mask = np.asarray(obs["action_mask"]).astype(np.int64)
        d = mask.shape[1]
        runnable = np.add.reduceat(mask, self.starts, axis=0)  # (M, D) ops of the cluster each device can run
        coarse_mask = runnable == self.sizes[:, None]
        whole = coarse_mask.any(axis=1)
        coarse_mask[~whole] = runnable[~whole] == runnable[~whole].max(axis=1, keepdims=True)
        edge_bytes = bytes_from_edge_features(obs["edge_features"])
        inside = self.edge_cluster >= 0
        summed = np.bincount(self.edge_cluster[inside], edge_bytes[inside], minlength=self.edge_index.shape[1])
        features = np.add.reduceat(np.asarray(obs["node_features"], dtype=np.float64), self.starts, axis=0)
        return {
            "node_features": (features / sizes[:, None]).astype(np.float32),
            "edge_index": self.edge_index.copy(),
            "edge_features": edge_features(summed),
            "placement": self.majority(obs["placement"], d),
            "action_mask": coarse_mask.astype(np.int8),
            "device_features": np.array(obs["device_features"], dtype=np.float32, copy=True),
            "node_device_cost": np.add.reduceat(np.asarray(obs["node_device_cost"], dtype=np.float64), self.starts,
                                                axis=0).astype(np.float32),
            "node_memory_bytes": self.memory(obs),
            # Not per op: unchanged (0, unknown, for an observation from before the key existed).
            "submodel_overhead": np.array(obs.get("submodel_overhead", [0.0]), dtype=np.float32).reshape(1),
        }

    def memory(self, obs: dict) -> np.ndarray:
        """(M, 2) float32 each cluster's memory (``node_memory_bytes``): its ops' weights summed, the largest
        working set of one of its ops (what a device holding the cluster needs; zeros for an observation from
        before the key existed)."""
        memory = np.asarray(obs.get("node_memory_bytes", np.zeros((self.n_ops, 2))), dtype=np.float64)
        return np.stack([np.add.reduceat(memory[:, 0], self.starts), np.maximum.reduceat(memory[:, 1], self.starts)],
                        axis=1).astype(np.float32)

    def observation_space(self, space: spaces.Dict) -> spaces.Dict:
        """The coarse observation's space for the full env's observation `space`."""
        m, e = self.n_clusters, int(self.edge_index.shape[1])
        f = int(space["node_features"].shape[1])
        d, k = space["device_features"].shape
        return placement_observation_space(m, e, f, d, k)
