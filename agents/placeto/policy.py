"""Placeto-like policy: embed the whole graph by directed message passing, then pick the current node's device.

Placeto (Addanki et al., NeurIPS 2019) places a graph node by node: at each step it re-embeds the graph with
the placement so far (message passing over the DAG), reads the embedding of the node it is about to place and
chooses that node's device. Here the node inputs are the env's node features, the one-hot current device of
every op, and the ``current_node`` / ``visited`` marks of `DevicePlacementNode-v0`; the encoder is the shared
`agents.common.gnn.DirectedGNN` (producers and consumers with separate weights, as Placeto's parent/child
aggregations).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn

from agents.common.base import PolicySpec
from agents.common.gnn import MLP, DirectedGNN
from agents.common.graph_batch import obs_to_batch
from agents.common.policy import PolicySample, categorical_log_prob, sample_categorical
from agents.common.sb3 import placement_input_features

__all__ = ["PlacetoPolicy"]


class PlacetoPolicy(nn.Module):
    """Device of the current node given the graph, the placement so far and which nodes were visited.

    Args:
        spec: sizes from the env (`PolicySpec`): F node features, Fe edge features, D devices.
        hidden_dim: embedding width H.
        n_layers: message-passing layers of the encoder.
        directed: separate producer/consumer weights in the encoder.

    ``act(obs)`` takes ONE node-level observation (numpy or torch): the `DevicePlacementNode-v0` Dict, i.e.
    the `DevicePlacement-v0` keys plus ``current_node`` (N,) and ``visited`` (N,). The current node may be
    a group of ops: its embedding is the mean over its ops.
    """

    def __init__(self, spec: PolicySpec, hidden_dim: int = 64, n_layers: int = 3, directed: bool = True) -> None:
        super().__init__()
        self.n_devices = spec.n_devices
        in_channels = spec.node_features + spec.n_devices + 2  # features, one-hot device, current, visited
        self.encoder = DirectedGNN(in_channels, hidden_dim, n_layers, edge_dim=spec.edge_features, directed=directed)
        # [current node, mean over the graph, max over the graph] -> device logits
        self.head = MLP(3 * hidden_dim, hidden_dim, spec.n_devices, num_layers=2)
        # Start from a near-uniform device distribution: a random initial preference for one device index would
        # make the result depend on the order the devices are listed in (as HSDAG's placer does).
        nn.init.normal_(self.head[-1].weight, std=0.01)
        nn.init.zeros_(self.head[-1].bias)

    def logits(self, obs: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        """(1, D) device logits for the current node of `obs`, and the (3H,) summary they were read from
        ([current node, mean over the graph, max over the graph])."""
        for key in ("current_node", "visited"):
            if key not in obs:
                raise ValueError(f"PlacetoPolicy needs the node-by-node observation (DevicePlacementNode-v0) with "
                                 f"'current_node' and 'visited'; got keys {sorted(obs)}")
        device = next(self.parameters()).device
        batch = obs_to_batch(obs, device=device)
        if batch.num_graphs != 1:
            raise ValueError(f"act() takes one observation, got a batch of {batch.num_graphs}")
        x = placement_input_features(batch, obs, self.n_devices)
        h = self.encoder(x, batch.edge_index, batch.edge_attr)  # (N, H)
        current = x[:, -2:-1]  # the current_node column (see placement_input_features)
        if float(current.sum()) == 0:
            raise ValueError("the observation marks no current node (the episode is over): reset the env")
        node = (h * current).sum(0) / current.sum()
        summary = torch.cat([node, h.mean(0), h.amax(0)])
        return self.head(summary).unsqueeze(0), summary

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        """`num_samples` devices for the current node: actions (K,), log_prob (K,), entropy (), embedding (3H,)."""
        logits, summary = self.logits(obs)
        actions, log_prob, entropy = sample_categorical(logits, num_samples, deterministic)
        return PolicySample(actions=actions[:, 0], log_prob=log_prob, entropy=entropy, embedding=summary)

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        """`taken`'s devices for the current node of `obs`, scored under the current weights."""
        logits, summary = self.logits(obs)
        log_prob, entropy = categorical_log_prob(logits, taken.actions.view(-1, 1))
        return PolicySample(actions=taken.actions, log_prob=log_prob, entropy=entropy, embedding=summary)
