"""`PolicyGradientAgent`: a `BaseAgent` trained by the shared REINFORCE or PPO trainer, the user's choice.

HSDAG, Placeto, the RNN placer and Post are such agents: each builds its policy (`build_policy`) and its
trainer settings (`ReinforceConfig`); ``algorithm="ppo"`` trains the same policy with `agents.common.ppo`
instead, with the PPO settings given in ``ppo`` (a dict of `PPOConfig` fields beyond `ReinforceConfig`'s):

    placement-gym train --agent hsdag --agent-option algorithm=ppo --agent-option 'ppo={"n_epochs": 8}'
"""
from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, Mapping

import gymnasium as gym
import torch

from .base import BaseAgent, PolicySpec
from .ppo import PPOConfig, PPOTrainer
from .reinforce import ReinforceConfig, ReinforceTrainer
from .run import RunLoop

__all__ = ["ALGORITHMS", "PolicyGradientAgent"]

#: The trainers an agent can use.
ALGORITHMS = ("reinforce", "ppo")
_PPO_ONLY = tuple(f.name for f in fields(PPOConfig) if f.name not in {g.name for g in fields(ReinforceConfig)})


class PolicyGradientAgent(BaseAgent):
    """A `BaseAgent` trained by `ReinforceTrainer` or `PPOTrainer`.

    Subclasses implement `build_policy(spec)` and `hyperparameters()` (adding `algorithm_options()` to it),
    pass their trainer settings to this constructor, and may override `agent_env` to train on a wrapper of the
    run's env (the node-by-node variant, another reward). Calling `learn` again continues training (same
    optimiser and baselines).

    Args:
        reinforce: `ReinforceConfig` or a dict of its fields: the method's settings (mode, step size, ...).
        algorithm: ``"reinforce"`` or ``"ppo"``.
        ppo: PPO-only settings (`PPOConfig` fields such as ``n_epochs``, ``clip_range``, ``target_kl``,
            ``value``, ``minibatch_size``); only with ``algorithm="ppo"``.
        seed, torch_threads, device: see `BaseAgent`.
    """

    def __init__(self, reinforce: "ReinforceConfig | Mapping[str, Any] | None" = None, *, algorithm: str = "reinforce",
                 ppo: Mapping[str, Any] | None = None, seed: int | None = None, torch_threads: int | None = 1,
                 device: "str | torch.device" = "cpu") -> None:
        super().__init__(seed=seed, torch_threads=torch_threads, device=device)
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        unknown = sorted(set(ppo or {}) - set(_PPO_ONLY))
        if unknown:
            raise ValueError(f"unknown PPO settings {unknown}; accepted: {list(_PPO_ONLY)}")
        if ppo and algorithm != "ppo":
            raise ValueError("PPO settings were given but algorithm is 'reinforce': add algorithm='ppo'")
        config = reinforce if isinstance(reinforce, ReinforceConfig) else ReinforceConfig(**dict(reinforce or {}))
        self.algorithm, self.ppo = algorithm, dict(ppo or {})
        self.trainer_config = PPOConfig(**asdict(config), **self.ppo) if algorithm == "ppo" else config
        self.trainer: ReinforceTrainer | PPOTrainer | None = None

    @property
    def reinforce(self) -> ReinforceConfig:
        """The trainer settings (a `PPOConfig` with ``algorithm="ppo"``)."""
        return self.trainer_config

    def algorithm_options(self) -> dict[str, Any]:
        """The constructor arguments that pick the trainer (for `hyperparameters`)."""
        return {"algorithm": self.algorithm, "ppo": dict(self.ppo)}

    def agent_env(self, env: gym.Env) -> gym.Env:
        """The env the trainer steps: the run's env itself, or a wrapper of it (subclasses)."""
        return env

    def train(self, run: RunLoop, seed: int | None) -> None:
        env = self.agent_env(run.env)
        policy = self.setup(PolicySpec.from_env(env, self.feature_families), seed)
        if self.trainer is None:
            trainer_cls = PPOTrainer if self.algorithm == "ppo" else ReinforceTrainer
            self.trainer = trainer_cls(policy, self.trainer_config)
        self.trainer.train(run, env, seed)
