"""The device head every learned placer shares: logits over devices with no device count in its parameters.

A head that ends in ``Linear(H, D)`` learns "device index 1 is good": it cannot run with another number of
devices, and it breaks when the same devices are listed in another order. `DeviceScorer` instead scores each
(item, device) pair from what the observation says about the device, so one set of weights serves any device
set, in any order, and any graph size::

    u_d        = MLP(device_inputs(device_features))           (D, H)   what device d is
    c_d        = (u_d - mean_d' u_d') / rms                      (D, H)   what sets it apart from the others
    logit_{md} = <W h_m, c_d> / sqrt(H)                                  item m's affinity for device d
               + MLP_c(cost_inputs(cost_{m, :})_d)                       how fast m runs on d, vs the other devices
               + Linear(u_d)                                             a per-device prior (e.g. "the fast one")
    logit_{md} = -inf where the device cannot run the item (``mask``), unless no device can
               + s w graph_cost_inputs(T)_d       (policies trained across graphs) the whole graph's cost on d

Items m are ops, or groups of ops (HSDAG's parsed groups, the RNN's chunks): a group's cost on a device is the
sum of its ops' (`group_costs`) and its mask the AND of theirs. Device features are the env's
``obs["device_features"]`` (`placement_gym.backends.base.DEVICE_FEATURES`, log10 of peak FLOP/s, bandwidths,
memory, launch cost); costs are ``obs["node_device_cost"]`` (seconds of an op alone on each device).

Initialised near-uniform (small bilinear and prior weights, a zero cost output), so an untrained policy favours
no device index and the first samples explore; the cost term is what lets a trained policy place a graph it has
never seen.

The whole-graph cost term (`enable_graph_cost`, built on demand: a policy that trains across graphs, and GO's
always). T_d is the item's graph's total cost on device d (the graph's latency on d alone), so the term says which
single device is best for the graph as a whole, what no per-item cost says (every op on its own cheapest device
mixes devices and pays for every tensor that crosses). One weight w (monotone in the cost, so what it learns on
the training graphs holds on others), starting at -10: a prior of 6 logits per 6% towards the graph's fastest
device, which the rest of the head corrects where the training graphs say so. Why that strong: the rest of the
head learns device leads shared by the training graphs (a per-device prior, items alike across graphs), and from
-3 (1.8 logits per 6%) they could outgrow it: a lead for the small-memory accelerator of ``edge`` beat the term's
preference for the CPU on a graph whose accelerator alone is much slower (GO, the RNN; chosen on the VAL split with
``benchmarks/learned_placer/transfer_seeds.py --test-models dataset:val``).
An untrained head's logits are the term alone, so its own first placement, the graph's fastest device by the
summed costs, is the same from either. Without it, a policy trained on many
graphs learned one device for all of them (on the `edge` preset the CPU, far from the optimum zero-shot on the
test graphs). s (``graph_cost_scale``, a buffer) switches it off where a search on one graph wants to move
every op freely (GO's ``search_groups``). Not built for a policy that only ever learns one graph, whose runs
stay as they were.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter

from .gnn import MLP

__all__ = ["DeviceScorer", "Devices", "cost_inputs", "device_input_width", "device_inputs", "enable_graph_cost",
           "graph_cost_inputs", "group_costs", "placed_device_inputs", "usable"]

#: Width of `device_inputs`' output per raw device feature: the value relative to the device set's mean, and the
#: raw value (scaled to about unit size).
DEVICE_INPUTS_PER_FEATURE = 2
#: Width of `cost_inputs`' output per (item, device) pair.
COST_INPUTS = 3
#: Width of `graph_cost_inputs`' output per device.
GRAPH_COST_INPUTS = 1
#: The whole-graph cost term's weight at the start (module docstring).
GRAPH_COST_WEIGHT = -10.0


def device_input_width(device_features: int) -> int:
    """Width of `device_inputs`' output for K raw device features (``max(K, 1)``: K = 0 reads one zero column)."""
    return DEVICE_INPUTS_PER_FEATURE * max(device_features, 1) + 1


def device_inputs(device_features: Tensor) -> Tensor:
    """(..., D, K) raw device features (log10 scales) -> (..., D, 2K + 1): each feature minus its mean over the
    devices ("faster than the others", what placement needs, independent of the machine class), the raw
    value / 10 (absolute scale: a 1 TFLOP/s edge box is not a 100 TFLOP/s server), and the device's list
    position / 4 ONLY where the observation tells the devices of a graph not apart (a backend that describes
    none: all features equal). Then the position is all that distinguishes them, and without it no policy
    could place two ops on different devices; described devices never read their position, so their order
    does not matter."""
    relative = device_features - device_features.mean(-2, keepdim=True)
    alike = (relative.abs() < 1e-6).flatten(-2).all(-1, keepdim=True).unsqueeze(-1)  # (..., 1, 1) per graph
    d = device_features.shape[-2]
    position = torch.arange(d, device=device_features.device, dtype=device_features.dtype).view(d, 1) / 4.0
    position = (position * alike).expand(*device_features.shape[:-1], 1)
    return torch.cat([relative, device_features / 10.0, position], dim=-1)


def cost_inputs(cost: Tensor, graph: Tensor | None = None) -> Tensor:
    """(M, D) seconds of each item on each device -> (M, D, 3): log of the cost relative to the item's cheapest
    device (0 for the cheapest; what decides where an item alone would go), log10 of the cost in microseconds
    (how much the item matters), and the item's share of the device set's total cost of the graph (how much of
    the work it is; large items decide the placement). `graph` (M,) int64 says which graph each item belongs to
    when the M items span several graphs (a batch): shares are then taken within each graph."""
    cost = cost.clamp_min(1e-9)
    relative = torch.log(cost / cost.amin(-1, keepdim=True)).clamp_max(10.0) / 3.0
    absolute = torch.log10(cost * 1e6).clamp(-3.0, 9.0) / 3.0
    if graph is None:
        share = cost / cost.sum(0, keepdim=True).clamp_min(1e-12) * cost.shape[0]  # 1 = an average item
    else:
        total = scatter(cost, graph, 0, reduce="sum")[graph]  # (M, D) each item's graph's total
        count = torch.bincount(graph).to(cost.dtype)[graph].unsqueeze(-1)  # items of that graph
        share = cost / total.clamp_min(1e-12) * count
    return torch.stack([relative, absolute, torch.log1p(share)], dim=-1)


def graph_cost_inputs(total: Tensor) -> Tensor:
    """(..., D) seconds of a graph alone on each device (its ops' costs summed) -> (..., D, 1): 10 x the log of the
    total relative to the cheapest device's (0 for the cheapest, 0.6 for 6% slower, 2.7 for 30% slower; clipped at
    30). Scaled up because the differences that decide a placement are a few %."""
    total = total.clamp_min(1e-9)
    return (10.0 * torch.log(total / total.amin(-1, keepdim=True))).clamp_max(30.0).unsqueeze(-1)


def group_costs(cost: Tensor | None, mask: Tensor | None, assignment: Tensor,
                num_groups: int) -> tuple[Tensor | None, Tensor | None]:
    """Per-op costs (N, D) and mask (N, D) -> per-group ones (G, D): summed costs, AND of the masks (None stays
    None)."""
    g_cost = None if cost is None else scatter(cost, assignment, 0, dim_size=num_groups, reduce="sum")
    g_mask = None if mask is None else scatter(mask.float(), assignment, 0, dim_size=num_groups, reduce="min") > 0.5
    return g_cost, g_mask


@dataclass(frozen=True)
class Devices:
    """What a placer reads about the devices for M items of ONE graph (ops, or groups of ops).

    Attributes:
        features: (D, K) device features (``obs["device_features"]``), or None.
        cost: (M, D) seconds of each item alone on each device, or None.
        mask: (M, D) bool which device can run each item, or None.
        default_count: D where the observation describes no devices (the policy's `PolicySpec.n_devices`).
    """

    features: Tensor | None
    cost: Tensor | None = None
    mask: Tensor | None = None
    default_count: int | None = None

    @classmethod
    def of_ops(cls, batch, default_count: int | None = None) -> "Devices":
        """The ops of a one-graph `agents.nn.graph_batch.GraphBatch`."""
        if batch.num_graphs != 1:
            raise ValueError(f"Devices describes one graph, the batch has {batch.num_graphs}")
        return cls(None if batch.device_features is None else batch.device_features[0], batch.node_cost,
                   batch.action_mask, default_count)

    def grouped(self, assignment: Tensor, num_groups: int) -> "Devices":
        """The same devices for groups of these items (`group_costs`: summed costs, AND of the masks)."""
        return Devices(self.features, *group_costs(self.cost, self.mask, assignment, num_groups), self.default_count)

    @property
    def n_devices(self) -> int | None:
        """D, where the features, costs or mask say it."""
        for value in (self.features, self.cost, self.mask):
            if value is not None:
                return int(value.shape[-2] if value is self.features else value.shape[-1])
        return self.default_count


def placed_device_inputs(device_features: Tensor | None, placement: Tensor, graph: Tensor, known: Tensor | None,
                         width: int) -> Tensor:
    """What the device each op sits on is, with no device index: (sumN, `device_input_width` + 1) = `device_inputs` of the
    op's current device, then 1 where the op's device is known (0 and zeros elsewhere: node by node, the ops
    the episode has not placed yet). Replaces a one-hot (sumN, D) of the placement, which builds D into the
    weights that read it.

    Args:
        device_features: (B, D, K) of the batch (None: devices undescribed, all read as zeros).
        placement: (sumN,) int64 current device of every op.
        graph: (sumN,) int64 graph of every op.
        known: (sumN,) 1 where the op's device counts, or None (all).
        width: K the reader was built for (``max(K, 1)`` columns when the observation has no device features).
    """
    if device_features is None or width == 0:
        described = placement.new_zeros(placement.shape[0], device_input_width(width), dtype=torch.float32)
    else:
        d = device_features.shape[-2]
        described = device_inputs(device_features.float())[graph, placement.clamp(0, d - 1)]  # (sumN, 2K)
    flag = torch.ones(placement.shape[0], 1, device=placement.device) if known is None else known.float().view(-1, 1)
    return torch.cat([described * flag, flag], dim=-1)


class DeviceScorer(nn.Module):
    """Logits (M, D) of M items over D devices from item embeddings, device features and costs (module docstring).

    Args:
        in_channels: item embedding width H_in.
        device_features: K, raw device feature width (``obs["device_features"].shape[-1]``; 0: no device features,
            every device is described by its costs alone).
        hidden_channels: width H of the device embedding and the bilinear form.
        use_costs: read the per-item costs (``obs["node_device_cost"]``) when given.
        places_graphs: the head that places a policy's items, which `enable_graph_cost` gives the whole-graph cost
            term (module docstring); False for a head that scores something else (`agents.nn.refine.OpRefiner`'s
            overrides of a placement).

    Shapes: h (M, H_in), device_features (D, K) (or (B, D, K) with `graph` (M,): items of B graphs, each
    scored against its own graph's devices), cost (M, D) or None, mask (M, D) bool or None -> (M, D).
    """

    def __init__(self, in_channels: int, device_features: int, hidden_channels: int = 64, use_costs: bool = True,
                 places_graphs: bool = True) -> None:
        super().__init__()
        self.hidden_channels = hidden_channels
        self.device_features = device_features
        self.use_costs = use_costs
        self.places_graphs = places_graphs
        self.graph_cost: nn.Linear | None = None  # `enable_graph_cost`
        # LayerNorm first: every placer's item embeddings (a GNN's, an MLP's, an LSTM's) reach the head at one scale,
        # so its near-uniform start and its step size do not depend on the placer in front of it.
        self.item = nn.Sequential(nn.LayerNorm(in_channels), nn.Linear(in_channels, hidden_channels, bias=False))
        self.device = MLP(device_input_width(device_features), hidden_channels, hidden_channels, num_layers=2)
        self.prior = nn.Linear(hidden_channels, 1)
        self.cost = MLP(COST_INPUTS, 16, 1, num_layers=2) if use_costs else None
        # Near-uniform start: no device index or device kind is preferred before any reward was seen.
        nn.init.normal_(self.item[-1].weight, std=0.001)  # logit differences ~0.01 at the start (contrasts are at unit scale)
        nn.init.zeros_(self.prior.weight)  # learns from the first update (u is not zero)
        nn.init.zeros_(self.prior.bias)
        if self.cost is not None:
            nn.init.zeros_(self.cost[-1].weight)
            nn.init.zeros_(self.cost[-1].bias)

    @torch.no_grad()
    def enable_graph_cost(self) -> bool:
        """Build the whole-graph cost term (module docstring) if this head places graphs and has none; True if
        built. Its parameter is new: an optimizer made before needs it added (`enable_graph_cost`, the function)."""
        if not self.places_graphs or self.graph_cost is not None:
            return False
        reference = self.item[-1].weight
        self.graph_cost = nn.Linear(GRAPH_COST_INPUTS, 1, bias=False).to(reference.device)
        nn.init.constant_(self.graph_cost.weight, GRAPH_COST_WEIGHT)
        self.register_buffer("graph_cost_scale", torch.tensor(1.0, device=reference.device))
        return True

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "graph_cost.weight" in state_dict:  # saved with the term: build it before it is loaded
            self.enable_graph_cost()
            state_dict.setdefault(prefix + "graph_cost_scale", torch.tensor(1.0))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def graph_cost_logits(self, total: Tensor) -> Tensor:
        """(D,) or (B, D) each graph's total cost per device -> the whole-graph term of its items' logits, (1, D)
        or (B, D) (once `enable_graph_cost` built it)."""
        return (self.graph_cost_scale * self.graph_cost(graph_cost_inputs(total))).squeeze(-1).view(-1, total.shape[-1])

    def cost_logits(self, cost: Tensor, graph: Tensor | None = None) -> Tensor:
        """(M, D) the cost term of the logits for M items' costs (M, D) (`cost_inputs`; `graph` (M,) as there).
        Zero without a cost MLP. A placer that scores one item at a time (the RNN decoder) computes it once for
        all items, so the cost shares are taken over the whole graph, and passes rows of it to `forward`."""
        if self.cost is None:
            return cost.new_zeros(cost.shape)
        return self.cost(cost_inputs(cost, graph)).squeeze(-1)

    def forward(self, h: Tensor, device_features: Tensor | None, cost: Tensor | None = None,
                mask: Tensor | None = None, n_devices: int | None = None, *, graph: Tensor | None = None,
                cost_logits: Tensor | None = None, graph_total: Tensor | None = None) -> Tensor:
        """Logits (M, D). `n_devices` is needed only when neither device features nor costs give D; `graph`
        (M,) int64 maps items to the rows of a batched (B, D, K) `device_features` (and makes the cost shares
        per graph); `cost_logits` (M, D) replaces `cost` with an already computed `cost_logits(cost)`.
        `graph_total` (D,) or (B, D): each graph's total cost per device, for the whole-graph term; by default the
        sum of `cost` over each graph's items, right where the items cover their graphs (ops, or groups that
        partition them); a placer that scores part of a graph (the node placed next) gives it."""
        d = (device_features.shape[-2] if device_features is not None else
             cost.shape[1] if cost is not None else cost_logits.shape[1] if cost_logits is not None else n_devices)
        if d is None:
            raise ValueError("DeviceScorer needs device_features, costs or n_devices to know how many devices there are")
        if device_features is None or self.device_features == 0:
            device_features = h.new_zeros(d, max(self.device_features, 1))
        if device_features.shape[-1] != max(self.device_features, 1):
            raise ValueError(f"device features have width {device_features.shape[-1]}, this head was built for "
                             f"{self.device_features} (obs['device_features'] of the env it was trained on)")
        u = self.device(device_inputs(device_features.to(h.dtype)))  # (D, H) or (B, D, H)
        contrast = _contrast(u)
        item = self.item(h)  # (M, H)
        if u.dim() == 2:
            logits = item @ contrast.T / math.sqrt(self.hidden_channels) + self.prior(u).T  # (M, D)
        else:  # every item against the devices of its own graph
            if graph is None:
                raise ValueError("batched device_features (B, D, K) need `graph`: the graph of every item")
            u, contrast = u[graph], contrast[graph]  # (M, D, H)
            logits = (torch.einsum("mh,mdh->md", item, contrast) / math.sqrt(self.hidden_channels)
                      + self.prior(u).squeeze(-1))
        if cost_logits is None and cost is not None:
            cost_logits = self.cost_logits(cost.to(h.dtype), graph)
        if self.cost is not None and cost_logits is not None:
            logits = logits + cost_logits
        if mask is not None:
            logits = logits.masked_fill(~usable(mask), -1e4)
        if self.graph_cost is not None and (graph_total is not None or cost is not None):
            if graph_total is None:
                per_item = cost.to(h.dtype).clamp_min(1e-9)
                graph_total = per_item.sum(0) if graph is None else scatter(per_item, graph, 0, reduce="sum")
            term = self.graph_cost_logits(graph_total.to(h.dtype))  # (1, D) or (B, D)
            logits = logits + (term if graph is None or term.shape[0] == 1 else term[graph])
        return logits


def enable_graph_cost(policy: nn.Module, optimizer: torch.optim.Optimizer | None = None, build: bool = True) -> None:
    """With `build`, give every head of `policy` that places graphs the whole-graph cost term (module docstring;
    what a policy trained across graphs needs); then make sure `optimizer` trains every such term the policy has
    (one built here or by loading a checkpoint after the optimizer was made). The learned agents' training calls
    it on every run, with `build` on a run over many graphs."""
    heads = [head for head in policy.modules() if isinstance(head, DeviceScorer)]
    if build:
        for head in heads:
            head.enable_graph_cost()
    if optimizer is None:
        return
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    missing = [head.graph_cost.weight for head in heads
               if head.graph_cost is not None and id(head.graph_cost.weight) not in held]
    if missing:  # with the first group's settings (learning rate and the rest)
        optimizer.add_param_group({**{k: v for k, v in optimizer.param_groups[0].items() if k != "params"},
                                   "params": missing})


def _contrast(u: Tensor) -> Tensor:
    """Device embeddings (..., D, H) -> what sets each device apart from the others of its set, at unit scale:
    minus their mean over the devices (a part common to all devices adds the same logit to every device, which
    the softmax ignores) and divided by the root mean square of what is left (over the set's D x H entries).

    Why: the item term's gradient moves device d's logit by sum over d' of g_d' <u_d', u_d>; with raw embeddings of
    two devices that look alike to a fresh MLP (<u_0, u_1> close to |u|^2) the updates of the two logits cancel
    and the policy learns an order of magnitude slower than a ``Linear(H, D)`` head. Contrasted and at unit
    scale, <u_0, u_1> = -H for two devices, and the update of ``logit_0 - logit_1`` is exactly that of a
    ``Linear(H, D)`` head with the same learning rate."""
    centred = u - u.mean(-2, keepdim=True)
    scale = centred.pow(2).mean((-2, -1), keepdim=True).sqrt()
    return centred / (scale + 1e-6)


def usable(mask: Tensor) -> Tensor:
    """(M, D) bool the devices an item may take: those that can run it (`mask`), or every device where none can
    run the item whole (a group mixing ops only different devices support: the env reports or repairs that
    placement, the policy still has to choose)."""
    return mask | ~mask.any(-1, keepdim=True)
