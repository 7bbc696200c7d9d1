"""The GO policy network: bidirectional GraphSAGE encoder -> segment-recurrent attention -> device head.

::

    obs --obs_to_batch-->          x (N, F), edges (2, E), ops in topological order (`ComputationGraph`)
        --DirectedGNN-->            h (N, H)   GraphSAGE-style: self + mean over producers + mean over consumers
        --SegmentRecurrentAttention--> z (N, H)   segments of L ops; each attends to itself and to the cached,
                                                  detached states of the segment before it (Transformer-XL)
        --DeviceScorer-->           logits (N, D) from z, device features, per-op costs and the action mask
        --sample_categorical-->     placements (K, N): every op's device in one pass

Nothing here has the number of ops or devices in its weights: the encoder and the attention act per op and
per segment, the head scores (op, device) pairs from what the observation says about each device. So one set
of weights places a graph of any size on any device set (Zhou et al., NeurIPS 2020, "Transferable Graph
Optimizers for ML Compilers").

Why `agents.nn.gnn.DirectedGNN` rather than PyG's ``SAGEConv`` pair: with ``aggr="mean"`` its layer is
``W_self h_i + mean_{j->i} W_fwd [h_j, e_ji] + mean_{i->k} W_bwd [h_k, e_ik]``, i.e. GraphSAGE's mean
aggregator over both edge directions with separate weights, plus the tensor sizes on the edges (what a cut
costs), and it is the encoder every other graph agent shares.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from agents.core.base import PolicySpec
from agents.nn.device_head import DeviceScorer, Devices
from agents.nn.gnn import MLP, DirectedGNN
from agents.nn.graph_batch import GraphBatch, obs_to_batch
from agents.nn.refine import OpRefiner
from agents.nn.policy import (
    PolicySample, categorical_log_prob, first_of_groups, group_majority, group_mean_logits, sample_categorical,
    with_uniform_share,
)
from placement_gym.wrappers import contiguous_groups

__all__ = ["GOPolicy", "SegmentRecurrentAttention"]


class SegmentRecurrentAttention(nn.Module):
    """Attention over ops in topological order, one segment of `segment_length` ops at a time, with the previous
    segment's states as a read-only memory (Transformer-XL's segment-level recurrence, Dai et al. 2019).

    For layer l and segment s (queries: the segment's ops; keys/values: the previous segment of the same graph,
    detached, then the segment itself)::

        m = stop_gradient(z^{l-1}_{s-1})                    (L, H); absent for a graph's first segment
        a = MultiHeadAttention(z^{l-1}_s, [m; z^{l-1}_s])  (L, H)
        z^l_s = LN(u + FFN(u)),  u = LN(z^{l-1}_s + a)

    Within a segment attention goes both ways (all ops of a placement are decided at once); across segments
    information flows forward in topological order, `num_layers` segments deep. Every segment of every layer is
    computed at once (a batch of segments): the memory of segment s at layer l is segment s-1's layer-(l-1)
    output, already there when layer l starts, so this equals the sequential recurrence. Cost per layer:
    O(N * 2L * H), linear in the graph's size.

    Args:
        channels: H.
        heads: attention heads (H must be divisible by it).
        num_layers: attention layers.
        segment_length: L, ops per segment.
        dropout: dropout inside attention and the feed-forward block.

    Shapes: h (N, H), batch (N,) graph of each op, ptr (B + 1,) node offsets (`GraphBatch`) -> (N, H).
    Ops of each graph must be contiguous and in topological order (what `obs_to_batch` gives).
    """

    def __init__(self, channels: int, heads: int = 4, num_layers: int = 2, segment_length: int = 128,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if segment_length < 1:
            raise ValueError(f"segment_length must be >= 1, got {segment_length}")
        if channels % heads:
            raise ValueError(f"the width {channels} must be divisible by the number of heads {heads}")
        self.segment_length = segment_length
        self.attention = nn.ModuleList(nn.MultiheadAttention(channels, heads, dropout=dropout, batch_first=True)
                                       for _ in range(num_layers))
        self.feed_forward = nn.ModuleList(MLP(channels, 2 * channels, channels, num_layers=2, dropout=dropout)
                                          for _ in range(num_layers))
        self.norm_attention = nn.ModuleList(nn.LayerNorm(channels) for _ in range(num_layers))
        self.norm_feed_forward = nn.ModuleList(nn.LayerNorm(channels) for _ in range(num_layers))

    def segments(self, batch: Tensor, ptr: Tensor) -> tuple[Tensor, Tensor, Tensor, int]:
        """Where each op goes in the dense (S, L) segment layout: segment (N,), slot (N,), the index of the
        segment before each segment (S,) (-1 for a graph's first), and S."""
        length = self.segment_length
        position = torch.arange(batch.shape[0], device=batch.device) - ptr[batch]
        counts = ptr[1:] - ptr[:-1]
        per_graph = (counts + length - 1) // length  # (B,) segments of each graph
        first = torch.cumsum(per_graph, 0) - per_graph  # (B,) index of each graph's first segment
        segment = first[batch] + position // length
        n_segments = int(per_graph.sum())
        owner = torch.repeat_interleave(torch.arange(len(counts), device=batch.device), per_graph)  # (S,)
        index = torch.arange(n_segments, device=batch.device)
        previous = torch.where(index > first[owner], index - 1, torch.full_like(index, -1))
        return segment, position % length, previous, n_segments

    def forward(self, h: Tensor, batch: Tensor, ptr: Tensor) -> Tensor:
        if h.shape[0] == 0:
            return h
        segment, slot, previous, s = self.segments(batch, ptr)
        length = self.segment_length
        z = h.new_zeros(s, length, h.shape[-1])
        z[segment, slot] = h
        padding = torch.ones(s, length, dtype=torch.bool, device=h.device)
        padding[segment, slot] = False
        has_memory = previous >= 0
        memory_padding = padding[previous.clamp_min(0)] | ~has_memory.unsqueeze(1)  # (S, L)
        key_padding = torch.cat([memory_padding, padding], dim=1)  # (S, 2L)
        for attention, norm_a, feed_forward, norm_f in zip(self.attention, self.norm_attention, self.feed_forward,
                                                           self.norm_feed_forward):
            memory = z.detach()[previous.clamp_min(0)]  # cached states of the segment before: no gradient
            keys = torch.cat([memory, z], dim=1)  # (S, 2L, H)
            attended, _ = attention(z, keys, keys, key_padding_mask=key_padding, need_weights=False)
            u = norm_a(z + attended)
            z = norm_f(u + feed_forward(u))
        return z[segment, slot]


class GOPolicy(nn.Module):
    """Encoder + segment-recurrent attention + device head (module docstring), following `agents.nn.policy`.

    Args:
        spec: sizes from the env (`PolicySpec`); only the feature widths are used (node, edge, device).
        hidden_channels: H.
        num_layers: message-passing layers of the encoder.
        attention_layers: layers of `SegmentRecurrentAttention`.
        heads: attention heads.
        segment_length: L, ops per segment.
        use_edge_features: give the encoder the tensor sizes on the edges.
        dropout: dropout in the attention layers.
        graph_cost: the device head's whole-graph cost term (`agents.nn.device_head.DeviceScorer`), built with
            the policy (the other agents' heads get it on their first run over many graphs).

    Search groups (`set_groups`, `split`; GO's single-graph search, `agents.go.GOAgent`'s ``search_groups``):
    with G > 0 groups the policy draws one device per contiguous group of ops (a group's logits are the mean of
    its ops', as `agents.algos.sb3.GroupedMultiCategoricalDistribution` does), and `split` halves the groups
    (coarse to fine, `agents.search.coarse_to_fine`), down to one per op; G = 0 (default): every op on its own,
    the paper's. The head's ``graph_cost_scale`` multiplies the whole-graph cost term (1: on); ``explore`` keeps a
    uniform share in every decision (`_grouped`; 0: off). All three are buffers, saved with the weights.
    """

    def __init__(self, spec: PolicySpec, hidden_channels: int = 64, num_layers: int = 3, attention_layers: int = 2,
                 heads: int = 4, segment_length: int = 128, use_edge_features: bool = True, dropout: float = 0.0,
                 graph_cost: bool = True) -> None:
        super().__init__()
        self.spec = spec
        edge_dim = spec.edge_features if use_edge_features else 0
        self.encoder = DirectedGNN(spec.node_features, hidden_channels, num_layers, edge_dim=edge_dim)
        self.attention = SegmentRecurrentAttention(hidden_channels, heads, attention_layers, segment_length, dropout)
        self.head = DeviceScorer(hidden_channels, spec.device_features, hidden_channels)
        # The whole-graph cost term (`agents.nn.device_head`, module docstring). Its start was chosen with GO
        # trained on dataset:train (paper), zero-shot against the best single device over the test graphs: from
        # 0 or -1 every graph ended on the CPU, and -3 held only for some training lengths once the head had its
        # LayerNorm. From -10 since (the device head's docstring: from -3 some training seeds on edge put graphs
        # on the accelerator).
        if graph_cost:
            self.head.enable_graph_cost()
        self.refiner: OpRefiner | None = None  # `enable_refiner`
        self.hidden_channels = hidden_channels
        self.register_buffer("n_groups", torch.tensor(0))  # 0: per op; G: one decision per contiguous group
        self.register_buffer("explore", torch.tensor(0.0))  # decisions redrawn uniformly per placement (`_grouped`)
        self._groups_cache: dict[int, Tensor] = {}
        self._largest = 0  # ops of the largest graph placed so far: where splitting ends

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before the search groups: per op, the whole-graph cost term on.
        state_dict.setdefault(prefix + "n_groups", torch.tensor(0))
        # The whole-graph cost term was GO's before it was the shared head's.
        for key in ("graph_cost.weight", "graph_cost_scale"):
            if prefix + key in state_dict:
                state_dict[prefix + "head." + key] = state_dict.pop(prefix + key)
        state_dict.setdefault(prefix + "explore", torch.tensor(0.0))
        # The zero-shot override was a buffer of GO's before every agent had it (`agents.core.run`, "Zero-shot";
        # whether it is on is now the checkpoint's, `agents.core.checkpoint.restore_run_state`).
        state_dict.pop(prefix + "zero_shot_override", None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._groups_cache = {}

    def set_groups(self, n_groups: int) -> None:
        """Decide per `n_groups` contiguous groups of ops from now on (0: per op)."""
        if n_groups < 0:
            raise ValueError(f"n_groups must be >= 0 (0: per op), got {n_groups}")
        self.n_groups.fill_(int(n_groups))
        self._groups_cache = {}

    def groups_for(self, n_ops: int) -> Tensor | None:
        """(N,) int64 group of every op of an `n_ops`-op graph (min(G, N) contiguous chunks); None when per op."""
        g = int(self.n_groups)
        self._largest = max(self._largest, n_ops)
        if g == 0 or g >= n_ops:
            return None
        if n_ops not in self._groups_cache:
            self._groups_cache[n_ops] = torch.as_tensor(contiguous_groups(n_ops, g),
                                                        device=self.n_groups.device)
        return self._groups_cache[n_ops]

    @torch.no_grad()
    def split(self) -> bool:
        """Halve the groups (coarse to fine; at a graph's size the policy is per op); False when per op already."""
        g = int(self.n_groups)
        if g == 0:
            return False
        self.set_groups(0 if self._largest and 2 * g >= self._largest else 2 * g)
        return True

    def _grouped(self, logits: Tensor) -> tuple[Tensor, Tensor | None]:
        """(G, D) each decision's logits and the (N,) groups (None when per op).

        A group's logits are the mean of its ops'. With ``explore`` = e > 0 each of the G decisions is drawn
        from (1 - e/G) softmax + (e/G) uniform (`with_uniform_share`, returned as its log): PPO otherwise collapsed
        GO's group distributions early in a run, so after a split no sample ever moved a group boundary."""
        groups = self.groups_for(logits.shape[0])
        decisions = logits
        if groups is not None:
            decisions = group_mean_logits(logits, groups)
        return with_uniform_share(decisions, float(self.explore)), groups

    def logits(self, obs: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        """Logits (N, D) of every op over the devices, and the op embeddings z (N, H), for one graph."""
        return self._forward(obs)[:2]

    def _forward(self, obs: Mapping[str, Any]) -> tuple[Tensor, Tensor, GraphBatch]:
        batch = obs_to_batch(obs, device=next(self.parameters()).device)
        if batch.num_graphs != 1:
            raise ValueError(f"GOPolicy places one graph per call; got a batch of {batch.num_graphs} observations")
        return (*self._logits(batch), batch)

    def _logits(self, batch: GraphBatch) -> tuple[Tensor, Tensor]:
        h = self.encoder(batch.x, batch.edge_index, batch.edge_attr)
        z = self.attention(h, batch.batch, batch.ptr)
        features = None if batch.device_features is None else batch.device_features[0]
        # The spec's device count is only a fallback for observations without device features or costs.
        logits = self.head(z, features, batch.node_cost, batch.action_mask, n_devices=self.spec.n_devices)
        return logits, z

    @torch.no_grad()
    def enable_refiner(self) -> None:
        """Add the per-op refinement stage with boundary moves (`agents.nn.refine.OpRefiner`) after the
        device decisions (GO's single-graph search: a learned local search that moves the cut of the groups'
        placement op by op). Built on demand, so a GO without it keeps its weights, checkpoints and random draws."""
        if self.refiner is None:  # on the device of the policy's parameters (torch's meta device while a
            # checkpoint's shapes are checked: `agents.core.checkpoint.check_tensor_shapes`)
            self.refiner = OpRefiner(self.hidden_channels, self.hidden_channels, self.spec.device_features,
                                     boundary=True).to(next(self.parameters()).device)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        if self.refiner is None and any(key.startswith("refiner.") for key in state_dict):
            self.enable_refiner()  # saved after a single-graph search
        return super().load_state_dict(state_dict, strict, assign)

    def _refine(self, z: Tensor, batch: GraphBatch, group_devices: Tensor, deterministic: bool = False,
                path: Tensor | None = None) -> tuple[Tensor, Tensor | float, Tensor | None]:
        """The refinement stage on the decisions' placements (K, N): op devices (K, N), their log-probability
        (K,) (0 without a refiner) and the rounds' path (K, R, N)."""
        if self.refiner is None:
            return group_devices, 0.0, None
        return self.refiner(z, group_devices, Devices.of_ops(batch, self.spec.n_devices), deterministic, path,
                            batch.edge_index)

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        """`num_samples` placements of one graph from one forward pass.

        Returns a `PolicySample`: actions (K, N) int64, log_prob (K,), entropy () per decision, and [mean, max] of
        the op embeddings (2H,) as ``embedding`` (a critic's input); with groups or the refinement stage the
        decisions' placement (K, N) and the refinement's path are in ``replay``."""
        logits, z, batch = self._forward(obs)
        decisions, groups = self._grouped(logits)
        actions, log_prob, entropy = sample_categorical(decisions, num_samples, deterministic)
        if groups is not None:
            actions = actions[:, groups]  # every op takes its group's device
        replay = {"decided": actions}
        actions, refine_log_prob, replay["refine_path"] = self._refine(z, batch, actions, deterministic)
        return PolicySample(actions, log_prob + refine_log_prob, entropy,
                            {"n_ops": float(logits.shape[0]), "n_groups": float(decisions.shape[0])},
                            replay=replay, embedding=torch.cat([z.mean(0), z.amax(0)]),
                            decisions=float(decisions.shape[0]))

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        """`taken`'s placements (an earlier ``act`` on `obs`) re-scored under the current weights (and the
        current groups: a split keeps a coarse placement expressible)."""
        logits, z, batch = self._forward(obs)
        decisions, groups = self._grouped(logits)
        decided = taken.replay.get("decided", taken.actions)
        log_prob, entropy = categorical_log_prob(decisions, decided if groups is None else decided[:, first_of_groups(groups)])
        path = taken.replay.get("refine_path")
        if self.refiner is not None and path is not None:
            log_prob = log_prob + self._refine(z, batch, decided, path=path)[1]
        return PolicySample(taken.actions, log_prob, entropy, replay=taken.replay,
                            embedding=torch.cat([z.mean(0), z.amax(0)]), decisions=float(decisions.shape[0]))

    def placement_log_prob(self, obs: Mapping[str, Any], placement: np.ndarray) -> Tensor:
        """() mean log-probability per decision that the policy places `placement` (N,) (differentiable): what
        the self-imitation term and the final distillation raise. With groups each group is scored by its ops'
        majority device; with the refinement stage, plus its mean log-probability of reaching `placement` from
        the groups' placement."""
        logits, z, batch = self._forward(obs)
        decisions, groups = self._grouped(logits)
        target = torch.as_tensor(np.asarray(placement), dtype=torch.long, device=logits.device)
        decided = target
        if groups is not None:
            majority = group_majority(groups.cpu().numpy(), placement, logits.shape[1], obs.get("action_mask"))
            decided = torch.as_tensor(majority, device=logits.device)
        log_prob = torch.log_softmax(decisions, -1).gather(1, decided.view(-1, 1)).mean()
        if self.refiner is None:
            return log_prob
        per_op = decided if groups is None else decided[groups]
        return log_prob + self.refiner.mean_log_prob(z, per_op, target, Devices.of_ops(batch, self.spec.n_devices),
                                                     batch.edge_index)
