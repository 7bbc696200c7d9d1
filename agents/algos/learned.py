"""`LearnedAgent`: the one script every learned agent runs, the policy-gradient agents (`PolicyGradientAgent`:
HSDAG, Placeto, the RNN placer, Post, GO) and the Stable-Baselines3 agents (`agents.ppo.SB3Agent`) alike.

    1. prepare the policy      build it for the run's env, or adapt a trained one to it      (`prepare_policy`)
    2. search: starts          a hybrid's start placements, a fine-tuning run's own placement (`measure_starts`)
    3. start training          the update rule's own set-up for this run                      (`start_training`)
    4. search: refit           fit the best start into the policy (``heuristic_start="refit"``)  (`refit_best`)
    5. the algorithm           the update rule steps the run's env until the budget is spent  (`learn_policy`)
    6. search: express, distil split the groups until the best is one the policy can return, then fit the
                               policy to it, so ``predict`` returns it        (`split_to_express`, `distill_best`)

Steps 2, 4 and 6 are the search layer's (`agents.core.search_settings.SearchConfig`): a pure agent (no search)
runs none of them, so its run is steps 1, 3 and 5, its paper's method. The script calls the search at named points
and never imports it: step 2's start placements are `RunAgent.measure_heuristic_start`, step 5's trainer calls
its `agents.algos.hooks.TrainingHooks` (memory fit, proposals, coarse to fine), ``predict`` calls
`RunAgent.on_predict` (the zero-shot override); all do nothing here and are filled in from above by
`agents.search.attach.SearchLayer`, which every named learned agent composes. Steps 4 and 6 are the policy's own
training (gradient steps toward the run's best), so they stay here.
"""
from __future__ import annotations

import gymnasium as gym

from agents.core.loop import RunLoop
from agents.core.settings import RunSettings
from placement_gym.coarsen import COARSEN_ABOVE

__all__ = ["LEARNED_RUN", "REFIT_STEPS", "LearnedAgent"]

#: The run's settings of the learned agents shipped here (their ``RUN``): graphs of more than
#: `placement_gym.coarsen.COARSEN_ABOVE` ops are learned and placed coarsened (`agents.core.run`, "Big graphs").
LEARNED_RUN = RunSettings(coarsen_above=COARSEN_ABOVE)

#: Gradient steps of the refit after a split (the run's best placement fitted into the policy) when the agent's
#: final distillation is off (``distill_steps=0``); otherwise the refit takes ``distill_steps``.
REFIT_STEPS = 1000


class LearnedAgent:
    """Mixin of a `agents.core.run.RunAgent` with a learned policy: `train` is the script of the module
    docstring; a subclass implements its steps (`prepare_policy`, `learn_policy`, `fit_best`, and where it has them
    `start_training`, `split_to_express`, `agent_env`)."""

    def train(self, run: RunLoop, seed: int | None) -> None:
        env = self.agent_env(run.env)
        trained = self.prepare_policy(run, env, seed)
        self.imitation_obs = run.predict_observation()
        self.measure_starts(run, env, seed, trained, self.imitation_obs)
        self.start_training(run, env, seed, trained)
        if self.refits_start(run):
            self.refit_best(run)
        self.learn_policy(run, env, seed)
        if run.best_action is not None and not run.many_graphs:
            self.split_to_express(run)
        self.distilled_steps = self.distill_best(run)

    def agent_env(self, env: gym.Env) -> gym.Env:
        """The env the policy learns on: the run's env itself, or a wrapper of it (subclasses)."""
        return env

    def prepare_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> bool:
        """Build the policy for `env`, or adapt a trained one to it; True if it was trained before this run."""
        raise NotImplementedError

    def start_training(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool) -> None:
        """The update rule's set-up for this run, once the start placements are measured (nothing here)."""

    def learn_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> None:
        """The algorithm: update the policy from placements measured through `env` until ``run.done``."""
        raise NotImplementedError

    def refit_best(self, run: RunLoop) -> None:
        """Fit the run's best placement so far into the policy (no placement measured): after the start
        (``heuristic_start="refit"``) and after a coarse-to-fine split (``split_refit``), for the final
        distillation's ``search.distill_steps``, or `REFIT_STEPS` where that is off."""
        self.fit_best(run, self.search.distill_steps or REFIT_STEPS)

    def split_to_express(self, run: RunLoop) -> bool:
        """Split the policy's groups until it can return the run's best placement; True if it split (never
        here)."""
        return False

    def distill_best(self, run: RunLoop) -> int:
        """After the budget, fit the policy to the run's best placement (``search.distill_steps`` at most, 0 for
        a pure agent); the steps taken."""
        return self.fit_best(run, self.search.distill_steps)

    def fit_best(self, run: RunLoop, max_steps: int) -> int:
        """Gradient steps on the policy until ``predict`` returns the run's best placement, at most `max_steps`
        (and ``search.distill_seconds`` on a coarsened run; `agents.algos.policy_gradient.distill`); the steps
        taken."""
        raise NotImplementedError
