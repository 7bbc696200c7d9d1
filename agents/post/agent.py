"""`PostAgent`: Post (Gao et al., NeurIPS 2018: "Post: Device Placement with Cross-Entropy Minimization and
Proximal Policy Optimization").

>>> env = gym.make("DevicePlacement-v0", model="resnet", backend="simulated")
>>> agent = PostAgent(seed=0).learn(env, budget=500)
>>> agent.best_placement, agent.best_latency_s, agent.predict(env.reset()[0])

The placement distribution is a product of independent softmax distributions, one per op group
(`PostPolicy`). Training interleaves the two updates of the paper:

* PPO on every batch of sampled placements: the project's shared trainer (`agents.common.ppo.PPOTrainer`,
  bandit mode, moving-average baseline: the distribution does not depend on an observation, so there is
  nothing for a critic to read);
* every ``ce_every`` batches, the cross-entropy step: the elite fraction ``elite_fraction`` of the placements
  sampled since the last such step (the fastest ones) and the distributions are moved toward their device
  frequencies (`PostPolicy.fit`, closed form, ``ce_smoothing``).

Unlike the other learned agents, a Post policy serves only the graph and device list it was trained on (its
parameters ARE that graph's per-group distributions): using it on another graph or device count raises a
`ValueError` that says so (`agents.post.policy.POST_IS_PER_GRAPH`). We kept it per-graph rather than make it
size-free because the free per-group distribution is what makes it the most sample-efficient agent here.

Like every learned agent it ends by distilling its best placement into the policy (``distill_steps``) so
that ``predict`` (every group's most likely device) is what the search found.

Defaults, measured on the simulated ``paper`` preset (budget 500; "to 2%" = placements until within 2% of the
optimum, median over the seeds, one that never got there counted as never; README, convergence): 4 coarse groups,
halved after 30 placements without a new best (``split_patience``, coarse to fine, our addition,
`agents.common.coarse_to_fine`), and a cross-entropy step every 3 updates (``ce_every``, ``elite_fraction=0.1,
ce_smoothing=0.5``): to 2% in 97 (ResNet) / 93 (Inception) placements over seeds 0-9, 100 / 100 over seeds 10-19,
median best 0.00% / 0.08% above the optimum (measured before the boundary exploration below was added). The earlier
defaults (16 groups, ``split_patience=80``, ``ce_every=5``) took 107 / 183 and 120 / 171 and ended 0.00% / 0.08% and
0.00% / 0.90% above: 16 groups start with 2^16 placements to search where a cut of 4 groups is one of 16, and a
slower split leaves the finer groups too few placements. On ``server`` the same change took ResNet / Inception from
4.4% / 10.0% above the best known (median, seeds 0-4) to 1.3% / 0.9%. Tried on the way (seeds 0-4 or 0-9):
``split_patience=25`` 92 / 87 but one Inception seed stuck at the GPU alone (+5.2%), 35 110 / 104, ``ce_every=2``
one seed in ten 4.3% above; from 16 groups, faster cross-entropy steps (``ce_every`` 1-3, ``ce_smoothing=1``, more
elites, elites kept across steps) moved "to 2%" by +-20 placements at best, and a first step toward the heuristic
start's best placement trapped the search at the best single device.

Boundary exploration (``boundary_explore=0.5``, our addition, 0 turns it off): at every split, the groups that hold
an op with a graph neighbour on another device in the run's best placement get back half of the uniform distribution
(`PostPolicy.explore_boundary`). Without it the cross-entropy steps have made every distribution nearly sure (~1e-3
on the other devices) before the groups are fine, so on the ``edge`` preset every seed stayed at the 16-group cut or
an island short of the best (ResNet / Inception 9.6% / 7.2% above the best known, seeds 0-4); with it 0.0% / 0.3%,
within 2% in 340 / 129 placements (4 of 5 seeds each; over seeds 0-9 the medians went from 10.0% / 7.5% to 0.75% /
0.60%); on ``paper`` to 2% in 85 / 91 (seeds 0-4; 94 / 101.5 over seeds 0-9), every seed within 0.64% of the optimum
(README, "Post explores at its device boundaries"). A share of 0.3 kept ``paper`` where it was but left ``edge``
ResNet 3.8% above; the neighbours' devices as the target instead of uniform did worse on ``edge`` (its third device
is the one to try).

Memory fit (``fit_memory=True``, our addition, False turns it off): a sample that puts more on a device than it holds
is measured with ops at the edge of that device's region given back to their neighbours' devices
(`agents.common.reinforce`, ``fit_memory``). Post's groups are sampled independently, so on ``edge`` (a 64 MB
accelerator) a sample that moves ops onto the full accelerator only failed unless it also happened to take others
off; fitted, it is a swap. ``edge`` seeds 0-9, placements to within 2% of the best known: ResNet 283 (seeds within:
6 of 10; seeds 0-4: 155), was never (0 of 10); Inception 3 both ways. A no-op where every device holds every model
(``paper``, ``server``, ``ai_pc``: their results are unchanged).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.common.base import PolicySpec
from agents.common.heuristic_start import HEURISTIC_START
from agents.common.policy import group_majority_placement
from agents.common.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.common.ppo import PPOTrainer
from agents.common.reinforce import ReinforceConfig
from agents.common.rollout import Decision, Measured
from placement_gym.coarsen import COARSEN_ABOVE, MAX_NODES

from .policy import POST_IS_PER_GRAPH, PostPolicy

__all__ = ["PostAgent", "PostTrainer"]


class PostTrainer(PPOTrainer):
    """The shared PPO trainer plus Post's periodic cross-entropy step (`after_update`).

    Args:
        policy: a `PostPolicy`.
        config: `PPOConfig` (its ``split_patience``: coarse to fine, the shared trainer's
            `PolicyGradientTrainer.coarse_to_fine`).
        imitate: the agent's ``imitate`` (only used with ``imitation_coef > 0``).
        ce_every, elite_fraction, ce_smoothing: see `PostAgent`.
        on_split: called with the run after every split of the groups (`PostAgent.explore_boundary`).
    """

    def __init__(self, policy: PostPolicy, config, imitate=None, *, ce_every: int = 5, elite_fraction: float = 0.1,
                 ce_smoothing: float = 0.5, on_split=None) -> None:
        super().__init__(policy, config, imitate, on_split)
        self.ce_every, self.elite_fraction, self.ce_smoothing = ce_every, elite_fraction, ce_smoothing
        self.updates = 0
        self.pool: list[tuple[float, np.ndarray]] = []  # (latency, placement) since the last cross-entropy step

    def after_update(self, measured: "list[Decision | Measured]", stats: dict) -> None:
        for decision in measured:
            self.pool += list(zip(decision.latencies, decision.placements))
        stats["n_groups"] = float(self.policy.n_groups)
        self.updates += 1
        if self.updates % self.ce_every:
            return
        self.pool.sort(key=lambda item: item[0])
        elites = self.pool[:max(1, int(round(self.elite_fraction * len(self.pool))))]
        self.policy.fit(np.stack([placement for _, placement in elites]), self.ce_smoothing)
        stats["ce_elites"], stats["ce_elite_latency_s"] = float(len(elites)), float(elites[-1][0])
        self.pool = []


class PostAgent(PolicyGradientAgent):
    """Post: per-group softmax distributions trained by PPO and cross-entropy minimisation (module docstring).

    Args:
        n_groups: G contiguous op groups with one distribution each (None: one per op).
        learning_rate, samples_per_update, entropy_coef, baseline_decay, max_grad_norm: the PPO settings shared
            with REINFORCE (`agents.common.reinforce.ReinforceConfig`, bandit mode).
        ppo: further PPO settings (`agents.common.ppo.PPOConfig`: n_epochs, clip_range, target_kl, ...).
        ce_every: PPO updates between two cross-entropy steps.
        elite_fraction: share of the placements sampled since the last cross-entropy step that are elites.
        ce_smoothing: how far a cross-entropy step moves the distributions to the elites' frequencies (1: all
            the way, the paper's closed form).
        split_patience: coarse to fine (our addition): after this many placements in a row without a new best,
            halve every group, down to one per op (`agents.common.coarse_to_fine`; None: the groups stay).
        boundary_explore: after each split, the groups at a device boundary of the best placement so far get back
            this share of the uniform distribution (our addition, module docstring; 0: off).
        search_proposals: after every update, this many cost-guided proposals around the run's best placement
            (`agents.common.reinforce`, ``search_proposals``; 0: off, the paper). Our addition.
        fit_memory: a sample that overfills a device is measured with ops at that device's region's edge given
            back (`agents.common.reinforce`, ``fit_memory``; False: off, the paper). Our addition (module docstring).
        imitation_coef, elites, distill_steps, distill_seconds: self-imitation and final distillation (`ReinforceConfig`).
        heuristic_start: ``"off"``, ``"measure"`` or ``"refit"``: the placements the costs suggest, measured before the
            policy samples (`agents.common.heuristic_start`; not in the paper).
        seed, torch_threads, device: see `agents.common.base.BaseAgent`.
        coarsen_above, max_nodes: graphs of more than `coarsen_above` ops are learned and placed as at most
            `max_nodes` clusters of ops (`agents.common.run`, `placement_gym.coarsen`; None: never).
    """

    name = "post"
    # Post's distribution is per op group of its training graph (`agents.post.policy`): no transfer, by design.
    size_free = False
    size_bound_reason = POST_IS_PER_GRAPH

    def __init__(self, n_groups: int | None = 4, learning_rate: float = 0.05, samples_per_update: int = 10,
                 entropy_coef: float = 0.0, baseline_decay: float = 0.9, max_grad_norm: float | None = 1.0,
                 ppo: "dict[str, Any] | None" = None, ce_every: int = 3, elite_fraction: float = 0.1,
                 ce_smoothing: float = 0.5, split_patience: int | None = 30, boundary_explore: float = 0.5,
                 search_proposals: int = 0, fit_memory: bool = True,
                 imitation_coef: float = 0.0, elites: int = 4, distill_steps: int = 1000,
                 distill_seconds: float | None = DISTILL_SECONDS, heuristic_start: str = HEURISTIC_START,
                 *, seed: int | None = None, torch_threads: int | None = 1,
                 device: "str | torch.device" = "cpu", coarsen_above: int | None = COARSEN_ABOVE,
                 max_nodes: int = MAX_NODES) -> None:
        if n_groups is not None and n_groups < 1:
            raise ValueError(f"n_groups must be >= 1 or None (one distribution per op), got {n_groups}")
        if ce_every < 1 or not 0 < elite_fraction <= 1 or not 0 < ce_smoothing <= 1:
            raise ValueError("ce_every must be >= 1, elite_fraction and ce_smoothing in (0, 1]")
        if not 0 <= boundary_explore <= 1:
            raise ValueError(f"boundary_explore must be in [0, 1] (0: off), got {boundary_explore}")
        config = ReinforceConfig(mode="bandit", learning_rate=learning_rate, samples_per_update=samples_per_update,
                                 entropy_coef=entropy_coef, baseline_decay=baseline_decay, max_grad_norm=max_grad_norm,
                                 imitation_coef=imitation_coef, elites=elites, distill_steps=distill_steps,
                                 distill_seconds=distill_seconds, split_patience=split_patience,
                                 search_proposals=search_proposals, fit_memory=fit_memory)
        super().__init__(config, algorithm="ppo", ppo=ppo, heuristic_start=heuristic_start, seed=seed,
                         torch_threads=torch_threads, device=device, coarsen_above=coarsen_above, max_nodes=max_nodes)
        self.n_groups = n_groups
        self.learning_rate, self.samples_per_update, self.entropy_coef = learning_rate, samples_per_update, entropy_coef
        self.baseline_decay, self.max_grad_norm = baseline_decay, max_grad_norm
        self.ce_every, self.elite_fraction, self.ce_smoothing = ce_every, elite_fraction, ce_smoothing
        self.split_patience, self.boundary_explore = split_patience, boundary_explore

    def hyperparameters(self) -> dict[str, Any]:
        options = self.algorithm_options()
        del options["algorithm"]  # always PPO
        return dict(n_groups=self.n_groups, learning_rate=self.learning_rate, samples_per_update=self.samples_per_update,
                    entropy_coef=self.entropy_coef, baseline_decay=self.baseline_decay,
                    max_grad_norm=self.max_grad_norm, ce_every=self.ce_every, elite_fraction=self.elite_fraction,
                    ce_smoothing=self.ce_smoothing, split_patience=self.split_patience,
                    boundary_explore=self.boundary_explore, search_proposals=self.trainer_config.search_proposals,
                    fit_memory=self.trainer_config.fit_memory,
                    seed=self.seed, torch_threads=self.torch_threads,
                    **options,
                    **self.coarsen_options())

    def train(self, run, seed: int | None) -> None:
        if run.many_graphs:  # one distribution per op group of ONE graph: over many graphs it means nothing
            raise ValueError(f"Post cannot train over several graphs (this env draws from {run.base.models}): it "
                             "learns one free device distribution per op group of one graph. Train one PostAgent "
                             "per graph, or use hsdag, placeto, rnn, ppo, ppo-node or go to train across graphs")
        super().train(run, seed)

    def expressible(self, placement: np.ndarray) -> np.ndarray:
        """`placement` with every current group of ops on the device most of its ops have (what Post's
        distributions, one per group, can return)."""
        return group_majority_placement(self.policy.groups.cpu().numpy(), placement, self.policy.n_devices,
                                        self.imitation_obs.get("action_mask"))

    def build_policy(self, spec: PolicySpec) -> PostPolicy:
        return PostPolicy(spec, self.n_groups)

    def make_trainer(self, policy: PostPolicy) -> PostTrainer:
        return PostTrainer(policy, self.trainer_config, self.imitate, ce_every=self.ce_every,
                           elite_fraction=self.elite_fraction, ce_smoothing=self.ce_smoothing,
                           on_split=self.explore_boundary if self.boundary_explore > 0 else None)

    def explore_boundary(self, run) -> None:
        """After a split of the groups: the groups at a device boundary of the run's best placement get back
        ``boundary_explore`` of the uniform distribution (`PostPolicy.explore_boundary`)."""
        if run.best_action is not None:
            self.policy.explore_boundary(run.best_action, self.imitation_obs["edge_index"], self.boundary_explore)
