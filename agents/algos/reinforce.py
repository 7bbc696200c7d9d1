"""THE REINFORCE trainer shared by HSDAG, Placeto, the RNN placer and Post (read `ReinforceTrainer.train` top to
bottom). Its sibling `agents.algos.ppo` trains the same policies with PPO.

A policy follows `agents.nn.policy` (``act(obs, num_samples, deterministic) -> PolicySample``). Two ways
to collect experience (`ReinforceConfig.mode`, `agents.algos.rollout`):

``"bandit"`` (one-step envs: `DevicePlacement-v0`): draw K = `samples_per_update` placements from ONE
    encoding, measure each (K env steps), and make one gradient step on ``-(A_k * log p(a_k))`` with
    A_k = (r_k - b) / scale.
``"episodic"`` (multi-step envs, e.g. the node-by-node `DevicePlacementNode-v0` of Placeto): roll out whole
    episodes one action at a time, with per-step rewards r_t, returns G_t = sum_{t'>=t} gamma^(t'-t) r_t' and a
    baseline b_t per step index (moving average over earlier episodes, as Placeto does); one gradient step per
    `episodes_per_update` episodes.

Both modes use (each switchable, for ablations)::

    baseline            exponential moving average of the reward (decay `baseline_decay`); off = raw rewards,
                        as the HSDAG authors' code did;
    normalize_advantage divide advantages by a moving RMS of (r - b), so the step size does not depend on the
                        reward's units;
    entropy_coef        bonus on the policy's (per-decision) entropy; 0 = none, as the HSDAG code;
    entropy_per_decision the bonus weighs every decision's entropy by `entropy_coef`, as the summed
                        log-probability weighs every decision's log-probability (the bonus is coef x the SUM of the
                        M decisions' entropies); off: coef x their MEAN, whose weight per decision, coef / M,
                        vanishes on a placement of many decisions (per-op ResNet: 176);
    leave_one_out       bandit mode: each of the K placements of an update is compared with the mean reward of the
                        other K - 1 (an unbiased baseline that moves with the policy); episodic mode: each step's
                        return with the mean return at the same step index of the update's other episodes
                        (`episodes_per_update` >= 2; with one, the moving average); off: the moving average,
                        which trails an improving reward so that every advantage is about +1 and the update
                        becomes maximum likelihood of the policy's own samples (with ``normalize_advantage`` a
                        lag that decays as the rewards settle stays an advantage of constant size: the RMS it is
                        divided by decays with it);
    measure_argmax      bandit mode, a run on one graph: after every update, measure the policy's own
                        deterministic placement (its argmax) once, from the budget; the policy's output, not a
                        search, recorded per update as ``argmax_latency_s``. A per-op stochastic policy's best
                        sample understates it;
    max_grad_norm       gradient-norm clipping (None = off).

Two settings add a search-like component to the loss, off by default (the papers' methods; a record lists them
under ``search`` when on)::

    imitation_coef      weight of a self-imitation term, ``-log p(elite placement)`` (per decision) averaged
                        over the `elites` fastest placements measured so far (`agents.algos.rollout.EliteSet`);
                        0 = off (the papers' methods). It makes the policy's own (deterministic) placement
                        converge to what its sampling found, which a policy-gradient step alone does not: a rare
                        fast sample moves the policy by one step, the many slow ones around it by many. The
                        agent supplies ``imitate(placement) -> log-likelihood`` (`PolicyGradientAgent.imitate`);
    elites              how many placements the self-imitation keeps (only with imitation_coef).

The search layer's components inside a trainer's run are not its settings: they are the layer's
(`agents.search.config.SearchConfig`), which acts at the trainer's named hook points::

    search_proposals    after every update of a run on one graph, measure this many cost-guided proposals around
                        the run's best placement (`agents.search.local_search.AroundBest`: block moves drawn by
                        what the observation's per-op costs say they save, and moves at its device boundaries),
                        beside the policy's own samples and from the same budget; what they find reaches the
                        policy through the run's best (HSDAG samples around it), the self-imitation elites,
                        Post's cross-entropy pool and the final distillation; 0 = off (the papers' methods).
                        Bandit mode only (a proposal is a whole placement).
    fit_memory          a sampled placement that puts more on a device than it holds (what the observation's
                        ``node_memory_bytes`` and ``device_features`` say; measured, it would only fail) is
                        measured with ops at the edge of that device's region given back to their neighbours'
                        devices, the sample's own moves last (`agents.search.local_search.BlockSearch.fit_memory`,
                        what the proposals do): a sample that moves a block onto a full accelerator becomes a swap.
                        The policy is scored on its sample, with the fitted placement's reward (to it the fit is
                        part of the env); what was measured reaches the run's best, the elites and Post's
                        cross-entropy pool. A no-op where every device holds its share of every sample (``paper``,
                        ``server``, ``ai_pc``); off = the papers' methods. Bandit mode, runs on one graph only.
    split_patience      coarse to fine (`agents.search.coarse_to_fine`): after this many placements in a row
                        without a new best, the policy halves its contiguous op groups (``policy.split()``),
                        down to one per op; None = the groups stay (only policies with ``split``: Post, the RNN,
                        GO's single-graph search); only on runs on one graph.

The trainer only learns: the budget, the best placement, its fresh re-measurement, the timing and the
callbacks are the shared run loop's (`agents.core.run`), whose ``run.env`` the trainer steps; ``search_proposals``,
``fit_memory`` and ``split_patience`` are the search layer's, which acts at the trainer's named hook points
(`agents.algos.hooks.TrainingHooks`: ``fit_samples`` before the samples are measured, ``proposals`` and
``after_update`` after every update), built from above (`agents.search.attach.SearchDuringTraining`) and handed
in; this module never imports `agents.search`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Literal

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from agents.core.loop import RunLoop
from agents.core.bounds import COEFFICIENT, FLAG, LEARNING_RATE, SHARE, STEPS, check_settings, setting
from placement_gym.schema import Integer, Number, Optional, Text
from agents.nn.policy import PolicySample, sample_categorical

from .hooks import TrainingHooks
from .rollout import (AdvantageEstimator, Decision, EliteSet, Measured, collect_argmax, collect_episode,
                      collect_placements, discounted_returns)

__all__ = ["SWITCHES_OFF", "SWITCHES_ON", "BanditTrainerSettings", "EpisodicTrainerSettings", "FullBanditTrainerSettings",
           "PolicyGradientTrainer", "PolicySample", "ReinforceConfig", "ReinforceTrainer", "TrainerSettings",
           "apply_gradients", "imitation_loss", "sample_categorical"]


@dataclass
class TrainerSettings:
    """The trainer settings an agent takes as keywords in every trainer form (the module docstring says what each
    does). A form (`BanditTrainerSettings`, `FullBanditTrainerSettings`, `EpisodicTrainerSettings`) adds its mode's;
    an agent's ``TRAINER`` is an instance of its form with the agent's defaults
    (`agents.algos.policy_gradient.PolicyGradientAgent`), and `ReinforceConfig` holds every form's settings."""

    #: The collection mode (`ReinforceConfig.mode`) of the form; each form states its own.
    MODE: ClassVar[str] = "bandit"

    learning_rate: float = setting(1e-3, LEARNING_RATE)
    baseline_decay: float = setting(0.9, SHARE)
    entropy_coef: float = setting(0.01, COEFFICIENT)
    leave_one_out: bool = setting(False, FLAG)
    max_grad_norm: float | None = setting(1.0, Optional(Number(positive=True, high=1e6)))
    imitation_coef: float = setting(0.0, COEFFICIENT, component=True)
    elites: int = setting(4, Integer(1, 10_000))

    def __post_init__(self) -> None:
        check_settings(self)
        if self.baseline_decay == 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {self.baseline_decay}")


@dataclass
class BanditTrainerSettings(TrainerSettings):
    """The bandit mode's trainer settings with the moving-average baseline and the advantage's normalisation
    always on (the RNN placer's and Post's keywords)."""

    MODE: ClassVar[str] = "bandit"

    samples_per_update: int = setting(8, STEPS)
    entropy_per_decision: bool = setting(False, FLAG)
    measure_argmax: bool = setting(False, FLAG)


@dataclass
class FullBanditTrainerSettings(BanditTrainerSettings):
    """Every bandit-mode trainer setting: `BanditTrainerSettings` and the switches of the baseline and of the
    advantage's normalisation (HSDAG's and GO's keywords: ``baseline=False, normalize_advantage=False`` are the
    HSDAG authors' REINFORCE)."""

    baseline: bool = setting(True, FLAG)
    normalize_advantage: bool = setting(True, FLAG)


@dataclass
class EpisodicTrainerSettings(TrainerSettings):
    """The episodic mode's trainer settings (Placeto's keywords): returns discounted by `gamma`, one update per
    `episodes_per_update` episodes."""

    MODE: ClassVar[str] = "episodic"

    gamma: float = setting(1.0, SHARE)
    episodes_per_update: int = setting(1, STEPS)


@dataclass
class ReinforceConfig(FullBanditTrainerSettings, EpisodicTrainerSettings):
    """Settings of `ReinforceTrainer` (see the module docstring for what each does): every trainer form's
    settings (each declared once, by its form) and the collection `mode`."""

    mode: Literal["bandit", "episodic"] = setting("bandit", Text(choices=("bandit", "episodic")))

    def __post_init__(self) -> None:
        super().__post_init__()  # every field's declared values
        if self.measure_argmax and self.mode != "bandit":
            raise ValueError("measure_argmax needs mode='bandit' (whole placements); the episodic mode places one "
                             "node per step")


#: The switches that keep updates from collapsing (module docstring), all off: the trainer's defaults, and what
#: the hybrid forms of the agents were tuned with (their ``HYBRID_SETTINGS``).
SWITCHES_OFF = {"entropy_per_decision": False, "leave_one_out": False, "measure_argmax": False}
#: The same switches all on: what the bandit agents (HSDAG, GO, the RNN placer, Post) train with by default (their
#: ``TRAINER``, `agents.algos.policy_gradient.PolicyGradientAgent`).
SWITCHES_ON = dict.fromkeys(SWITCHES_OFF, True)


#: ``imitate(placement (N,) int64) -> ()``: the log-likelihood, per decision, that the current policy produces
#: the placement (differentiable); see `PolicyGradientAgent.imitate`.
Imitate = Callable[[np.ndarray], Tensor]


def imitation_loss(imitate: Imitate | None, elites: EliteSet, coef: float) -> Tensor | float:
    """The self-imitation term of the loss: ``-coef * mean log p(elite placement)`` (`coef`: the search's
    ``imitation_coef``; 0 when off or while no placement was measured)."""
    if coef == 0 or not elites.members:
        return 0.0
    if imitate is None:
        raise ValueError("imitation_coef > 0 needs the agent's imitate(placement) (PolicyGradientAgent.imitate)")
    return -coef * torch.stack([imitate(p) for p in elites.placements]).mean()


def apply_gradients(optimizer: torch.optim.Optimizer, parameters, loss: Tensor, max_grad_norm: float | None) -> float:
    """One optimiser step on `loss`, the gradient norm clipped to `max_grad_norm`; returns the norm (nan if
    not clipped)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = float("nan")
    if max_grad_norm is not None:
        grad_norm = float(nn.utils.clip_grad_norm_(parameters, max_grad_norm))
    optimizer.step()
    return grad_norm


class PolicyGradientTrainer:
    """What the REINFORCE and the PPO trainer share: the policy, its optimiser, the advantage statistics and the
    elite placements (all kept across `train` calls, so training can be resumed), and how a run starts.

    Args:
        policy: module with ``act(obs, num_samples, deterministic) -> PolicySample`` (`agents.nn.policy`).
        config: the trainer's settings (`ReinforceConfig` or `agents.algos.ppo.PPOConfig`).
        optimizer: optional; Adam(policy.parameters(), lr=config.learning_rate) by default.
        imitate: the agent's ``imitate(placement)`` (needed with ``imitation_coef > 0``).
        on_split: called with the run after every split of the policy's groups (the hooks' ``after_update``,
            after their ``after_split``): the agent's reaction to a new grouping (Post's boundary exploration).
        on_update: called with the run after every update (before a split): the agent's reaction to the
            placements measured so far (HSDAG samples around the run's best, ``boundary_explore``).
        hooks: the search layer's points inside the run (`agents.algos.hooks.TrainingHooks`; None: none, a pure
            agent's; `agents.search.attach.SearchDuringTraining`: the layer's), checked against the policy and
            the mode (`TrainingHooks.check`).
    """

    def __init__(self, policy: nn.Module, config: ReinforceConfig, optimizer: torch.optim.Optimizer | None = None,
                 imitate: Imitate | None = None, on_split: Callable[[RunLoop], None] | None = None,
                 on_update: Callable[[RunLoop], None] | None = None, hooks: TrainingHooks | None = None) -> None:
        self.policy, self.config, self.imitate, self.on_split = policy, config, imitate, on_split
        self.on_update = on_update
        self.optimizer = optimizer or torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        self.advantages = AdvantageEstimator(config.baseline, config.baseline_decay, config.normalize_advantage)
        self.elites = EliteSet(config.elites if config.imitation_coef > 0 else 0)
        self.hooks = TrainingHooks() if hooks is None else hooks
        self.hooks.check(policy, config.mode)

    def react(self, run: RunLoop, decisions: list[Decision], stats: dict) -> "list[Decision | Measured]":
        """After every update, with the placements it measured: the search layer's proposals (``proposals``,
        ``search_proposals``), the agent's ``on_update``, then `coarse_to_fine`. Returns the update's decisions and
        the proposals (what was measured since the last update)."""
        measured: list[Decision | Measured] = list(decisions)
        proposals = self.hooks.proposals(run, decisions[0].obs)
        if proposals is not None:
            self.elites.offer([proposals])
            measured.append(proposals)
            stats["search_proposals"] = float(len(proposals.placements))
        if self.on_update is not None:
            self.on_update(run)
        self.coarse_to_fine(run, measured, stats)
        return measured

    def memory_fit(self, run: RunLoop, obs) -> Callable[[np.ndarray], np.ndarray] | None:
        """What fits the sampled actions before they are measured (the hooks' ``fit_samples``: ``fit_memory``);
        None: measure them as drawn. `obs`: the graph as the policy sees it."""
        return self.hooks.fit_samples(run, obs)

    def coarse_to_fine(self, run: RunLoop, decisions: "list[Decision | Measured]", stats: dict) -> None:
        """Halve the policy's groups when the hooks say the search has stalled (``after_update``:
        ``split_patience``, `agents.search.coarse_to_fine`); called after every update with the placements it
        measured; then the hooks' ``after_split`` and the agent's ``on_split``."""
        if self.hooks.after_update(run, decisions) and self.policy.split():
            self.hooks.after_split(run)
            if self.on_split is not None:
                self.on_split(run)

    def comparison(self, r: Tensor) -> Tensor | None:
        """(K,) what each of an update's K rewards `r` (K,) is compared with: the mean of the other K - 1
        (``leave_one_out``), or None (the moving-average baseline, `AdvantageEstimator`)."""
        if not self.config.leave_one_out or r.numel() < 2:
            return None
        return (r.sum() - r) / (r.numel() - 1)

    def step_comparison(self, returns: list[Tensor]) -> list[Tensor] | None:
        """Episodic ``leave_one_out``: per episode of an update, what each step's return G_t (`returns`: one (T_k,)
        tensor per episode) is compared with: the mean G_t of the update's other episodes at the same step index
        (an episode cut short by the budget has fewer steps; a step no other episode reached is compared with
        itself). None: the moving average per step index (`AdvantageEstimator.per_step`)."""
        if not self.config.leave_one_out or len(returns) < 2:
            return None
        length = max(len(g) for g in returns)
        padded = torch.zeros(len(returns), length)
        present = torch.zeros(len(returns), length)
        for k, g in enumerate(returns):
            padded[k, :len(g)], present[k, :len(g)] = g, 1.0
        totals, counts = padded.sum(0), present.sum(0)
        compared = []
        for k, g in enumerate(returns):
            others = (counts - 1)[:len(g)]
            mean_of_others = (totals - padded[k])[:len(g)] / others.clamp_min(1)
            compared.append(torch.where(others > 0, mean_of_others, g))
        return compared

    def step_advantages(self, returns: list[Tensor]) -> list[Tensor]:
        """Episodic mode with the baseline: per episode of an update, the advantages (T_k,) of its step returns
        (`returns`: one (T_k,) tensor per episode), against the other episodes' (`step_comparison`) or the moving
        average per step index, then normalised (`AdvantageEstimator`)."""
        compared = self.step_comparison(returns)
        if compared is None:
            return [self.advantages.per_step(g) for g in returns]
        return [self.advantages(g, values=values) for g, values in zip(returns, compared)]

    def entropy_bonus(self, sample: PolicySample) -> Tensor:
        """The entropy the bonus rewards: the mean per decision, times the number of decisions with
        ``entropy_per_decision`` (their sum, as the log-probability is)."""
        return sample.entropy * sample.decisions if self.config.entropy_per_decision else sample.entropy

    def measure_policy_argmax(self, run: RunLoop, env: gym.Env, obs, next_obs, stats: dict):
        """``measure_argmax``: measure the policy's deterministic placement for `obs` once (one placement of the
        budget), recorded in `stats` as ``argmax_latency_s``; returns the observation to go on from (`next_obs`
        unchanged when nothing was measured: off, over many graphs, or the budget spent)."""
        if not self.config.measure_argmax or run.many_graphs or run.done:
            return next_obs
        decision, next_obs = collect_argmax(self.policy, run, env, obs, fit=self.memory_fit(run, obs))
        self.elites.offer([decision])
        if decision.latencies:
            stats["argmax_latency_s"] = decision.latencies[0]
        return next_obs

    def start(self, env: gym.Env, seed: int | None) -> object:
        """Seed the env's action space, reset it and put the policy in training mode; the first observation."""
        if seed is not None:
            env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        self.policy.train()
        return obs


class ReinforceTrainer(PolicyGradientTrainer):
    """REINFORCE with a moving-average baseline, entropy bonus and gradient clipping (module docstring).

    Args:
        policy, optimizer, imitate, on_split, on_update, hooks: see `PolicyGradientTrainer`.
        config: `ReinforceConfig` (defaults if None).
    """

    def __init__(self, policy: nn.Module, config: ReinforceConfig | None = None,
                 optimizer: torch.optim.Optimizer | None = None, imitate: Imitate | None = None,
                 on_split: Callable[[RunLoop], None] | None = None,
                 on_update: Callable[[RunLoop], None] | None = None, hooks: TrainingHooks | None = None) -> None:
        super().__init__(policy, config or ReinforceConfig(), optimizer, imitate, on_split, on_update, hooks)

    def train(self, run: RunLoop, env: gym.Env, seed: int | None = None) -> None:
        """REINFORCE on `env` (``run.env`` or a wrapper of it) until the run's budget is spent."""
        obs = self.start(env, seed)
        while not run.done:
            if self.config.mode == "bandit":
                obs, stats = self._bandit_update(run, env, obs)
            else:
                stats = self._episodic_update(run, env)
            run.record_update(stats)

    def _bandit_update(self, run: RunLoop, env: gym.Env, obs) -> tuple[object, dict]:
        """K placements from one encoding of `obs`, K env steps, one gradient step."""
        decision, next_obs = collect_placements(self.policy, run, env, obs,
                                                min(self.config.samples_per_update, run.remaining),
                                                fit=self.memory_fit(run, obs))
        r, sample = decision.rewards, decision.sample
        self.elites.offer([decision])
        advantage = self.advantages(r, values=self.comparison(r), key=decision.graph)
        stats = self._gradient_step(sample.log_prob[:len(r)], advantage, self.entropy_bonus(sample))
        stats.update(reward_mean=float(r.mean()), reward_max=float(r.max()), **sample.info)
        next_obs = self.measure_policy_argmax(run, env, decision.obs, next_obs, stats)
        self.react(run, [decision], stats)
        return next_obs, stats

    def _episodic_update(self, run: RunLoop, env: gym.Env) -> dict:
        """`episodes_per_update` episodes one action at a time, per-step returns and baselines, one step."""
        log_probs, entropies, returns, episode_rewards = [], [], [], []
        for _ in range(self.config.episodes_per_update):
            if run.done:
                break
            steps = collect_episode(self.policy, run, env)
            self.elites.offer(steps)
            rewards = [float(step.rewards[0]) for step in steps]
            returns.append(discounted_returns(rewards, self.config.gamma))
            log_probs += [step.sample.log_prob[0] for step in steps]
            entropies += [self.entropy_bonus(step.sample).mean() for step in steps]
            episode_rewards.append(float(sum(rewards)))
        if not log_probs:
            return {"reward_mean": 0.0}
        advantage = torch.cat(self.step_advantages(returns)).to(log_probs[0].device)
        stats = self._gradient_step(torch.stack(log_probs), advantage, torch.stack(entropies))
        stats.update(reward_mean=float(np.mean(episode_rewards)), reward_max=float(np.max(episode_rewards)))
        return stats

    def _gradient_step(self, log_prob: Tensor, advantage: Tensor, entropy: Tensor) -> dict:
        """One step on ``-mean(A * log p) - entropy_coef * mean(entropy) + imitation``; `entropy` as
        `entropy_bonus` weighs it."""
        policy_loss = -(advantage.detach() * log_prob).mean()
        entropy_term = entropy.mean()
        loss = (policy_loss - self.config.entropy_coef * entropy_term
                + imitation_loss(self.imitate, self.elites, self.config.imitation_coef))
        grad_norm = apply_gradients(self.optimizer, self.policy.parameters(), loss, self.config.max_grad_norm)
        baseline = self.advantages.baseline
        return {"loss": float(loss.detach()), "policy_loss": float(policy_loss.detach()),
                "entropy": float(entropy_term.detach()), "baseline": 0.0 if baseline is None else float(baseline),
                "grad_norm": grad_norm}
