"""Placeto-like policy: embed the whole graph by directed message passing, then pick the current node's device.

Placeto (Addanki et al., NeurIPS 2019) places a graph node by node: at each step it re-embeds the graph with
the placement so far (message passing over the DAG), reads the embedding of the node it is about to place and
chooses that node's device. Here the node inputs are the env's node features, what the current device of every
placed op is (its device features, `agents.algos.sb3.placement_input_features`), and the ``current_node`` /
``visited`` marks of `DevicePlacementNode-v0`; the encoder is the shared `agents.nn.gnn.DirectedGNN`
(producers and consumers with separate weights, as Placeto's parent/child aggregations). The device comes from
the shared device head (`agents.nn.device_head.DeviceScorer`: the node's embedding against the device
features, the summed costs of the node's ops and their action mask), so no graph size or device count is built
into the weights.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter

from agents.core.base import PolicySpec
from agents.nn.device_head import DeviceScorer, group_costs
from agents.nn.gnn import DirectedGNN
from agents.nn.graph_batch import obs_to_batch
from agents.nn.policy import PolicySample, categorical_log_prob, sample_categorical
from agents.algos.sb3 import placement_input_features, placement_input_width

__all__ = ["PlacetoPolicy"]


class PlacetoPolicy(nn.Module):
    """Device of the current node given the graph, the placement so far and which nodes were visited.

    Args:
        spec: sizes from the env (`PolicySpec`): F node features, Fe edge features, K device features.
        hidden_channels: embedding width H.
        num_layers: message-passing layers of the encoder.
        directed: separate producer/consumer weights in the encoder.

    ``act(obs)`` takes ONE node-level observation (numpy or torch): the `DevicePlacementNode-v0` Dict, i.e.
    the `DevicePlacement-v0` keys plus ``current_node`` (N,) and ``visited`` (N,). The current node may be
    a group of ops: its embedding is the mean over its ops.
    """

    def __init__(self, spec: PolicySpec, hidden_channels: int = 64, num_layers: int = 3, directed: bool = True) -> None:
        super().__init__()
        self.device_features, self.default_devices = spec.device_features, spec.n_devices
        in_channels = placement_input_width(spec.node_features, spec.device_features, node_level=True)
        self.encoder = DirectedGNN(in_channels, hidden_channels, num_layers, edge_dim=spec.edge_features, directed=directed)
        # [current node, mean over the graph, max over the graph] -> a hidden layer -> the device head, which
        # starts near-uniform: a random initial preference for one device would make the result depend on the
        # order the devices are listed in.
        self.body = nn.Sequential(nn.Linear(3 * hidden_channels, hidden_channels), nn.ReLU())
        self.head = DeviceScorer(hidden_channels, spec.device_features, hidden_channels)

    def logits(self, obs: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        """(B, D) device logits for the current node of each of B node-level observations (one observation:
        B = 1; a batch: arrays with a leading B, e.g. the steps of one episode scored at once), and the (B, 3H)
        summaries they were read from ([current node, mean over the graph, max over the graph])."""
        for key in ("current_node", "visited"):
            if key not in obs:
                raise ValueError(f"PlacetoPolicy needs the node-by-node observation (DevicePlacementNode-v0) with "
                                 f"'current_node' and 'visited'; got keys {sorted(obs)}")
        device = next(self.parameters()).device
        batch = obs_to_batch(obs, device=device)
        b = batch.num_graphs
        x = placement_input_features(batch, obs, self.device_features)
        h = self.encoder(x, batch.edge_index, batch.edge_attr)  # (sumN, H)
        current = x[:, -2:-1]  # the current_node column (see placement_input_features)
        marked = scatter(current, batch.batch, 0, dim_size=b, reduce="sum")  # (B, 1) ops of each current node
        if bool((marked == 0).any()):
            raise ValueError("the observation marks no current node (the episode is over): reset the env")
        node = scatter(h * current, batch.batch, 0, dim_size=b, reduce="sum") / marked
        summary = torch.cat([node, scatter(h, batch.batch, 0, dim_size=b, reduce="mean"),
                             scatter(h, batch.batch, 0, dim_size=b, reduce="max")], dim=-1)  # (B, 3H)
        # Each current node (a group of ops) is one item of its own graph: its ops' summed costs, the AND of their
        # masks. One item per graph makes the head's cost-share feature constant; the relative and absolute
        # costs still tell.
        chosen = current.squeeze(-1) > 0
        cost, mask = group_costs(batch.node_cost, batch.action_mask, batch.batch.masked_fill(~chosen, b), b + 1)
        cost, mask = (None if cost is None else cost[:b]), (None if mask is None else mask[:b])
        graph = torch.arange(b, device=device)
        total = None if batch.node_cost is None else scatter(batch.node_cost, batch.batch, 0, dim_size=b, reduce="sum")
        return (self.head(self.body(summary), batch.device_features, cost, mask, self.default_devices, graph=graph,
                          graph_total=total), summary)

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        """`num_samples` devices for the current node: actions (K,), log_prob (K,), entropy (), embedding (3H,)."""
        logits, summary = self.logits(obs)
        if logits.shape[0] != 1:
            raise ValueError(f"act() takes one observation, got a batch of {logits.shape[0]}")
        actions, log_prob, entropy = sample_categorical(logits, num_samples, deterministic)
        return PolicySample(actions=actions[:, 0], log_prob=log_prob, entropy=entropy, embedding=summary[0])

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        """`taken`'s devices for the current node of `obs`, scored under the current weights."""
        logits, summary = self.logits(obs)
        log_prob, entropy = categorical_log_prob(logits, taken.actions.view(-1, 1))
        return PolicySample(actions=taken.actions, log_prob=log_prob, entropy=entropy, embedding=summary[0])
