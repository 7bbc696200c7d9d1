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

Budget = env steps (= placements measured). The trainer keeps the best placement seen (lowest ``info
["latency_s"]`` among successful steps) and, at the end, re-measures it on the env's backend bypassing the
measurement cache, so the reported latency is not the luckiest of many noisy draws. It also times itself:
``agent_s`` (everything but ``env.step``/``env.reset``) / steps is the agent's compute per placement.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from .base import BaseAgent, PolicySpec, set_seed
from .callbacks import Callback, make_callback

__all__ = [
    "PolicySample", "ReinforceConfig", "ReinforceTrainer", "TrainResult", "ReinforceAgent",
    "sample_categorical", "remeasure",
]


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
    remeasure_best: bool = True
    #: torch intra-op threads while training (graphs of a few hundred ops run fastest on one, and a second
    #: thread spin-waits badly on a busy machine); restored afterwards. None = leave torch's setting.
    torch_threads: int | None = 1

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
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1 or None, got {self.torch_threads}")


@dataclass
class TrainResult:
    """What `ReinforceTrainer.train` found.

    Attributes:
        best_placement: (N,) int64 the best placement seen (None if no step succeeded).
        best_latency_s: its latency re-measured at the end (the best seen if re-measuring is off or failed).
        best_latency_seen_s: its latency when it was first measured during training.
        best_step: the env step (1-based) that found it.
        steps: env steps taken (= placements measured through the env).
        updates: gradient updates made.
        wall_s: total wall time; env_s: time inside env.step/env.reset; agent_s = wall_s - env_s - remeasure_s.
        remeasure_s: time of the final re-measurement.
        history: one dict of statistics per update.
    """

    best_placement: np.ndarray | None
    best_latency_s: float
    best_latency_seen_s: float
    best_step: int
    steps: int
    updates: int
    wall_s: float
    env_s: float
    agent_s: float
    remeasure_s: float
    history: list[dict] = field(default_factory=list)

    # (agent_s includes one-off costs of the first call in a process, e.g. PyG's code generation.)

    @property
    def agent_ms_per_placement(self) -> float:
        return 1e3 * self.agent_s / max(self.steps, 1)

    def summary(self) -> dict[str, Any]:
        """Scalars for logs and result files (no per-update history)."""
        return {
            "best_latency_s": self.best_latency_s,
            "best_latency_seen_s": self.best_latency_seen_s,
            "best_step": self.best_step,
            "steps": self.steps,
            "updates": self.updates,
            "wall_s": self.wall_s,
            "env_s": self.env_s,
            "agent_s": self.agent_s,
            "remeasure_s": self.remeasure_s,
            "agent_ms_per_placement": self.agent_ms_per_placement,
        }


def remeasure(env, placement: np.ndarray) -> float | None:
    """Latency (s) of `placement` measured afresh (`DevicePlacementEnv.measure`); None if it fails."""
    m = env.unwrapped.measure(np.asarray(placement, dtype=np.int64))
    return float(m.latency_s) if m.ok else None


# ------------------------------------------------------------------------------------------- the trainer
class ReinforceTrainer:
    """REINFORCE with a moving-average baseline, entropy bonus and gradient clipping (module docstring).

    Args:
        policy: module with ``act(obs, num_samples, deterministic) -> PolicySample``.
        config: `ReinforceConfig` (defaults if None).
        optimizer: optional; Adam(policy.parameters(), lr=config.learning_rate) by default.
        placement_of: ``(next_obs, action, info) -> (N,) placement`` that was measured, for best-tracking.
            Default: ``info["placement"]`` if present, else ``next_obs["placement"]`` if present, else the action.
    """

    def __init__(self, policy: nn.Module, config: ReinforceConfig | None = None,
                 optimizer: torch.optim.Optimizer | None = None,
                 placement_of: Callable[[Any, Any, Mapping], np.ndarray] | None = None) -> None:
        if not hasattr(policy, "act"):
            raise TypeError(f"{type(policy).__name__} has no act(obs, num_samples, deterministic) method")
        self.policy = policy
        self.config = config or ReinforceConfig()
        self.optimizer = optimizer or torch.optim.Adam(policy.parameters(), lr=self.config.learning_rate)
        self.placement_of = placement_of or _measured_placement
        # Running statistics (kept across `train` calls, so training can be resumed).
        self._baseline: float | None = None            # bandit: EMA of the reward
        self._step_baselines: list[float] = []          # episodic: EMA of the return at each step index
        self._adv_sq: float | None = None              # EMA of advantage**2, for normalisation

    # ----------------------------------------------------------------------------------------- train
    def train(self, env, budget: int, seed: int | None = None, callback: Callback | None = None) -> TrainResult:
        """Run `budget` env steps of REINFORCE on `env` and return what was found."""
        if not isinstance(budget, (int, np.integer)) or budget < 1:
            raise ValueError(f"budget must be a positive number of env steps (placements), got {budget!r}")
        threads = torch.get_num_threads()
        if self.config.torch_threads is not None:
            torch.set_num_threads(self.config.torch_threads)
        try:
            return self._train(env, int(budget), seed, callback or Callback())
        finally:
            torch.set_num_threads(threads)

    def _train(self, env, budget: int, seed: int | None, callback: Callback) -> TrainResult:
        cfg = self.config
        set_seed(seed)
        if seed is not None:
            env.action_space.seed(seed)
        self._best = (math.inf, None, 0)  # (latency, placement, step)
        self._steps, self._env_s, self._stop = 0, 0.0, False
        history: list[dict] = []
        start = time.perf_counter()
        callback.on_training_start(int(budget), asdict(cfg))

        obs = self._reset(env, seed)
        self.policy.train()
        while self._steps < budget and not self._stop:
            if cfg.mode == "bandit":
                obs, stats = self._bandit_update(env, obs, int(budget), callback)
            else:
                stats = self._episodic_update(env, int(budget), callback)
            stats["best_latency_s"] = self._best[0]
            stats["step"] = self._steps
            history.append(stats)
            callback.on_update(self._steps, stats)

        best_seen, best_placement, best_step = self._best
        best_latency, remeasure_s = best_seen, 0.0
        if cfg.remeasure_best and best_placement is not None:
            t = time.perf_counter()
            fresh = remeasure(env, best_placement)
            remeasure_s = time.perf_counter() - t
            if fresh is not None:
                best_latency = fresh
        wall = time.perf_counter() - start
        result = TrainResult(best_placement, best_latency, best_seen, best_step, self._steps, len(history), wall,
                             self._env_s, wall - self._env_s - remeasure_s, remeasure_s, history)
        callback.on_training_end(result.summary())
        return result

    # ------------------------------------------------------------------------------------- collection
    def _reset(self, env, seed: int | None = None):
        t = time.perf_counter()
        obs, _ = env.reset(seed=seed)
        self._env_s += time.perf_counter() - t
        return obs

    def _step(self, env, action: np.ndarray, callback: Callback):
        """One env step with bookkeeping: timing, best placement, callback."""
        t = time.perf_counter()
        next_obs, reward, terminated, truncated, info = env.step(action)
        self._env_s += time.perf_counter() - t
        self._steps += 1
        latency = info.get("latency_s", math.inf)
        if info.get("ok", True) and latency < self._best[0]:
            self._best = (float(latency), np.asarray(self.placement_of(next_obs, action, info), dtype=np.int64).copy(), self._steps)
        if callback.on_step(self._steps, float(reward), info) is False:
            self._stop = True
        return next_obs, float(reward), terminated or truncated, info

    def _bandit_update(self, env, obs, budget: int, callback: Callback) -> tuple[Any, dict]:
        """K placements from one encoding of `obs`, K env steps, one gradient step."""
        k = min(self.config.samples_per_update, budget - self._steps)
        sample = self.policy.act(obs, num_samples=k)
        actions = sample.actions.detach().cpu().numpy()
        rewards = []
        next_obs = obs
        for action in actions:
            next_obs, reward, done, _ = self._step(env, action, callback)
            rewards.append(reward)
            if done:
                next_obs = self._reset(env)
            if self._stop:
                break
        n = len(rewards)  # fewer than k if a callback stopped training
        r = torch.as_tensor(rewards, dtype=torch.float32, device=sample.log_prob.device)
        advantage = self._advantage(r, slot=None)
        stats = self._gradient_step(sample.log_prob[:n], advantage, sample.entropy)
        stats.update(reward_mean=float(r.mean()), reward_max=float(r.max()), **sample.info)
        return next_obs, stats

    def _episodic_update(self, env, budget: int, callback: Callback) -> dict:
        """`episodes_per_update` episodes one action at a time, per-step returns and baselines, one step."""
        log_probs, entropies, advantages, episode_rewards = [], [], [], []
        for _ in range(self.config.episodes_per_update):
            if self._steps >= budget or self._stop:
                break
            obs = self._reset(env)
            rewards, done = [], False
            while not done and self._steps < budget and not self._stop:
                sample = self.policy.act(obs, num_samples=1)
                obs, reward, done, _ = self._step(env, sample.actions[0].detach().cpu().numpy(), callback)
                log_probs.append(sample.log_prob[0])
                entropies.append(sample.entropy.mean())
                rewards.append(reward)
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


def _measured_placement(next_obs, action, info: Mapping) -> np.ndarray:
    if "placement" in info:
        return np.asarray(info["placement"])
    if isinstance(next_obs, Mapping) and "placement" in next_obs:
        return np.asarray(next_obs["placement"])
    return np.asarray(action)


# ------------------------------------------------------------------------------------------- agent glue
class ReinforceAgent(BaseAgent):
    """A `BaseAgent` whose `learn` is the shared `ReinforceTrainer` (HSDAG, Placeto and the RNN placer).

    Subclasses implement `build_policy(spec)` (a module with ``act``) and `hyperparameters()`, and pass the
    trainer settings to this constructor.

    Args:
        reinforce: `ReinforceConfig` or a dict of its fields.
        progress_bar: show a tqdm bar during `learn`.
        tensorboard_log: directory for TensorBoard logs (None = no logging).
        seed, device: see `BaseAgent`.
    """

    def __init__(self, reinforce: "ReinforceConfig | Mapping[str, Any] | None" = None, *, progress_bar: bool = False,
                 tensorboard_log: str | None = None, seed: int | None = None, device: "str | torch.device" = "cpu") -> None:
        super().__init__(seed=seed, device=device)
        self.reinforce = reinforce if isinstance(reinforce, ReinforceConfig) else ReinforceConfig(**dict(reinforce or {}))
        self.progress_bar, self.tensorboard_log = progress_bar, tensorboard_log
        self.trainer: ReinforceTrainer | None = None
        self.result: TrainResult | None = None

    def learn(self, env, budget: int, seed: int | None = None, callback: Callback | None = None) -> "ReinforceAgent":
        """Train with REINFORCE for `budget` env steps; sets `best_placement`, `best_latency_s`, `history`,
        `train_summary` and `result`. Calling it again continues training (same optimizer and baselines)."""
        seed = self.seed if seed is None else seed
        set_seed(seed)  # before building the policy, so its initial weights follow the seed too
        policy = self.setup(PolicySpec.from_env(env, self.feature_families))
        if self.trainer is None:
            self.trainer = ReinforceTrainer(policy, self.reinforce)
        cb = make_callback(callback, progress_bar=self.progress_bar, tensorboard_log=self.tensorboard_log)
        self.result = self.trainer.train(env, budget, seed=seed, callback=cb)
        self.best_placement, self.best_latency_s = self.result.best_placement, self.result.best_latency_s
        self.history, self.train_summary = self.result.history, self.result.summary()
        return self
