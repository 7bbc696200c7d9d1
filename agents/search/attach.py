"""The search layer attached to a learned agent: its behaviour at the run loop's and the trainers' named points.

The run loop (`agents.core.run`) and the trainers (`agents.algos`) keep the books and compute the updates; they
never import this package. Where a hybrid's search acts inside a run, they call a named point that does nothing
for a pure agent, and this module fills it in from above::

    point                          where                                            search behaviour here
    ----------------------------   ----------------------------------------------   ------------------------------
    before training                `RunAgent.measure_heuristic_start`, called by     the heuristic start's
                                   ``measure_starts`` / ``start_fine_tuning``        placements
                                                                                     (``heuristic_start``)
    before the samples are         `TrainingHooks.fit_samples`                      the memory fit (``fit_memory``)
    measured
    after each update              `TrainingHooks.proposals`, then                  cost-guided proposals around the
                                   `TrainingHooks.after_update`                     best (``search_proposals``); the
                                                                                     stall detector of coarse to fine
                                                                                     (``split_patience``)
    after training                 `LearnedAgent.split_to_express`,                 (the policy's own training: its
                                   ``distill_best``                                 splits and distillation)
    on predict                     `RunAgent.on_predict`                            the zero-shot override
                                                                                     (``zero_shot_override``)

`SearchLayer` is the mixin every named learned agent composes (``class HSDAGAgent(SearchLayer,
PolicyGradientAgent)``): it overrides the agent's points and builds the trainer's (`SearchDuringTraining`, from the
agent's `agents.core.search_settings.SearchConfig`, handed in through ``training_hooks``). Each point calls the same
code at the same moment as when the search lived inside the trainers and the run loop, so every seeded result is
unchanged. A class without the layer (``SEARCH_LAYER`` False: a user's `PolicyGradientAgent` subclass) refuses the
components the layer carries (`agents.core.search_settings.LAYER_COMPONENTS`) when it is built.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from agents.algos.hooks import TrainingHooks
from agents.algos.rollout import Measured

from .coarse_to_fine import StallDetector
from .heuristic_start import measure_start_placements, override_zero_shot
from .local_search import AroundBest, BlockSearch

if TYPE_CHECKING:
    from agents.algos.rollout import Decision
    from agents.core.loop import RunLoop

__all__ = ["SearchDuringTraining", "SearchLayer"]


class SearchDuringTraining(TrainingHooks):
    """The search inside a trainer's run (`agents.algos.hooks.TrainingHooks`' points): the memory fit, the
    cost-guided proposals around the run's best and the stall detector of coarse to fine. Kept with the trainer
    across `train` calls (the stall count goes on, as the trainer's state does); the graph's `BlockSearch` and
    proposals are the current run's, built on first use with the run's seed.

    Args:
        config: the agent's search settings (`SearchConfig`), whose ``search_proposals``, ``fit_memory`` and
            ``split_patience`` say what runs.
    """

    RUNS: ClassVar[frozenset[str]] = frozenset({"search_proposals", "fit_memory", "split_patience"})

    def __init__(self, config) -> None:
        self.config = config
        self.stall = None if config.split_patience is None else StallDetector(config.split_patience)
        self.search: tuple[RunLoop, BlockSearch] | None = None  # the current run's graph, as proposals and fit read it
        self.around_best: tuple[RunLoop, AroundBest] | None = None  # the cost-guided proposals of the current run

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


class SearchLayer:
    """Mixin that attaches the search layer to a learned agent (module docstring): put it first among the bases,
    ``class MyAgent(SearchLayer, PolicyGradientAgent)``. The agent's `SearchConfig` (its ``search`` argument) says
    which components run; with none on (the default) every point does what a pure agent's does."""

    #: This class runs the search layer's components (`agents.core.search_settings.LAYER_COMPONENTS`).
    SEARCH_LAYER: ClassVar[bool] = True

    def measure_heuristic_start(self, run: "RunLoop", obs: Mapping[str, Any], seed: int | None = None) -> int:
        """Before training: measure the heuristic start's placements (`measure_start_placements`)."""
        return measure_start_placements(run, obs, seed)

    def on_predict(self, placement: np.ndarray, obs: Mapping[str, Any]) -> np.ndarray:
        """On predict, while the zero-shot override is active: `override_zero_shot` with the agent's
        ``zero_shot_override``."""
        return override_zero_shot(placement, obs, self.zero_shot_override)

    def training_hooks(self) -> SearchDuringTraining:
        """The trainer's points (`SearchDuringTraining`), from the agent's search settings (``search``): what
        a `PolicyGradientAgent`'s ``make_trainer`` hands its trainer. The SB3 agents train with Stable-Baselines3
        and never call it."""
        return SearchDuringTraining(self.search)
