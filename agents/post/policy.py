"""Post's policy: one independent categorical distribution over the devices per op group (Gao et al., 2018).

    p(placement) = prod_g softmax(theta_g)[device of g]

The parameters theta (G, D) are the distribution itself, not a network's output: the cross-entropy step can set
them to the elites' device frequencies in closed form (`PostPolicy.fit`), and PPO moves them by gradient. With
``shared_device_logits`` theta_g = u_g + b: every group's own logits u_g plus one logit per device b shared by all
groups (zero at first: uniform). The distributions are the same family; b gives a gradient step a direction that
moves every group toward a device at once (with u alone each group's gradient sees only its neighbours' current
devices, and from uniform the groups settle in runs on different devices). The cross-entropy step still sets
theta in closed form (u takes theta - b).
Groups are contiguous chunks of the topological order (``n_groups``; None = one per op). theta is stored per
op, (N, D), every op of a group holding its group's values (theta_g is their mean, so gradient steps and the
cross-entropy step keep them equal): `split` halves the groups (coarse to fine,
`agents.search.coarse_to_fine`) without changing the distribution, each half starting from its parent's theta.

Post does not transfer, by design: theta is the placement distribution of ONE graph on ONE device list (group g
of its training graph, device index d), not a function of what the graph or the devices are, so there is
nothing to carry to another graph or device set. This keeps what makes Post the most sample-efficient agent on
one graph (a free distribution moved in closed form by the cross-entropy step); a size-free variant would be a
network reading the graph, i.e. another agent (hsdag, placeto, rnn, ppo). Using a Post policy on another graph
or device count raises `ValueError` saying so (`POST_IS_PER_GRAPH`); to "fine-tune" Post on a new graph, train a
new Post agent on it.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from agents.core.base import PolicySpec
from agents.nn.groups import split_groups
from agents.nn.policy import (
    PolicySample, categorical_log_prob, first_of_groups, group_majority, group_mean_logits, groups_at_device_boundary,
    sample_categorical, with_uniform_share,
)
from placement_gym.wrappers import contiguous_groups

__all__ = ["POST_IS_PER_GRAPH", "PostPolicy"]

#: Why a Post policy serves only its training graph and device list, and what to use instead.
POST_IS_PER_GRAPH = (
    "Post learns one free device distribution per op group of the graph it was trained on (group g, device index "
    "d), so it cannot place another graph or device set; to fine-tune, train a new PostAgent on the new env; for "
    "a checkpoint that runs on any graph and device set use hsdag, placeto, rnn, ppo or ppo-node")


class PostPolicy(nn.Module):
    """Independent per-group device distributions (module docstring).

    Args:
        spec: sizes from the env (`PolicySpec`, with ``n_ops``).
        n_groups: G contiguous groups of ops (None: one per op).
        shared_device_logits: add one logit per device shared by all groups (module docstring).
    """

    def __init__(self, spec: PolicySpec, n_groups: int | None = None, shared_device_logits: bool = False) -> None:
        super().__init__()
        if spec.n_ops is None:
            raise ValueError("PostPolicy is built for one graph: its PolicySpec needs n_ops")
        self.n_ops, self.n_devices = int(spec.n_ops), spec.n_devices
        g = self.n_ops if n_groups is None else min(int(n_groups), self.n_ops)
        self.register_buffer("groups", torch.as_tensor(contiguous_groups(self.n_ops, g)), persistent=False)
        # G now (saved: a split policy reloads with its groups); theta per op, uniform at first.
        self.register_buffer("n_groups", torch.tensor(g))
        self.op_logits = nn.Parameter(torch.zeros(self.n_ops, spec.n_devices))
        # one logit per device added to every group's (zero at first: uniform); a parameter only when asked
        self.device_logits = nn.Parameter(torch.zeros(spec.n_devices)) if shared_device_logits else None

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if self.device_logits is not None and prefix + "device_logits" not in state_dict:
            # saved before the shared device logits: zero ones give the same distributions
            state_dict[prefix + "device_logits"] = torch.zeros_like(self.device_logits)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.groups = torch.as_tensor(contiguous_groups(self.n_ops, int(self.n_groups)), device=self.op_logits.device)

    @property
    def logits(self) -> Tensor:
        """(G, D) theta: each group's mean of its ops' logits (all equal within a group)."""
        logits = group_mean_logits(self.op_logits, self.groups)
        return logits if self.device_logits is None else logits + self.device_logits

    @torch.no_grad()
    def split(self) -> bool:
        """Halve every group (coarse to fine; each half keeps its parent's theta); False when already per op."""
        if int(self.n_groups) >= self.n_ops:
            return False
        groups, g = split_groups(self.n_ops, int(self.n_groups))
        self.groups, self.n_groups = torch.as_tensor(groups, device=self.op_logits.device), self.n_groups.new_tensor(g)
        return True

    def _check(self, obs: Mapping[str, Any]) -> None:
        n = int(np.shape(obs["node_features"])[0])
        d = int(np.shape(obs["action_mask"])[-1]) if "action_mask" in obs else self.n_devices
        if (n, d) != (self.n_ops, self.n_devices):
            raise ValueError(f"this Post policy was built for a graph of {self.n_ops} ops on {self.n_devices} devices, "
                             f"the observation has {n} ops on {d} devices: {POST_IS_PER_GRAPH}")

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        """K placements: actions (K, N), log_prob (K,), entropy () per group; group devices as replay."""
        self._check(obs)
        group_actions, log_prob, entropy = sample_categorical(self.logits, num_samples, deterministic)
        return PolicySample(group_actions[:, self.groups], log_prob, entropy,
                            {"n_groups": float(self.n_groups)}, {"group_actions": group_actions},
                            decisions=float(self.n_groups))

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        """`taken`'s group devices scored under the current distributions."""
        group_actions = taken.actions[:, first_of_groups(self.groups)]  # the current groups' (a split keeps them constant)
        log_prob, entropy = categorical_log_prob(self.logits, group_actions)
        return PolicySample(taken.actions, log_prob, entropy, replay=taken.replay, decisions=float(self.n_groups))

    def group_devices(self, placements: np.ndarray) -> np.ndarray:
        """(M, G) each group's most common device in each of the placements (M, N)."""
        groups = self.groups.cpu().numpy()
        return np.stack([group_majority(groups, placement, self.n_devices)
                         for placement in np.atleast_2d(np.asarray(placements, dtype=np.int64))])

    def placement_log_prob(self, obs: Mapping[str, Any], placement: np.ndarray) -> Tensor:
        """() log-likelihood, per group, of `placement` (N,) (each group scored by its ops' majority device)."""
        target = torch.as_tensor(self.group_devices(placement), device=self.logits.device)
        return categorical_log_prob(self.logits, target)[0][0] / self.logits.shape[0]

    @torch.no_grad()
    def fit(self, placements: np.ndarray, smoothing: float) -> None:
        """The cross-entropy step: move every group's distribution toward the device frequencies of the elite
        `placements` (M, N): p <- (1 - smoothing) p + smoothing freq (smoothing 1 = the elites' frequencies,
        the closed-form cross-entropy minimiser; a little probability is kept on every device)."""
        devices = torch.as_tensor(self.group_devices(placements), device=self.logits.device)  # (M, G)
        freq = nn.functional.one_hot(devices, self.n_devices).float().mean(0)  # (G, D)
        self._set_probabilities((1 - smoothing) * torch.softmax(self.logits, -1) + smoothing * freq)

    @torch.no_grad()
    def explore_boundary(self, placement: np.ndarray, edge_index: np.ndarray, share: float) -> int:
        """Give the groups at a device boundary of `placement` (N,) back `share` of the uniform distribution:
        p_g <- (1 - share) p_g + share / D for every group g holding an op with a producer or consumer (an edge
        of `edge_index` (2, E)) on another device in `placement`. Returns how many groups that was.

        Why (our addition, `PostAgent`'s ``boundary_explore``): the cross-entropy steps make the distributions
        nearly deterministic (every other device all but never drawn) long before the groups are fine, so after a
        split the halves at the best cut can move only by such a rare draw each, and the search stays at the coarse
        groups' cut; groups at a boundary are where a finer cut, or an op joining its neighbours' device, can
        pay."""
        device = self.op_logits.device
        placement = torch.as_tensor(np.asarray(placement, dtype=np.int64), device=device)
        edge_index = torch.as_tensor(np.asarray(edge_index, dtype=np.int64), device=device).reshape(2, -1)
        marked = groups_at_device_boundary(placement, edge_index, self.groups)
        if marked.numel():
            logits = self.logits  # (G, D), computed afresh
            # each marked group is one decision drawn uniformly with probability `share`
            logits[marked] = with_uniform_share(logits[marked], share, decisions=1)
            self._set_probabilities(torch.softmax(logits, -1))
        return int(marked.numel())

    def _set_probabilities(self, p: Tensor) -> None:
        """Set theta to the log of the group distributions `p` (G, D) (every device kept >= 1e-3)."""
        logits = torch.log(p.clamp_min(1e-3))
        if self.device_logits is not None:  # the shared part stays; the groups' own part takes the rest
            logits = logits - self.device_logits
        self.op_logits.copy_(logits[self.groups])
