"""THE REINFORCE trainer shared by HSDAG, Placeto and the RNN placer (read `ReinforceTrainer.train` top to bottom).

A policy is any ``nn.Module`` with

    act(obs, num_samples=1, deterministic=False) -> PolicySample

that encodes the observation once and draws `num_samples` actions from it, returning their log-probabilities
(differentiable) and the policy's entropy. Two ways to collect experience (`ReinforceConfig.mode`):

``"bandit"`` (one-step envs: `DevicePlacement-v0`, where a step is a whole placement and its reward does not
    depend on earlier steps): draw K = `samples_per_update` placements from ONE encoding, measure each (K env
    steps), and make one gradient step on ``-(A_k * log p(a_k))`` with A_k = (r_k - b) / scale. Sampling several
    placements per forward/backward pass is what keeps the agent's compute per placement small.
``"episodic"`` (multi-step envs, e.g. the node-by-node `DevicePlacementNode-v0` of Placeto): roll out whole
    episodes one action at a time, with per-step rewards r_t, returns G_t = sum_{t'>=t} gamma^(t'-t) r_t' and a
    baseline b_t per step index (moving average over earlier episodes, as Placeto does); one gradient step per
    `episodes_per_update` episodes.

Both modes use (each switchable, for ablations):
    baseline            exponential moving average of the reward (decay `baseline_decay`); off = raw rewards,
                        as the HSDAG authors' code did;
    normalize_advantage divide advantages by a moving RMS of (r - b), so the step size does not depend on the
                        reward's units;
    entropy_coef        bonus on the policy's (per-decision) entropy; 0 = none, as the HSDAG code;
    max_grad_norm       gradient-norm clipping (None = off).

The trainer only learns: the budget, the best placement, its fresh re-measurement, the timing and the
callbacks are the shared run loop's (`agents.common.run`), whose ``run.env`` the trainer steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from .base import BaseAgent, PolicySpec
from .run import RunLoop

__all__ = ["PolicySample", "ReinforceAgent", "ReinforceConfig", "ReinforceTrainer", "sample_categorical"]


# ------------------------------------------------------------------------------------------- policy output
@dataclass
class PolicySample:
    """What a policy's ``act`` returns for one observation.

    Attributes:
        actions: (K, *action_shape) int64, one action per sample (K = num_samples); for DevicePlacement-v0
            (K, N) devices per node, for the node-by-node env (K,) devices.
        log_prob: (K,) log-probability of each action (differentiable; sum over the action's parts).
        entropy: () or (K,) entropy of the distribution, averaged per decision (differentiable).
        info: extra scalars to log (e.g. ``{"n_groups": 12}``).
    """

    actions: Tensor
    log_prob: Tensor
    entropy: Tensor
    info: dict[str, float] = field(default_factory=dict)


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


# ------------------------------------------------------------------------------------------- configuration
@dataclass
class ReinforceConfig:
    """Settings of `ReinforceTrainer` (see the module docstring for what each does)."""

    mode: Literal["bandit", "episodic"] = "bandit"
    learning_rate: float = 1e-3
    samples_per_update: int = 8
    episodes_per_update: int = 1
    gamma: float = 1.0
    baseline: bool = True
    baseline_decay: float = 0.9
    normalize_advantage: bool = True
    entropy_coef: float = 0.01
    max_grad_norm: float | None = 1.0

    def __post_init__(self) -> None:
        if self.mode not in ("bandit", "episodic"):
            raise ValueError(f"mode must be 'bandit' (one-step envs) or 'episodic' (multi-step envs), got {self.mode!r}")
        if self.samples_per_update < 1 or self.episodes_per_update < 1:
            raise ValueError("samples_per_update and episodes_per_update must be >= 1")
        if not 0.0 <= self.baseline_decay < 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {self.baseline_decay}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.entropy_coef < 0:
            raise ValueError(f"entropy_coef must be >= 0, got {self.entropy_coef}")


# ------------------------------------------------------------------------------------------- the trainer
class ReinforceTrainer:
    """REINFORCE with a moving-average baseline, entropy bonus and gradient clipping (module docstring).

    Args:
        policy: module with ``act(obs, num_samples, deterministic) -> PolicySample``.
        config: `ReinforceConfig` (defaults if None).
        optimizer: optional; Adam(policy.parameters(), lr=config.learning_rate) by default.
    """

    def __init__(self, policy: nn.Module, config: ReinforceConfig | None = None,
                 optimizer: torch.optim.Optimizer | None = None) -> None:
        self.policy = policy
        self.config = config or ReinforceConfig()
        self.optimizer = optimizer or torch.optim.Adam(policy.parameters(), lr=self.config.learning_rate)
        # Running statistics (kept across `train` calls, so training can be resumed).
        self._baseline: float | None = None            # bandit: EMA of the reward
        self._step_baselines: list[float] = []          # episodic: EMA of the return at each step index
        self._adv_sq: float | None = None              # EMA of advantage**2, for normalisation

    # ----------------------------------------------------------------------------------------- train
    def train(self, run: RunLoop, env: gym.Env, seed: int | None = None) -> None:
        """REINFORCE on `env` (``run.env`` or a wrapper of it) until the run's budget is spent."""
        if seed is not None:
            env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        self.policy.train()
        while not run.done:
            if self.config.mode == "bandit":
                obs, stats = self._bandit_update(run, env, obs)
            else:
                stats = self._episodic_update(run, env)
            run.record_update(stats)

    # ------------------------------------------------------------------------------------- collection
    def _bandit_update(self, run: RunLoop, env: gym.Env, obs) -> tuple[Any, dict]:
        """K placements from one encoding of `obs`, K env steps, one gradient step."""
        k = min(self.config.samples_per_update, run.remaining)
        sample = self.policy.act(obs, num_samples=k)
        actions = sample.actions.detach().cpu().numpy()
        rewards = []
        next_obs = obs
        for action in actions:
            next_obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(float(reward))
            if terminated or truncated:
                next_obs, _ = env.reset()
            if run.stopped:
                break
        n = len(rewards)  # fewer than k if a callback stopped training
        r = torch.as_tensor(rewards, dtype=torch.float32, device=sample.log_prob.device)
        advantage = self._advantage(r, slot=None)
        stats = self._gradient_step(sample.log_prob[:n], advantage, sample.entropy)
        stats.update(reward_mean=float(r.mean()), reward_max=float(r.max()), **sample.info)
        return next_obs, stats

    def _episodic_update(self, run: RunLoop, env: gym.Env) -> dict:
        """`episodes_per_update` episodes one action at a time, per-step returns and baselines, one step."""
        log_probs, entropies, advantages, episode_rewards = [], [], [], []
        for _ in range(self.config.episodes_per_update):
            if run.done:
                break
            obs, _ = env.reset()
            rewards, done = [], False
            while not done and not run.done:
                sample = self.policy.act(obs, num_samples=1)
                obs, reward, terminated, truncated, _ = env.step(sample.actions[0].detach().cpu().numpy())
                done = terminated or truncated
                log_probs.append(sample.log_prob[0])
                entropies.append(sample.entropy.mean())
                rewards.append(float(reward))
            returns = np.zeros(len(rewards))
            running = 0.0
            for t in reversed(range(len(rewards))):
                running = rewards[t] + self.config.gamma * running
                returns[t] = running
            g = torch.as_tensor(returns, dtype=torch.float32)
            advantages.append(torch.stack([self._advantage(g[t:t + 1], slot=t)[0] for t in range(len(g))]) if len(g) else g)
            episode_rewards.append(float(sum(rewards)))
        if not log_probs:
            return {"reward_mean": 0.0}
        advantage = torch.cat(advantages).to(log_probs[0].device)
        stats = self._gradient_step(torch.stack(log_probs), advantage, torch.stack(entropies))
        stats.update(reward_mean=float(np.mean(episode_rewards)), reward_max=float(np.max(episode_rewards)))
        return stats

    # ---------------------------------------------------------------------------------------- learning
    def _advantage(self, r: Tensor, slot: int | None) -> Tensor:
        """(r - b) / scale with b the moving-average baseline (of the step index `slot` in episodic mode),
        then update b and the scale. The first batch initialises b with its own mean."""
        cfg, decay = self.config, self.config.baseline_decay
        mean = float(r.mean())
        if cfg.baseline:
            if slot is None:
                b = mean if self._baseline is None else self._baseline
                self._baseline = decay * b + (1 - decay) * mean
            else:
                while len(self._step_baselines) <= slot:
                    self._step_baselines.append(math.nan)
                prev = self._step_baselines[slot]
                b = mean if math.isnan(prev) else prev
                self._step_baselines[slot] = decay * b + (1 - decay) * mean
            centred = r - b
        else:
            centred = r
        if cfg.normalize_advantage:
            sq = float((centred ** 2).mean())
            self._adv_sq = sq if self._adv_sq is None else decay * self._adv_sq + (1 - decay) * sq
            return centred / (math.sqrt(self._adv_sq) + 1e-8)
        return centred

    def _gradient_step(self, log_prob: Tensor, advantage: Tensor, entropy: Tensor) -> dict:
        cfg = self.config
        policy_loss = -(advantage.detach() * log_prob).mean()
        entropy_term = entropy.mean()
        loss = policy_loss - cfg.entropy_coef * entropy_term
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float("nan")
        if cfg.max_grad_norm is not None:
            grad_norm = float(nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm))
        self.optimizer.step()
        return {
            "loss": float(loss.detach()),
            "policy_loss": float(policy_loss.detach()),
            "entropy": float(entropy_term.detach()),
            "baseline": float(self._baseline) if self._baseline is not None else 0.0,
            "grad_norm": grad_norm,
        }


# ------------------------------------------------------------------------------------------- agent glue
class ReinforceAgent(BaseAgent):
    """A `BaseAgent` trained by the shared `ReinforceTrainer` (HSDAG, Placeto and the RNN placer).

    Subclasses implement `build_policy(spec)` (a module with ``act``) and `hyperparameters()`, pass the trainer
    settings to this constructor, and may override `agent_env` to train on a wrapper of the run's env (the
    node-by-node variant, another reward). Calling `learn` again continues training (same optimizer and
    baselines).

    Args:
        reinforce: `ReinforceConfig` or a dict of its fields.
        seed, torch_threads, device: see `BaseAgent`.
    """

    def __init__(self, reinforce: "ReinforceConfig | Mapping[str, Any] | None" = None, *, seed: int | None = None,
                 torch_threads: int | None = 1, device: "str | torch.device" = "cpu") -> None:
        super().__init__(seed=seed, torch_threads=torch_threads, device=device)
        self.reinforce = reinforce if isinstance(reinforce, ReinforceConfig) else ReinforceConfig(**dict(reinforce or {}))
        self.trainer: ReinforceTrainer | None = None

    def agent_env(self, env: gym.Env) -> gym.Env:
        """The env the trainer steps: the run's env itself, or a wrapper of it (subclasses)."""
        return env

    def train(self, run: RunLoop, seed: int | None) -> None:
        env = self.agent_env(run.env)
        policy = self.setup(PolicySpec.from_env(env, self.feature_families), seed)
        if self.trainer is None:
            self.trainer = ReinforceTrainer(policy, self.reinforce)
        self.trainer.train(run, env, seed)
