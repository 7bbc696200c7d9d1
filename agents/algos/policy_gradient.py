"""`PolicyGradientAgent`: a `BaseAgent` trained by the shared REINFORCE or PPO trainer, the user's choice.

HSDAG, Placeto, the RNN placer and Post are such agents: each builds its policy (`build_policy`) and its
trainer settings (`ReinforceConfig`); ``algorithm="ppo"`` trains the same policy with `agents.algos.ppo`
instead, with the PPO settings given in ``ppo`` (a dict of `PPOConfig` fields beyond `ReinforceConfig`'s):

    placement-gym train --agent hsdag --agent-option algorithm=ppo --agent-option 'ppo={"n_epochs": 8}'
"""
from __future__ import annotations

import time
from dataclasses import asdict, fields, replace
from typing import Any, Callable, ClassVar, Mapping


import gymnasium as gym
import numpy as np
import torch

from agents.core.base import BaseAgent, PolicySpec
from agents.core.loop import RunLoop
from agents.core.settings import field_values, take_settings
from agents.nn.device_head import enable_graph_cost
from agents.nn.groups import split_until_expressible

from .hooks import TrainingHooks
from .learned import DistillSettings, run_learned
from .ppo import PPOConfig, PPOTrainer
from .reinforce import ReinforceConfig, ReinforceTrainer, TrainerSettings, apply_gradients

__all__ = ["ALGORITHMS", "DISTILL_SECONDS", "PolicyGradientAgent", "distill", "distill_cap"]

#: The learned agents' hybrid ``distill_seconds`` (`agents.algos.learned.DistillSettings`): a cap on the final
#: distillation of a COARSENED big graph only (`distill_cap`), where one step is a forward and backward pass over
#: a graph of up to ~1,000 clusters. The zoo models are never capped: on a busy machine a cap of this size stopped
#: the distillation of ResNet short for hsdag and placeto (``predict`` then fell well short of the run's best),
#: and there a step is cheap.
DISTILL_SECONDS = 5.0


def distill_cap(seconds: float | None, run: RunLoop) -> float | None:
    """The wall-time cap of a run's final distillation: `seconds` on a coarsened run, None (none) otherwise."""
    return seconds if run.coarsening is not None else None

#: The trainers an agent can use.
ALGORITHMS = ("reinforce", "ppo")
_PPO_ONLY = tuple(f.name for f in fields(PPOConfig) if f.name not in {g.name for g in fields(ReinforceConfig)})


class PolicyGradientAgent(BaseAgent):
    """A `BaseAgent` trained by `ReinforceTrainer` or `PPOTrainer`, through the learned-agent script
    (`agents.algos.learned.run_learned`, over the steps this class states).

    Subclasses implement `build_policy(spec)`, declare their own settings in ``SETTINGS`` (an instance of their
    settings dataclass, `agents.core.settings`: the constructor takes its fields as keywords and keeps them as
    attributes of the same name, so `hyperparameters` needs no override), and may override `_agent_env` to train on
    a wrapper of the run's env (the node-by-node variant, another reward). Calling `learn` again continues
    training (same optimiser and baselines).

    Their trainer settings are declared in `TRAINER`: an instance of their trainer form
    (`agents.algos.reinforce.FullBanditTrainerSettings`, `BanditTrainerSettings`, `EpisodicTrainerSettings`: the
    form fixes the mode and which settings the constructor takes as keywords) with the defaults of their method,
    the one place those defaults are written; the trainer runs with `ReinforceConfig` in the form's mode, the
    form's values and `ReinforceConfig`'s defaults for the rest. A subclass without one (`TRAINER` None, as the
    imitation agent) takes none of them as keywords. The trainer is picked by ``algorithm`` (default: the class's
    `ALGORITHM`).

    Args:
        reinforce: `ReinforceConfig` or a dict of its fields: the trainer's settings that the class's `TRAINER`
            form does not set (all of them for a class without one).
        algorithm: ``"reinforce"`` or ``"ppo"``.
        ppo: PPO-only settings (`PPOConfig` fields such as ``n_epochs``, ``clip_range``, ``target_kl``,
            ``value``, ``minibatch_size``); only with ``algorithm="ppo"``.
        seed, torch_threads, device: see `agents.core.base.BaseAgent`.
        coarsen_above, max_nodes: graphs of more than `coarsen_above` ops are learned and placed as at most
            `max_nodes` clusters of ops (`agents.core.run`, `placement_gym.coarsen`; None: never).
        search: the search layer around the method, for a class that composes one (``SEARCH_LAYER``,
            `agents.search.config.SearchConfig`; None: none, the paper's method alone; ``"hybrid"``: the class's
            hybrid form); the trainer runs its components at its hook points (`agents.algos.hooks`).
        distill_steps, distill_seconds: the final distillation (`agents.algos.learned.DistillSettings`).
    """

    #: The trainer settings the constructor takes as keywords, with the defaults of the class's method: an instance
    #: of its trainer form (class docstring). None here: this class takes them all in ``reinforce``.
    TRAINER: ClassVar[TrainerSettings | None] = None
    #: The trainer ``algorithm`` defaults to (one of `ALGORITHMS`).
    ALGORITHM: ClassVar[str] = "reinforce"

    def __init__(self, reinforce: "ReinforceConfig | Mapping[str, Any] | None" = None, *,
                 algorithm: str | None = None, ppo: Mapping[str, Any] | None = None, **options: Any) -> None:
        # The trainer's keywords (its form's, `TRAINER`) and the distillation's; the rest are the agent's own
        # settings and the run's (`BaseAgent`).
        options = self._hybrid_form(options)
        #: The trainer settings the constructor took (its form, `TRAINER`; None for a class without one).
        self.trainer_settings = None if self.TRAINER is None else take_settings(self.TRAINER, options)
        distillation = DistillSettings.take(options)
        if algorithm is not None and "algorithm" not in self.option_defaults():
            raise self._refusal(["algorithm"])  # a class that always trains with its `ALGORITHM` (Post)
        super().__init__(**options)
        #: The final distillation's settings (`agents.algos.learned.DistillSettings`).
        self.distillation = distillation
        algorithm = self.ALGORITHM if algorithm is None else algorithm
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        unknown = sorted(set(ppo or {}) - set(_PPO_ONLY))
        if unknown:
            raise ValueError(f"unknown PPO settings {unknown}; accepted: {list(_PPO_ONLY)}")
        if ppo and algorithm != "ppo":
            raise ValueError("PPO settings were given but algorithm is 'reinforce': add algorithm='ppo'")
        config = reinforce if isinstance(reinforce, ReinforceConfig) else ReinforceConfig(**dict(reinforce or {}))
        if self.trainer_settings is not None:
            config = replace(config, mode=self.trainer_settings.MODE, **asdict(self.trainer_settings))
        if self._search is not None:  # refused here, before the trainer is built at the first `learn`
            self._search.check_trainer(config.mode)
        self.algorithm, self.ppo = algorithm, dict(ppo or {})
        self.trainer_config = PPOConfig(**asdict(config), **self.ppo) if algorithm == "ppo" else config
        self.trainer: ReinforceTrainer | PPOTrainer | None = None

    @property
    def reinforce(self) -> ReinforceConfig:
        """The trainer settings (a `PPOConfig` with ``algorithm="ppo"``)."""
        return self.trainer_config

    @classmethod
    def _base_option_defaults(cls) -> dict[str, Any]:
        """The trainer's keywords (`TRAINER`'s), ``algorithm`` and ``ppo``, the distillation's, then `BaseAgent`'s."""
        trainer = {} if cls.TRAINER is None else field_values(cls.TRAINER)
        return {**trainer, "algorithm": cls.ALGORITHM, "ppo": None,
                **field_values(DistillSettings()), **super()._base_option_defaults()}

    def _trainer_options(self) -> dict[str, Any]:
        """The trainer settings the constructor took (`TRAINER`'s form), for `hyperparameters`."""
        return {} if self.trainer_settings is None else field_values(self.trainer_settings)

    def _algorithm_options(self) -> dict[str, Any]:
        """The constructor arguments that pick the trainer, and the search (for `hyperparameters`)."""
        return {"algorithm": self.algorithm, "ppo": dict(self.ppo), **self._search_options()}

    def _run_options(self) -> dict[str, Any]:
        """Every constructor argument `hyperparameters` needs besides the agent's own settings: the trainer's
        (`_trainer_options`), the seed and threads, the algorithm and search, the coarsening."""
        return {**self._trainer_options(), **field_values(self.distillation), "seed": self.seed,
                "torch_threads": self.torch_threads, **self._algorithm_options(), **self._coarsen_options()}

    def _owned_settings(self) -> list[Any]:
        """The agent's own settings, the distillation's and the trainer's (`RunAgent.search_components`)."""
        return [*super()._owned_settings(), self.distillation, self.trainer_config]

    def hyperparameters(self) -> dict[str, Any]:
        """The agent's own settings (``SETTINGS``), then `_run_options`."""
        return {**self._own_settings(), **self._run_options()}

    def _make_trainer(self, policy: torch.nn.Module) -> ReinforceTrainer | PPOTrainer:
        """The trainer `algorithm` names, for `policy` (subclasses: their own, e.g. Post's)."""
        trainer_cls = PPOTrainer if self.algorithm == "ppo" else ReinforceTrainer
        return trainer_cls(policy, self.trainer_config, imitate=self._imitate, on_update=self._on_update,
                           hooks=self._training_hooks())

    def _training_hooks(self) -> TrainingHooks:
        """The search layer's points inside the trainer's run (`agents.algos.hooks`), handed to the trainer
        `_make_trainer` builds: the layer's (``training_hooks``, with the refit it runs after a split), or none (a
        pure agent's)."""
        return TrainingHooks() if self._search is None else self._search.training_hooks(self._refit_best)

    #: ``on_update(run)``: called by the trainer after every update (`PolicyGradientTrainer`'s ``on_update``);
    #: None here, HSDAG's boundary exploration sets it.
    _on_update: Callable[[RunLoop], None] | None = None

    def _imitate(self, placement: np.ndarray) -> torch.Tensor:
        """() the log-likelihood, per decision, that the policy produces `placement` (N,) itself, as ``predict``
        would on the run's graph (differentiable): the self-imitation term's (``imitation_coef``). Here the
        policy's ``placement_log_prob(obs, placement)``; agents whose placement is built step by step override
        it (Placeto)."""
        scorer = getattr(self.policy, "placement_log_prob", None)
        if scorer is None:
            raise ValueError(f"{type(self.policy).__name__} has no placement_log_prob(obs, placement): "
                             "imitation_coef > 0 is not available for this policy")
        return scorer(self.imitation_obs, placement)

    # ------------------------------------------------------------------ the learned-agent script and its steps
    def train(self, run: RunLoop, seed: int | None) -> None:
        """The learned-agent script (`agents.algos.learned.run_learned`) over this class's steps."""
        run_learned(self, run, seed)

    def _agent_env(self, env: gym.Env) -> gym.Env:
        """The env the policy learns on: the run's env itself here; subclasses wrap it (the node-by-node
        variant, another reward)."""
        return env

    def _refit_best(self, run: RunLoop) -> None:
        """Fit the run's best placement so far into the policy (no placement measured; after a coarse-to-fine
        split, ``split_refit``): `agents.algos.learned.DistillSettings.refit_steps` steps at most."""
        self._fit_best(run, self.distillation.refit_steps)

    def _prepare_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> bool:
        trained = self.policy is not None
        self._setup(PolicySpec.from_env(env, self.feature_families), seed)
        return trained

    def _start_training(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool) -> None:
        self._start_run(run, env, seed, trained)
        if self.trainer is None:
            self.trainer = self._make_trainer(self.policy)
        enable_graph_cost(self.policy, self.trainer.optimizer, build=run.many_graphs and self.whole_graph_cost)
        graph = run.base.graph
        self.trainer.elites.bind(None if run.many_graphs else (graph.name, graph.n_ops, graph.n_edges))

    def _learn_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> None:
        self.trainer.train(run, env, seed)

    def _fit_best(self, run: RunLoop, max_steps: int) -> int:
        return self._distill(run.best_action, max_steps, run.as_measured,
                             distill_cap(self.distillation.distill_seconds, run))

    def _start_run(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool) -> None:
        """Called once the run's start placements are measured (the search layer's and `RunAgent._start_fine_tuning` for a policy
        `trained` before, the heuristic start for a new one) and before the trainer starts. Nothing here;
        subclasses add to it (GO's search for a new policy on one graph, `agents.go.GOAgent`)."""

    def _distill(self, placement: np.ndarray | None, max_steps: int,
                as_measured: Callable[[np.ndarray], np.ndarray] | None = None,
                max_seconds: float | None = None) -> int:
        """Fit the policy to `placement` (the run's best action) until ``predict`` returns it, as the env would
        measure it, for at most `max_steps` steps and `max_seconds` (`distill`)."""
        self.distilled_steps = distill(self.predict, self._imitate, self.trainer.optimizer, self.policy, placement,
                                       self.imitation_obs, max_steps, self.trainer_config.max_grad_norm, as_measured,
                                       max_seconds, self._expressible, self._reproduces)
        return self.distilled_steps

    def _split_to_express(self, run: RunLoop) -> bool:
        """With coarse-to-fine groups (``split_patience``): split them until the run's best placement is one the
        policy can return (`expressible`), e.g. a heuristic start's per-op placement on groups of ops; done before
        the final distillation, not at the start (splitting to one group per op at the start left Post and PPO a
        per-op search: under throughput on `paper` it ended much further from the best found than with the
        coarse groups). True if it split."""
        if self._search is None or not self._search.coarse_to_fine:
            return False
        return split_until_expressible(run.best_action, self._expressible, self.policy.split)

    def _expressible(self, placement: np.ndarray) -> np.ndarray:
        """(N,) the placement nearest `placement` (N,) that the policy's ``predict`` can return (`distill`'s
        target): `placement` itself here; group placers override it
        (`agents.nn.policy.group_majority_placement`)."""
        return placement

    #: ``reproduces(placement) -> bool``: whether ``predict`` on the run's graph returns `placement` (as
    #: `expressible` maps it), where a placer answers that faster than ``predict`` (node by node: Placeto); None:
    #: `distill` calls ``predict``.
    _reproduces: Callable[[np.ndarray], bool] | None = None


def distill(predict, imitate, optimizer: torch.optim.Optimizer, policy: torch.nn.Module,
            placement: np.ndarray | None, obs: Mapping[str, Any], max_steps: int,
            max_grad_norm: float | None = 1.0, as_measured: Callable[[np.ndarray], np.ndarray] | None = None,
            max_seconds: float | None = None, expressible: Callable[[np.ndarray], np.ndarray] | None = None,
            reproduces: Callable[[np.ndarray], bool] | None = None) -> int:
    """Gradient steps on ``-imitate(placement)`` until ``predict(obs)`` returns `placement`, at most `max_steps`
    and (unless None) `max_seconds` of wall time; returns the steps taken. Measures nothing: the search is over,
    this makes the policy's own placement the one its search found (the ``distill_steps`` and
    ``distill_seconds`` of every learned agent, torch and SB3 alike).

    `as_measured` (the run's, `RunLoop.as_measured`) compares the two as the env would measure them:
    with ``unsupported="repair"`` a policy that never proposes a device an op cannot run (its action mask) cannot
    return an unrepaired target action, nor a node-by-node agent the repaired placement it is given as target,
    and without it the loop would spin for `max_steps`. (Under ``unsupported="fail"`` a placement that puts an op
    on a device that cannot run it fails and is never the best, so the target is within the mask.)
    `expressible` maps `placement` to the nearest placement the policy can return (a node-by-node placer's: one
    device per group of ops, `agents.nn.policy.group_majority_placement`), for a best placement it did not
    draw itself (the heuristic start's, `agents.search.heuristic_start`). `reproduces(placement)` answers "does
    ``predict`` return it?" where that is cheaper than calling ``predict`` (a node-by-node placer's: one forward
    pass, not one per group, `agents.search.node_by_node.TeacherForcing.reproduces`)."""
    if placement is None or max_steps == 0:
        return 0
    measured = (lambda action: np.asarray(action)) if as_measured is None else as_measured
    target = measured(placement if expressible is None else expressible(placement))
    deadline = None if max_seconds is None else time.perf_counter() + max_seconds
    if reproduces is None:
        def reproduces(_: np.ndarray) -> bool:
            return np.array_equal(measured(predict(obs)), target)
    for step in range(max_steps):
        if reproduces(placement) or (deadline is not None and time.perf_counter() > deadline):
            return step
        policy.train()
        apply_gradients(optimizer, policy.parameters(), -imitate(placement), max_grad_norm)
    return max_steps
