"""The one observation encoding: a `DevicePlacement-v0` Dict observation -> one disjoint torch graph batch.

Every agent turns observations into tensors here, whatever shape they arrive in:

* a single env observation (numpy): ``node_features`` (N, F), ``edge_index`` (2, E) int64,
  ``edge_features`` (E, Fe), ``placement`` (N,), and the device keys ``device_features`` (D, K),
  ``node_device_cost`` (N, D), ``action_mask`` (N, D);
* a batch from Stable-Baselines3 (torch): ``node_features`` (B, N, F), ``edge_index`` (B, 2, E) as *float32*
  (SB3 casts every Box to float; exact below 2**24), ``edge_features`` (B, E, Fe), ``placement`` (B, N) float.

Optional keys ``node_mask`` (N,) / (B, N) and ``edge_mask`` (E,) / (B, E) (truthy = real) drop padding when
graphs of different sizes were padded to one shape. Padded nodes must come after the real ones (so edge indices
of real edges stay valid); padded edges are dropped by ``edge_mask``, or, without one, when they are
self-loops (a DAG has none, and (0, 0) is the usual padding).

The result is PyG's disjoint-union layout (node indices of graph ``b`` are offset by the nodes before it):

>>> batch = obs_to_batch(env.reset()[0])
>>> batch.x.shape, batch.edge_index.shape, batch.num_graphs
(torch.Size([N, F]), torch.Size([2, E]), 1)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

__all__ = ["GraphBatch", "obs_to_batch"]


@dataclass(frozen=True)
class GraphBatch:
    """B graphs as one disjoint graph (PyG ``Batch`` layout, without the PyG dependency).

    Attributes (sumN = total nodes, sumE = total edges):
        x: (sumN, F) float32 node features.
        edge_index: (2, sumE) int64 producer -> consumer pairs, in global node indices.
        edge_attr: (sumE, Fe) float32 edge features, or None when the observation had none.
        batch: (sumN,) int64 graph index of every node.
        placement: (sumN,) int64 current device of every node, or None when the observation had none.
        ptr: (B + 1,) int64 node offsets: graph ``b`` owns nodes ``ptr[b]:ptr[b + 1]``.
        num_graphs: B.
        device_features: (B, D, K) float32 what each device is (``obs["device_features"]``), or None.
        node_cost: (sumN, D) float32 seconds of each op alone on each device (``obs["node_device_cost"]``), or None.
        action_mask: (sumN, D) bool which device can run each op (``obs["action_mask"]``), or None.
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor | None
    batch: Tensor
    placement: Tensor | None
    ptr: Tensor
    num_graphs: int
    device_features: Tensor | None = None
    node_cost: Tensor | None = None
    action_mask: Tensor | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    @property
    def nodes_per_graph(self) -> Tensor:
        """(B,) int64 number of nodes of each graph."""
        return self.ptr[1:] - self.ptr[:-1]

    def to(self, device: "torch.device | str") -> "GraphBatch":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return replace(self, x=move(self.x), edge_index=move(self.edge_index), edge_attr=move(self.edge_attr),
                       batch=move(self.batch), placement=move(self.placement), ptr=move(self.ptr),
                       device_features=move(self.device_features), node_cost=move(self.node_cost),
                       action_mask=move(self.action_mask))

    def to_dense(self, values: Tensor, fill_value: float = 0.0) -> tuple[Tensor, Tensor]:
        """Per-node `values` (sumN, ...) -> ((B, Nmax, ...), mask (B, Nmax) bool), e.g. to hand per-node logits
        back to SB3 in its (B, N, D) layout. Graphs shorter than Nmax are padded with `fill_value`."""
        counts = self.nodes_per_graph
        n_max = int(counts.max()) if self.num_graphs else 0
        out = values.new_full((self.num_graphs, n_max) + tuple(values.shape[1:]), fill_value)
        position = torch.arange(self.num_nodes, device=values.device) - self.ptr[self.batch]
        out[self.batch, position] = values
        mask = torch.zeros(self.num_graphs, n_max, dtype=torch.bool, device=values.device)
        mask[self.batch, position] = True
        return out, mask


def _tensor(value: Any, dtype: torch.dtype, device) -> Tensor:
    if isinstance(value, Tensor):
        return value.to(device=device, dtype=dtype) if value.dtype != dtype or value.device != torch.device(device) else value
    return torch.as_tensor(np.asarray(value), dtype=dtype, device=device)


def _index_tensor(value: Any, device) -> Tensor:
    """Edge indices / placements as int64, whether they arrive as ints or as SB3's float32."""
    if isinstance(value, Tensor):
        t = value.to(device)
    else:
        t = torch.as_tensor(np.asarray(value), device=device)
    if t.is_floating_point():
        t = t.round()
    return t.long()


def obs_to_batch(obs: Mapping[str, Any], device: "torch.device | str | None" = None) -> GraphBatch:
    """Turn a Dict observation (single or batched, numpy or torch; see the module docstring) into a `GraphBatch`.

    Args:
        obs: mapping with ``node_features`` and ``edge_index`` (required) and ``edge_features``,
            ``placement``, ``node_mask``, ``edge_mask``, ``device_features``, ``node_device_cost``,
            ``action_mask`` (optional).
        device: torch device of the result (default: the device of ``node_features`` if it is a tensor, else CPU).

    Raises:
        ValueError: a key is missing or the shapes do not line up (the message says what is expected).
    """
    for key in ("node_features", "edge_index"):
        if key not in obs:
            raise ValueError(f"observation has no {key!r}; expected the DevicePlacement-v0 Dict observation "
                             f"with keys node_features, edge_index[, edge_features, placement]; got {sorted(obs)}")
    nf = obs["node_features"]
    if device is None:
        device = nf.device if isinstance(nf, Tensor) else "cpu"
    x = _tensor(nf, torch.float32, device)
    edge_index = _index_tensor(obs["edge_index"], device)
    edge_attr = _tensor(obs["edge_features"], torch.float32, device) if obs.get("edge_features") is not None else None
    placement = _index_tensor(obs["placement"], device) if obs.get("placement") is not None else None
    node_mask = _index_tensor(obs["node_mask"], device).bool() if obs.get("node_mask") is not None else None
    edge_mask = _index_tensor(obs["edge_mask"], device).bool() if obs.get("edge_mask") is not None else None
    device_features = _tensor(obs["device_features"], torch.float32, device) if obs.get("device_features") is not None else None
    node_cost = _tensor(obs["node_device_cost"], torch.float32, device) if obs.get("node_device_cost") is not None else None
    action_mask = _index_tensor(obs["action_mask"], device).bool() if obs.get("action_mask") is not None else None

    single = x.dim() == 2
    if single:  # add a batch dimension of one; everything below is batched
        x, edge_index = x.unsqueeze(0), edge_index.unsqueeze(0)
        edge_attr = None if edge_attr is None else edge_attr.unsqueeze(0)
        placement = None if placement is None else placement.unsqueeze(0)
        node_mask = None if node_mask is None else node_mask.unsqueeze(0)
        edge_mask = None if edge_mask is None else edge_mask.unsqueeze(0)
        device_features = None if device_features is None else device_features.unsqueeze(0)
        node_cost = None if node_cost is None else node_cost.unsqueeze(0)
        action_mask = None if action_mask is None else action_mask.unsqueeze(0)
    if x.dim() != 3:
        raise ValueError(f"node_features must be (N, F) or (B, N, F), got shape {tuple(x.shape)}")
    b, n, f = x.shape
    if edge_index.dim() != 3 or edge_index.shape[:2] != (b, 2):
        raise ValueError(f"edge_index must be (2, E) or (B, 2, E) matching node_features {tuple(x.shape)}, "
                         f"got shape {tuple(edge_index.shape) if not single else tuple(edge_index.shape[1:])}")
    e = edge_index.shape[2]
    if edge_attr is not None:
        if edge_attr.dim() == 2:  # (B, E) -> (B, E, 1)
            edge_attr = edge_attr.unsqueeze(-1)
        if edge_attr.shape[:2] != (b, e):
            raise ValueError(f"edge_features must be (E, Fe) or (B, E, Fe) with E={e}, got {tuple(edge_attr.shape)}")
    if placement is not None and placement.shape != (b, n):
        raise ValueError(f"placement must be (N,) or (B, N) with N={n}, got {tuple(placement.shape)}")
    for key, value in (("node_device_cost", node_cost), ("action_mask", action_mask)):
        if value is not None and value.shape[:2] != (b, n):
            raise ValueError(f"{key} must be (N, D) or (B, N, D) with N={n}, got {tuple(value.shape)}")
    if device_features is not None and (device_features.dim() != 3 or device_features.shape[0] != b):
        raise ValueError(f"device_features must be (D, K) or (B, D, K), got {tuple(device_features.shape)}")
    if e and (edge_index.min() < 0 or edge_index.max() >= n):
        raise ValueError(f"edge_index has node indices outside 0..{n - 1}")

    node_offsets = torch.arange(b, device=device) * n
    global_edges = (edge_index + node_offsets.view(b, 1, 1)).permute(1, 0, 2).reshape(2, b * e)
    flat_attr = None if edge_attr is None else edge_attr.reshape(b * e, edge_attr.shape[-1])
    flat_x = x.reshape(b * n, f)
    flat_placement = None if placement is None else placement.reshape(b * n)
    graph_of_node = torch.arange(b, device=device).repeat_interleave(n)
    flat_cost = None if node_cost is None else node_cost.reshape(b * n, -1)
    flat_mask = None if action_mask is None else action_mask.reshape(b * n, -1)

    if node_mask is None and edge_mask is None:  # the common case: one fixed-size graph per row
        ptr = torch.arange(b + 1, device=device) * n
        return GraphBatch(flat_x, global_edges, flat_attr, graph_of_node, flat_placement, ptr, b,
                          device_features, flat_cost, flat_mask)

    # Padded batch: keep the real nodes and edges and renumber the nodes densely.
    keep_node = torch.ones(b * n, dtype=torch.bool, device=device) if node_mask is None else node_mask.reshape(b * n)
    if edge_mask is not None:
        keep_edge = edge_mask.reshape(b * e)
    else:
        keep_edge = global_edges[0] != global_edges[1]
    keep_edge = keep_edge & keep_node[global_edges[0]] & keep_node[global_edges[1]]
    new_id = torch.cumsum(keep_node.long(), 0) - 1
    counts = keep_node.view(b, n).sum(1)
    ptr = torch.cat([torch.zeros(1, dtype=torch.long, device=device), torch.cumsum(counts, 0)])
    return GraphBatch(
        x=flat_x[keep_node],
        edge_index=new_id[global_edges[:, keep_edge]],
        edge_attr=None if flat_attr is None else flat_attr[keep_edge],
        batch=graph_of_node[keep_node],
        placement=None if flat_placement is None else flat_placement[keep_node],
        ptr=ptr,
        num_graphs=b,
        device_features=device_features,
        node_cost=None if flat_cost is None else flat_cost[keep_node],
        action_mask=None if flat_mask is None else flat_mask[keep_node],
    )
