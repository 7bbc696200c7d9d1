"""METIS graph partitioning as a placement baseline (pymetis, the reference METIS library's binding).

The graph is partitioned into D parts, one per device, minimising the bytes cut (edge weights) while giving
each device a share of the compute (vertex weights) proportional to its speed (METIS ``tpwgts``). Vertex
weights and speeds come from the env backend's cost model where there is one, or from the device profile given as
``cost_profile`` (`agents.baselines.costs.CostPlanner`); without a cost model (the real backend with no profile) the
FLOPs estimate is the weight and all devices count as equally fast. Edge direction plays no part:
METIS partitions undirected graphs, which is exactly why it is a baseline and not the answer.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from .costs import CostPlanner

_WEIGHT_SCALE = 1_000_000  # METIS takes integer weights: scale to this range


def _integer_weights(values: np.ndarray) -> list[int]:
    values = np.asarray(values, dtype=np.float64)
    top = values.max() if values.size else 0.0
    if top <= 0:
        return [1] * len(values)
    return np.maximum(1, np.round(values / top * _WEIGHT_SCALE)).astype(np.int64).tolist()


def metis_partition(
    n_ops: int,
    edge_index: np.ndarray,
    n_parts: int,
    vertex_weight: np.ndarray,
    edge_weight: np.ndarray,
    part_share: np.ndarray | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, int]:
    """Partition a graph with METIS: (part of each node (N,) int64, the weighted edge cut).

    Args:
        edge_index: (2, E) edges (direction ignored).
        vertex_weight: (N,) positive compute weights; edge_weight: (E,) positive cut costs.
        part_share: (n_parts,) target share of the total vertex weight per part (sums to 1); default equal.
    """
    try:
        import pymetis
    except ImportError as exc:  # pragma: no cover - pymetis is a dependency of the package
        raise ImportError("the METIS baseline needs pymetis: pip install pymetis") from exc
    if n_parts == 1:
        return np.zeros(n_ops, dtype=np.int64), 0
    neighbours: list[dict[int, float]] = [dict() for _ in range(n_ops)]
    for (u, v), w in zip(edge_index.T.tolist(), np.asarray(edge_weight, dtype=np.float64)):
        neighbours[u][v] = neighbours[u].get(v, 0.0) + w
        neighbours[v][u] = neighbours[v].get(u, 0.0) + w
    xadj, adjncy, weights = [0], [], []
    for adjacent in neighbours:
        adjncy.extend(adjacent.keys())
        weights.extend(adjacent.values())
        xadj.append(len(adjncy))
    tpwgts = None
    if part_share is not None:
        share = np.asarray(part_share, dtype=np.float64)
        tpwgts = (share / share.sum()).tolist()
    cut, parts = pymetis.part_graph(
        n_parts,
        pymetis.CSRAdjacency(xadj, adjncy),
        vweights=_integer_weights(vertex_weight),
        eweights=_integer_weights(np.asarray(weights)) if weights else None,
        tpwgts=tpwgts,
        options=pymetis.Options(seed=int(seed)),
    )
    return np.asarray(parts, dtype=np.int64), int(cut)


class MetisPartition(CostPlanner):
    """One METIS partition (part ``d`` on device ``d``), balanced by device speed; measures one placement.

    Args:
        use_costs: weigh ops by the cost model (True, needs one: the simulated backend's or `cost_profile`'s), by
            estimated FLOPs with equal device shares (False), or whichever is available (None).
        cost_profile: the device profile to weigh by (`CostPlanner`); not with ``use_costs=False``.
    """

    name = "metis"

    def __init__(self, use_costs: bool | None = None, cost_profile: "str | None" = None) -> None:
        if use_costs is False and cost_profile is not None:
            raise ValueError("metis with use_costs=False weighs by FLOPs and takes no cost_profile; leave one out")
        super().__init__(cost_profile)
        self.use_costs = use_costs

    def hyperparameters(self) -> dict:
        return {"use_costs": self.use_costs, **super().hyperparameters()}

    def candidates(self, env, budget, rng) -> Iterator[np.ndarray]:
        base = env.unwrapped
        graph, d = base.graph, base.n_devices
        costs = None
        if self.use_costs is not False:
            try:
                costs = self.cost_model(env)
            except ValueError:
                if self.use_costs:
                    raise
        if costs is not None:
            # Weight = time on the fastest device; bytes cut ~ transfer time (any cross pair).
            vertex_weight = costs.op_time_s.min(axis=1)
            edge_weight = costs.edge_time_s.max(axis=(1, 2)) if graph.n_edges else np.zeros(0)
            share, source = costs.device_speed(), costs.source
        else:
            vertex_weight, edge_weight = graph.flops, graph.edge_bytes.astype(np.float64)
            share, source = np.full(d, 1.0 / d), "flops and bytes (no cost model)"
        parts, cut = metis_partition(
            graph.n_ops, graph.edge_index, d, vertex_weight, edge_weight, share, seed=int(rng.integers(2**31))
        )
        self.plan_info = {"edge_cut": cut, "weights": source, "device_share": np.round(share, 4).tolist()}
        yield parts
