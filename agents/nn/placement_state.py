"""What a device head cannot see op by op: where the earlier ops of the placement went.

A head that scores every op on its own (`agents.nn.device_head.DeviceScorer`) cannot balance the devices' load
(the throughput objective's bottleneck), keep a small device within its memory, or keep an op beside the
producers it reads from: each is a property of the whole placement. `PlacementState` adds a term that reads it.
Ops are decided one after another in topological order; op i's logit for device d gets

    logit_{id} += MLP([state_{id}, P z_i])          state_{id}: STATE_FEATURES numbers from a_{<i}

where a_{<i} are the devices of the ops before i, and `state_{id}` says (costs in units of the graph's summed
cheapest cost S = sum_j min_d c_jd, so a graph's size does not matter), first the `PLACED` columns that depend on
the earlier ops' devices::

    load          sum of c_jd over the earlier ops on d                       (what d already has to run)
    load_after    the same with op i on d
    bottleneck    load_after - max_d' load_d'      (> 0: op i on d raises the busiest device's load)
    memory_after  (weights on d + w_i + max(largest working set on d, m_i)) / capacity_d   (> 1: out of memory,
                  as `placement_gym.backends.profiles.memory_need` counts it)
    producers     share of op i's input bytes made on d
    transfer      seconds to bring op i's inputs made elsewhere to d (bytes / d's link bandwidth) / S
    previous      whether op i - 1 is on d           (a device change starts a submodel)
    memory_rest   memory_after with every op after i on d too   (does the rest of the graph still fit on d)

and, with ``balance`` (`BALANCE_COLUMNS` more columns; off by default, on for the throughput checkpoints that
the val split chose it for: docs/agents/learned-placer.md)::

    share         load_after / balanced, balanced = 1 / sum_d' 1/whole_d'   (> 1: d is past its share of a load
                  spread so that every device finishes together; the same for every device, which a score that
                  sees one device's columns cannot compute from whole alone)
    pace          share / done, done = sum_{j<=i} min_d' c_jd'   (> 1: d is ahead of its share of what is placed
                  so far)

then the columns that are the same for every placement::

    progress      i / N
    whole         sum of c_jd over all ops           (the graph on d alone)
    whole_gap     whole / min_d' whole_d' - 1        (0 for the best single device)
    rest          sum of c_jd over the ops after i   (what is still to place)

The term starts at zero (its last layer is zero), so an untrained policy with it places as it would without it.
One column is also a constraint: a device that op i would overflow (memory_after > 1) is masked out, as the
observation's ``action_mask`` masks a device that cannot run an op, unless every device would overflow. The
placements the policy draws then fit in memory as the simulator counts it (no measurement tells it so: the
observation's per-op memory and the devices' capacities do).

Two ways to the same numbers: `teacher_forced` computes every op's state from a given placement at once
(cumulative sums along the topological order: imitation, PPO's re-scoring), `PlacementState.decode` steps op by
op while the devices are drawn (sampling, ``predict``). tests/test_learned_placer.py checks that both give the same
log-probabilities.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from placement_gym.features import bytes_from_edge_features

from .graph_batch import GraphBatch

__all__ = ["GraphCosts", "PlacementState", "STATE_FEATURES"]

#: Numbers per (op, device) in the state (module docstring), and how many of them (the first) depend on the
#: placement of the earlier ops; the others are the graph's own. ``balance`` adds `BALANCE_COLUMNS` placed
#: columns.
STATE_FEATURES = 12
PLACED = 8
BALANCE_COLUMNS = 2
#: The placed column memory_after: above 1, the op would overflow the device.
MEMORY_AFTER = 3
#: Where memory_after and the cost ratios are clipped: beyond it "much too large" is all they need to say.
CLIP = 8.0
#: Column of the observation's ``device_features`` with log10 of the memory capacity in bytes, and of the link
#: bandwidth (`placement_gym.backends.base.DEVICE_FEATURES`).
MEMORY_COLUMN, LINK_COLUMN = 2, 3


@dataclass
class GraphCosts:
    """The numbers of one graph the state is computed from (`of_observation`).

    Attributes:
        cost: (N, D) seconds of each op alone on each device, divided by S (module docstring).
        whole: (D,) the same summed over all ops.
        rest: (N, D) the same summed over the ops after each op.
        weights, working: (N,) bytes of each op's weights and working set.
        weights_rest, working_rest: (N,) the weights summed, and the largest working set, of the ops after each.
        balanced: () the load of each device when the whole graph is spread so that every device finishes
            together (1 / sum_d 1/whole_d).
        done: (N,) the cheapest costs of the ops up to each, summed (the last is 1).
        capacity: (D,) bytes of each device's memory.
        link_s: (D,) seconds per byte into each device, divided by S.
        src, dst, nbytes: (E,) the edges (producer, consumer) and the bytes of their tensors.
        in_bytes: (N,) bytes each op reads from producers (1 where it reads none, to divide by).
    """

    cost: Tensor
    whole: Tensor
    rest: Tensor
    weights: Tensor
    working: Tensor
    weights_rest: Tensor
    working_rest: Tensor
    balanced: Tensor
    done: Tensor
    capacity: Tensor
    link_s: Tensor
    src: Tensor
    dst: Tensor
    nbytes: Tensor
    in_bytes: Tensor

    @classmethod
    def of_observation(cls, obs, batch: GraphBatch, n_devices: int) -> "GraphCosts":
        """From a DevicePlacement-v0 observation of one graph and its `GraphBatch` (`obs_to_batch`: padding of a
        multi-graph env's observation removed, ops in topological order as the env gives them); raises if it
        lacks the per-op costs, memory or device features."""
        memory = obs.get("node_memory_bytes")
        if batch.node_cost is None or memory is None or batch.device_features is None or batch.edge_attr is None:
            raise ValueError("the placement state needs obs['node_device_cost'], obs['node_memory_bytes'], "
                             "obs['device_features'] and obs['edge_features']; this env's observation lacks one")
        memory = np.asarray(memory, dtype=np.float64)
        if obs.get("node_mask") is not None:
            memory = memory[np.asarray(obs["node_mask"], dtype=bool)]
        memory = torch.as_tensor(memory)
        cost = batch.node_cost.double()[:, :n_devices]
        scale = cost.min(1).values.sum().clamp_min(1e-12)
        devices = batch.device_features[0, :n_devices].double()
        edges = batch.edge_index.cpu()
        nbytes = torch.as_tensor(bytes_from_edge_features(batch.edge_attr[:, 0].cpu().numpy()))
        in_bytes = torch.zeros(cost.shape[0], dtype=torch.float64).index_add_(0, edges[1], nbytes)
        after = lambda x: x.flip(0).cumsum(0).flip(0) - x  # noqa: E731  sums over the ops after each
        working_rest = torch.cat([torch.cummax(memory[:, 1].flip(0), 0).values.flip(0)[1:], memory.new_zeros(1)])
        whole = cost.sum(0) / scale
        return cls(cost=cost / scale, whole=whole, rest=after(cost) / scale, weights=memory[:, 0],
                   working=memory[:, 1], weights_rest=after(memory[:, 0]), working_rest=working_rest,
                   balanced=1.0 / (1.0 / whole.clamp_min(1e-12)).sum(), done=cost.min(1).values.cumsum(0) / scale,
                   capacity=10.0 ** devices[:, MEMORY_COLUMN], link_s=10.0 ** -devices[:, LINK_COLUMN] / scale,
                   src=edges[0], dst=edges[1], nbytes=nbytes, in_bytes=torch.where(in_bytes > 0, in_bytes, 1.0))

    def placed(self, i: "Tensor | slice", load: Tensor, weights_on: Tensor, working_on: Tensor,
               produced_on: Tensor, previous: Tensor, balance: bool = False) -> Tensor:
        """(K, M, D, P) the columns of ops `i` (M of them) that depend on the ops before each: from their
        sums load, weights_on, working_on (largest working set), produced_on (input bytes made on each device)
        and previous (one-hot of the op before), all (K, M, D). P: `PLACED`, plus `BALANCE_COLUMNS` with
        `balance`."""
        after = load + self.cost[i]
        busiest = load.amax(-1, keepdim=True)
        working = torch.maximum(working_on, self.working[i, None])
        need = weights_on + self.weights[i, None] + working
        need_rest = need + self.weights_rest[i, None] + (self.working_rest[i, None] - working).clamp_min(0.0)
        in_bytes = self.in_bytes[i, None]
        elsewhere = (in_bytes - produced_on).clamp_min(0.0)
        columns = [load, after, after - busiest, need / self.capacity, produced_on / in_bytes,
                   elsewhere * self.link_s, previous, need_rest / self.capacity]
        if balance:
            share = after / self.balanced
            columns += [share, share / self.done[i, None].clamp_min(1e-12)]
        return torch.stack(columns, -1).clamp(-CLIP, CLIP).float()

    def fixed(self) -> Tensor:
        """(N, D, STATE_FEATURES - `PLACED`) the columns that no placement changes: progress, whole, whole_gap,
        rest."""
        n, d = self.cost.shape
        progress = (torch.arange(n, dtype=torch.float64) / n)[:, None].expand(n, d)
        whole = self.whole.expand(n, d)
        columns = [progress, whole, whole / self.whole.min() - 1, self.rest]
        return torch.stack(columns, -1).clamp(-CLIP, CLIP).float()

    def teacher_forced(self, placements: Tensor, balance: bool = False) -> Tensor:
        """(K, N, D, P) every op's placed columns under `placements` (K, N), each from the ops before it (P:
        `placed`'s)."""
        k, n = placements.shape
        d = self.cost.shape[1]
        onehot = torch.nn.functional.one_hot(placements, d).to(torch.float64)  # (K, N, D)
        before = lambda x: torch.cumsum(x, 1) - x  # noqa: E731  sums over the ops before each
        load = before(onehot * self.cost)
        weights_on = before(onehot * self.weights[:, None])
        working = onehot * self.working[:, None]
        working_on = torch.cat([working.new_zeros(k, 1, d), torch.cummax(working, 1).values[:, :-1]], 1)
        produced_on = torch.zeros_like(onehot).index_add_(1, self.dst, onehot[:, self.src] * self.nbytes[:, None])
        previous = torch.cat([onehot.new_zeros(k, 1, d), onehot[:, :-1]], 1)
        return self.placed(slice(None), load, weights_on, working_on, produced_on, previous, balance)


class PlacementState(nn.Module):
    """The state term (module docstring): ``MLP([state_{id}, P z_i]) -> (K, N, D)`` logits to add.

    Args:
        channels: H, the width of the op embeddings z.
        hidden: width of the MLP.
        balance: add the columns share and pace (`BALANCE_COLUMNS`, module docstring).
    """

    def __init__(self, channels: int, hidden: int = 32, balance: bool = False) -> None:
        super().__init__()
        self.balance = balance
        #: How many of the state's columns (the first) depend on the placement.
        self.n_placed = PLACED + BALANCE_COLUMNS * balance
        self.embed = nn.Linear(channels, hidden)
        self.state = nn.Linear(STATE_FEATURES + BALANCE_COLUMNS * balance, hidden, bias=False)
        self.out = nn.Linear(hidden, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def fixed_part(self, z: Tensor, costs: GraphCosts) -> Tensor:
        """(N, D, hidden) the first layer's share that no placement changes: the op embeddings and the fixed
        columns."""
        fixed = costs.fixed()
        return self.embed(z)[:, None, :] + fixed @ self.state.weight[:, self.n_placed:].T

    def forward(self, base: Tensor, fixed_part: Tensor, placed: Tensor) -> Tensor:
        """Some ops' logits: their `base` logits (M, D), `fixed_part` (M, D, hidden) and placed columns
        (K, M, D, `n_placed`) -> (K, M, D) logits, with a device the op would overflow masked out (``-inf``: its
        memory_after column above 1, as the simulator counts memory) unless every device would overflow."""
        hidden = placed @ self.state.weight[:, :self.n_placed].T + fixed_part
        logits = base + self.out(torch.relu(hidden)).squeeze(-1)
        overflows = placed[..., MEMORY_AFTER] > 1.0
        overflows &= ~overflows.all(-1, keepdim=True)
        return logits.masked_fill(overflows, float("-inf"))

    def teacher_forced(self, z: Tensor, costs: GraphCosts, base: Tensor, placements: Tensor) -> Tensor:
        """(K, N, D) every op's logits under `placements` (K, N): `base` (N, D) plus the state term, masked."""
        return self(base, self.fixed_part(z, costs), costs.teacher_forced(placements, self.balance))

    def decode(self, z: Tensor, costs: GraphCosts, base: Tensor, num_samples: int, deterministic: bool
               ) -> tuple[Tensor, Tensor]:
        """Draw `num_samples` placements op by op in topological order, each op's logits `base` (N, D) plus the
        state term of the ops drawn before it, masked (`forward`): placements (K, N) int64 and the logits they were
        drawn from (K, N, D) (differentiable). The mask keeps every device within its memory: a device's need only
        grows as ops are added, so a placement whose every step fits fits as a whole."""
        n, d = base.shape
        k = num_samples
        fixed_part = self.fixed_part(z, costs)
        placements = torch.zeros(k, n, dtype=torch.long)
        logits = []
        zeros = lambda: torch.zeros(k, 1, d, dtype=torch.float64)  # noqa: E731
        load, weights_on, working_on, previous = zeros(), zeros(), zeros(), zeros()
        produced = torch.zeros(k, n, d, dtype=torch.float64)  # input bytes of every op made on each device so far
        consumers = _consumers(costs, n)
        rows = torch.arange(k)
        for i in range(n):
            placed = costs.placed(slice(i, i + 1), load, weights_on, working_on, produced[:, i:i + 1], previous,
                                  self.balance)
            step = self(base[i:i + 1], fixed_part[i:i + 1], placed)[:, 0]  # (K, D)
            logits.append(step)
            with torch.no_grad():
                if deterministic:
                    device = step.argmax(-1)
                else:
                    device = torch.multinomial(torch.softmax(step, -1), 1).squeeze(1)
            placements[:, i] = device
            onehot = torch.nn.functional.one_hot(device, d).to(torch.float64)[:, None]  # (K, 1, D)
            load = load + onehot * costs.cost[i]
            weights_on = weights_on + onehot * costs.weights[i]
            working_on = torch.maximum(working_on, onehot * costs.working[i])
            previous = onehot
            edges, targets = consumers[i]
            if len(targets):  # accumulate: two edges may reach the same consumer
                produced.index_put_((rows[:, None].expand(k, len(targets)), targets.expand(k, -1),
                                     device[:, None].expand(k, len(targets))),
                                    costs.nbytes[edges].expand(k, -1), accumulate=True)
        return placements, torch.stack(logits, 1)


def _consumers(costs: GraphCosts, n: int) -> list[tuple[Tensor, Tensor]]:
    """Per op: the indices of its out-edges and their consumers."""
    order = torch.argsort(costs.src, stable=True)
    counts = torch.bincount(costs.src, minlength=n).tolist()
    out, start = [], 0
    for count in counts:
        edges = order[start:start + count]
        out.append((edges, costs.dst[edges]))
        start += count
    return out
