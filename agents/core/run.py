"""THE run loop: the bookkeeping of one `learn` call, shared by every agent and baseline.

Every agent's ``learn(env, budget, seed, callback)`` is `RunAgent.learn`, which reads top to bottom:

    1. check the budget (placements the agent may measure, an int >= 0) and seed every generator once;
    2. pin torch's threads (``torch_threads``, default 1: on a busy machine torch's extra threads spin and
       can make training several times slower);
    3. open a `RunLoop` on the env: ``run.env`` is the env wrapped in a recorder that counts every placement
       measured, times the env apart from the agent, keeps the best placement seen and the best-so-far
       curve, calls the user's callback, and refuses to measure past the budget; on a graph of more than the
       agent's ``coarsen_above`` ops, ``run.env`` shows it coarsened to at most ``max_nodes`` clusters
       (`placement_gym.wrappers.CoarsenedPlacement`, see "Big graphs" below);
    4. call the agent's own `RunAgent.train(run, seed)`, the algorithm: it steps ``run.env`` (or a wrapper of
       it) until ``run.done`` and reports each update's statistics with ``run.record_update``. A run that
       continues a policy trained before on one graph (fine-tuning: ``learn`` called again, ``placement-gym
       evaluate --load A.pt --budget K``) first measures the policy's own placement and the heuristic start's
       (`RunAgent.start_fine_tuning`), so it ends no worse than either;
    5. `RunLoop.finish`: re-measure the best placement afresh (bypassing the measurement cache, so the
       reported latency is not the luckiest of many noisy draws) and the agent's own deterministic
       placement (``predict``), and return a `placement_gym.evaluation.RunSummary`.

On a multi-graph env (``model=[...]`` or ``"dataset:SPLIT"``: each reset draws a graph) a best placement
across graphs means nothing, so the loop keeps the best per graph (``best_by_graph``), its curve is in a
graph-free unit (the mean over the graphs seen of best latency / reference latency), and `finish` re-measures
every graph's best and predicts on every graph, reporting them in ``details["graphs"]``.

The summary is what the harness (`placement_gym.evaluation.evaluate`) turns into a results record, so every
agent, ours or a user's subclass, reports the same things: the curve, placements to the best, the agent's
compute per placement, and both its best placement and its own policy's placement.

Big graphs. An agent with ``coarsen_above`` set (the learned agents: `placement_gym.coarsen.COARSEN_ABOVE`
ops) learns a graph of more ops than that on its coarsening (`placement_gym.coarsen`, at most ``max_nodes``
clusters): ``run.env`` takes a device per cluster, the recorder below it still sees every full placement, so
the run's best placement and the final measurements are full-size, while ``run.best_action`` (what distillation
aims at) and ``run.predict_observation()`` are the coarse ones the policy works with. ``predict`` (decorated
with `agent_predict`) coarsens a full-size observation the same way and expands its answer; the clusters are
recomputed from the observation itself, so a saved agent needs no stored mapping.

Zero-shot. After a run over many graphs, ``predict`` on a graph the policy was not fitted to goes through the named
point `RunAgent.on_predict`, where the search layer applies the zero-shot override
(`agents.search.heuristic_start.override_zero_shot`, the agent's ``zero_shot_override``): every op that
saves more on its cheapest device than the move adds on links plus that many per-submodel overheads moves there
(from another device than the policy's, where the policy put the graph on one device and the moves gain enough
more from the other: `override_zero_shot`'s ``rebase``; runs of ops the policy put off its main device that do not
pay for themselves go back first: ``consolidate``). It stays on for the
placements the trained agent is asked for (``placement-gym evaluate --budget 0``, the first placement a
fine-tuning run measures) and goes off once a run on one graph has measured its start: from there ``predict`` is
the placement that run distils, as for any run on one graph (`RunAgent.zero_shot_active`).
"""
from __future__ import annotations

import abc
import contextlib
import functools
import inspect
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Mapping

import gymnasium as gym
import numpy as np
import torch

from placement_gym.backends.base import Measurement
from placement_gym.env import DevicePlacementEnv
from placement_gym.evaluation import RunSummary, check_budget
from placement_gym.results import write_json
from placement_gym.schema import (
    MAX_DEVICES, MAX_OPS, Found, Integer, ListOf, Number, Optional, Record, SchemaError, Text, check, mismatch,
    read_json,
)
from placement_gym.graph import ComputationGraph
from placement_gym.vector_env import DevicePlacementVectorEnv

from placement_gym.callbacks import Callback, make_callback
from placement_gym.coarsen import MAX_NODES, Coarsening
from placement_gym.wrappers import CoarsenedPlacement, NodePlacementWrapper

from agents.core.checkpoint import SETTINGS, CheckpointError
from agents.core.search_settings import SearchConfig, check_components, option_names

__all__ = ["BestPlacement", "RunAgent", "RunLoop", "agent_predict", "set_seed", "torch_threads", "train_in_turns"]

_MISSING = object()
#: What the default `RunAgent.save` writes, as the default `RunAgent.load` checks it.
AGENT_FILE = Record({
    "agent": Text(max_len=500), "hyperparameters": SETTINGS,
    "best_placement": Optional(ListOf(Integer(0, MAX_DEVICES - 1), max_len=MAX_OPS)),
    "best_latency_s": Optional(Number(positive=True)),
})
MAX_AGENT_FILE_BYTES = 16 << 20


def _is_plain(value: Any) -> bool:
    """Whether `value` is a setting the default `RunAgent.load` takes back: plain data as `SETTINGS` accepts it
    for any setting (None, bool, int, float, str, lists and dicts of them, bounded)."""
    try:
        check(value, SETTINGS.others, "hyperparameters")
    except SchemaError:
        return False
    return True


#: The ``predict_error`` of a run whose agent has no policy of its own (`RunAgent.has_policy`).
NO_POLICY = "the agent has no policy of its own (it defines no predict)"


@dataclass(frozen=True)
class BestPlacement:
    """The best placement of one graph seen in a run: its drift-corrected latency (seconds) as measured during
    the run, the (N,) int64 placement measured, the (N,) int64 action the agent sent (before any repair), and the
    step that found it."""

    latency_s: float
    placement: np.ndarray
    action: np.ndarray
    step: int


def set_seed(seed: int | None) -> None:
    """Seed Python's, NumPy's and torch's global generators (no-op for None)."""
    if seed is None:
        return
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    torch.manual_seed(int(seed))


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch using `n` threads (None: leave torch's setting alone), then restore it."""
    if n is None:
        yield
        return
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"torch_threads must be a positive number of threads or None, got {n!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


class RunLoop:
    """Bookkeeping of one `learn` call on a `DevicePlacementEnv` (see the module docstring).

    Args:
        env: the env `learn` was given: a `DevicePlacementEnv`, possibly wrapped (e.g. by ``gym.make``), or a
            `DevicePlacementVectorEnv` (``gym.make_vec``), whose sub-env 0 is then the env and which measures
            batches (`vector`).
        budget: placements the agent may measure (env steps of `env`).
        seed: the run's seed (recorded; the agent uses it).
        callback: a `Callback` that sees every step and update; ``on_step`` returning False stops the run.
        config: the agent's settings, handed to ``callback.on_training_start``.
        max_nodes: None, or show the agent the graph coarsened to at most this many clusters (module docstring;
            a vector env is then stepped through its first sub-env, one placement at a time).

    Attributes (what an agent's ``train`` reads):
        env: `env` wrapped in the recorder: the agent measures placements through it (or through its own
            wrappers of it, e.g. the node-by-node variant).
        base: the unwrapped `DevicePlacementEnv`: ``base.graph`` (a `placement_gym.graph.ComputationGraph`:
            ``n_ops``, ``edge_index`` (2, E), ``op_types``, ``name``), ``base.n_devices``, ``base.device_names``,
            ``base.reference_placement`` ((N,) int64, the placement rewards are relative to),
            ``base.validate_action(placement)`` and ``base.multi_graph``.
        budget: placements the agent may measure; done: whether the budget is spent (or a callback stopped the
            run); remaining: placements left.
        steps: placements measured so far; best_latency_s / best_placement / best_step: the best seen so far
            (by the drift-corrected latency measured during the run, ``info["latency_corrected_s"]``); curve: ``[[steps, latency_s], ...]`` each time the
            best improved; history: one dict of statistics per update; details: what the agent reports about
            its run (a planner's plan, e.g. the optimum's proven bound), JSON-able.
        best_by_graph: ``{graph name: BestPlacement}``, the best of each graph seen. On a multi-graph env it is
            the result, best_placement / best_action stay None (a placement belongs to one graph), and
            best_latency_s and curve are the mean over the graphs seen of best latency / reference latency
            (unitless; 1.0 = the reference; it can rise when a new graph is first seen).
        vector: with a vector env, it wrapped in the recorder: one ``step`` measures ``num_envs`` placements in
            one batch, each counted and recorded as a step of `env` would be (the bandit collector,
            `agents.algos.rollout.collect_placements`, uses it); None for a single env or a coarsened run.
        coarsening: the `placement_gym.coarsen.Coarsening` ``env`` shows (None: the graph as it is).
    """

    def __init__(self, env: "gym.Env | DevicePlacementVectorEnv", budget: int, seed: int | None = None,
                 callback: Callback | None = None, config: Mapping[str, Any] | None = None,
                 max_nodes: int | None = None) -> None:
        vector = env if isinstance(env, DevicePlacementVectorEnv) else None
        if vector is not None:
            env = vector.envs[0]
        if not isinstance(env.unwrapped, DevicePlacementEnv):
            raise TypeError(f"expected a DevicePlacementEnv (or a wrapper of one) or a DevicePlacementVectorEnv, "
                            f"got {type(env.unwrapped).__name__}")
        self.base: DevicePlacementEnv = env.unwrapped
        self.user_env = env
        self.budget = check_budget(budget)
        self.seed = seed
        self.callback = callback or Callback()
        self.steps, self.updates = 0, 0
        self.best_latency_s, self.best_placement, self.best_step = math.inf, None, None
        # The action the agent sent at the best step: the best placement before the env's ``unsupported="repair"``
        # moved ops off devices that cannot run them (the same placement otherwise; the placement itself where the
        # env's action is not a whole placement; a device per cluster on a coarsened run). It is what the agent's
        # own policy can produce, so distillation aims at it.
        self.best_action: np.ndarray | None = None
        self.curve: list[list] = []
        self.best_by_graph: dict[str, BestPlacement] = {}
        self.history: list[dict] = []
        self.details: dict[str, Any] = {}
        self.stopped = False  # a callback asked to stop
        self.env_s = 0.0
        self._started = time.perf_counter()
        self.env: gym.Env = _Recorder(env, self)
        self.coarsening: Coarsening | None = None
        if max_nodes is not None:
            # Outside the recorder, so the recorder sees (and the run reports) every full placement.
            self.env = CoarsenedPlacement(self.env, max_nodes)
            self.coarsening = self.env.coarsening
            self.details["coarsened"] = {"ops": self.base.graph.n_ops, "clusters": self.coarsening.n_clusters,
                                         "cluster_edges": int(self.coarsening.edge_index.shape[1])}
            vector = None  # the vector env measures full placements; the coarse env is stepped one at a time
        self.vector = None if vector is None else _VectorRecorder(vector, self)
        self.callback.on_training_start(self.budget, dict(config or {}))

    # ------------------------------------------------------------------------------------ for agents
    @property
    def remaining(self) -> int:
        """Placements the agent may still measure."""
        return self.budget - self.steps

    @property
    def done(self) -> bool:
        """True once the budget is spent or a callback asked to stop."""
        return self.stopped or self.steps >= self.budget

    @property
    def many_graphs(self) -> bool:
        """True when the run trains over several graphs: its env draws one per reset, or it is one graph's turn
        of such a run (`train_in_turns`). Then there is no single graph whose best placement the policy should
        end on: no heuristic start, coarse to fine, self-imitation or final distillation."""
        return self.base.multi_graph

    def turn(self, model: str, budget: int, max_nodes: int | None = None) -> "RunLoop":
        """A run of at most `budget` placements on graph `model` of this multi-graph run (`train_in_turns`): it
        steps a single-graph env of that graph (`DevicePlacementEnv.one_graph`; shown coarsened to at most
        `max_nodes` clusters unless None) and records every step into this run (its budget, best per graph,
        curve, callback)."""
        return _Turn(self, model, budget, max_nodes)

    def record_update(self, stats: Mapping[str, Any]) -> None:
        """Report one update of the agent's parameters (loss, entropy, ...): kept in `history`, passed on to
        the callback with the step count and the best latency so far added."""
        stats = {**stats, "step": self.steps, "best_latency_s": self.best_latency_s}
        self.updates += 1
        self.history.append(stats)
        self.callback.on_update(self.steps, stats)

    # ------------------------------------------------------------------------------------ the recorder
    def _record_step(self, action: Any, reward: float, info: Mapping[str, Any]) -> None:
        self.steps += 1
        latency = float(info["latency_corrected_s"])  # drift-corrected: comparable over a long real run
        best = self.best_by_graph.get(info["model"])
        if info["ok"] and (best is None or latency < best.latency_s):
            placement = np.array(info["placement"], dtype=np.int64)
            action = np.array(action, dtype=np.int64)  # a node-by-node env's action is one node's device only
            if action.ndim == 1 and action.shape[0] > placement.shape[0]:
                action = action[:placement.shape[0]]  # a multi-graph env's padded action: its real part
            if action.shape != placement.shape:
                action = placement.copy()
            if self.coarsening is not None:  # the recorder saw the expanded action: back to one device per cluster
                action = self.coarsening.majority(action, self.base.n_devices)
            self.best_by_graph[info["model"]] = BestPlacement(latency, placement, action, self.steps)
            if not self.base.multi_graph:
                self.best_latency_s, self.best_step = latency, self.steps
                self.best_placement, self.best_action = placement, action
                self.curve.append([self.steps, latency])
            else:
                relative = float(np.mean([b.latency_s / self.base.reference_of(name).latency_s
                                          for name, b in self.best_by_graph.items()]))
                self.best_latency_s, self.best_step = relative, self.steps
                self.curve.append([self.steps, relative])
        if self.callback.on_step(self.steps, float(reward), info) is False:
            self.stopped = True

    def as_measured(self, action: np.ndarray) -> np.ndarray:
        """(N,) the placement the env would measure for an agent's `action`: a coarse action expanded to every
        op on a coarsened run, then the env's own `as_measured` (``unsupported="repair"``). Distillation compares
        placements through it."""
        action = np.asarray(action)
        if self.coarsening is not None:
            action = self.coarsening.expand(action)
        return self.base.as_measured(action)

    # ------------------------------------------------------------------------------------- the end
    def predict_observation(self) -> dict[str, np.ndarray]:
        """The observation `finish` gives ``predict``: the whole graph with the reference placement (what the env
        shows after a reset), built without resetting the env (agents fit their policy to it, `distill`);
        coarsened on a coarsened run, as ``predict`` would coarsen it."""
        obs = self.base.observation(self.base.reference_placement)
        return obs if self.coarsening is None else self.coarsening.observation(obs)

    def finish(self, predict: Callable[[Mapping[str, Any]], np.ndarray] | None) -> RunSummary:
        """Measure the best placement seen and the agent's deterministic placement (``predict`` on a fresh
        observation of the whole graph) afresh, and return the run's summary. Neither measurement counts
        against the budget. `predict` None: the agent has no policy of its own (`RunAgent.has_policy`); its
        ``predict_latency_s`` is None.

        On a multi-graph env this is done for every graph of ``env.models`` (a graph never drawn gets only the
        prediction; a ``ValueError`` from ``predict``, e.g. a planner's placement made for another graph, is
        reported as that graph's ``predict_error``); ``details["graphs"]`` holds the results by graph, and the
        summary's placement fields describe the first graph with a best placement (else the first graph)."""
        finish_started = time.perf_counter()
        if self.base.multi_graph:
            results = {name: self._finish_graph(name, predict) for name in self.base.models}
            self.details["graphs"] = {name: row for name, (row, *_) in results.items()}
            name = next((n for n in self.base.models if n in self.best_by_graph), self.base.models[0])
            _, placement, source, final, predicted, predicted_m = results[name]
            best = self.best_by_graph.get(name)
            best_step, best_seen = (best.step, best.latency_s) if best else (None, None)
        else:
            _, placement, source, final, predicted, predicted_m = self._finish_graph(self.base.graph.name, predict)
            best_step = self.best_step
            best_seen = self.best_latency_s if self.best_placement is not None else None
        now = time.perf_counter()
        finish_s = now - finish_started
        wall_s = now - self._started
        summary = RunSummary(
            budget=self.budget, seed=self.seed, steps=self.steps, updates=self.updates, curve=self.curve,
            best_step=best_step, best_latency_seen_s=best_seen,
            placement=placement, placement_source=source, final=final,
            predict_placement=predicted, predict=predicted_m,
            wall_s=wall_s, env_s=self.env_s, agent_s=wall_s - self.env_s - finish_s, finish_s=finish_s,
            details=dict(self.details),
        )
        self.callback.on_training_end(summary.to_dict())
        return summary

    def _finish_graph(self, name: str, predict: Callable[[Mapping[str, Any]], np.ndarray] | None) -> tuple:
        """Graph `name`'s final measurements: ``(details row, placement, source, final, predicted placement,
        its measurement)``."""
        options = {"model": name} if self.base.multi_graph else None
        obs, _ = self.base.reset(seed=self.seed, options=options)
        row: dict[str, Any] = {"reference_latency_s": float(self.base.reference.latency_s)}
        best = self.best_by_graph.get(name)
        if predict is None:  # no policy of its own: nothing to predict; its result is its best or the reference
            predicted, predicted_m = self.base.reference_placement.copy(), Measurement.failure(NO_POLICY)
            row["predict_error"] = NO_POLICY
            if best is None:
                placement, source, final = predicted, "reference", self.base.measure(predicted)
            else:
                placement, source, final = best.placement, "best_placement", self.base.measure(best.placement)
        else:
            try:
                predicted = self.base.as_measured(predict(obs))  # with unsupported="repair", as a step would
                predicted_m = self.base.measure(predicted)  # measure it
            except ValueError as exc:
                if not self.base.multi_graph:
                    raise
                predicted, predicted_m = self.base.reference_placement.copy(), Measurement.failure(f"predict: {exc}")
                row["predict_error"] = str(exc)
            if best is None:  # nothing measured (budget 0): the policy's own placement is the result
                placement, source, final = predicted, "predict", predicted_m
            else:
                placement, source = best.placement, "best_placement"
                final = predicted_m if np.array_equal(placement, predicted) else self.base.measure(placement)
        row.update(
            best_step=None if best is None else best.step,
            best_latency_seen_s=None if best is None else best.latency_s,
            latency_s=float(final.latency_s) if final.ok else None,
            speedup=row["reference_latency_s"] / final.latency_s if final.ok else None,
            placement_source=source, ok=final.ok, error=final.error,
            predict_latency_s=float(predicted_m.latency_s) if predicted_m.ok else None,
        )
        return row, placement, source, final, predicted, predicted_m


class _Turn(RunLoop):
    """One graph's turn of a multi-graph run (`RunLoop.turn`): a run of its own budget on a single-graph env whose
    steps and updates are recorded into the parent run (it keeps no best placement of its own)."""

    def __init__(self, parent: RunLoop, model: str, budget: int, max_nodes: int | None) -> None:
        self.parent = parent
        super().__init__(parent.base.one_graph(model), budget, parent.seed, max_nodes=max_nodes)

    @property
    def many_graphs(self) -> bool:
        return True

    def _record_step(self, action: Any, reward: float, info: Mapping[str, Any]) -> None:
        self.steps += 1
        self.parent._record_step(action, reward, info)
        self.stopped = self.parent.stopped

    def record_update(self, stats: Mapping[str, Any]) -> None:
        self.parent.record_update(stats)


def train_in_turns(agent: "RunAgent", run: RunLoop, seed: int | None) -> None:
    """Train `agent` over the graphs of a multi-graph `run` one graph at a time, for agents whose env or model is
    built for one graph (a node-by-node wrapper's groups, SB3's spaces and rollout buffer): turns of
    ``agent.placements_per_turn(graph)`` placements (one update's worth) on a single-graph env of each graph
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
        placements = max(1, int(agent.placements_per_turn(graph)))
        coarse = agent.coarsens(graph.n_ops)
        turn = run.turn(model, min(placements, run.remaining), agent.max_nodes if coarse else None)
        agent.train(turn, None if seed is None else seed + turns)
        run.env_s += turn.env_s
        turns += 1
        if turn.steps == 0:
            break  # the agent measured nothing in its turn: another would not either


def agent_predict(predict: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Decorator for a `RunAgent`'s ``predict(obs, deterministic)``, what every learned agent's placement goes
    through: an observation of a graph above the agent's ``coarsen_above`` is coarsened first
    (`RunAgent.coarsening_for`) and the (M,) answer expanded to (N,); then, while `RunAgent.zero_shot_active`, the
    named point `RunAgent.on_predict` (the search layer's zero-shot override, module docstring) may change it. A decorated
    ``predict`` that calls its parent class's (also decorated) is wrapped once: by the outermost call."""

    @functools.wraps(predict)
    def wrapper(self: "RunAgent", obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        if getattr(self, "_predicting", False):  # inside another decorated predict of this agent
            return predict(self, obs, deterministic)
        self._predicting = True
        try:
            coarsening = self.coarsening_for(obs)
            if coarsening is None:
                placement = predict(self, obs, deterministic)
            else:
                placement = coarsening.expand(predict(self, coarsening.observation(obs), deterministic))
        finally:
            self._predicting = False
        if not self.zero_shot_active:
            return placement
        return self.on_predict(placement, obs)

    return wrapper


class _Recorder(gym.Wrapper):
    """The env as the agent sees it during a run: every step is counted, timed and recorded by the `RunLoop`."""

    def __init__(self, env: gym.Env, run: RunLoop) -> None:
        super().__init__(env)
        self.run = run

    @property
    def placements_left(self) -> int:
        """Placements the run may still measure (wrappers that measure on reset ask, `NodePlacementWrapper`)."""
        return self.run.remaining

    def step(self, action):
        if self.run.steps >= self.run.budget:
            raise RuntimeError(
                f"the budget of {self.run.budget} placements is spent; an agent must stop when run.done is True"
            )
        started = time.perf_counter()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.run.env_s += time.perf_counter() - started
        self.run._record_step(action, reward, info)
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        started = time.perf_counter()
        try:
            return self.env.reset(**kwargs)
        finally:
            self.run.env_s += time.perf_counter() - started


class _VectorRecorder:
    """The vector env as the agent sees it during a run: one `step` measures a placement per sub-env in one
    batch; the `RunLoop` counts, times and records each as a step of the single env."""

    def __init__(self, env: DevicePlacementVectorEnv, run: RunLoop) -> None:
        self.vector_env, self.run = env, run
        self.num_envs = env.num_envs
        started = time.perf_counter()
        env.reset(seed=run.seed)
        run.env_s += time.perf_counter() - started

    def step(self, actions: np.ndarray) -> list[tuple[float, dict]]:
        """Measure `actions` ((num_envs, N) ints, one placement per sub-env) in one step of the vector env;
        returns each sub-env's ``(reward, info)``, info as `DevicePlacementEnv.step` returns it."""
        if self.run.steps + self.num_envs > self.run.budget:
            raise RuntimeError(f"a vector step measures {self.num_envs} placements; only {self.run.remaining} of "
                               f"the budget of {self.run.budget} remain (step the single env, run.env, instead)")
        started = time.perf_counter()
        _, rewards, _, _, _ = self.vector_env.step(actions)
        self.run.env_s += time.perf_counter() - started
        results = list(zip(rewards.tolist(), self.vector_env.step_infos))
        for action, (reward, info) in zip(actions, results):
            self.run._record_step(action, reward, info)
        return results


class RunAgent(abc.ABC):
    """What every placement agent is: `learn` runs the shared run loop around the agent's `train`.

    A subclass implements `train` (the algorithm: measure placements through ``run.env`` until ``run.done``;
    `RunLoop` lists what ``run`` offers). Everything else is optional: ``name`` (the class name by default),
    ``feature_families`` if it needs particular node features, `predict` if it has a policy (without one its
    result is its best placement and tables show no ``predict``), and `hyperparameters` / `save` / `load`, whose
    defaults read the constructor's keywords from same-named attributes and write plain JSON. It meets
    `placement_gym.evaluation.Agent`, so the harness and ``placement-gym benchmark|compare|evaluate --agent
    module:Class`` (or ``--agent path/to/file.py:Class``) run it like the agents shipped here.

    Args:
        seed: default seed of `learn` (its own `seed` argument wins).
        torch_threads: torch threads while learning (None: leave torch's setting alone).
        coarsen_above: learn and predict on graphs of more ops than this coarsened to at most `max_nodes`
            clusters (module docstring); None or 0: never (the default here; the learned agents set
            `placement_gym.coarsen.COARSEN_ABOVE`). At least `max_nodes`, so a coarse graph is never coarsened again.
        max_nodes: clusters of a coarsened graph, at most.
        search: the search components around the agent's own method (`agents.core.search_settings.SearchConfig`,
            a dict of its fields, ``"off"``/None: none, the default; ``"hybrid"``: the class's ``HYBRID`` preset).
            The run loop itself reads ``heuristic_start``, ``finetune_from_predict`` and ``zero_shot_override``
            (module docstring, "Zero-shot"); the trainers read the rest. What the search does is the search
            layer's (`agents.search`), attached from above at this class's named points (`SEARCH_LAYER`).

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

    #: The search this agent's hybrid form runs (``search="hybrid"``, ``hybrid:NAME``): none here; the learned
    #: agents set theirs (`agents.search.config`).
    HYBRID: ClassVar[SearchConfig | None] = SearchConfig()
    #: The search components this class runs (`agents.search.config` field names, with their aliases): a search
    #: with any other component on is refused when the agent is built, and the command line's ``--agent-option
    #: KEY=VALUE`` goes to the agents whose class lists KEY. Here what this run loop itself runs (the heuristic
    #: start, the fine-tuning run's first placement, the zero-shot override of `agent_predict`); subclasses add
    #: what their training runs.
    SEARCH_OPTIONS: ClassVar[frozenset[str]] = option_names("heuristic_start", "finetune_from_predict",
                                                            "zero_shot_override")
    #: Whether the search layer is attached at this class's named points (`measure_heuristic_start`,
    #: `on_predict`, a trainer's ``training_hooks``): `agents.search.attach.SearchLayer` sets it. Without it the
    #: points do nothing and the components they carry (`agents.core.search_settings.LAYER_COMPONENTS`) are
    #: refused when the agent is built.
    SEARCH_LAYER: ClassVar[bool] = False

    #: The constructor keywords that the base classes keep themselves (subclasses add theirs): everything else
    #: in an agent's signature is its own setting (`keep_settings`).
    BASE_SETTINGS: ClassVar[frozenset[str]] = frozenset({"seed", "torch_threads", "device", "coarsen_above",
                                                          "max_nodes", "search"})
    #: The names of the agent's own settings, kept as attributes of the same name (`keep_settings`).
    own_setting_names: tuple[str, ...] = ()

    def __init__(self, seed: int | None = None, torch_threads: int | None = 1, *, coarsen_above: int | None = None,
                 max_nodes: int = MAX_NODES,
                 search: "SearchConfig | Mapping[str, Any] | str | None" = None) -> None:
        if not isinstance(max_nodes, (int, np.integer)) or max_nodes < 1:
            raise ValueError(f"max_nodes must be a positive number of clusters, got {max_nodes!r}")
        if coarsen_above is not None and (not isinstance(coarsen_above, (int, np.integer)) or
                                          (coarsen_above and coarsen_above < max_nodes)):
            raise ValueError(f"coarsen_above must be None or 0 (never coarsen) or a number of ops >= max_nodes "
                             f"({max_nodes}), so a coarsened graph is not coarsened again; got {coarsen_above!r}")
        self.seed = seed
        self.torch_threads = torch_threads
        #: The search components around the agent's own method (`agents.search.config`; none by default).
        self.search = SearchConfig.resolve(search, type(self).HYBRID)
        check_components(self.search, type(self).SEARCH_OPTIONS, self.name or type(self).__name__,
                         layer=type(self).SEARCH_LAYER)
        self.zero_shot_active = False
        self.coarsen_above = int(coarsen_above) if coarsen_above else None
        self.max_nodes = int(max_nodes)
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
            coarsen = not base.multi_graph and self.coarsens(base.graph.n_ops)
            run = RunLoop(env, budget, seed, make_callback(callback), {"agent": self.name, **self.hyperparameters()},
                          max_nodes=self.max_nodes if coarsen else None)
            if base.multi_graph and self.placements_per_turn(base.graph) is not None:
                train_in_turns(self, run, seed)  # an agent built for one graph at a time
            else:
                self.train(run, seed)
            if base.multi_graph:  # a policy for graphs it was not fitted to (module docstring, "Zero-shot")
                self.zero_shot_active = self.zero_shot_override > 0
            elif budget > 0:  # a run on one graph: predict is what it distilled (also for a train without
                self.zero_shot_active = False  # `measure_starts`)
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

    @property
    def finetune_from_predict(self) -> bool:
        """Whether a fine-tuning run measures the policy's own placement (``predict``, zero-shot) first, so its best
        is never worse than the placement it started from (``search.finetune_from_predict``)."""
        return self.search.finetune_from_predict

    @property
    def heuristic_start(self) -> str:
        """What a run measures before the policy samples (``search.heuristic_start``, `agents.search.heuristic_start`)."""
        return self.search.heuristic_start

    @property
    def zero_shot_override(self) -> float:
        """``search.zero_shot_override`` (module docstring, "Zero-shot"; 0: off)."""
        return self.search.zero_shot_override

    def measure_starts(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool,
                       obs: Mapping[str, Any]) -> None:
        """What a run on one graph measures before the policy samples: `start_fine_tuning` for a policy `trained`
        before, else the heuristic start (`agents.search.heuristic_start`, unless ``heuristic_start="off"``).
        Nothing over many graphs (`RunLoop.many_graphs`). `env` is the agent's env (``run.env`` or its wrapper),
        `obs` the run's ``run.predict_observation()`` (the graph as the agent's actions address it)."""
        if run.many_graphs:
            return
        if trained:
            self.start_fine_tuning(run, env, seed, obs)
        elif self.heuristic_start != "off":
            self.measure_heuristic_start(run, obs, seed)
        if run.budget > 0:  # the zero-shot placement is measured (or not asked for): from here predict is this
            self.zero_shot_active = False  # graph's own (module docstring, "Zero-shot")

    def refits_start(self, run: RunLoop) -> bool:
        """Whether the policy is fitted to the run's best start placement before it samples
        (``heuristic_start="refit"``, on one graph, once a start placement worked); the agent's trainer does the
        fitting (`agents.algos.learned.LearnedAgent.refit_best`)."""
        return self.heuristic_start == "refit" and not run.many_graphs and run.best_action is not None

    def start_fine_tuning(self, run: RunLoop, env: gym.Env, seed: int | None, obs: Mapping[str, Any]) -> None:
        """What a fine-tuning run (a policy trained before, continuing on one graph) measures before its training
        goes on, within the budget: the policy's own placement (`finetune_from_predict`), then the heuristic
        start's placements (unless ``heuristic_start="off"``: each device alone and every op on its cheapest
        device), so the run ends no worse than the zero-shot placement or the best single device. A node-by-node
        `env` (Placeto's and ppo-node's `NodePlacementWrapper`) then starts its episodes from the run's best
        placement so far instead of a random one (`NodePlacementWrapper.start_from_best`): the episodes search
        around what the policy and the costs suggest (from random starts, Placeto and ppo-node ended a short
        fine-tuning on the `paper` test graphs worse than their zero-shot placements). Nothing here on a node-by-node
        env given directly (its actions are not whole placements). `env` and `obs` as for `measure_starts`."""
        if not isinstance(run.env.action_space, gym.spaces.MultiDiscrete):
            return
        if self.finetune_from_predict and not run.done:
            self.measure_predict(run, seed, obs)
        if self.heuristic_start != "off":
            self.measure_heuristic_start(run, obs)
        if isinstance(env, NodePlacementWrapper) and run.best_action is not None:
            env.start_from_best(run.best_action, run.best_latency_s)

    # ------------------------------------------------------------ named points of the search layer (no-ops here)
    def measure_heuristic_start(self, run: RunLoop, obs: Mapping[str, Any], seed: int | None = None) -> int:
        """Before training (called by `measure_starts` and `start_fine_tuning` where ``heuristic_start`` is on):
        measure the heuristic start's placements through ``run.env``; the placements measured. Nothing here: the
        search layer's (`agents.search.attach.SearchLayer`, `agents.search.heuristic_start`)."""
        return 0

    def on_predict(self, placement: np.ndarray, obs: Mapping[str, Any]) -> np.ndarray:
        """On predict (`agent_predict`, while `zero_shot_active`): the (N,) placement to return for `obs` instead
        of the policy's `placement` (N,). `placement` itself here: the zero-shot override is the search layer's
        (`agents.search.attach.SearchLayer`, `agents.search.heuristic_start.override_zero_shot`)."""
        return placement

    def measure_predict(self, run: RunLoop, seed: int | None, obs: Mapping[str, Any]) -> None:
        """Measure the policy's own placement for `obs` (``run.predict_observation()``) through ``run.env`` (one
        placement of the budget)."""
        run.env.reset(seed=seed)
        run.env.step(self.predict(obs))

    def placements_per_turn(self, graph: ComputationGraph) -> int | None:
        """Training over several graphs (a multi-graph env): None (here) trains on that env as it is; an agent
        whose env or model is built for one graph returns the placements of one turn on `graph`, and is trained
        one graph at a time (`train_in_turns`)."""
        return None

    # ------------------------------------------------------------------------------------ big graphs
    def coarsens(self, n_ops: int) -> bool:
        """Whether this agent works on a graph of `n_ops` ops through its coarsening (``coarsen_above``)."""
        return self.coarsen_above is not None and n_ops > self.coarsen_above

    def coarsen_options(self) -> dict[str, Any]:
        """``coarsen_above`` and ``max_nodes`` (for `hyperparameters`)."""
        return {"coarsen_above": self.coarsen_above, "max_nodes": self.max_nodes}

    def search_options(self) -> dict[str, Any]:
        """``{"search": ...}``: the search components that are on, as plain data (for `hyperparameters`)."""
        return {"search": self.search.to_dict()}

    def search_components(self) -> list[str]:
        """The search components this agent runs (`agents.search.config.SearchConfig.components`): what its results
        records list under ``search``; empty for a pure agent."""
        return self.search.components()

    def coarsening_for(self, obs: Mapping[str, Any]) -> Coarsening | None:
        """The coarsening ``predict`` applies to `obs`: None for a graph it places as it is (at most
        ``coarsen_above`` ops, or a node-by-node observation, which is already of the env it learned on)."""
        if "current_node" in obs or not self.coarsens(int(np.shape(obs["placement"])[0])):
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

    def keep_settings(self, arguments: Mapping[str, Any]) -> None:
        """Keep the agent's own settings: every constructor keyword in `arguments` (the constructor's ``locals()``,
        taken before it defines anything else) that is not one of ``BASE_SETTINGS``, as an attribute of the same
        name, named in ``own_setting_names``; `own_settings` and `hyperparameters` read them back. So each
        setting is written once, in the constructor's signature."""
        self.own_setting_names = tuple(name for name in arguments
                                       if name not in ("self", "__class__") and name not in self.BASE_SETTINGS)
        for name in self.own_setting_names:
            setattr(self, name, arguments[name])

    def own_settings(self, target: "Callable[..., Any] | None" = None) -> dict[str, Any]:
        """The agent's own settings (`keep_settings`) by name: all of them, or those that `target` (a class or
        function: a policy, a trainer) takes as keywords."""
        names = self.own_setting_names
        if target is not None:
            names = [name for name in names if name in inspect.signature(target).parameters]
        return {name: getattr(self, name) for name in names}

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild this agent (plain Python values only).

        This default reads each keyword of the class's ``__init__`` from the attribute of the same name, where
        one holds a plain value (None, bool, int, float, str, or lists / dicts of them); a keyword without such
        an attribute is left to its default. Override it when the attributes are named otherwise."""
        params = inspect.signature(type(self).__init__).parameters.values()
        return {p.name: getattr(self, p.name) for p in params
                if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and _is_plain(getattr(self, p.name, _MISSING))}

    def save(self, path: "str | Path", overwrite: bool = False) -> Path:
        """Write the agent to `path`; refuses to replace an existing file unless `overwrite`.

        This default writes plain JSON: the class, `hyperparameters` and the last run's best placement. An agent
        with learned state (weights, tables) overrides it (and `load`)."""
        return write_json(path, {
            "agent": f"{type(self).__module__}:{type(self).__qualname__}",
            "hyperparameters": self.hyperparameters(),
            "best_placement": None if self.best_placement is None else np.asarray(self.best_placement).tolist(),
            "best_latency_s": self.best_latency_s,
        }, overwrite=overwrite)

    @classmethod
    def load(cls, path: "str | Path") -> "RunAgent":
        """Rebuild an agent written by the default `save` (plain JSON checked against `AGENT_FILE` before anything
        is built: nothing in it is imported or run; the file must name this class)."""
        data = read_json(path, AGENT_FILE, max_bytes=MAX_AGENT_FILE_BYTES, what=f"agent saved by {cls.__name__}.save",
                         error=CheckpointError)
        expected = f"{cls.__module__}:{cls.__qualname__}"
        if data["agent"] != expected:
            raise mismatch(path, "agent", data["agent"], f"{expected!r} (a file written by {cls.__name__}.save)",
                           CheckpointError)
        try:
            agent = cls(**data["hyperparameters"])
        except (TypeError, ValueError) as exc:  # settings this class does not take, or refuses
            raise mismatch(path, "hyperparameters", Found(str(exc).splitlines()[0][:200]),
                           f"the settings {cls.__name__} takes", CheckpointError) from None
        best = data["best_placement"]
        agent.best_placement = None if best is None else np.asarray(best, dtype=np.int64)
        agent.best_latency_s = data["best_latency_s"]
        return agent
