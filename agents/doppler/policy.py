"""DOPPLER's dual policy (Yao et al., ICLR 2026; github.com/xinyuyao/Doppler, ``scheduler/rl_agent.py``): a
SELECTION policy that picks which ready op to place next and a PLACEMENT policy that picks its device, each with its
own message-passing encoder over the graph.

* `MPNNEncoder`: dgllife's ``MPNNGNN`` (Gilmer et al. 2017), which DOPPLER uses: the node features projected to H,
  then ``num_layers`` rounds of an edge-conditioned convolution (``NNConv``: a small network turns each edge's
  feature into an H x H matrix for its message, messages summed) each followed by a GRU update; on the graph with
  its edges both ways.
* `SelectionPolicy` (DOPPLER's ``Node_Policy``, SEL): scores each ready op from [its features (standardised over the
  ready ops) through a layer, its embedding, the summed embeddings of its longest path to a sink and of its longest
  path from a source (each standardised)] through two layers.
* `PlacementPolicy` (DOPPLER's ``Device_Policy``, PLC): scores each device for the chosen op from [the device's
  state (`agents.doppler.graph.DEVICE_STATE` and the observation's static device description, standardised over the
  devices) through a layer, the op's features through a layer, the op's embedding, the summed embeddings of the
  ops already on the device (standardised over the devices)] through two layers. A device that cannot run the op
  gets no probability.

Every input is per op or per device, so no graph size or device count is in the weights. LeakyReLU(0.1) and
orthogonal initialisation of the scoring layers, as DOPPLER's code.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from agents.core.base import PolicySpec

from .graph import DEVICE_STATE, NODE_FEATURES, GraphContext

__all__ = ["DopplerPolicy", "Encoded", "MPNNEncoder", "PlacementPolicy", "SelectionPolicy", "standardise"]


def standardise(x: Tensor, dim: int = 0) -> Tensor:
    """Each column of `x` (R, C) minus its mean over the rows, over its standard deviation (+1e-6): DOPPLER's
    ``normalize_feat_state``. A single row becomes zeros. ``dim`` = 1 on a batch (B, R, C): each item's rows."""
    return (x - x.mean(dim=dim, keepdim=True)) / (x.std(dim=dim, unbiased=False, keepdim=True) + 1e-6)


def _init(layer: nn.Linear) -> nn.Linear:
    """DOPPLER's ``layer_init``: orthogonal weights, zero bias."""
    nn.init.orthogonal_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class MPNNEncoder(nn.Module):
    """dgllife's ``MPNNGNN``: ``h0 = ReLU(W x)``, then ``num_layers`` times ``m_i = ReLU(sum_{j->i} h_j Theta(e_ji) +
    b)``, ``h = GRU(m, h)``, where ``Theta`` is a small network that turns an edge's features into an H x H matrix
    (an edge-conditioned convolution, DGL's ``NNConv`` with sum aggregation and no self term).

    An edge's matrix depends on its features alone, and a graph's edges have few distinct features (DOPPLER's is
    its tensor's transfer time: one value per tensor size), so the network turns each distinct feature into its
    matrix once per forward pass, for every step, and each step multiplies the messages of all the edges that
    share a matrix in one product: the same numbers as DGL's per-edge products up to float rounding, for a
    fraction of the work (benchmarks/performance/doppler_encoder.py). Where most edges' features differ, each edge
    takes its own matrix in one batched product (`GROUPED_BELOW`).

    Args:
        in_channels: F, node feature width; hidden_channels: H; edge_channels: edge feature width;
        num_layers: message-passing steps (DOPPLER: 6).

    Shapes: x (N, F), edge_index (2, E), edge_attr (E, edge_channels) -> (N, H).
    """

    #: The edges share matrices in groups while distinct features are fewer than this share of the edges; above
    #: it, one matrix product per group costs more than one batched product over the edges' own matrices.
    GROUPED_BELOW = 0.25

    def __init__(self, in_channels: int, hidden_channels: int, edge_channels: int = 1, num_layers: int = 6) -> None:
        super().__init__()
        self.project = nn.Sequential(nn.Linear(in_channels, hidden_channels), nn.ReLU())
        self.edge_network = nn.Sequential(nn.Linear(edge_channels, hidden_channels), nn.ReLU(),
                                          nn.Linear(hidden_channels, hidden_channels * hidden_channels))
        self.bias = nn.Parameter(torch.zeros(hidden_channels))
        self.gru = nn.GRU(hidden_channels, hidden_channels)
        self.hidden_channels, self.num_layers = hidden_channels, num_layers

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        h = self.project(x)
        n, width = h.shape
        if edge_attr.shape[1] == 1:  # one number per edge (DOPPLER's): unique values, far faster than unique rows
            values, kind = torch.unique(edge_attr.view(-1), return_inverse=True)
            features = values.unsqueeze(1)  # (U, 1)
        else:
            features, kind = torch.unique(edge_attr, dim=0, return_inverse=True)  # (U, edge_channels), (E,)
        theta = self.edge_network(features).view(-1, width, width)  # (U, H, H), once for every step
        grouped = features.shape[0] < self.GROUPED_BELOW * kind.numel()
        if grouped:  # the edges in order of their matrix: group u is the next counts[u] edges
            order = torch.argsort(kind, stable=True)
            src, dst = edge_index[:, order]
            counts = torch.bincount(kind, minlength=features.shape[0]).tolist()
        else:
            src, dst = edge_index
            theta = theta[kind]  # (E, H, H)
        hidden = h.unsqueeze(0)
        for _ in range(self.num_layers):
            if grouped:
                message = torch.cat([h_u @ theta_u for h_u, theta_u in zip(h[src].split(counts), theta.unbind(0))])
            else:
                message = torch.bmm(h[src].unsqueeze(1), theta).squeeze(1)  # (E, H)
            summed = torch.zeros(n, width, dtype=h.dtype).index_add(0, dst, message) + self.bias
            h, hidden = self.gru(torch.relu(summed).unsqueeze(0), hidden)
            h = h.squeeze(0)
        return h


@dataclass
class Encoded:
    """One policy's per-episode encoding of a graph (DOPPLER computes it at an episode's first step and reuses it).

    Attributes: embedding (N, H); bottom, top (N, H) the summed embeddings of each op's longest path to a sink /
    from a source, standardised over the ops (SEL only); latent (N, H) the op features through a layer (PLC only).
    """

    embedding: Tensor
    bottom: Tensor | None = None
    top: Tensor | None = None
    latent: Tensor | None = None

    def detached(self) -> "Encoded":
        """The same tensors outside autograd (what an episode's step-by-step decisions read)."""
        return Encoded(*(None if t is None else t.detach() for t in (self.embedding, self.bottom, self.top,
                                                                     self.latent)))


class SelectionPolicy(nn.Module):
    """SEL: which ready op next (module docstring). Args: hidden_channels H, head_channels (DOPPLER: 64),
    num_layers of the encoder."""

    def __init__(self, hidden_channels: int, head_channels: int, num_layers: int) -> None:
        super().__init__()
        f = len(NODE_FEATURES)
        self.encoder = MPNNEncoder(f, hidden_channels, 1, num_layers)
        self.features = _init(nn.Linear(f, hidden_channels))
        self.hidden = _init(nn.Linear(4 * hidden_channels, head_channels))
        self.out = _init(nn.Linear(head_channels, 1))
        self.act = nn.LeakyReLU(0.1)

    def encode(self, graph: GraphContext) -> Encoded:
        h = self.act(self.encoder(standardise(graph.node_features), graph.message_index, graph.message_features))
        return Encoded(h, standardise(torch.sparse.mm(graph.bottom_path, h)),
                       standardise(torch.sparse.mm(graph.top_path, h)))

    def logits(self, graph: GraphContext, encoded: Encoded, ready: Tensor) -> Tensor:
        """(R,) a score per op of `ready` (R,) int64."""
        latent = self.act(self.features(standardise(graph.node_features[ready])))
        x = torch.cat([latent, encoded.embedding[ready], standardise(encoded.bottom[ready]),
                       standardise(encoded.top[ready])], dim=1)
        return self.out(self.act(self.hidden(x))).view(-1)

    def batch_logits(self, graph: GraphContext, encoded: Encoded, ready: Tensor) -> Tensor:
        """(K, R) `logits` of K steps at once that had as many ready ops: `ready` (K, R) int64 (each step's ops
        standardised on their own, by the same reduction as one step's)."""
        latent = self.act(self.features(standardise(graph.node_features[ready], dim=1)))
        x = torch.cat([latent, encoded.embedding[ready], standardise(encoded.bottom[ready], dim=1),
                       standardise(encoded.top[ready], dim=1)], dim=2)
        return self.out(self.act(self.hidden(x))).squeeze(2)


class PlacementPolicy(nn.Module):
    """PLC: which device for the chosen op (module docstring). Args as `SelectionPolicy`, and device_features K,
    the width of the observation's static device description."""

    def __init__(self, hidden_channels: int, head_channels: int, num_layers: int, device_features: int) -> None:
        super().__init__()
        f = len(NODE_FEATURES)
        self.encoder = MPNNEncoder(f, hidden_channels, 1, num_layers)
        self.device = _init(nn.Linear(len(DEVICE_STATE) + device_features, hidden_channels))
        self.features = _init(nn.Linear(f, hidden_channels))
        self.hidden = _init(nn.Linear(4 * hidden_channels, head_channels))
        self.out = _init(nn.Linear(head_channels, 1))
        self.act = nn.LeakyReLU(0.1)

    def encode(self, graph: GraphContext) -> Encoded:
        x = standardise(graph.node_features)
        h = self.act(self.encoder(x, graph.message_index, graph.message_features))
        return Encoded(h, latent=self.act(self.features(x)))

    def logits(self, graph: GraphContext, encoded: Encoded, op: int, state: np.ndarray, placed: Tensor,
               mask: np.ndarray) -> Tensor:
        """(D,) a score per device for `op`: `state` (D, 7) its `DEVICE_STATE`, `placed` (D, N) 0/1 which ops each
        device holds; -inf where `mask` (D,) bool (the op's action mask, less the devices the episode shut out)
        forbids the device."""
        d = state.shape[0]
        device = torch.cat([torch.as_tensor(state, dtype=torch.float32), graph.device_features], dim=1)
        on_device = standardise(placed @ encoded.embedding)  # (D, H) the ops placed there, summed
        x = torch.cat([self.act(self.device(standardise(device))), encoded.latent[op].expand(d, -1),
                       encoded.embedding[op].expand(d, -1), on_device], dim=1)
        scores = self.out(self.act(self.hidden(x))).view(-1)
        allowed = torch.as_tensor(mask)
        return scores.masked_fill(~allowed, float("-inf")) if bool(allowed.any()) else scores

    def batch_logits(self, graph: GraphContext, encoded: Encoded, ops: Tensor, states: Tensor,
                     placed: Tensor, masks: Tensor) -> Tensor:
        """(P, D) `logits` of P decisions at once: `ops` (P,), `states` (P, D, 7), `placed` (P, D, N), `masks`
        (P, D) bool as each decision saw them (each decision's devices standardised on their own)."""
        p, d, _ = states.shape
        device = torch.cat([states.to(torch.float32), graph.device_features.expand(p, -1, -1)], dim=2)
        # The summed embeddings of the ops on each device (P, D, H), summed and standardised one decision at a time
        # by the same products and reductions as a step's: two devices can hold sums equal but for rounding (as
        # many ops of equal embedding), where the standard deviation is rounding and its gradient large, so only
        # the same arithmetic gives a step's gradient.
        on_device = torch.stack([standardise(placed[k] @ encoded.embedding) for k in range(p)])
        x = torch.cat([self.act(self.device(standardise(device, dim=1))),
                       encoded.latent[ops].unsqueeze(1).expand(-1, d, -1),
                       encoded.embedding[ops].unsqueeze(1).expand(-1, d, -1), on_device], dim=2)
        scores = self.out(self.act(self.hidden(x))).squeeze(2)
        allowed = masks | ~masks.any(dim=1, keepdim=True)  # an op no device may run: every device scored
        return scores.masked_fill(~allowed, float("-inf"))


class DopplerPolicy(nn.Module):
    """Both policies (what a checkpoint holds). Args: spec (its ``device_features`` width K), hidden_channels,
    head_channels, num_layers (`agents.doppler.DopplerSettings`)."""

    def __init__(self, spec: PolicySpec, hidden_channels: int = 64, head_channels: int = 64,
                 num_layers: int = 6) -> None:
        super().__init__()
        self.selection = SelectionPolicy(hidden_channels, head_channels, num_layers)
        self.placement = PlacementPolicy(hidden_channels, head_channels, num_layers, spec.device_features)
