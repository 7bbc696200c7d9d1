"""The policy contract every trained placer follows, and the vectorised categorical it samples with.

A policy is an ``nn.Module`` with two methods:

    act(obs, num_samples=1, deterministic=False) -> PolicySample
        encode the observation once and draw `num_samples` actions from it, with their log-probabilities
        (differentiable), the policy's entropy, what is needed to score the same decisions again (``replay``)
        and a summary of the observation (``embedding``, read by a critic);
    evaluate(obs, taken: PolicySample) -> PolicySample
        the log-probabilities and entropy of the decisions in `taken` (an earlier ``act`` on the same
        observation) under the policy's *current* weights. PPO needs it to compare the new policy with the one
        that drew the samples; REINFORCE does not call it.

Both trainers (`agents.algos.reinforce`, `agents.algos.ppo`) and every agent (HSDAG, Placeto, the RNN placer,
Post) use these, so a policy written once trains with either algorithm.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from placement_gym.wrappers import group_action_mask

__all__ = ["PolicySample", "categorical_log_prob", "first_of_groups", "group_majority", "group_majority_placement",
           "group_mean_logits", "groups_at_device_boundary", "sample_categorical", "with_uniform_share"]


@dataclass
class PolicySample:
    """What a policy's ``act`` (or ``evaluate``) returns for one observation.

    Attributes:
        actions: ``(K, *action_shape)`` int64, one action per sample (K = num_samples); for DevicePlacement-v0
            (K, N) devices per node, for the node-by-node env (K,) devices.
        log_prob: (K,) log-probability of each action (differentiable; sum over the action's parts).
        entropy: () or (K,) entropy of the distribution, averaged per decision (differentiable).
        info: extra scalars to log (e.g. ``{"n_groups": 12}``).
        replay: the policy's own record of its decisions beyond ``actions`` (e.g. HSDAG's parsing choices and
            per-group devices), read back by its ``evaluate``; empty when ``actions`` say it all.
        embedding: (E,) summary of the observation the decisions were made from (a critic's input), or None.
        decisions: M, the number of independent decisions in one action (groups or ops placed; 1 for one op of
            the node-by-node env): ``entropy`` is their mean, ``log_prob`` their sum. A trainer that weights the
            entropy per decision (``entropy_per_decision``) multiplies ``entropy`` by it.
    """

    actions: Tensor
    log_prob: Tensor
    entropy: Tensor
    info: dict[str, float] = field(default_factory=dict)
    replay: dict[str, Any] = field(default_factory=dict)
    embedding: Tensor | None = None
    decisions: float = 1.0


def sample_categorical(logits: Tensor, num_samples: int = 1, deterministic: bool = False,
                       generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Draw `num_samples` joint samples from M independent categoricals, vectorised (one op for all M, unlike
    SB3's per-dimension `MultiCategoricalDistribution`).

    Args:
        logits: (M, D) unnormalised log-probabilities of M decisions over D choices.
        num_samples: K.
        deterministic: return the argmax K times.
        generator: torch generator for the draws (default: torch's global one).

    Returns:
        actions (K, M) int64, log_prob (K,) = sum over the M decisions, entropy () = mean entropy per decision.
    """
    log_p = torch.log_softmax(logits, dim=-1)  # (M, D)
    if deterministic:
        actions = log_p.argmax(-1).expand(num_samples, -1)
    else:
        actions = torch.multinomial(log_p.exp(), num_samples, replacement=True, generator=generator).T  # (K, M)
    log_prob = log_p.gather(1, actions.T).sum(0)  # (K,)
    entropy = -(log_p.exp() * log_p).sum(-1).mean()
    return actions.contiguous(), log_prob, entropy


def categorical_log_prob(logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """Score given joint actions under M independent categoricals (`sample_categorical`'s ``evaluate`` side).

    Args:
        logits: (M, D).
        actions: (K, M) int64.

    Returns:
        log_prob (K,) = sum over the M decisions, entropy () = mean entropy per decision.
    """
    log_p = torch.log_softmax(logits, dim=-1)
    log_prob = log_p.gather(1, actions.T.to(log_p.device)).sum(0)
    entropy = -(log_p.exp() * log_p).sum(-1).mean()
    return log_prob, entropy


def group_majority(groups: np.ndarray, placement: np.ndarray, n_devices: int,
                   mask: np.ndarray | None = None) -> np.ndarray:
    """(G,) int64 the device most ops of each group have in `placement` (ties: the lowest index), among the
    devices that can run the whole group where `mask` is given.

    A group placer scores a whole placement (imitation, distillation, Post's cross-entropy step) through its
    groups' devices; for the placements it drew itself every op of a group has that device. A placement the env
    repaired (``unsupported="repair"`` moved an op of the group to another device) can have a majority the
    group's masked policy never chooses; the majority among the devices it can choose is the one it can learn.

    Args:
        groups: (N,) int64 group of every op, 0..G-1.
        placement: (N,) int64 device of every op.
        n_devices: D.
        mask: (N, D) bool which device can run each op (``obs["action_mask"]``), or None.
    """
    groups = np.asarray(groups, dtype=np.int64)
    n_groups = int(groups.max()) + 1
    votes = np.zeros((n_groups, n_devices), dtype=np.int64)
    np.add.at(votes, (groups, np.asarray(placement, dtype=np.int64)), 1)
    if mask is not None:
        votes = np.where(group_action_mask(groups, mask, n_groups), votes, -1)
    return votes.argmax(1)


def group_majority_placement(groups: np.ndarray, placement: np.ndarray, n_devices: int,
                             mask: np.ndarray | None = None) -> np.ndarray:
    """(N,) int64 `placement` (N,) with every op on its group's majority device (`group_majority`): the placement
    nearest it that a placer deciding one device per group of ops (`groups` (N,)) can return."""
    return group_majority(groups, np.asarray(placement), n_devices, mask)[groups]


def group_mean_logits(logits: Tensor, groups: Tensor) -> Tensor:
    """(G, D) one decision's logits per group: the mean of its ops' `logits` (N, D); `groups` (N,) int64, every
    value 0..G-1 used (contiguous groups of a coarse-to-fine placer, `agents.search.coarse_to_fine`)."""
    g = int(groups.max()) + 1
    total = logits.new_zeros(g, logits.shape[1]).index_add(0, groups, logits)
    return total / torch.bincount(groups, minlength=g).unsqueeze(1).to(logits.dtype)


def with_uniform_share(logits: Tensor, explore: float, decisions: int | None = None) -> Tensor:
    """(M, D) log of (1 - s) softmax(`logits`) + s / D, with s = min(1, `explore` / `decisions`) (default M): about
    `explore` of a placement's `decisions` device decisions drawn uniformly at random however sure the policy is
    (`logits` unchanged when `explore` is 0). The mode stays the same while s < 1; at s = 1 (`explore` >=
    `decisions`) every row is uniform and its argmax is device 0, so a deterministic placement must not read a
    share that can reach 1 (HSDAG's boundary share, `agents.hsdag.HSDAGPolicy.explore_around`). Why: a policy
    gradient collapses the group distributions early in a run (GO's, under PPO, to nearly zero entropy per decision),
    after which no sample moves a group's device and the search stops; Post's cross-entropy step keeps a floor the
    same way (`agents.post.PostPolicy.fit`). Used by GO's single-graph search and HSDAG (``explore``)."""
    if explore <= 0:
        return logits
    share = min(1.0, explore / (decisions or logits.shape[0]))
    return torch.log((1 - share) * torch.softmax(logits, -1) + share / logits.shape[-1])


def groups_at_device_boundary(placement: Tensor, edge_index: Tensor, groups: Tensor) -> Tensor:
    """(M,) int64 the distinct groups (of `groups` (N,), the group of every op) that hold an op with a producer or
    consumer (an edge of `edge_index` (2, E)) on another device in `placement` (N,): where a search that has found
    `placement` can move a device boundary. Post's and HSDAG's boundary exploration (`agents.post.PostPolicy
    .explore_boundary`, `agents.hsdag.HSDAGPolicy.explore_around`) give these groups back a share of the uniform
    distribution."""
    src, dst = edge_index[0], edge_index[1]
    crossing = placement[src] != placement[dst]
    return torch.unique(groups[torch.cat([src[crossing], dst[crossing]])])


def first_of_groups(groups: Tensor) -> Tensor:
    """(G,) the first op of every group of `groups` (N,) int64 contiguous groups 0..G-1 in op order: where a
    placement constant on the groups reads its group decisions."""
    return torch.searchsorted(groups, torch.arange(int(groups[-1]) + 1, device=groups.device))
