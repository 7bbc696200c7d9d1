"""The one script every learned agent runs (`run_learned`), the policy-gradient agents (`PolicyGradientAgent`:
HSDAG, Placeto, the RNN placer, Post, GO) and the Stable-Baselines3 agents (`agents.ppo.SB3Agent`) alike, and the
final distillation's settings (`DistillSettings`):

    1. prepare the policy      build it for the run's env, or adapt a trained one to it      (`_prepare_policy`)
    2. search: starts          the search layer's start placements, a fine-tuning run's own  (`_measure_starts`)
    3. start training          the update rule's own set-up for this run                      (`_start_training`)
    4. search: refit           fit the best start into the policy (``heuristic_start="refit"``)  (`_fit_best`)
    5. the algorithm           the update rule steps the run's env until the budget is spent  (`_learn_policy`)
    6. express, distil         split the groups until the best is one the policy can return, then fit the
                               policy to it, so ``predict`` returns it        (`_split_to_express`, `_fit_best`)

An agent's ``train`` is ``run_learned(self, run, seed)``: the script is a function over the steps the agent states
(`LearnedSteps`), not a base class. Steps 2 and 4 are the search layer's (`agents.search`, an object the agent
holds, absent for a pure agent); step 6's distillation is the script's own, switched by `DistillSettings` (off by
default). A pure agent runs steps 1, 3 and 5, its paper's method. The script calls the layer at named points and
never imports it: step 2 through `agents.core.run.RunAgent._measure_starts`, step 5's trainer through its
`agents.algos.hooks.TrainingHooks` (memory fit, proposals, coarse to fine), ``predict`` through the layer's
zero-shot override.
"""
from __future__ import annotations

import gymnasium as gym

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from agents.core.bounds import check_settings, setting
from agents.core.loop import RunLoop
from agents.core.settings import RunSettings, take_settings
from placement_gym.coarsen import COARSEN_ABOVE
from placement_gym.schema import Integer, Number, Optional

__all__ = ["DistillSettings", "LEARNED_RUN", "LearnedSteps", "REFIT_STEPS", "run_learned"]

#: The run's settings of the learned agents shipped here (their ``RUN``): graphs of more than
#: `placement_gym.coarsen.COARSEN_ABOVE` ops are learned and placed coarsened (`agents.core.run`, "Big graphs").
LEARNED_RUN = RunSettings(coarsen_above=COARSEN_ABOVE)

#: Gradient steps of the refit after a split (the run's best placement fitted into the policy) when the agent's
#: final distillation is off (``distill_steps=0``); otherwise the refit takes ``distill_steps``.
REFIT_STEPS = 1000


@dataclass(frozen=True)
class DistillSettings:
    """The learned script's own settings: the final distillation (step 6), off by default.

    Args:
        distill_steps: after the budget, fit the policy to the run's best placement, at most this many gradient
            steps, so ``predict`` returns what the run found (no placement measured); 0: off.
        distill_seconds: wall-time cap of that distillation on a coarsened big graph (None: none; the zoo models
            are never capped, `agents.algos.policy_gradient.distill_cap`).
    """

    distill_steps: int = setting(0, Integer(0, 1_000_000), component=True)
    distill_seconds: float | None = setting(None, Optional(Number(positive=True, high=86_400.0)))

    def __post_init__(self) -> None:
        check_settings(self)

    @classmethod
    def take(cls, options: dict[str, Any]) -> "DistillSettings":
        """The settings among an agent's constructor `options` (popped from it), checked."""
        return take_settings(cls(), options)

    @property
    def refit_steps(self) -> int:
        """Gradient steps of a refit of the run's best into the policy (after the start, ``heuristic_start=
        "refit"``, and after a coarse-to-fine split, ``split_refit``): ``distill_steps``, or `REFIT_STEPS` where
        the final distillation is off."""
        return self.distill_steps or REFIT_STEPS


class LearnedSteps(Protocol):
    """The steps `run_learned` calls on a learned agent (module docstring), each the agent's own."""

    distillation: DistillSettings
    imitation_obs: Mapping[str, Any]
    distilled_steps: int

    def _agent_env(self, env: gym.Env) -> gym.Env:
        """The env the policy learns on: the run's env itself, or a wrapper of it."""

    def _prepare_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> bool:
        """Build the policy for `env`, or adapt a trained one to it; True if it was trained before this run."""

    def _measure_starts(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool,
                        obs: Mapping[str, Any]) -> None:
        """What the run measures before the policy samples (`agents.core.run.RunAgent._measure_starts`)."""

    def _start_training(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool) -> None:
        """The update rule's set-up for this run, once the start placements are measured."""

    def _refits_start(self, run: RunLoop) -> bool:
        """Whether the policy is fitted to the run's best start before it samples (the search layer's)."""

    def _learn_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> None:
        """The algorithm: update the policy from placements measured through `env` until ``run.done``."""

    def _split_to_express(self, run: RunLoop) -> bool:
        """Split the policy's groups until it can return the run's best placement; True if it split."""

    def _fit_best(self, run: RunLoop, max_steps: int) -> int:
        """Gradient steps on the policy until ``predict`` returns the run's best placement, at most `max_steps`
        (and ``distill_seconds`` on a coarsened run; `agents.algos.policy_gradient.distill`); the steps taken."""


def run_learned(agent: LearnedSteps, run: RunLoop, seed: int | None) -> None:
    """The learned-agent script (module docstring): `agent`'s steps on `run`, top to bottom."""
    env = agent._agent_env(run.env)
    trained = agent._prepare_policy(run, env, seed)
    agent.imitation_obs = run.predict_observation()
    agent._measure_starts(run, env, seed, trained, agent.imitation_obs)
    agent._start_training(run, env, seed, trained)
    if agent._refits_start(run):
        agent._fit_best(run, agent.distillation.refit_steps)
    agent._learn_policy(run, env, seed)
    if run.best_action is not None and not run.many_graphs:
        agent._split_to_express(run)
    agent.distilled_steps = agent._fit_best(run, agent.distillation.distill_steps)
