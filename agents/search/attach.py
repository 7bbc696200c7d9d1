"""The search layer attached to a learned agent: an object the agent holds, called at the run loop's and the
trainers' named points.

The run loop (`agents.core.run`) and the trainers (`agents.algos`) keep the books and compute the updates; they
never import this package nor read its settings. A learned agent built with search holds a `SearchLayer` (built by
its class's ``SEARCH_LAYER``, this class, from its ``search`` argument); one built without holds none, and every
point below is skipped::

    point                          where                                            search behaviour here
    ----------------------------   ----------------------------------------------   ------------------------------
    before training                `RunAgent._measure_starts` ->                    a fine-tuning run's own
                                   `SearchLayer.measure_starts`                     placement
                                                                                    (``finetune_from_predict``), the
                                                                                    heuristic start's placements
                                                                                    (``heuristic_start``)
    before the samples are         `TrainingHooks.fit_samples`                      the memory fit (``fit_memory``)
    measured
    after each update              `TrainingHooks.proposals`, then                  cost-guided proposals around the
                                   `TrainingHooks.after_update`,                    best (``search_proposals``); the
                                   `TrainingHooks.after_split`                      stall detector of coarse to fine
                                                                                    (``split_patience``) and the refit
                                                                                    after a split (``split_refit``)
    on predict                     `agent_predict` -> `SearchLayer.on_predict`      the zero-shot override
                                                                                    (``zero_shot_override``)

Each point calls the same code at the same moment as when the search lived inside the trainers and the run loop,
so every seeded result is unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np

from agents.algos.hooks import TrainingHooks
from agents.algos.rollout import Measured
from placement_gym.wrappers import NodePlacementWrapper

from .coarse_to_fine import StallDetector
from .config import SearchConfig, check_components
from .heuristic_start import measure_start_placements, override_zero_shot
from .local_search import AroundBest, BlockSearch

if TYPE_CHECKING:
    from agents.algos.rollout import Decision
    from agents.core.loop import RunLoop
    from agents.core.run import RunAgent

__all__ = ["SearchDuringTraining", "SearchLayer"]


class SearchDuringTraining(TrainingHooks):
    """The search inside a trainer's run (`agents.algos.hooks.TrainingHooks`' points): the memory fit, the
    cost-guided proposals around the run's best, the stall detector of coarse to fine and the refit after a split.
    Kept with the trainer across `train` calls (the stall count goes on, as the trainer's state does); the graph's
    `BlockSearch` and proposals are the current run's, built on first use with the run's seed.

    Args:
        config: the layer's settings (`SearchConfig`), whose ``search_proposals``, ``fit_memory``,
            ``split_patience`` and ``split_refit`` say what runs.
        refit: the agent's refit of the run's best placement into its policy, called after a split with
            ``split_refit``.
    """

    def __init__(self, config: SearchConfig, refit: "Callable[[RunLoop], None] | None" = None) -> None:
        self.config = config
        self.refit = refit
        self.stall = None if config.split_patience is None else StallDetector(config.split_patience)
        self.search: tuple[RunLoop, BlockSearch] | None = None  # the current run's graph, as proposals and fit read it
        self.around_best: tuple[RunLoop, AroundBest] | None = None  # the cost-guided proposals of the current run

    def check(self, policy, mode: str) -> None:
        """ValueError, in one line: ``search_proposals`` and ``fit_memory`` need the bandit `mode` (whole
        placements); ``split_patience`` a `policy` with groups to ``split()``."""
        check_mode(self.config, mode)
        if self.config.split_patience is not None and not callable(getattr(policy, "split", None)):
            raise ValueError(f"split_patience needs a policy with contiguous op groups it can split; "
                             f"{type(policy).__name__} has no split()")

    def block_search(self, run: "RunLoop", obs) -> BlockSearch:
        """The run's `BlockSearch` (its graph's costs, edges and memory, from `obs`), built once per run."""
        if self.search is None or self.search[0] is not run:
            self.search = (run, BlockSearch.of_observation(obs, seed=run.seed))
        return self.search[1]
    def fit_samples(self, run: "RunLoop", obs) -> Callable[[np.ndarray], np.ndarray] | None:
        """``fit_memory``: (K, N) sampled actions -> the same fitted to the devices' memory around the run's best
        placement (`BlockSearch.fit_memory`; `collect_placements`'s `fit`); None when off, on a run over many
        graphs, or where the observation says nothing of per-op costs or memory."""
        if not self.config.fit_memory or run.many_graphs or "node_device_cost" not in obs:
            return None
        search, best = self.block_search(run, obs), run.best_action
        if search.memory is None:  # the observation says nothing of memory (`BlockSearch.of_observation`)
            return None

        def fit(actions: np.ndarray) -> np.ndarray:
            fitted = np.array(actions, dtype=np.int64)
            for placement in fitted:  # before the run has a best, no op of a sample counts as moved
                search.fit_memory(placement, placement.copy() if best is None else np.asarray(best, dtype=np.int64))
            return fitted
        return fit

    def proposals(self, run: "RunLoop", obs) -> "Measured | None":
        """Measure ``search_proposals`` cost-guided proposals around the run's best placement
        (`agents.algos.reinforce`'s module docstring); None when off, on a run over many graphs, before the run
        has a best, or once its budget is spent. `obs`: the graph as the policy sees it (its per-op costs guide
        the proposals)."""
        count = min(self.config.search_proposals, run.remaining)
        if count == 0 or run.many_graphs or run.best_action is None or run.stopped:
            return None
        if self.around_best is None or self.around_best[0] is not run:  # a new run: its own graph and search
            self.around_best = (run, AroundBest(self.block_search(run, obs)))
        latencies, placements = self.around_best[1].measure(run, count)
        return Measured(latencies, placements)

    def after_update(self, run: "RunLoop", measured: "Sequence[Decision | Measured]") -> bool:
        """Coarse to fine (``split_patience``, `agents.search.coarse_to_fine`): True when the placements measured
        since the last update complete a stall. Only on a run on one graph: the groups are cut positions of that
        graph's topological order, and across graphs a "new best" compares latencies of different graphs
        (training over many graphs, for transfer, keeps them)."""
        if self.stall is None or run.many_graphs:
            return False
        return self.stall.offer(latency for decision in measured for latency in decision.latencies)

    def after_split(self, run: "RunLoop") -> None:
        """``split_refit``: fit the run's best placement into the policy after its groups split."""
        if self.config.split_refit and self.refit is not None:
            self.refit(run)


def check_mode(config: SearchConfig, mode: str) -> None:
    """ValueError, in one line, if the layer's components inside a trainer's run do not go with the trainer's
    `mode`: ``search_proposals`` and ``fit_memory`` need bandit mode (ranges are `SearchConfig`'s own checks)."""
    for name in ("search_proposals", "fit_memory"):
        if getattr(config, name) and mode != "bandit":
            what = "a proposal is a whole placement" if name == "search_proposals" else \
                "it fits a whole sampled placement"
            raise ValueError(f"{name} needs mode='bandit': {what}, the episodic mode's env takes one op's device "
                             "per step")


class SearchLayer:
    """The search layer a learned agent holds (module docstring): built from the agent's ``search`` argument by
    `build` (a class's ``SEARCH_LAYER``), it runs the components its `SearchConfig` turns on at the agent's named
    points. An agent without search holds none.

    Args:
        config: which components run (`SearchConfig`, at least one on).
    """

    def __init__(self, config: SearchConfig) -> None:
        self.config = config

    @classmethod
    def build(cls, value: Any, agent_class: type) -> "SearchLayer | None":
        """The layer `value` (an agent's ``search``: None, ``"off"``, ``"hybrid"``, a dict or a `SearchConfig`)
        names for an agent of `agent_class` (its ``HYBRID`` preset; components outside its ``SEARCH_OPTIONS``
        are refused, so that no record lists one that did not run); None when no component is on."""
        config = SearchConfig.resolve(value, getattr(agent_class, "HYBRID", None))
        check_components(config, getattr(agent_class, "SEARCH_OPTIONS", frozenset()),
                         agent_class.name or agent_class.__name__)
        return cls(config) if config.active else None

    # ------------------------------------------------------------------------------ before training
    def measure_starts(self, agent: "RunAgent", run: "RunLoop", env: gym.Env, seed: int | None, trained: bool,
                       obs: Mapping[str, Any]) -> None:
        """Before training, on a run on one graph: for a policy `trained` before (fine-tuning), `start_fine_tuning`;
        else the heuristic start (``heuristic_start``). `env` is the agent's env (``run.env`` or its wrapper),
        `obs` the run's ``run.predict_observation()`` (the graph as the agent's actions address it)."""
        if trained:
            self.start_fine_tuning(agent, run, env, seed, obs)
        elif self.config.heuristic_start != "off":
            measure_start_placements(run, obs, seed)

    def start_fine_tuning(self, agent: "RunAgent", run: "RunLoop", env: gym.Env, seed: int | None,
                          obs: Mapping[str, Any]) -> None:
        """What a fine-tuning run measures before its training goes on, within the budget: the policy's own
        placement (``finetune_from_predict``), then the heuristic start's placements (each device alone and every
        op on its cheapest device), so the run ends no worse than the zero-shot placement or the best single
        device. A node-by-node `env` (Placeto's and ppo-node's `NodePlacementWrapper`) then starts its episodes
        from the run's best placement so far instead of a random one (`NodePlacementWrapper.start_from_best`):
        the episodes search around what the policy and the costs suggest (from random starts, Placeto and
        ppo-node ended a short fine-tuning on the `paper` test graphs worse than their zero-shot placements).
        Nothing on a node-by-node env given directly (its actions are not whole placements)."""
        if not isinstance(run.env.action_space, gym.spaces.MultiDiscrete):
            return
        if self.config.finetune_from_predict and not run.done:
            agent._measure_predict(run, seed, obs)
        if self.config.heuristic_start != "off":
            measure_start_placements(run, obs)
        if isinstance(env, NodePlacementWrapper) and run.best_action is not None:
            env.start_from_best(run.best_action, run.best_latency_s)

    def refits_start(self, run: "RunLoop") -> bool:
        """Whether the policy is fitted to the run's best start placement before it samples
        (``heuristic_start="refit"``, on one graph, once a start placement worked)."""
        return self.config.heuristic_start == "refit" and not run.many_graphs and run.best_action is not None

    # ------------------------------------------------------------------------------ during training
    def check_trainer(self, mode: str) -> None:
        """ValueError, in one line, if the components inside a trainer's run need another `mode` (`check_mode`):
        refused when the agent is built, before its trainer is."""
        check_mode(self.config, mode)

    def training_hooks(self, refit: "Callable[[RunLoop], None] | None" = None) -> SearchDuringTraining:
        """The trainer's points (`SearchDuringTraining`), with the agent's `refit` for ``split_refit``."""
        return SearchDuringTraining(self.config, refit)

    @property
    def coarse_to_fine(self) -> bool:
        """Whether the policy's groups split coarse to fine (``split_patience``)."""
        return self.config.split_patience is not None

    def stall_detector(self) -> StallDetector | None:
        """A new stall detector of coarse to fine (``split_patience``), or None when off: what an agent whose
        training this package's trainers do not run (the SB3 agents) watches its placements with."""
        return None if self.config.split_patience is None else StallDetector(self.config.split_patience)

    def refits_after_split(self) -> bool:
        """Whether a split is followed by the refit of the run's best placement (``split_refit``)."""
        return self.config.split_refit

    # ------------------------------------------------------------------------------ on predict
    @property
    def overrides_zero_shot(self) -> bool:
        """Whether ``predict`` after a run over many graphs applies the zero-shot override."""
        return self.config.zero_shot_override > 0

    def on_predict(self, placement: np.ndarray, obs: Mapping[str, Any]) -> np.ndarray:
        """On predict, while the zero-shot override is active: `override_zero_shot` with
        ``zero_shot_override``."""
        return override_zero_shot(placement, obs, self.config.zero_shot_override)
