"""`RunAgent`, what every agent and baseline is: its `RunAgent.learn` runs the shared run loop around the agent's
own `RunAgent.train`.

Every agent's ``learn(env, budget, seed, callback)`` is `RunAgent.learn`, which reads top to bottom:

    1. check the budget (placements the agent may measure, an int >= 0) and seed every generator once
       (`agents.core.loop.set_seed`);
    2. pin torch's threads (`agents.core.loop.torch_threads`, default 1: on a busy machine torch's extra threads
       spin and can make training several times slower);
    3. open the run's books, a `agents.core.loop.RunLoop`, on the env: ``run.env`` is the env wrapped in a recorder
       that counts, times and keeps the best of every placement measured and refuses to measure past the budget;
       on a graph of more than the agent's ``coarsen_above`` ops, ``run.env`` shows it coarsened to at most
       ``max_nodes`` clusters (see "Big graphs" below);
    4. call the agent's own `RunAgent.train(run, seed)`, the algorithm: it steps ``run.env`` (or a wrapper of
       it) until ``run.done`` and reports each update's statistics with ``run.record_update``; an agent built for
       one graph at a time is trained over a multi-graph env in turns (`train_in_turns`). A run that continues a
       policy trained before on one graph (fine-tuning: ``learn`` called again, ``placement-gym evaluate --load
       A.pt --budget K``) first measures what the agent's search layer measures at its start (the policy's own
       placement and the heuristic start's, in a hybrid), then what the agent itself does
       (`RunAgent._start_fine_tuning`);
    5. ``run.finish``: re-measure the best placement afresh and the agent's own deterministic placement
       (``predict``), and return a `placement_gym.evaluation.RunSummary` (`agents.core.loop`).

Big graphs. An agent with ``coarsen_above`` set (the learned agents: `placement_gym.coarsen.COARSEN_ABOVE`
ops) learns a graph of more ops than that on its coarsening (`placement_gym.coarsen`, at most ``max_nodes``
clusters; how the run keeps full-size books beneath it: `agents.core.loop`). ``predict`` (decorated with
`agent_predict`) coarsens a full-size observation the same way and expands its answer; the clusters are
recomputed from the observation itself, so a saved agent needs no stored mapping.

Zero-shot. After a run over many graphs, ``predict`` on a graph the policy was not fitted to goes through the search
layer the agent holds, if any (its ``on_predict``), which applies the zero-shot override (the layer's
``zero_shot_override``; which ops it moves, and how: `agents.search.heuristic_start.override_zero_shot`). It stays on
for the placements the trained agent is asked for (``placement-gym evaluate --budget 0``, the first placement a
fine-tuning run measures) and goes off once a run on one graph has measured its start: from there ``predict`` is
the placement that run distils, as for any run on one graph (`RunAgent.zero_shot_active`).

The agent's settings and its default plain-JSON ``save`` / ``load`` are `agents.core.settings.AgentSettings`, which
`RunAgent` inherits. `RunLoop`, `BestPlacement`, `set_seed` and `torch_threads` (`agents.core.loop`) can be
imported from here too, as a custom agent does: ``from agents.core.run import RunAgent, RunLoop``.
"""
from __future__ import annotations

import abc
import functools
from dataclasses import replace
from typing import Any, Callable, ClassVar, Mapping

import gymnasium as gym
import numpy as np

from placement_gym.callbacks import Callback, make_callback
from placement_gym.coarsen import Coarsening
from placement_gym.evaluation import RunSummary, check_budget
from placement_gym.graph import ComputationGraph
from placement_gym.vector_env import DevicePlacementVectorEnv

from agents.core.loop import BestPlacement, RunLoop, set_seed, torch_threads  # noqa: F401 (re-exported)
from agents.core.bounds import components_of
from agents.core.settings import AgentSettings, field_values

__all__ = ["RunAgent", "agent_predict", "train_in_turns"]


class RunAgent(AgentSettings, abc.ABC):
    """What every placement agent is: `learn` runs the shared run loop around the agent's `train`.

    A subclass implements `train` (the algorithm: measure placements through ``run.env`` until ``run.done``;
    `RunLoop` lists what ``run`` offers). Everything else is optional: ``name`` (the class name by default),
    ``feature_families`` if it needs particular node features, `predict` if it has a policy (without one its
    result is its best placement and tables show no ``predict``), and `hyperparameters` / `save` / `load`, whose
    defaults (`agents.core.settings.AgentSettings`) read the keywords it takes (`option_names`) from same-named
    attributes and write plain JSON. It meets `placement_gym.evaluation.Agent`, so the harness and ``placement-gym
    benchmark|compare|evaluate --agent module:Class`` (or ``--agent path/to/file.py:Class``) run it like the
    agents shipped here.

    Keywords: the run's settings, `agents.core.settings.RunSettings` (``seed``, ``torch_threads``,
    ``coarsen_above``, ``max_nodes``, ``search``; the class's ``RUN`` holds their defaults), and a subclass's own
    (its ``SETTINGS``); any other is refused. ``search`` is handed to the class's search layer (`SEARCH_LAYER`, a
    factory from above, `agents.search.attach.SearchLayer`), which builds the object the agent holds (``_search``;
    None without search); the run loop calls it at named points and never reads its settings.

    After `learn`::

        best_placement, best_latency_s: the run's result: its best placement (or, if it measured none, its
            policy's own) and that placement's latency measured afresh at the end.
        run_summary: the `RunSummary` of the last `learn`; history: its per-update statistics.
        zero_shot_active: whether ``predict`` applies the zero-shot override now (module docstring, "Zero-shot").
    """

    #: Registry / table name (``placement-gym train --agent <name>``).
    name: ClassVar[str] = ""
    #: Node-feature families the agent's env must observe; None = the env's default.
    feature_families: tuple[str, ...] | None = None

    #: The search layer this class composes (`agents.search.attach.SearchLayer` for the learned agents shipped
    #: here): a factory whose ``build(search, agent_class)`` returns the layer object the agent holds, or None for
    #: no search. None here: a class without one refuses a ``search`` with components (wrap the agent instead,
    #: ``hybrid:NAME``, `agents.search.hybrid.SearchAround`).
    SEARCH_LAYER: ClassVar[Any] = None
    #: The hybrid form's own search-like settings (``search="hybrid"``, ``hybrid:NAME``): the agent's, its
    #: trainer's and its policy's settings that the hybrid turns on, by keyword (none here). ``search="hybrid"``
    #: takes them under the caller's keywords; its layer is the class's ``HYBRID`` (`agents.search.config`).
    HYBRID_COMPONENTS: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        # The agent's own settings (``SETTINGS``) first, then the run's (``RUN``); any other keyword is refused in
        # one line naming those the class takes (`agents.core.settings`).
        options = self._hybrid_form(options)
        self._take_own_settings(options)
        unknown = set(options) - set(field_values(type(self).RUN))
        if unknown:
            raise self._refusal(unknown)
        run = replace(type(self).RUN, **options)
        self.seed = run.seed
        self.torch_threads = run.torch_threads
        #: The search layer around the agent's own method (`agents.search.attach.SearchLayer`), an object; None:
        #: no search (the default), the paper's method alone.
        self._search = self._build_search(run.search)
        self.zero_shot_active = False
        self.coarsen_above = int(run.coarsen_above) if run.coarsen_above else None
        self.max_nodes = int(run.max_nodes)
        self.best_placement: np.ndarray | None = None
        self.best_latency_s: float | None = None
        self.run_summary: RunSummary | None = None
        self.history: list[dict] = []
        #: What the agent last learned on (graph, devices, features): recorded in its checkpoints.
        self.trained_for: dict[str, Any] = {}

    def learn(self, env: "gym.Env | DevicePlacementVectorEnv", budget: int, seed: int | None = None,
              callback: "Callback | list[Callback] | None" = None) -> "RunAgent":
        """Measure at most `budget` placements on `env` while learning; returns self (see the module docstring).

        `env` may be a native vector env (``gym.make_vec("DevicePlacement-v0", num_envs=K)``): agents that collect
        placements in batches (the bandit mode of the REINFORCE and PPO trainers) then measure K at a time in one
        step of it; the others step its first sub-env.

        Calling it again continues from what the agent has learned (a fine-tuning run on another env too,
        where the agent supports it); ``budget=0`` only measures the agent's own placement (``predict``).
        """
        budget = check_budget(budget)
        seed = self.seed if seed is None else seed
        set_seed(seed)
        with torch_threads(self.torch_threads):
            base = (env.envs[0] if isinstance(env, DevicePlacementVectorEnv) else env).unwrapped
            # A multi-graph env is learned as it is: its graphs differ, one coarsening cannot serve them all.
            coarsen = not base.multi_graph and self._coarsens(base.graph.n_ops)
            run = RunLoop(env, budget, seed, make_callback(callback), {"agent": self.name, **self.hyperparameters()},
                          max_nodes=self.max_nodes if coarsen else None)
            if base.multi_graph and self._placements_per_turn(base.graph) is not None:
                train_in_turns(self, run, seed)  # an agent built for one graph at a time
            else:
                self.train(run, seed)
            if base.multi_graph:  # a policy for graphs it was not fitted to (module docstring, "Zero-shot")
                self.zero_shot_active = self.overrides_zero_shot
            elif budget > 0:  # a run on one graph: predict is what it distilled (also for a train without
                self.zero_shot_active = False  # `_measure_starts`)
            summary = run.finish(self.predict if self.has_policy() else None)
        self.run_summary, self.history = summary, run.history
        base = run.base
        graphs = [base.graphs[name] for name in base.models]
        self.trained_for = {"graph": base.graph.name if not base.multi_graph else [g.name for g in graphs],
                            "n_ops": base.graph.n_ops if not base.multi_graph else [g.n_ops for g in graphs],
                            "devices": base.device_names,
                            "feature_families": list(base.feature_families), "simulated": base.backend.simulated}
        if run.coarsening is not None:
            self.trained_for["clusters"] = run.coarsening.n_clusters
        self.best_placement, self.best_latency_s = summary.placement, summary.latency_s
        return self

    #: Whether a run over many graphs gives the policy's device head the whole-graph cost term (the graph's total
    #: cost on each device, `agents.nn.device_head.enable_graph_cost`), where the agent has such a head.
    whole_graph_cost: bool = True

    @classmethod
    def _hybrid_form(cls, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with ``search="hybrid"`` spelled out: the class's `HYBRID_COMPONENTS` under the caller's
        keywords and its layer preset (``HYBRID``) as ``search``; `options` unchanged otherwise. Called by the
        first constructor in the class's bases that takes keywords (a base class's constructor may take some of
        them before this one runs)."""
        if options.get("search") != "hybrid":
            return options
        return {**cls.HYBRID_COMPONENTS, **options, "search": getattr(cls, "HYBRID", None)}

    def _build_search(self, value: Any) -> Any:
        """The search layer the ``search`` keyword names, built by the class's `SEARCH_LAYER`; None for no search.
        A class without a layer takes no search (None, ``"off"`` or an empty dict, as an earlier file may hold)."""
        if type(self).SEARCH_LAYER is not None:
            return type(self).SEARCH_LAYER.build(value, type(self))
        if value is None or value == "off" or (isinstance(value, Mapping) and not value):
            return None
        raise ValueError(f"{self.name or type(self).__name__} composes no search layer and takes no search "
                         f"({value!r}); put the layer around it: hybrid:NAME on the command line, "
                         "agents.search.hybrid.SearchAround(agent) in Python")

    @property
    def search(self) -> Any:
        """The search layer's settings (`agents.search.config.SearchConfig`), or None: no search."""
        return None if self._search is None else self._search.config

    @property
    def overrides_zero_shot(self) -> bool:
        """Whether ``predict`` after a run over many graphs goes through the search layer's zero-shot override
        (module docstring, "Zero-shot")."""
        return self._search is not None and self._search.overrides_zero_shot

    def _measure_starts(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool,
                        obs: Mapping[str, Any]) -> None:
        """What a run on one graph measures before the policy samples: the search layer's starts (its
        ``measure_starts``: a fine-tuning run's own placement, the heuristic start), then, for a policy `trained`
        before, the agent's own start of a fine-tuning run (`_start_fine_tuning`). Nothing over many graphs
        (`RunLoop.many_graphs`). `env` is the agent's env (``run.env`` or its wrapper), `obs` the run's
        ``run.predict_observation()`` (the graph as the agent's actions address it)."""
        if run.many_graphs:
            return
        if self._search is not None:
            self._search.measure_starts(self, run, env, seed, trained, obs)
        if trained:
            self._start_fine_tuning(run, env, seed, obs)
        if run.budget > 0:  # the zero-shot placement is measured (or not asked for): from here predict is this
            self.zero_shot_active = False  # graph's own (module docstring, "Zero-shot")

    def _start_fine_tuning(self, run: RunLoop, env: gym.Env, seed: int | None, obs: Mapping[str, Any]) -> None:
        """What the agent itself measures when a policy trained before continues on one graph, after the search
        layer's starts and within the budget: nothing here (GO's local search, `agents.go.GOAgent`)."""

    def _refits_start(self, run: RunLoop) -> bool:
        """Whether the policy is fitted to the run's best start placement before it samples (the search layer's
        ``heuristic_start="refit"``); the agent's trainer does the fitting
        (`agents.algos.learned.run_learned`)."""
        return self._search is not None and self._search.refits_start(run)

    def _measure_predict(self, run: RunLoop, seed: int | None, obs: Mapping[str, Any]) -> None:
        """Measure the policy's own placement for `obs` (``run.predict_observation()``) through ``run.env`` (one
        placement of the budget)."""
        run.env.reset(seed=seed)
        run.env.step(self.predict(obs))

    def _placements_per_turn(self, graph: ComputationGraph) -> int | None:
        """Training over several graphs (a multi-graph env): None (here) trains on that env as it is; an agent
        whose env or model is built for one graph returns the placements of one turn on `graph`, and is trained
        one graph at a time (`train_in_turns`)."""
        return None

    # ------------------------------------------------------------------------------------ big graphs
    def _coarsens(self, n_ops: int) -> bool:
        """Whether this agent works on a graph of `n_ops` ops through its coarsening (``coarsen_above``)."""
        return self.coarsen_above is not None and n_ops > self.coarsen_above

    def _coarsen_options(self) -> dict[str, Any]:
        """``coarsen_above`` and ``max_nodes`` (for `hyperparameters`)."""
        return {"coarsen_above": self.coarsen_above, "max_nodes": self.max_nodes}

    def _search_options(self) -> dict[str, Any]:
        """``{"search": ...}``: the search layer's components that are on, as plain data (for `hyperparameters`);
        nothing for an agent without search."""
        return {} if self._search is None else {"search": self._search.config.to_dict()}

    def _owned_settings(self) -> list[Any]:
        """The settings dataclasses the agent owns (its own ``settings``; subclasses add their trainer's), whose
        fields declared as search components (`agents.core.bounds.setting`, ``component=True``) count in
        `search_components`."""
        settings = getattr(self, "settings", None)
        return [] if settings is None else [settings]

    def search_components(self) -> list[str]:
        """The search components this agent runs: the search layer's that are on, then the search-like settings of
        its own code that differ from their off value (the field's default): what its results records list under
        ``search``; empty for a pure agent."""
        layer = [] if self._search is None else self._search.config.components()
        return layer + [name for settings in self._owned_settings() for name in components_of(settings)]

    def _coarsening_for(self, obs: Mapping[str, Any]) -> Coarsening | None:
        """The coarsening ``predict`` applies to `obs`: None for a graph it places as it is (at most
        ``coarsen_above`` ops, or a node-by-node observation, which is already of the env it learned on)."""
        if "current_node" in obs or not self._coarsens(int(np.shape(obs["placement"])[0])):
            return None
        return Coarsening.of(obs, self.max_nodes)

    # ------------------------------------------------------------------------------------ to implement
    @abc.abstractmethod
    def train(self, run: RunLoop, seed: int | None) -> None:
        """The algorithm: measure placements through ``run.env`` (or a wrapper of it) until ``run.done``."""

    # ------------------------------------------------------------------ optional (defaults for your own agent)
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """(N,) int64 placement for a `DevicePlacement-v0` observation: the agent's own choice.

        Override it if the agent has a policy. This default (an agent without one, `has_policy` False) returns
        the best placement of its last run when `obs` is of that graph's size, else raises ValueError; the run's
        ``predict_latency_s`` stays None, so tables show no ``predict`` for it."""
        if self.best_placement is None or np.shape(obs["placement"]) != np.shape(self.best_placement):
            raise ValueError(f"{type(self).__name__} has no policy of its own: it can only give the best placement "
                             "of its last run, for that run's graph")
        return np.asarray(self.best_placement, dtype=np.int64).copy()

    def has_policy(self) -> bool:
        """Whether the agent has a policy that places a graph: its class defines its own ``predict``, not the
        default."""
        return type(self).predict is not RunAgent.predict


def train_in_turns(agent: "RunAgent", run: RunLoop, seed: int | None) -> None:
    """Train `agent` over the graphs of a multi-graph `run` one graph at a time, for agents whose env or model is
    built for one graph (a node-by-node wrapper's groups, SB3's spaces and rollout buffer): turns of
    ``agent._placements_per_turn(graph)`` placements (one update's worth) on a single-graph env of each graph
    (`RunLoop.turn`), every graph once in a seeded random order, then again, until the run's budget is spent.
    Each turn is the agent's `RunAgent.train` on that turn's run, continuing what it learned
    (`RunLoop.many_graphs` keeps the single-graph extras off: heuristic start, coarse to fine, self-imitation,
    final distillation)."""
    rng = np.random.default_rng(seed)
    order: list[str] = []
    turns = 0
    while not run.done:
        if not order:
            order = [run.base.models[i] for i in rng.permutation(len(run.base.models))]
        model = order.pop()
        graph = run.base.graphs[model]
        placements = max(1, int(agent._placements_per_turn(graph)))
        coarse = agent._coarsens(graph.n_ops)
        turn = run.turn(model, min(placements, run.remaining), agent.max_nodes if coarse else None)
        agent.train(turn, None if seed is None else seed + turns)
        run.env_s += turn.env_s
        turns += 1
        if turn.steps == 0:
            break  # the agent measured nothing in its turn: another would not either


def agent_predict(predict: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Decorator for a `RunAgent`'s ``predict(obs, deterministic)``, what every learned agent's placement goes
    through: an observation of a graph above the agent's ``coarsen_above`` is coarsened first
    (`RunAgent._coarsening_for`) and the (M,) answer expanded to (N,); then, while `RunAgent.zero_shot_active`, the
    search layer's ``on_predict`` (its zero-shot override, module docstring) may change it. A decorated
    ``predict`` that calls its parent class's (also decorated) is wrapped once: by the outermost call."""

    @functools.wraps(predict)
    def wrapper(self: "RunAgent", obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        if getattr(self, "_predicting", False):  # inside another decorated predict of this agent
            return predict(self, obs, deterministic)
        self._predicting = True
        try:
            coarsening = self._coarsening_for(obs)
            if coarsening is None:
                placement = predict(self, obs, deterministic)
            else:
                placement = coarsening.expand(predict(self, coarsening.observation(obs), deterministic))
        finally:
            self._predicting = False
        if not self.zero_shot_active or self._search is None:
            return placement
        return self._search.on_predict(placement, obs)

    return wrapper
