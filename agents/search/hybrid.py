"""`SearchAround`: the search layer around an agent that has none of its own, and the search baseline alone.

A built-in learned agent runs its hybrid form itself (``search="hybrid"``: the search is woven into its training,
e.g. proposals after every update). Any other `RunAgent`, a user's own included, gets the same layer from outside
(``hybrid:mymodule:MyAgent`` on the command line, ``SearchAround(MyAgent(...))`` in Python). One run reads top to
bottom:

    1. start       ``heuristic_start``: each device alone and every op on its cheapest device, measured first
                   (`agents.search.heuristic_start.measure_start_placements`);
    2. the agent   the wrapped agent's own ``train`` on the same run, with the budget less the search's share;
    3. search      ``local_search`` of the budget (the share left for it): cost-guided block moves around the
                   run's best placement (`agents.search.local_search.search_around_best`).

With no agent (`LocalSearch`, ``local-search`` in the registry) the same run is a search baseline that learns
nothing: the start, then the local search for the whole remaining budget.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from agents.core.loop import RunLoop, torch_threads
from agents.core.run import RunAgent
from placement_gym.registry import HYBRID_PREFIX

from .attach import SearchLayer
from .config import SearchConfig, option_names, split_search_options
from .heuristic_start import measure_start_placements
from .local_search import BlockSearch, search_around_best

__all__ = ["LocalSearch", "SearchAround", "SearchFrom", "build_agent"]


class SearchAround(RunAgent):
    """The search layer around `agent` (module docstring); with ``agent=None``, the search alone.

    Args:
        agent: the agent whose run the search surrounds (its own search, if any, stays as it was built), or None.
        search: the layer's components (`SearchConfig`, a dict of its fields, or ``"hybrid"``: `HYBRID`). Read
            here: ``heuristic_start`` and ``local_search``; the others belong to an agent's own training.
        seed: default seed of `learn`.
    """

    #: The generic hybrid: the heuristic start first, a quarter of the budget on the local search at the end.
    HYBRID = SearchConfig(heuristic_start="measure", local_search=0.25)
    #: The layer's own components (the wrapped agent's search, if any, was checked when it was built).
    SEARCH_OPTIONS = option_names("heuristic_start", "local_search")
    #: Its settings are the layer's (`SearchLayer.build` checks them); it runs them directly (`train`), not
    #: through an agent's named points.
    SEARCH_LAYER = SearchLayer

    def __init__(self, agent: RunAgent | None = None, search: "SearchConfig | Mapping[str, Any] | str | None" = "hybrid",
                 seed: int | None = None) -> None:
        if agent is not None and not isinstance(agent, RunAgent):
            raise TypeError(f"SearchAround wraps a RunAgent (agents.core.run), got {type(agent).__name__}")
        super().__init__(seed=seed if seed is not None else getattr(agent, "seed", None), torch_threads=None,
                         search=search)
        self.agent = agent
        self.searched_best: np.ndarray | None = None  # (N,) the last run's best placement (the baseline's predict)
        self.name = "search" if agent is None else HYBRID_PREFIX + (agent.name or type(agent).__name__)
        if agent is not None:
            self.feature_families = agent.feature_families

    def train(self, run: RunLoop, seed: int | None) -> None:
        if run.many_graphs:
            raise ValueError("the search layer works on one graph (its placements are one graph's); train the agent "
                             "itself over many graphs")
        obs = run.predict_observation()
        config = self.search or SearchConfig()
        if config.heuristic_start != "off" and isinstance(run.env.action_space, gym.spaces.MultiDiscrete):
            measure_start_placements(run, obs, seed)
        reserved = int(round(config.local_search * run.remaining)) if self.agent is not None else run.remaining
        if self.agent is not None and not run.done:
            # The agent's share runs as its own `learn` would: its `run.done` comes when the share is spent, and
            # torch uses the agent's thread count (the layer's `learn` leaves torch's setting alone).
            with run.share(run.remaining - reserved), torch_threads(self.agent.torch_threads):
                self.agent.train(run, seed)
        if reserved and not run.done:
            start = run.best_action if run.best_action is not None else self.predict(obs)
            search_around_best(run, BlockSearch.of_observation(obs, seed), run.remaining, start=start)
        if run.best_action is not None:
            self.searched_best = np.array(run.best_action, dtype=np.int64)

    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """The wrapped agent's own placement (its policy, not the search's best); the search alone, or around an
        agent without a policy of its own, has none, so its placement is the run's best (the cheapest-device
        placement before any run)."""
        if self.agent is not None and self.agent.has_policy():
            return self.agent.predict(obs, deterministic)
        if self.searched_best is not None and len(self.searched_best) == np.shape(obs["placement"])[0]:
            return self.searched_best.copy()
        return BlockSearch.of_observation(obs).cheapest()

    def has_policy(self) -> bool:
        """The wrapped agent's policy decides; the search baseline (no agent) gives its best as its placement."""
        return self.agent is None or self.agent.has_policy()

    def hyperparameters(self) -> dict[str, Any]:
        inner = {} if self.agent is None else {"agent": self.agent.name, "agent_settings": self.agent.hyperparameters()}
        return {**inner, "seed": self.seed, **self._search_options()}

    def search_components(self) -> list[str]:
        own = [] if self.agent is None else self.agent.search_components()
        layer = [] if self.search is None else self.search.components()
        return own + [c for c in layer if c not in own]

    def save(self, path: "str | Path", overwrite: bool = False) -> Path:
        """Save the wrapped agent (the search keeps no state between runs)."""
        if self.agent is None:
            raise ValueError("the search baseline learns nothing: there is nothing to save")
        return self.agent.save(path, overwrite=overwrite)

    @classmethod
    def load(cls, path: "str | Path") -> "SearchAround":
        raise ValueError("load the wrapped agent itself (its class's load) and wrap it again: SearchAround(agent)")


class LocalSearch(SearchAround):
    """The search baseline: the heuristic start, then cost-guided block moves around the best for the rest of the
    budget (`SearchAround` with no agent). Learns nothing."""

    name = "local-search"
    #: A baseline: its search is its method, not a layer around one (no hybrid form, no search settings to give).
    HYBRID = None

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(None, SearchConfig(heuristic_start="measure", local_search=1.0), seed=seed)
        self.name = "local-search"

    def hyperparameters(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def search_components(self) -> list[str]:
        """None around a method: the search is this baseline's method (its record's ``search`` is empty)."""
        return []


class SearchFrom(SearchAround):
    """The local search from a given placement: `start` (N,) measured first, then cost-guided block moves around
    the run's best for the rest of the budget. Learns nothing. The imitation placer's labels run it around the best
    planner's placement (`agents.imitation.labels.LabelSettings.search_from_best`)."""

    name = "search-from"

    def __init__(self, start: np.ndarray, seed: int | None = None) -> None:
        super().__init__(None, SearchConfig(local_search=1.0), seed=seed)
        self.start = np.asarray(start, dtype=np.int64)
        self.name = "search-from"

    def train(self, run: RunLoop, seed: int | None) -> None:
        if not run.many_graphs:  # (the layer refuses a run over many graphs)
            run.env.reset(seed=seed)
            run.env.step(self.start)  # the run's best so far: the layer's local search moves around it
        super().train(run, seed)

    def hyperparameters(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def search_components(self) -> list[str]:
        """None around a method: the search is this agent's method."""
        return []


def build_agent(cls: type, options: Mapping[str, Any], hybrid: bool = False) -> RunAgent:
    """``cls(**options)`` with the options that name search-layer settings (`SearchConfig` fields) gathered into its
    ``search``: on top of no search, or of the class's ``HYBRID`` preset when `hybrid`
    (`placement_gym.registry.make_agent`, ``hybrid:NAME``), with the class's ``HYBRID_COMPONENTS`` (the hybrid's
    search-like settings of its own code) and ``HYBRID_SETTINGS`` (agent settings the hybrid form was tuned with)
    under the given options. With `hybrid`, an agent without a preset of its own is wrapped in `SearchAround`. A
    ValueError names the agent when it rejects the options."""
    options, search_options = split_search_options(options)
    preset = getattr(cls, "HYBRID", None)  # None: an agent that takes no search settings (the planners)
    if search_options and preset is None:
        raise ValueError(f"agent {cls.__name__} has no search settings; it rejected {sorted(search_options)}")
    own_hybrid = hybrid and preset is not None and (preset.active or bool(getattr(cls, "HYBRID_COMPONENTS", {})))
    if own_hybrid or search_options or "search" in options:
        base = SearchConfig.resolve(options.pop("search", "hybrid" if own_hybrid else None), preset)
        options["search"] = SearchConfig.of(search_options, base)
    if own_hybrid:  # the agent settings its hybrid form was tuned with, under the caller's
        options = {**getattr(cls, "HYBRID_SETTINGS", {}), **getattr(cls, "HYBRID_COMPONENTS", {}), **options}
    try:
        agent = cls(**options)
    except TypeError as exc:
        # the names only: a value may be long (a list of 10,000 items), and the message is one line
        raise ValueError(f"agent {cls.__name__} rejected the options {sorted(options)}: {exc}") from exc
    return SearchAround(agent) if hybrid and not own_hybrid else agent
