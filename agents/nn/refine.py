"""Per-op refinement: a stage after a group placer that lets single ops leave their group's device.

Placers that decide per group (HSDAG's parsed groups, the RNN placer's contiguous chunks) cannot express a
placement that splits a group, however long they train: the groups come from the graph's structure (or its
topological order), not from where the best cut lies. `OpRefiner` adds, per op, a learned probability sigma_op
of *overriding* the device it was given with a device drawn from a per-op distribution q_op:

    p(op device a | given device g) = (1 - sigma_op) [a == g] + sigma_op q_op(a)

sigma starts near 0 (``override_bias``), so the placer's coherent group placements are what it samples at
first; the reward (and the self-imitation term) raise it where a split pays. q_op comes from the shared device
head (`agents.nn.device_head.DeviceScorer`: the op's embedding against the device features, its costs and
its action mask), so the stage has no device count in its weights and never draws a device that cannot run the op.

Boundary moves (``boundary=True``, our addition, default on). With sigma from the op's embedding alone, the
stage explores by flipping ops anywhere, and one flipped op inside a group adds two device changes (two
transfers), so almost every override is punished and sigma stays near 0: the group placer's boundaries stay
where its groups put them (HSDAG and the RNN ended above the optimum on ResNet and Inception of the ``paper``
preset, with a cut one group away from the optimum's). The stage also reads, per op, which share
of its graph neighbours (producers and consumers) sit on another device than it (``disagree``, 0..1) and on
each device (``share_d``):

    logit sigma_op = MLP(h_op) + w_b disagree_op          (w_b learned, starts at ``boundary_weight``)
    logit q_op(d)  = DeviceScorer(h_op, d) + w_n share_d   (w_n learned, starts at ``neighbour_weight``)

so it proposes moving ops at a device boundary to their neighbours' device, one rule for every op (no op index
in it), and learns from the reward whether moving a boundary pays. It runs ``rounds`` times, each round reading
the devices the previous round left, so one placement can move a boundary by several ops; each round's result
is part of the decision (``path``: re-scored by `forward` with ``taken``; a given target placement is scored as
reached in the first round and kept after, see `mean_log_prob`).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .device_head import DeviceScorer, Devices
from .gnn import MLP

__all__ = ["OpRefiner", "neighbour_device_shares"]


def neighbour_device_shares(devices: torch.Tensor, edge_index: torch.Tensor, n_devices: int) -> torch.Tensor:
    """(K, N, D) share of each op's graph neighbours (producers and consumers, edges counted once each way)
    on each device, for K placements `devices` (K, N) and the ops' `edge_index` (2, E); zeros for an op
    without neighbours. The boundary moves' reading, here and in the search layer's proposals
    (`agents.search.local_search.BlockSearch`, which re-exports it)."""
    k, n = devices.shape
    one_hot = torch.nn.functional.one_hot(devices, n_devices).to(torch.float32)  # (K, N, D)
    src, dst = edge_index[0], edge_index[1]
    counts = torch.zeros_like(one_hot)
    counts.index_add_(1, dst, one_hot[:, src])  # producers' devices, at the consumer
    counts.index_add_(1, src, one_hot[:, dst])  # consumers' devices, at the producer
    degree = counts.sum(-1, keepdim=True)
    return counts / degree.clamp(min=1.0)


class OpRefiner(nn.Module):
    """The per-op override stage (module docstring).

    Args:
        in_channels: width of the per-op embeddings it reads.
        hidden_channels: its MLP's hidden width.
        device_features: K, width of the device features (`DeviceScorer`).
        override_bias: initial logit of sigma_op (-8: sigma ~ 0.03%, so the first samples are the group
            placer's, away from device boundaries).
        boundary: read the neighbours' devices (boundary moves, module docstring; False: sigma and q from the
            op's embedding only, one round).
        boundary_weight, neighbour_weight: initial w_b and w_n (12: an op with half its neighbours on another
            device overrides with probability ~12% at first, one with all of them ~98%).
        rounds: how many refinement rounds run in sequence (boundary moves only).

    Shapes: op embeddings h (N, in_channels); group devices (K, N) (the device of each op's group); the ops'
    `Devices` (device features (D, K), costs (N, D), mask (N, D)); edge_index (2, E) between the ops.
    """

    def __init__(self, in_channels: int, hidden_channels: int, device_features: int, override_bias: float = -8.0,
                 boundary: bool = True, boundary_weight: float = 12.0, neighbour_weight: float = 4.0,
                 rounds: int = 2) -> None:
        super().__init__()
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        self.override = MLP(in_channels, hidden_channels, 1, num_layers=2)  # the logit of sigma_op
        nn.init.normal_(self.override[-1].weight, std=0.01)
        nn.init.constant_(self.override[-1].bias, override_bias)
        self.q = DeviceScorer(in_channels, device_features, hidden_channels, places_graphs=False)
        self.boundary = boundary
        self.rounds = rounds if boundary else 1
        if boundary:
            self.boundary_weight = nn.Parameter(torch.tensor(float(boundary_weight)))
            self.neighbour_weight = nn.Parameter(torch.tensor(float(neighbour_weight)))

    def log_probs(self, h: Tensor, given: Tensor, devices: "Devices", edge_index: Tensor | None = None) -> Tensor:
        """(K, N, D) log p(op device | the devices `given` (K, N) to the ops) for one round."""
        scores = self.q(h, devices.features, devices.cost, devices.mask, devices.n_devices)  # (N, D)
        n_devices = scores.shape[-1]
        sigma_logit = self.override(h).squeeze(-1).expand(given.shape)  # (K, N)
        q_logits = scores.expand(given.shape[0], -1, -1)
        if self.boundary and edge_index is not None and edge_index.numel():
            shares = neighbour_device_shares(given, edge_index, n_devices)  # (K, N, D)
            has_neighbours = shares.sum(-1) > 0
            disagree = torch.where(has_neighbours, 1.0 - shares.gather(-1, given.unsqueeze(-1)).squeeze(-1), 0.0)
            sigma_logit = sigma_logit + self.boundary_weight * disagree
            allowed = torch.isfinite(q_logits)  # the device head's mask stays a mask
            q_logits = torch.where(allowed, q_logits + self.neighbour_weight * shares, q_logits)
        log_q = torch.log_softmax(q_logits, -1)
        log_override, log_keep = nn.functional.logsigmoid(sigma_logit), nn.functional.logsigmoid(-sigma_logit)
        same = nn.functional.one_hot(given, n_devices).bool()  # (K, N, D)
        keep = torch.where(same, log_keep.unsqueeze(-1), torch.full_like(log_q, float("-inf")))
        return torch.logaddexp(keep, log_override.unsqueeze(-1) + log_q)  # "keep g" or "draw from q"

    def forward(self, h: Tensor, group_device: Tensor, devices: "Devices", deterministic: bool = False,
                path: Tensor | None = None, edge_index: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Op devices (K, N) (drawn, or argmax), their log-probability summed over the ops and rounds (K,), and
        every round's devices ``path`` (K, R, N); given an earlier `path`, its rounds are re-scored instead."""
        given, log_prob, rounds = group_device, 0.0, []
        for r in range(self.rounds):
            log_p = self.log_probs(h, given, devices, edge_index)
            if path is not None:
                chosen = path[:, r]
            elif deterministic:
                chosen = log_p.argmax(-1)
            else:
                chosen = torch.distributions.Categorical(logits=log_p).sample()
            log_prob = log_prob + log_p.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).sum(-1)
            rounds.append(chosen)
            given = chosen
        return given, log_prob, torch.stack(rounds, dim=1)

    def mean_log_prob(self, h: Tensor, group_device: Tensor, target: Tensor, devices: "Devices",
                      edge_index: Tensor | None = None) -> Tensor:
        """() mean over the ops of log p(target op devices | group devices (N,)), the target reached in the first
        round and kept in the others: the imitation and distillation term's part."""
        path = target.view(1, 1, -1).expand(1, self.rounds, -1)
        return self(h, group_device.unsqueeze(0), devices, path=path, edge_index=edge_index)[1][0] / target.numel()
