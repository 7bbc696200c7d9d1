"""Per-op refinement: a stage after a group placer that lets single ops leave their group's device.

Placers that decide per group (HSDAG's parsed groups, the RNN placer's contiguous chunks) cannot express a
placement that splits a group, however long they train: the groups come from the graph's structure (or its
topological order), not from where the best cut lies. `OpRefiner` adds, per op, a learned probability sigma_op
of *overriding* the group's device with a device drawn from a per-op distribution q_op:

    p(op device a | group device g) = (1 - sigma_op) [a == g] + sigma_op q_op(a)

sigma starts near 0 (``override_bias``), so the placer's coherent group placements are what it samples at
first; the reward (and the self-imitation term) raise it where a split pays. q_op comes from the shared device
head (`agents.common.device_head.DeviceScorer`: the op's embedding against the device features, its costs and
its action mask), so the stage has no device count in its weights and never draws a device that cannot run the op.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .device_head import DeviceScorer, Devices
from .gnn import MLP

__all__ = ["OpRefiner"]


class OpRefiner(nn.Module):
    """The per-op override stage (module docstring).

    Args:
        in_channels: width of the per-op embeddings it reads.
        hidden_channels: its MLP's hidden width.
        device_features: K, width of the device features (`DeviceScorer`).
        override_bias: initial logit of sigma_op (-8: sigma ~ 0.03%, so the first samples are the group
            placer's).

    Shapes: op embeddings h (N, in_channels); group devices (K, N) (the device of each op's group); the ops'
    `Devices` (device features (D, K), costs (N, D), mask (N, D)).
    """

    def __init__(self, in_channels: int, hidden_channels: int, device_features: int, override_bias: float = -8.0) -> None:
        super().__init__()
        self.override = MLP(in_channels, hidden_channels, 1, num_layers=2)  # the logit of sigma_op
        nn.init.normal_(self.override[-1].weight, std=0.01)
        nn.init.constant_(self.override[-1].bias, override_bias)
        self.q = DeviceScorer(in_channels, device_features, hidden_channels)

    def log_probs(self, h: Tensor, group_device: Tensor, devices: "Devices") -> Tensor:
        """(K, N, D) log p(op device | its group's device)."""
        log_q = torch.log_softmax(self.q(h, devices.features, devices.cost, devices.mask, devices.n_devices), -1)  # (N, D)
        sigma_logit = self.override(h).squeeze(-1)  # (N,)
        log_override, log_keep = nn.functional.logsigmoid(sigma_logit), nn.functional.logsigmoid(-sigma_logit)
        same = nn.functional.one_hot(group_device, log_q.shape[-1]).bool()  # (K, N, D)
        keep = torch.where(same, log_keep.unsqueeze(-1), torch.full_like(log_q, float("-inf")).expand_as(same))
        return torch.logaddexp(keep, log_override.unsqueeze(-1) + log_q)  # "keep g" or "draw from q"

    def forward(self, h: Tensor, group_device: Tensor, devices: "Devices", deterministic: bool = False,
                actions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Op devices (K, N) (drawn, argmax, or the given `actions` re-scored) and their log-probability
        summed over the ops (K,)."""
        log_p = self.log_probs(h, group_device, devices)
        if actions is None:
            actions = log_p.argmax(-1) if deterministic else torch.distributions.Categorical(logits=log_p).sample()
        return actions, log_p.gather(-1, actions.unsqueeze(-1)).squeeze(-1).sum(-1)

    def mean_log_prob(self, h: Tensor, group_device: Tensor, target: Tensor, devices: "Devices") -> Tensor:
        """() mean over the ops of log p(target op device | group devices (N,)): the imitation term's part."""
        return self.log_probs(h, group_device.unsqueeze(0), devices)[0].gather(1, target.view(-1, 1)).mean()
