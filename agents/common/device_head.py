"""The device head every learned placer shares: logits over devices with no device count in its parameters.

A head that ends in ``Linear(H, D)`` learns "device index 1 is good": it cannot run with another number of
devices, and it breaks when the same devices are listed in another order. `DeviceScorer` instead scores each
(item, device) pair from what the observation says about the device, so one set of weights serves any device
set, in any order, and any graph size:

    u_d        = MLP(device_inputs(device_features))           (D, H)   what device d is
    logit_{md} = <W h_m, u_d> / sqrt(H)                                  item m's affinity for device d
               + MLP_c(cost_inputs(cost_{m, :})_d)                       how fast m runs on d, vs the other devices
               + Linear(u_d)                                             a per-device prior (e.g. "the fast one")
    logit_{md} = -inf where the device cannot run the item (``mask``), unless no device can

Items m are ops, or groups of ops (HSDAG's parsed groups, the RNN's chunks): a group's cost on a device is the
sum of its ops' (`group_costs`) and its mask the AND of theirs. Device features are the env's
``obs["device_features"]`` (`placement_gym.backends.base.DEVICE_FEATURES`, log10 of peak FLOP/s, bandwidths,
memory, launch cost); costs are ``obs["node_device_cost"]`` (seconds of an op alone on each device).

Initialised near-uniform (small bilinear and prior weights, a zero cost output), so an untrained policy favours
no device index and the first samples explore; the cost term is what lets a trained policy place a graph it has
never seen.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter

from .gnn import MLP

__all__ = ["DeviceScorer", "cost_inputs", "device_inputs", "group_costs"]

#: Width of `device_inputs`' output per raw device feature: the value relative to the device set's mean, and the
#: raw value (scaled to about unit size).
DEVICE_INPUTS_PER_FEATURE = 2
#: Width of `cost_inputs`' output per (item, device) pair.
COST_INPUTS = 3


def device_inputs(device_features: Tensor) -> Tensor:
    """(D, K) raw device features (log10 scales) -> (D, 2K): each feature minus its mean over the devices
    ("faster than the others", what placement needs, independent of the machine class) and the raw value / 10
    (absolute scale: a 1 TFLOP/s edge box is not a 100 TFLOP/s server)."""
    relative = device_features - device_features.mean(0, keepdim=True)
    return torch.cat([relative, device_features / 10.0], dim=-1)


def cost_inputs(cost: Tensor) -> Tensor:
    """(M, D) seconds of each item on each device -> (M, D, 3): log of the cost relative to the item's cheapest
    device (0 for the cheapest; what decides where an item alone would go), log10 of the cost in microseconds
    (how much the item matters), and the item's share of the device set's total cost of the graph (how much of
    the work it is; large items decide the placement)."""
    cost = cost.clamp_min(1e-9)
    relative = torch.log(cost / cost.amin(-1, keepdim=True)).clamp_max(10.0) / 3.0
    absolute = torch.log10(cost * 1e6).clamp(-3.0, 9.0) / 3.0
    share = cost / cost.sum(0, keepdim=True).clamp_min(1e-12) * cost.shape[0]  # 1 = an average item
    return torch.stack([relative, absolute, torch.log1p(share)], dim=-1)


def group_costs(cost: Tensor, mask: Tensor | None, assignment: Tensor, num_groups: int) -> tuple[Tensor, Tensor | None]:
    """Per-op costs (N, D) and mask (N, D) -> per-group ones (G, D): summed costs, AND of the masks."""
    g_cost = scatter(cost, assignment, 0, dim_size=num_groups, reduce="sum")
    g_mask = None if mask is None else scatter(mask.float(), assignment, 0, dim_size=num_groups, reduce="min") > 0.5
    return g_cost, g_mask


class DeviceScorer(nn.Module):
    """Logits (M, D) of M items over D devices from item embeddings, device features and costs (module docstring).

    Args:
        in_channels: item embedding width H_in.
        device_features: K, raw device feature width (``obs["device_features"].shape[-1]``; 0: no device features,
            every device is described by its costs alone).
        hidden_channels: width H of the device embedding and the bilinear form.
        use_costs: read the per-item costs (``obs["node_device_cost"]``) when given.

    Shapes: h (M, H_in), device_features (D, K), cost (M, D) or None, mask (M, D) bool or None -> (M, D).
    """

    def __init__(self, in_channels: int, device_features: int, hidden_channels: int = 64, use_costs: bool = True) -> None:
        super().__init__()
        self.hidden_channels = hidden_channels
        self.device_features = device_features
        self.use_costs = use_costs
        self.item = nn.Linear(in_channels, hidden_channels, bias=False)
        self.device = MLP(max(device_features, 1) * DEVICE_INPUTS_PER_FEATURE, hidden_channels, hidden_channels, num_layers=2)
        self.prior = nn.Linear(hidden_channels, 1)
        self.cost = MLP(COST_INPUTS, 16, 1, num_layers=2) if use_costs else None
        # Near-uniform start: no device index or device kind is preferred before any reward was seen.
        nn.init.normal_(self.item.weight, std=0.01)
        nn.init.normal_(self.prior.weight, std=0.01)
        nn.init.zeros_(self.prior.bias)
        if self.cost is not None:
            nn.init.zeros_(self.cost[-1].weight)
            nn.init.zeros_(self.cost[-1].bias)

    def forward(self, h: Tensor, device_features: Tensor | None, cost: Tensor | None = None,
                mask: Tensor | None = None, n_devices: int | None = None) -> Tensor:
        """Logits (M, D); `n_devices` is needed only when neither device features nor costs give D."""
        d = (device_features.shape[0] if device_features is not None else
             cost.shape[1] if cost is not None else n_devices)
        if d is None:
            raise ValueError("DeviceScorer needs device_features, costs or n_devices to know how many devices there are")
        if device_features is None or self.device_features == 0:
            device_features = h.new_zeros(d, max(self.device_features, 1))
        if device_features.shape[-1] != max(self.device_features, 1):
            raise ValueError(f"device features have width {device_features.shape[-1]}, this head was built for "
                             f"{self.device_features}")
        u = self.device(device_inputs(device_features.to(h.dtype)))  # (D, H)
        logits = self.item(h) @ u.T / math.sqrt(self.hidden_channels) + self.prior(u).T  # (M, D)
        if self.cost is not None and cost is not None:
            logits = logits + self.cost(cost_inputs(cost.to(h.dtype))).squeeze(-1)
        if mask is not None:
            # An item no device can run whole (a group mixing ops only different devices support) keeps every
            # device: the env reports or repairs that placement, the policy still has to choose.
            usable = mask | ~mask.any(-1, keepdim=True)
            logits = logits.masked_fill(~usable, -1e4)
        return logits
