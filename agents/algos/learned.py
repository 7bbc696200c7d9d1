"""`LearnedAgent`: the one script every learned agent runs, the policy-gradient agents (`PolicyGradientAgent`:
HSDAG, Placeto, the RNN placer, Post, GO) and the Stable-Baselines3 agents (`agents.ppo.SB3Agent`) alike.

    1. prepare the policy      build it for the run's env, or adapt a trained one to it      (`_prepare_policy`)
    2. search: starts          the search layer's start placements, a fine-tuning run's own  (`_measure_starts`)
    3. start training          the update rule's own set-up for this run                      (`_start_training`)
    4. search: refit           fit the best start into the policy (``heuristic_start="refit"``)  (`_refit_best`)
    5. the algorithm           the update rule steps the run's env until the budget is spent  (`_learn_policy`)
    6. express, distil         split the groups until the best is one the policy can return, then fit the
                               policy to it, so ``predict`` returns it     (`_split_to_express`, `_distill_best`)

Steps 2 and 4 are the search layer's (`agents.search`, an object the agent holds, absent for a pure agent); step
6's distillation is this script's own, switched by `DistillSettings` (off by default). A pure agent runs steps 1, 3
and 5, its paper's method. The script calls the layer at named points and never imports it: step 2 through
`agents.core.run.RunAgent._measure_starts`, step 5's trainer through its `agents.algos.hooks.TrainingHooks`
(memory fit, proposals, coarse to fine), ``predict`` through the layer's zero-shot override.
"""
from __future__ import annotations

import gymnasium as gym

from dataclasses import dataclass
from typing import Any

from agents.core.bounds import check_settings, setting
from agents.core.loop import RunLoop
from agents.core.settings import RunSettings, field_values
from placement_gym.coarsen import COARSEN_ABOVE
from placement_gym.schema import Integer, Number, Optional

__all__ = ["DistillSettings", "LEARNED_RUN", "REFIT_STEPS", "LearnedAgent"]

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


class LearnedAgent:
    """Mixin of a `agents.core.run.RunAgent` with a learned policy: `train` is the script of the module
    docstring; a subclass implements its steps (`_prepare_policy`, `_learn_policy`, `_fit_best`, and where it has
    them `_start_training`, `_split_to_express`, `_agent_env`). Keywords: `DistillSettings`'."""

    def __init__(self, **options: Any) -> None:
        options = self._hybrid_form(options)
        distill = {name: options.pop(name) for name in field_values(DistillSettings()) if name in options}
        super().__init__(**options)
        #: The final distillation's settings (`DistillSettings`).
        self.distillation = DistillSettings(**distill)

    @classmethod
    def base_option_defaults(cls) -> dict[str, Any]:
        """The distillation's keywords, then the base classes'."""
        return {**field_values(DistillSettings()), **super().base_option_defaults()}

    def _distill_options(self) -> dict[str, Any]:
        """The distillation's settings by keyword (for `hyperparameters`)."""
        return field_values(self.distillation)

    def _owned_settings(self) -> list[Any]:
        return [*super()._owned_settings(), self.distillation]

    def train(self, run: RunLoop, seed: int | None) -> None:
        env = self._agent_env(run.env)
        trained = self._prepare_policy(run, env, seed)
        self.imitation_obs = run.predict_observation()
        self._measure_starts(run, env, seed, trained, self.imitation_obs)
        self._start_training(run, env, seed, trained)
        if self._refits_start(run):
            self._refit_best(run)
        self._learn_policy(run, env, seed)
        if run.best_action is not None and not run.many_graphs:
            self._split_to_express(run)
        self.distilled_steps = self._distill_best(run)

    def _agent_env(self, env: gym.Env) -> gym.Env:
        """The env the policy learns on: the run's env itself, or a wrapper of it (subclasses)."""
        return env

    def _prepare_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> bool:
        """Build the policy for `env`, or adapt a trained one to it; True if it was trained before this run."""
        raise NotImplementedError

    def _start_training(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool) -> None:
        """The update rule's set-up for this run, once the start placements are measured (nothing here)."""

    def _learn_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> None:
        """The algorithm: update the policy from placements measured through `env` until ``run.done``."""
        raise NotImplementedError

    def _refit_best(self, run: RunLoop) -> None:
        """Fit the run's best placement so far into the policy (no placement measured): after the start
        (``heuristic_start="refit"``) and after a coarse-to-fine split (``split_refit``), for the final
        distillation's ``distill_steps``, or `REFIT_STEPS` where that is off."""
        self._fit_best(run, self.distillation.distill_steps or REFIT_STEPS)

    def _split_to_express(self, run: RunLoop) -> bool:
        """Split the policy's groups until it can return the run's best placement; True if it split (never
        here)."""
        return False

    def _distill_best(self, run: RunLoop) -> int:
        """After the budget, fit the policy to the run's best placement (``distill_steps`` at most, 0 for a pure
        agent); the steps taken."""
        return self._fit_best(run, self.distillation.distill_steps)

    def _fit_best(self, run: RunLoop, max_steps: int) -> int:
        """Gradient steps on the policy until ``predict`` returns the run's best placement, at most `max_steps`
        (and ``distill_seconds`` on a coarsened run; `agents.algos.policy_gradient.distill`); the steps taken."""
        raise NotImplementedError
