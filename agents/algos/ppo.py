"""THE PPO trainer for the project's own policies (HSDAG, Placeto, the RNN placer, Post), beside the REINFORCE
trainer and sharing its collection, advantages and run loop (read `PPOTrainer.train` top to bottom).

Proximal Policy Optimisation (Schulman et al., 2017) in the form SB3 and CleanRL use, for a policy that follows
`agents.nn.policy` (``act`` draws decisions, ``evaluate`` re-scores them under the current weights):

1. collect a rollout without gradients: K placements from one encoding (``mode="bandit"``, one-step envs) or
   `episodes_per_update` whole episodes (``mode="episodic"``, the node-by-node env), as REINFORCE does;
2. advantages: reward (or return) minus a value estimate, ``value="baseline"`` the moving average REINFORCE
   uses (one per step index in episodic mode) or ``value="critic"`` a small MLP on the policy's embedding of
   the observation (`PolicySample.embedding`; in episodic mode with GAE(`gamma`, `gae_lambda`)); divided by a
   moving RMS (`normalize_advantage`);
3. `n_epochs` passes over the rollout in minibatches of `minibatch_size` decisions: the clipped surrogate
   ``-min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)`` with rho = p_new(a) / p_old(a) (`clipped_surrogate`),
   minus `entropy_coef` x entropy, gradient norm clipped to `max_grad_norm`; the critic regresses on the
   rewards/returns. The epochs stop early once the approximate KL between the collecting and the current
   policy exceeds 1.5 x `target_kl` (SB3's rule). With ``imitation_coef > 0`` every step also imitates the
   run's elite placements (`agents.algos.reinforce.imitation_loss`), as the REINFORCE trainer does.

With ``n_epochs=1`` and one minibatch the update is REINFORCE's (rho = 1 on the only step). The critic reads a
detached embedding and has its own optimiser, so it never pulls the policy's encoder; it is part of the trainer
(like the baselines), not of the saved policy.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Literal

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from agents.core.loop import RunLoop
from agents.nn.gnn import MLP

from .hooks import TrainingHooks
from agents.core.bounds import LEARNING_RATE, SHARE, STEPS, setting
from placement_gym.schema import Integer, Number, Optional, Text

from .reinforce import Imitate, PolicyGradientTrainer, ReinforceConfig, apply_gradients, imitation_loss
from .rollout import Decision, Measured, collect_episode, collect_placements, discounted_returns

__all__ = ["PPOConfig", "PPOTrainer", "clipped_surrogate"]

VALUE_ESTIMATES = ("baseline", "critic")


@dataclass
class PPOConfig(ReinforceConfig):
    """`ReinforceConfig` plus PPO's settings (module docstring).

    Attributes:
        n_epochs: passes over each rollout.
        minibatch_size: decisions (placements in bandit mode, steps in episodic mode) per gradient step; None
            = the whole rollout.
        clip_range: eps of the clipped ratio.
        target_kl: stop a rollout's epochs once the approximate KL exceeds 1.5 x this (None: never).
        value: ``"baseline"`` (moving average) or ``"critic"`` (MLP on the policy's embedding).
        gae_lambda: GAE's lambda for the critic in episodic mode (1 = returns minus values).
        critic_learning_rate: the critic's Adam step size.
    """

    n_epochs: int = setting(4, Integer(1, 1000))
    minibatch_size: int | None = setting(None, Optional(STEPS))
    clip_range: float = setting(0.2, Number(positive=True, high=1.0))
    target_kl: float | None = setting(0.05, Optional(Number(positive=True, high=100.0)))
    value: Literal["baseline", "critic"] = setting("baseline", Text(choices=VALUE_ESTIMATES))
    gae_lambda: float = setting(0.95, SHARE)
    critic_learning_rate: float = setting(1e-3, LEARNING_RATE)

    def __post_init__(self) -> None:
        super().__post_init__()  # every field's declared values (`agents.core.bounds.check_settings`)
        if self.clip_range == 1:
            raise ValueError(f"clip_range must be in (0, 1), got {self.clip_range}")


def clipped_surrogate(log_prob: Tensor, old_log_prob: Tensor, advantage: Tensor,
                      clip_range: float) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped policy loss and its diagnostics.

    Args:
        log_prob: (B,) log p_new(a) (differentiable).
        old_log_prob: (B,) log p_old(a) of the policy that drew a.
        advantage: (B,) advantages.
        clip_range: eps.

    Returns:
        loss () = -mean(min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)), and ``approx_kl`` (SB3's
        mean((rho - 1) - log rho)) and ``clip_fraction`` (share of ``|rho - 1| > eps``).
    """
    log_ratio = log_prob - old_log_prob.detach()
    ratio = log_ratio.exp()
    advantage = advantage.detach()
    loss = -torch.min(ratio * advantage, ratio.clamp(1 - clip_range, 1 + clip_range) * advantage).mean()
    with torch.no_grad():
        approx_kl = float(((ratio - 1) - log_ratio).mean())
        clip_fraction = float(((ratio - 1).abs() > clip_range).float().mean())
    return loss, {"approx_kl": approx_kl, "clip_fraction": clip_fraction}


class PPOTrainer(PolicyGradientTrainer):
    """PPO on a policy with ``act`` and ``evaluate`` (module docstring).

    Args:
        policy: the policy module.
        config: `PPOConfig` (defaults if None).
        imitate: the agent's ``imitate(placement)`` (needed with ``imitation_coef > 0``).
        on_split, on_update, hooks: see `PolicyGradientTrainer`.
    """

    def __init__(self, policy: nn.Module, config: PPOConfig | None = None, imitate: Imitate | None = None,
                 on_split: Callable[[RunLoop], None] | None = None,
                 on_update: Callable[[RunLoop], None] | None = None, hooks: TrainingHooks | None = None) -> None:
        if not callable(getattr(policy, "evaluate", None)):
            raise ValueError(f"{type(policy).__name__} has no evaluate(obs, taken): PPO needs it to re-score the "
                             "decisions it collected (agents.nn.policy); train it with REINFORCE instead")
        super().__init__(policy, config or PPOConfig(), imitate=imitate, on_split=on_split, on_update=on_update,
                         hooks=hooks)
        self.critic: nn.Module | None = None  # built on the first embedding it sees
        self.critic_optimizer: torch.optim.Optimizer | None = None

    # ------------------------------------------------------------------------------------------ train
    def train(self, run: RunLoop, env: gym.Env, seed: int | None = None) -> None:
        """PPO on `env` (``run.env`` or a wrapper of it) until the run's budget is spent."""
        obs = self.start(env, seed)
        while not run.done:
            # 1. a rollout, collected without gradients
            if self.config.mode == "bandit":
                decision, obs = collect_placements(self.policy, run, env, obs,
                                                   min(self.config.samples_per_update, run.remaining), track_grad=False,
                                                   fit=self.memory_fit(run, obs))
                episodes = [[decision]]
                self.elites.offer([decision])
            else:
                episodes = [collect_episode(self.policy, run, env, track_grad=False)
                            for _ in range(self.config.episodes_per_update) if not run.done]
                episodes = [steps for steps in episodes if steps]
                for steps in episodes:
                    self.elites.offer(steps)
                if not episodes:
                    break
            decisions = [d for steps in episodes for d in steps]
            # 2. advantages and the critic's targets, one per measured action
            advantages, targets = self._advantages(episodes)
            # 3. epochs of clipped updates
            stats = self._update(decisions, advantages, targets)
            rewards = torch.cat([d.rewards for d in decisions])
            if self.config.mode == "bandit":
                stats.update(reward_mean=float(rewards.mean()), reward_max=float(rewards.max()), **decisions[0].sample.info)
            else:
                totals = [float(sum(float(d.rewards.sum()) for d in steps)) for steps in episodes]
                stats.update(reward_mean=float(np.mean(totals)), reward_max=float(np.max(totals)))
            if self.config.mode == "bandit":
                obs = self.measure_policy_argmax(run, env, decisions[0].obs, obs, stats)
            measured = self.react(run, decisions, stats)
            self.after_update(measured, stats)
            run.record_update(stats)

    def after_update(self, measured: "list[Decision | Measured]", stats: dict) -> None:
        """Called after every rollout's update with what was measured since the last (the rollout's decisions and
        the cost-guided proposals, `PolicyGradientTrainer.react`; subclasses: Post's cross-entropy step); may
        add to `stats`."""

    # ------------------------------------------------------------------------------------- advantages
    def _values(self, decision: Decision) -> Tensor | None:
        """The critic's value of `decision`'s observation (or None with the moving-average baseline)."""
        if self.config.value != "critic":
            return None
        embedding = decision.sample.embedding
        if embedding is None:
            raise ValueError(f"value='critic' needs a policy whose act() returns an embedding; "
                             f"{type(self.policy).__name__} returns none: use value='baseline'")
        if self.critic is None:
            self.critic = MLP(embedding.shape[-1], 64, 1, num_layers=2).to(embedding.device)
            self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=self.config.critic_learning_rate)
        with torch.no_grad():
            return self.critic(embedding.detach()).reshape(())

    def _advantages(self, episodes: list[list[Decision]]) -> tuple[list[Tensor], list[Tensor]]:
        """Per decision: advantages (n,) of its measured actions and the critic's regression targets (n,)."""
        cfg = self.config
        advantages, targets = [], []
        # episodic mode with the baseline: every episode's step returns and their advantages, as REINFORCE's
        step_returns, step_advantages = [], []
        if cfg.mode == "episodic" and cfg.value != "critic":
            step_returns = [discounted_returns([float(d.rewards[0]) for d in steps], cfg.gamma) for steps in episodes]
            step_advantages = self.step_advantages(step_returns)
        for index, steps in enumerate(episodes):
            values = [self._values(d) for d in steps]
            if cfg.mode == "bandit":  # one decision, K placements of the same observation
                r = steps[0].rewards
                v = self.comparison(r) if values[0] is None else values[0].expand_as(r)
                advantages.append(self.advantages(r, values=v, key=steps[0].graph))
                targets.append(r)
                continue
            rewards = [float(d.rewards[0]) for d in steps]
            if values[0] is None:  # the baseline per step index, as REINFORCE's
                g = step_returns[index]
                advantages += list(step_advantages[index].split(1))
                targets += [g[t:t + 1] for t in range(len(g))]
                continue
            v = torch.stack(values).cpu().numpy()
            gae, running = np.zeros(len(rewards)), 0.0
            for t in reversed(range(len(rewards))):  # the episode ends after its last step: no value beyond
                next_value = v[t + 1] if t + 1 < len(rewards) else 0.0
                delta = rewards[t] + cfg.gamma * next_value - v[t]
                running = delta + cfg.gamma * cfg.gae_lambda * running
                gae[t] = running
            returns = torch.as_tensor(gae + v, dtype=torch.float32)
            centred = self.advantages(returns, values=torch.as_tensor(v, dtype=torch.float32))
            advantages += [centred[t:t + 1] for t in range(len(rewards))]
            targets += [returns[t:t + 1] for t in range(len(rewards))]
        return advantages, targets

    # ---------------------------------------------------------------------------------------- update
    def _update(self, decisions: list[Decision], advantages: list[Tensor], targets: list[Tensor]) -> dict:
        """`n_epochs` passes of clipped steps over the rollout's measured actions (module docstring)."""
        cfg = self.config
        # Every measured action is a unit (decision index, sample index); minibatches are sets of units.
        units = [(d, i) for d, decision in enumerate(decisions) for i in range(len(decision.rewards))]
        old_log_prob = torch.stack([decisions[d].sample.log_prob[i].detach() for d, i in units])
        advantage = torch.cat(advantages)
        size = cfg.minibatch_size or len(units)
        log: dict[str, list[float]] = defaultdict(list)
        epochs_done, stop = 0, False
        for _ in range(cfg.n_epochs):
            order = torch.randperm(len(units)) if size < len(units) else torch.arange(len(units))
            for start in range(0, len(units), size):
                index = order[start:start + size]
                log_prob, entropy = self._rescore(decisions, [units[j] for j in index.tolist()])
                policy_loss, diagnostics = clipped_surrogate(log_prob, old_log_prob[index], advantage[index], cfg.clip_range)
                if cfg.target_kl is not None and diagnostics["approx_kl"] > 1.5 * cfg.target_kl:
                    stop = True  # the policy moved far enough from the one that collected: keep the rest for later
                    break
                loss = (policy_loss - cfg.entropy_coef * entropy
                        + imitation_loss(self.imitate, self.elites, self.config.imitation_coef))
                grad_norm = apply_gradients(self.optimizer, self.policy.parameters(), loss, cfg.max_grad_norm)
                self._fit_critic(decisions, units, targets, index)
                for key, value in {"loss": float(loss.detach()), "policy_loss": float(policy_loss.detach()),
                                   "entropy": float(entropy.detach()), "grad_norm": grad_norm, **diagnostics}.items():
                    log[key].append(value)
            if stop:
                break
            epochs_done += 1
        stats = {key: float(np.mean(values)) for key, values in log.items()}
        baseline = self.advantages.baseline
        stats.update(epochs=float(epochs_done), baseline=0.0 if baseline is None else float(baseline))
        return stats

    def _rescore(self, decisions: list[Decision], units: list[tuple[int, int]]) -> tuple[Tensor, Tensor]:
        """log p(a) (B,) of `units` under the current policy, and the mean entropy: one ``evaluate`` per
        decision involved (in bandit mode the K placements share one encoding, so all are re-scored at once)."""
        wanted: dict[int, list[int]] = defaultdict(list)
        for position, (d, i) in enumerate(units):
            wanted[d].append(position)
        log_prob: list[Tensor | None] = [None] * len(units)
        entropies = []
        for d, positions in wanted.items():
            scored = self.policy.evaluate(decisions[d].obs, decisions[d].sample)
            for position in positions:
                log_prob[position] = scored.log_prob[units[position][1]]
            entropies.append(self.entropy_bonus(scored).mean())
        return torch.stack(log_prob), torch.stack(entropies).mean()

    def _fit_critic(self, decisions: list[Decision], units: list[tuple[int, int]], targets: list[Tensor],
                    index: Tensor) -> None:
        """One regression step of the critic on the minibatch's rewards/returns."""
        if self.critic is None:
            return
        chosen = [units[j] for j in index.tolist()]
        embeddings = torch.stack([decisions[d].sample.embedding.detach() for d, _ in chosen])
        target = torch.stack([targets[d][i] for d, i in chosen]).to(embeddings.device)
        loss = nn.functional.mse_loss(self.critic(embeddings).squeeze(-1), target)
        self.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_optimizer.step()
