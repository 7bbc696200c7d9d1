"""`RNNAgent`: the seq2seq placer of Mirhoseini et al. (2017) trained with the shared REINFORCE trainer.

>>> env = gym.make("DevicePlacement-v0", model="bert", backend="simulated")
>>> agent = RNNAgent(n_groups=8, seed=0).learn(env, budget=500)

Training follows the paper: the reward is ``-sqrt(latency)`` (here relative to the reference placement,
`placement_gym.wrappers.SqrtLatencyReward`; faster = higher), the baseline a moving average of the reward,
REINFORCE on the log-probability of the whole placement. K placements are decoded from one encoding per
update (`samples_per_update`), as the shared trainer's bandit mode does.
"""
from __future__ import annotations

from typing import Any

import torch

from agents.common.base import PolicySpec
from agents.common.coarse_to_fine import SPLIT_PATIENCE
from agents.common.heuristic_start import HEURISTIC_START, ZERO_SHOT_OVERRIDE
from agents.common.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.common.reinforce import ReinforceConfig
from placement_gym.coarsen import COARSEN_ABOVE, MAX_NODES
from placement_gym.wrappers import SqrtLatencyReward

from .policy import RNNPolicy

__all__ = ["RNNAgent", "REWARDS"]

#: ``"neg_sqrt_latency"``: the paper's reward; ``"env"``: whatever reward the env gives (default: speedup).
REWARDS = ("neg_sqrt_latency", "env")


class RNNAgent(PolicyGradientAgent):
    """Mirhoseini et al.'s RNN placer (see the module docstring and `RNNPolicy`).

    Args:
        n_groups: G, op groups (contiguous chunks of the topological order) that the decoder places. Fewer
            groups = fewer decisions to learn from a small budget: on the simulated paper profile with 500
            placements (3 seeds) G=8 found mixed placements faster than GPU-only on ResNet (10.83 vs 11.32 ms)
            and Inception (12.08 vs 12.36 ms) for every seed, G=16 for 2 of 3 seeds, G=32 (the hierarchical
            planner's 20 x devices) hardly left GPU-only. Raise it for larger budgets.
        hidden_dim: LSTM width.
        refine: per-op refinement after the group decoder (`agents.common.refine.OpRefiner`): single ops may
            leave their group's device, so placements that split a group are within reach.
        refine_boundary: the refinement proposes moving ops at a device boundary to their neighbours' device
            (`agents.common.refine`, boundary moves; False: overrides from the op's embedding alone).
        split_patience: coarse to fine (`agents.common.coarse_to_fine`): after this many placements in a row
            without a new best, halve the groups (the decoder decodes twice as many), down to one per op; None:
            the `n_groups` stay (README, convergence).
        split_refit: after a split, fit the run's best placement into the policy (the final distillation's
            steps, `PolicyGradientAgent.refit_best`; no placement measured): the longer decoder's distribution is
            not its parent's, and without the refit the search restarts from far off its best.
        reward: one of `REWARDS`.
        learning_rate, samples_per_update, entropy_coef, baseline_decay, max_grad_norm: REINFORCE settings
            (`agents.common.reinforce.ReinforceConfig`, mode "bandit").
        imitation_coef, elites, distill_steps, distill_seconds: self-imitation (default 0.5, with the refinement's
            boundary moves: README, convergence) and final distillation (`ReinforceConfig`).
        algorithm, ppo: train with ``"reinforce"`` (the paper's) or ``"ppo"`` and its settings
            (`agents.common.policy_gradient`).
        heuristic_start: ``"off"``, ``"measure"`` or ``"refit"``: the placements the costs suggest, measured before the
            policy samples (`agents.common.heuristic_start`; not in the paper).
        seed, torch_threads, device: see `agents.common.base.BaseAgent`.
        coarsen_above, max_nodes: graphs of more than `coarsen_above` ops are learned and placed as at most
            `max_nodes` clusters of ops (`agents.common.run`, `placement_gym.coarsen`; None: never).
        zero_shot_override: after training over many graphs, ``predict`` on a new graph moves every op that saves
            more on its cheapest device than the move adds on links plus this many per-submodel overheads
            (`agents.common.run`, "Zero-shot"; off once a run on one graph has measured its start). None or 0: off.
    """

    name = "rnn"

    def __init__(self, n_groups: int = 8, hidden_dim: int = 64, refine: bool = True, refine_boundary: bool = True,
                 split_patience: int | None = SPLIT_PATIENCE, split_refit: bool = True,
                 reward: str = "neg_sqrt_latency",
                 learning_rate: float = 1e-3, samples_per_update: int = 8, entropy_coef: float = 0.01,
                 baseline_decay: float = 0.9, max_grad_norm: float | None = 1.0, imitation_coef: float = 0.5,
                 elites: int = 4, distill_steps: int = 1000,
                 distill_seconds: float | None = DISTILL_SECONDS, algorithm: str = "reinforce",
                 ppo: "dict[str, Any] | None" = None, heuristic_start: str = HEURISTIC_START, *,
                 seed: int | None = None,
                 torch_threads: int | None = 1, device: "str | torch.device" = "cpu",
                 coarsen_above: int | None = COARSEN_ABOVE, max_nodes: int = MAX_NODES,
                 zero_shot_override: float | None = ZERO_SHOT_OVERRIDE) -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if n_groups < 1:
            raise ValueError(f"n_groups must be >= 1, got {n_groups}")
        config = ReinforceConfig(mode="bandit", learning_rate=learning_rate, samples_per_update=samples_per_update,
                                 entropy_coef=entropy_coef, baseline_decay=baseline_decay, max_grad_norm=max_grad_norm,
                                 imitation_coef=imitation_coef, elites=elites, distill_steps=distill_steps,
                                 distill_seconds=distill_seconds, split_patience=split_patience)
        super().__init__(config, algorithm=algorithm, ppo=ppo, heuristic_start=heuristic_start, seed=seed,
                         torch_threads=torch_threads, device=device, coarsen_above=coarsen_above, max_nodes=max_nodes,
                         zero_shot_override=zero_shot_override)
        self.n_groups, self.hidden_dim, self.refine, self.reward = int(n_groups), hidden_dim, refine, reward
        self.refine_boundary, self.split_patience, self.split_refit = refine_boundary, split_patience, split_refit
        self.learning_rate, self.samples_per_update, self.entropy_coef = learning_rate, samples_per_update, entropy_coef
        self.baseline_decay, self.max_grad_norm = baseline_decay, max_grad_norm

    def hyperparameters(self) -> dict[str, Any]:
        return dict(n_groups=self.n_groups, hidden_dim=self.hidden_dim, refine=self.refine,
                    refine_boundary=self.refine_boundary, split_patience=self.split_patience,
                    split_refit=self.split_refit, reward=self.reward,
                    learning_rate=self.learning_rate, samples_per_update=self.samples_per_update,
                    entropy_coef=self.entropy_coef, baseline_decay=self.baseline_decay,
                    max_grad_norm=self.max_grad_norm, seed=self.seed, torch_threads=self.torch_threads,
                    **self.algorithm_options(), **self.coarsen_options(), **self.transfer_options())

    def build_policy(self, spec: PolicySpec) -> RNNPolicy:
        return RNNPolicy(spec, self.n_groups, self.hidden_dim, self.refine, self.refine_boundary)

    def agent_env(self, env):
        """The run's env, with the paper's reward (``-sqrt(latency)``) unless ``reward="env"``."""
        return SqrtLatencyReward(env) if self.reward == "neg_sqrt_latency" else env
