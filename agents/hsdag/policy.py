"""The HSDAG policy network: directed GNN encoder -> graph-parsing pooling -> per-group placer.

::

    obs --obs_to_batch--> x (N, F), edges (2, E)
        --DirectedGNN-->      h (N, H)                  node embeddings (forward + backward message passing)
        --GraphParsingPool--> g (G, H), assignment (N,) groups; G decided by the learned edge scores
        --placer-->           logits (G, D)             a device distribution per group: an MLP on the group
                                                        embedding, scored against every device by the shared
                                                        device head (`DeviceScorer`: device features, the
                                                        group's summed op costs, its action mask)
        --sample-->           group devices (K, G) -> node devices (K, N) = group devices[:, assignment]

With stochastic parsing (training) each of the K samples parses the graph anew (one encoder pass for all K),
and its log-probability is that of its parsing choices plus that of its devices. Deterministic `act` (predict)
parses with the paper's argmax rule and takes each group's most likely device.

Without pooling (ablation) the placer reads every node embedding and places nodes independently.

No graph size or device count is built into the weights (the device head reads ``obs["device_features"]``,
``obs["node_device_cost"]`` and ``obs["action_mask"]``), so a trained policy places any graph on any device set;
groups never get a device that cannot run all their ops (unless no device can: `device_head.usable`).

Per-op refinement (``refine=True``; our addition, switchable; `agents.nn.refine.OpRefiner`): a group's
device goes to all its ops unless an op *overrides* it with a learned, initially tiny, probability. Groups come
from the parse, which knows nothing of where the best cut lies; without this stage a placement that splits a
group (e.g. "the last 33 ops of ResNet on the CPU" when the tail shares a group with earlier ops) is out of the
policy's reach, however long it trains.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import nn
from torch_geometric.utils import scatter

from agents.core.base import PolicySpec
from agents.nn.device_head import DeviceScorer, Devices
from agents.nn.gnn import DirectedGNN
from agents.nn.refine import OpRefiner
from agents.nn.graph_batch import obs_to_batch
from agents.nn.policy import (
    PolicySample, categorical_log_prob, group_majority, groups_at_device_boundary, sample_categorical,
    with_uniform_share,
)

from .pooling import GraphParsingPool, PoolResult

__all__ = ["HSDAGPolicy", "PLACE"]

#: What the placer decides a device for: every op, reading its own embedding plus its group's (``"op"``), or every
#: group, all its ops following (``"group"``).
PLACE = ("op", "group")


class HSDAGPolicy(nn.Module):
    """Encoder + pooling + placer, trained end to end.

    Args:
        spec: sizes from the env (`PolicySpec`: node/edge feature widths, number of devices).
        hidden_channels: embedding width H.
        num_layers: directed message-passing layers of the encoder.
        pooling: group nodes with `GraphParsingPool` (False: place every node on its own).
        max_levels: pooling levels cap (None = parse until nothing merges, the paper's rule).
        directed: keep edge direction in encoder and pooling (False: symmetrised, as the authors' code).
        use_edge_features: feed the tensor sizes on the edges to the encoder and the edge scorer.
        stochastic_parsing: sample the parsing choices while training (False: the paper's argmax rule always).
        stay_bias: initial learned bias on the self-loop (no-merge) logits of the pooling.
        refine: add the per-op refinement stage (module docstring).
        override_bias: initial logit of an op overriding its group's device (`OpRefiner`).
        refine_boundary: the refinement's boundary moves (`OpRefiner`'s ``boundary``).
        explore: about this many group decisions per placement drawn uniformly at random
            (`agents.nn.policy.with_uniform_share`; 0: off). A buffer, saved with the weights.
        boundary_explore: about this many decisions per placement drawn uniformly at random among the groups at a
            device boundary of the placement set by `explore_around` (the run's best; 0: off). A buffer.
    """

    def __init__(self, spec: PolicySpec, hidden_channels: int = 64, num_layers: int = 3, pooling: bool = True,
                 max_levels: int | None = None, directed: bool = True, use_edge_features: bool = True,
                 stochastic_parsing: bool = False, stay_bias: float = 0.0, refine: bool = False,
                 override_bias: float = -8.0, refine_boundary: bool = False, explore: float = 0.0,
                 boundary_explore: float = 0.0, place: str = "group") -> None:
        super().__init__()
        if explore < 0 or boundary_explore < 0:
            raise ValueError(f"explore and boundary_explore must be >= 0 (0: off), got {explore}, {boundary_explore}")
        if place not in PLACE:
            raise ValueError(f"place must be one of {PLACE}, got {place!r}")
        if place == "op" and stochastic_parsing:
            raise ValueError("stochastic_parsing trains the parse through group decisions: it needs place='group'")
        self.place = place
        self.spec = spec
        edge_dim = spec.edge_features if use_edge_features else 0
        self.encoder = DirectedGNN(spec.node_features, hidden_channels, num_layers, edge_dim=edge_dim, directed=directed)
        self.pool = (GraphParsingPool(hidden_channels, edge_dim, max_levels=max_levels, directed=directed, stay_bias=stay_bias)
                     if pooling else None)
        self.stochastic_parsing = stochastic_parsing
        # A hidden layer on the group embedding, then the shared device head (it starts near-uniform over the
        # devices, with small, not zero, weights: with zero weights no gradient would reach the encoder and the
        # pooling on the first update).
        self.placer_body = nn.Sequential(nn.Linear(hidden_channels, hidden_channels), nn.ReLU())
        self.placer = DeviceScorer(hidden_channels, spec.device_features, hidden_channels)
        self.refiner = (OpRefiner(hidden_channels, hidden_channels, spec.device_features, override_bias,
                                  boundary=refine_boundary) if refine else None)
        self.register_buffer("explore", torch.tensor(float(explore)))
        self.register_buffer("boundary_explore", torch.tensor(float(boundary_explore)))
        self.around: torch.Tensor | None = None  # (N,) the placement whose device boundaries get boundary_explore

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before the buffer: the share the policy was built with (as the pooling's level cap).
        state_dict.setdefault(prefix + "explore", self.explore.clone())
        state_dict.setdefault(prefix + "boundary_explore", self.boundary_explore.clone())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def split(self) -> bool:
        """Coarse to fine (``split_patience``, `agents.search.coarse_to_fine`): parse one pooling level fewer from
        now on, so every group splits into the groups of the level below (the levels nest: a placement constant on
        the coarser groups is constant on the finer), down to one group per op (level 0); False when already
        there, without pooling, or with no level cap (the paper's parse-until-nothing-merges rule). On ResNet-50
        at initialisation 3 / 2 / 1 / 0 levels are 13 / 31 / 55 / 176 groups, on Inception-V3 24 / 68 / 119 /
        310."""
        levels = None if self.pool is None else self.pool.max_levels
        if not levels:
            return False
        self.pool.max_levels = levels - 1
        return True

    def place_logits(self, x: torch.Tensor, devices: Devices, graph: torch.Tensor | None = None) -> torch.Tensor:
        """(M, D) device logits of M groups (or ops) with embeddings `x` (M, H) and their `devices`; `graph` (M,)
        says which parse each group belongs to when several are scored at once (cost shares per parse); with
        ``explore`` the uniform share is mixed in (decisions per parse: M over the parses)."""
        logits = self.placer(self.placer_body(x), devices.features, devices.cost, devices.mask, devices.n_devices,
                             graph=graph)
        parses = 1 if graph is None else int(graph.max()) + 1
        return with_uniform_share(logits, float(self.explore), max(1, logits.shape[0] // parses))

    def op_logits(self, h: torch.Tensor, pooled: PoolResult, ops: Devices) -> torch.Tensor:
        """(N, D) ``place="op"``: every op's device logits, from its embedding `h` (N, H) plus its group's."""
        return self.place_logits(h + pooled.x[pooled.assignment], ops)

    def explore_around(self, placement: np.ndarray | None) -> None:
        """Sample around `placement` (N,) (the run's best so far; None: stop): from now on the groups holding an op
        with a graph neighbour on another device in it (`groups_at_device_boundary`) get ``boundary_explore`` of
        the uniform distribution, about that many of them per placement drawn at random. ``predict`` (the
        deterministic mode, also what distillation and the refit after a split aim at) never sees the share: with
        as many groups marked as ``boundary_explore`` or fewer, their distributions are uniform, whose argmax is
        the first device. Our addition, as Post's (`agents.post.PostPolicy.explore_boundary`): ``explore`` draws
        groups anywhere, and one group flipped inside a device's region adds two transfers and is almost always
        slower; at a boundary the flip moves the cut, which is where a collapsed search finds its next best."""
        self.around = None if placement is None else torch.as_tensor(
            np.asarray(placement, dtype=np.int64), device=self.explore.device)

    def boundary_share(self, logits: torch.Tensor, assignment: torch.Tensor, edge_index: torch.Tensor,
                        parses: int = 1) -> torch.Tensor:
        """`logits` (G, D) of the groups of `assignment` (parses * N,) with ``boundary_explore`` mixed into the
        groups at a device boundary of `explore_around`'s placement (`parses` copies of the graph, `edge_index`
        over them); unchanged when off or while no placement of this graph was set."""
        share = float(self.boundary_explore)
        if share <= 0 or self.around is None or self.around.numel() * parses != assignment.numel():
            return logits
        marked = groups_at_device_boundary(self.around.repeat(parses), edge_index, assignment)
        if not marked.numel():
            return logits
        logits = logits.clone()
        logits[marked] = with_uniform_share(logits[marked], share, decisions=max(1, marked.numel() // parses))
        return logits

    def encode(self, obs: Mapping[str, Any]):
        """Node embeddings h (N, H) and the `GraphBatch` they came from."""
        batch = obs_to_batch(obs, device=next(self.parameters()).device)
        return self.encoder(batch.x, batch.edge_index, batch.edge_attr), batch

    def groups(self, obs: Mapping[str, Any], sample: bool = False) -> tuple[torch.Tensor, PoolResult | None]:
        """Group embeddings (G, H) (node embeddings (N, H) without pooling) and the `PoolResult` (or None)."""
        h, batch = self.encode(obs)
        if self.pool is None:
            return h, None
        pooled = self.pool(h, batch.edge_index, batch.edge_attr, batch.batch, sample=sample)
        return pooled.x, pooled

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        """Sample `num_samples` placements from one encoding of `obs` (a single graph).

        Returns a `PolicySample` with actions (K, N) int64, log_prob (K,) (parsing choices + group devices),
        entropy (per-decision mean of the device choice, plus that of the parsing choice when sampled), the
        parse and the group devices as ``replay``, and [mean, max] of the node embeddings (2H,) as
        ``embedding``.
        """
        return self._place(obs, num_samples, deterministic)

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        """`taken` (an earlier ``act`` on `obs`) re-scored under the current weights: the same parse (replayed,
        `GraphParsingPool`'s ``choices``) and the same group devices, their log-probabilities recomputed."""
        return self._place(obs, int(taken.actions.shape[0]), taken=taken)

    def placement_log_prob(self, obs: Mapping[str, Any], placement: np.ndarray) -> torch.Tensor:
        """() log-likelihood, per decision, that the policy places `placement` (N,) under its *current* argmax
        parse (the one ``predict`` uses): each op's device scored by its group's distribution, averaged within
        the group, then over the groups. What the self-imitation term raises (``imitation_coef``)."""
        h, batch = self.encode(obs)
        ops = Devices.of_ops(batch, self.spec.n_devices)
        target = torch.as_tensor(np.asarray(placement), dtype=torch.long, device=h.device)
        if self.pool is None:
            return torch.log_softmax(self.place_logits(h, ops), -1).gather(1, target.view(-1, 1)).mean()
        pooled = self.pool(h, batch.edge_index, batch.edge_attr, batch.batch)
        if self.place == "op":
            return torch.log_softmax(self.op_logits(h, pooled, ops), -1).gather(1, target.view(-1, 1)).mean()
        group_log_p = torch.log_softmax(self.place_logits(pooled.x, ops.grouped(pooled.assignment, pooled.num_groups)), -1)  # (G, D)
        if self.refiner is None:
            per_op = group_log_p[pooled.assignment, target]  # (N,)
            return scatter(per_op, pooled.assignment, 0, dim_size=pooled.num_groups, reduce="mean").mean()
        # With refinement: each group's most common device, then every op's device given it.
        majority = torch.as_tensor(group_majority(pooled.assignment.cpu().numpy(), placement, group_log_p.shape[1],
                                                  obs.get("action_mask")), device=h.device)  # (G,)
        return (group_log_p.gather(1, majority.unsqueeze(1)).mean()
                + self.refiner.mean_log_prob(h, majority[pooled.assignment], target, ops, batch.edge_index))

    def _place(self, obs: Mapping[str, Any], k: int, deterministic: bool = False,
               taken: PolicySample | None = None) -> PolicySample:
        """``act`` (taken None: draw K placements) and ``evaluate`` (score `taken`'s decisions) in one path."""
        h, batch = self.encode(obs)
        ops = Devices.of_ops(batch, self.spec.n_devices)
        embedding = torch.cat([h.mean(0), h.amax(0)])

        def devices(logits: torch.Tensor, num: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            """Draw (or, replaying, look up and score) one device per row of `logits`, `num` times."""
            if taken is None:
                return sample_categorical(logits, num, deterministic)
            chosen = taken.replay.get("group_actions", taken.actions)
            return (chosen, *categorical_log_prob(logits, chosen))

        if self.pool is None:  # ablation: every op is its own group
            actions, log_prob, entropy = devices(self.place_logits(h, ops), k)
            return PolicySample(actions, log_prob, entropy, {"n_groups": float(h.shape[0])}, embedding=embedding,
                                decisions=float(h.shape[0]))
        replayed = None if taken is None else taken.replay["choices"]
        stochastic = taken.replay["stochastic"] if taken is not None else self.stochastic_parsing and not deterministic
        if not stochastic:  # one parse (argmax rule) shared by all samples
            pooled = self.pool(h, batch.edge_index, batch.edge_attr, batch.batch, choices=replayed)
            if self.place == "op":  # every op decides, reading its group's embedding beside its own
                logits = self.op_logits(h, pooled, ops)
                if not deterministic:
                    logits = self.boundary_share(logits, torch.arange(h.shape[0], device=h.device), batch.edge_index)
                actions, log_prob, entropy = devices(logits, k)
                info = {"n_groups": float(pooled.num_groups), "pool_levels": float(pooled.num_levels)}
                return PolicySample(actions, log_prob, entropy, info, {"stochastic": False, "choices": pooled.choices},
                                    embedding, float(h.shape[0]))
            logits = self.place_logits(pooled.x, ops.grouped(pooled.assignment, pooled.num_groups))
            if not deterministic:  # the share shapes the samples only: with it a group can be all uniform
                logits = self.boundary_share(logits, pooled.assignment, batch.edge_index)
            group_actions, log_prob, entropy = devices(logits, k)
            info = {"n_groups": float(pooled.num_groups), "pool_levels": float(pooled.num_levels)}
            replay = {"stochastic": False, "choices": pooled.choices, "group_actions": group_actions}
            actions = group_actions[:, pooled.assignment]
            if self.refiner is not None:
                actions, op_log_prob, replay["refine_path"] = self.refiner(
                    h, actions, ops, deterministic, None if taken is None else taken.replay["refine_path"], batch.edge_index)
                log_prob = log_prob + op_log_prob
            return PolicySample(actions, log_prob, entropy, info, replay, embedding, float(pooled.num_groups))
        # A fresh parse per sample, so the reward ranks parses too: K copies of the graph parsed as one batch.
        n = h.shape[0]
        copies = torch.arange(k, device=h.device)
        edges = (batch.edge_index.unsqueeze(0) + (copies * n).view(k, 1, 1)).permute(1, 0, 2).reshape(2, -1)
        attr = None if batch.edge_attr is None else batch.edge_attr.repeat(k, 1)
        pooled = self.pool(h.repeat(k, 1), edges, attr, copies.repeat_interleave(n), sample=True, choices=replayed)
        copies_ops = Devices(ops.features, None if ops.cost is None else ops.cost.repeat(k, 1),
                             None if ops.mask is None else ops.mask.repeat(k, 1), ops.default_count)
        logits = self.place_logits(pooled.x, copies_ops.grouped(pooled.assignment, pooled.num_groups),
                                   graph=pooled.batch)  # (sum of groups over the K parses, D)
        logits = self.boundary_share(logits, pooled.assignment, edges, k)
        group_actions = devices(logits, 1)[0] if taken is None else taken.replay["group_actions"]  # (1, sum G)
        log_p = torch.log_softmax(logits, -1)
        group_log_prob = log_p.gather(1, group_actions.T).squeeze(1)
        group_entropy = -(log_p.exp() * log_p).sum(-1)
        n_groups = torch.bincount(pooled.batch, minlength=k)
        device_log_prob = scatter(group_log_prob, pooled.batch, 0, dim_size=k, reduce="sum")
        device_entropy = scatter(group_entropy, pooled.batch, 0, dim_size=k, reduce="sum") / n_groups
        actions = group_actions[0, pooled.assignment].view(k, n)  # every op takes its group's device
        log_prob = device_log_prob + pooled.log_prob
        replay = {"stochastic": True, "choices": pooled.choices, "group_actions": group_actions}
        if self.refiner is not None:
            actions, op_log_prob, replay["refine_path"] = self.refiner(
                h, actions, ops, False, None if taken is None else taken.replay["refine_path"], batch.edge_index)
            log_prob = log_prob + op_log_prob
        info = {"n_groups": float(n_groups.float().mean()), "n_groups_min": float(n_groups.min()),
                "n_groups_max": float(n_groups.max())}
        return PolicySample(actions, log_prob, device_entropy + pooled.entropy, info, replay, embedding,
                            float(n_groups.float().mean()))
