"""The imitation placer's network: GO's (`agents.go.policy.GOPolicy`) with its ops decided in topological order,
each seeing where the ops before it went (`agents.nn.placement_state.PlacementState`).

::

    obs --GOPolicy._logits-->  base logits (N, D), op embeddings z (N, H)        one pass, as GO
        --PlacementState-->    + MLP([state_{id}, P z_i])                        state: load, memory, producers...
                               op by op in topological order when drawing (K placements at once),
                               every op at once from a given placement when scoring it (teacher forcing)

Still one forward pass of the network per placement, no measurement and no search: the op-by-op loop runs only the
small state MLP. GO's search machinery (groups, the refinement stage) does not apply: a grouped or refined policy
is refused.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from agents.core.base import PolicySpec
from agents.go.policy import GOPolicy
from agents.nn.placement_state import GraphCosts, PlacementState
from agents.nn.policy import PolicySample

__all__ = ["SequentialGOPolicy"]


class SequentialGOPolicy(GOPolicy):
    """GO's network plus the placement-state term (module docstring). `balance`: the state's share and pace
    columns (`agents.nn.placement_state`); the rest: `GOPolicy`'s arguments."""

    def __init__(self, spec: PolicySpec, balance: bool = False, **go_settings: Any) -> None:
        super().__init__(spec, **go_settings)
        self.state = PlacementState(self.hidden_channels, balance=balance)

    def _check_per_op(self) -> None:
        if int(self.n_groups) or self.refiner is not None:
            raise ValueError("the sequential policy decides every op on its own: no search groups or refinement "
                             "stage (they are GO's single-graph search)")

    def _base(self, obs: Mapping[str, Any]) -> tuple[Tensor, Tensor, GraphCosts]:
        self._check_per_op()
        logits, z, batch = self._forward(obs)
        return logits, z, GraphCosts.of_observation(obs, batch, logits.shape[1])

    @staticmethod
    def _scored(logits: Tensor, placements: Tensor) -> tuple[Tensor, Tensor]:
        """(K, N, D) logits and (K, N) placements -> log_prob (K,), mean entropy per decision ()."""
        log_p = torch.log_softmax(logits, -1)
        log_prob = log_p.gather(2, placements[..., None]).squeeze(-1).sum(1)
        entropy = -(log_p.exp() * torch.nan_to_num(log_p, neginf=0.0)).sum(-1).mean()
        return log_prob, entropy

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        base, z, costs = self._base(obs)
        placements, logits = self.state.decode(z, costs, base, num_samples, deterministic)
        log_prob, entropy = self._scored(logits, placements)
        return PolicySample(placements, log_prob, entropy, {"n_ops": float(base.shape[0])},
                            embedding=torch.cat([z.mean(0), z.amax(0)]), decisions=float(base.shape[0]))

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        base, z, costs = self._base(obs)
        logits = self.state.teacher_forced(z, costs, base, taken.actions)
        log_prob, entropy = self._scored(logits, taken.actions)
        return PolicySample(taken.actions, log_prob, entropy, embedding=torch.cat([z.mean(0), z.amax(0)]),
                            decisions=float(taken.actions.shape[-1]))

    def placement_log_prob(self, obs: Mapping[str, Any], placement: np.ndarray) -> Tensor:
        base, z, costs = self._base(obs)
        target = torch.as_tensor(np.asarray(placement), dtype=torch.long).view(1, -1)
        logits = self.state.teacher_forced(z, costs, base, target)
        return torch.log_softmax(logits, -1).gather(2, target[..., None]).mean()
