"""`PlacetoAgent`: node-by-node placement trained with the shared REINFORCE trainer (episodic mode).

>>> env = gym.make("DevicePlacement-v0", model="resnet", backend="simulated")
>>> agent = PlacetoAgent(groups=16, seed=0).learn(env, budget=500)
>>> agent.best_placement, agent.best_latency_s

`learn` accepts the whole-placement env (`DevicePlacement-v0`, wrapped here into the node-by-node variant
`placement_gym.wrappers.NodePlacementWrapper`) or a node-by-node env (`DevicePlacementNode-v0`) directly.
Every step re-places one node and measures the new placement, so the budget (placements measured) buys
``budget / n_nodes`` episodes: with 500 placements, one node per op would not even finish one episode on BERT
(376 ops). ``groups`` therefore cuts the topological order into that many contiguous groups of ops that move
together (coarsening, as the RNN placer's co-location groups do); ``groups=None`` places single ops. Starting
every episode from the reference placement (all ops on device 0) and moving one contiguous group at a time
also lets it find moves that sampling each op independently cannot, e.g. "the first 33 ops of ResNet on the
CPU" (the optimum on the simulated paper profile). Rewards are per-step latency improvements; the trainer's baseline is per step index, a moving
average over earlier episodes, as in Placeto.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from agents.common.base import PolicySpec
from agents.common.policy_gradient import PolicyGradientAgent
from agents.common.reinforce import ReinforceConfig
from placement_gym.wrappers import NodePlacementWrapper, contiguous_groups, place_node_by_node

from .policy import PlacetoPolicy

__all__ = ["PlacetoAgent"]


class PlacetoAgent(PolicyGradientAgent):
    """Placeto-like agent (see the module docstring).

    Args:
        hidden_dim, n_layers, directed: `PlacetoPolicy` encoder settings.
        groups: nodes per episode: an int G (topological order cut into G contiguous groups, at most the number
            of ops) or None (every op is a node).
        sweeps: visits of every node per episode.
        gamma: discount of the per-step rewards in the returns. A step's reward is the latency change that
            step's move caused, so most of its credit is immediate; gamma 0.5 still credits a move for what
            the next moves make of it (e.g. a cut that the next group's move removes). With gamma 1 every step
            is credited with the whole rest of the episode: on the simulated ResNet / Inception / BERT
            (budget 500, 3 seeds) gamma 1 missed the best placement on one Inception seed, 0 and 0.5 never did.
        learning_rate, entropy_coef, episodes_per_update, baseline_decay, max_grad_norm: REINFORCE settings
            (`agents.common.reinforce.ReinforceConfig`, mode "episodic").
        algorithm, ppo: train with ``"reinforce"`` (Placeto's) or ``"ppo"`` and its settings
            (`agents.common.policy_gradient`).
        seed, torch_threads, device: see `agents.common.base.BaseAgent`.
    """

    name = "placeto"

    def __init__(self, hidden_dim: int = 64, n_layers: int = 3, directed: bool = True, groups: int | None = 16,
                 sweeps: int = 1, learning_rate: float = 1e-3, entropy_coef: float = 0.01, gamma: float = 0.5,
                 episodes_per_update: int = 1, baseline_decay: float = 0.9, max_grad_norm: float | None = 1.0,
                 algorithm: str = "reinforce", ppo: "dict[str, Any] | None" = None,
                 *, seed: int | None = None, torch_threads: int | None = 1,
                 device: "str | torch.device" = "cpu") -> None:
        if groups is not None and (not isinstance(groups, (int, np.integer)) or groups < 1):
            raise ValueError(f"groups must be a positive int (contiguous groups of ops) or None (one node per op), got {groups!r}")
        config = ReinforceConfig(mode="episodic", learning_rate=learning_rate, entropy_coef=entropy_coef, gamma=gamma,
                                 episodes_per_update=episodes_per_update, baseline_decay=baseline_decay,
                                 max_grad_norm=max_grad_norm)
        super().__init__(config, algorithm=algorithm, ppo=ppo, seed=seed, torch_threads=torch_threads,
                         device=device)
        self.hidden_dim, self.n_layers, self.directed = hidden_dim, n_layers, directed
        self.groups, self.sweeps = None if groups is None else int(groups), int(sweeps)
        self.learning_rate, self.entropy_coef, self.gamma = learning_rate, entropy_coef, gamma
        self.episodes_per_update, self.baseline_decay, self.max_grad_norm = episodes_per_update, baseline_decay, max_grad_norm

    def hyperparameters(self) -> dict[str, Any]:
        return dict(hidden_dim=self.hidden_dim, n_layers=self.n_layers, directed=self.directed, groups=self.groups,
                    sweeps=self.sweeps, learning_rate=self.learning_rate, entropy_coef=self.entropy_coef, gamma=self.gamma,
                    episodes_per_update=self.episodes_per_update, baseline_decay=self.baseline_decay,
                    max_grad_norm=self.max_grad_norm, seed=self.seed, torch_threads=self.torch_threads,
                    **self.algorithm_options())

    def build_policy(self, spec: PolicySpec) -> PlacetoPolicy:
        return PlacetoPolicy(spec, self.hidden_dim, self.n_layers, self.directed)

    # ------------------------------------------------------------------ learning
    def node_groups(self, n_ops: int) -> np.ndarray:
        """(N,) int64 group of every op for a graph of `n_ops` ops (episode order = group order)."""
        if self.groups is None:
            return np.arange(n_ops, dtype=np.int64)
        return contiguous_groups(n_ops, min(self.groups, n_ops))

    def agent_env(self, env):
        """The run's env wrapped in `NodePlacementWrapper` (one group of ops re-placed per step), or as it is
        if it already is node-by-node (`DevicePlacementNode-v0`)."""
        if "current_node" in env.observation_space.spaces:
            return env
        return NodePlacementWrapper(env, groups=self.node_groups(env.unwrapped.graph.n_ops), sweeps=self.sweeps)

    # ------------------------------------------------------------------ inference
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """For a node-by-node observation: the current node's device (a 0-d int64 array). For a whole-placement
        observation (`DevicePlacement-v0`): a complete placement (N,) int64, built like an episode (every group
        in topological order, ``sweeps`` times, starting from ``obs["placement"]``) without measuring anything."""
        if "current_node" in obs:
            return super().predict(obs, deterministic)
        self._require_policy()
        self.policy.eval()

        def choose(node_obs) -> int:
            with torch.no_grad():
                return int(self.policy.act(node_obs, num_samples=1, deterministic=deterministic).actions[0])

        return place_node_by_node(obs, self.node_groups(len(obs["placement"])), choose, self.sweeps)
