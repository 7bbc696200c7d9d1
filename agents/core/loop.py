"""The books of one run: what `agents.core.run.RunAgent.learn` opens on the env, and its agent's ``train`` steps.

A `RunLoop` wraps the env in a recorder (``run.env``) that counts every placement measured, times the env apart
from the agent, keeps the best placement seen and the best-so-far curve, calls the user's callback and refuses to
measure past the budget; the agent reports each update with ``run.record_update``. `RunLoop.finish` re-measures the
best placement afresh (bypassing the measurement cache, so the reported latency is not the luckiest of many noisy
draws) and the agent's own placement (``predict``), and returns the `placement_gym.evaluation.RunSummary` that the
harness turns into a results record: every agent, ours or a user's, reports the same things.

On a multi-graph env (``model=[...]`` or ``"dataset:SPLIT"``: each reset draws a graph) a best placement across
graphs means nothing, so the loop keeps the best per graph (``best_by_graph``), its curve is in a graph-free unit
(the mean over the graphs seen of best latency / reference latency), and `finish` re-measures every graph's best
and predicts on every graph (``details["graphs"]``). An agent built for one graph at a time steps one graph's turn
of such a run at a time (`RunLoop.turn`, `agents.core.run.train_in_turns`).

Big graphs. A run opened with ``max_nodes`` shows the graph through ``run.env`` coarsened to at most that many
clusters (`placement_gym.wrappers.CoarsenedPlacement`, above the recorder: a device per cluster); the recorder still
sees every full placement, so the best placement and the final measurements are full-size, while
``run.best_action`` (what distillation aims at) and ``run.predict_observation()`` are the coarse ones the policy
works with.

Also here: `set_seed` and `torch_threads`, what ``learn`` sets before it opens the books.
"""
from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import gymnasium as gym
import numpy as np
import torch

from placement_gym.backends.base import Measurement
from placement_gym.callbacks import Callback
from placement_gym.coarsen import Coarsening
from placement_gym.env import DevicePlacementEnv
from placement_gym.evaluation import RunSummary
from placement_gym.vector_env import DevicePlacementVectorEnv
from placement_gym.wrappers import CoarsenedPlacement

__all__ = ["BestPlacement", "NO_POLICY", "RunLoop", "set_seed", "torch_threads"]


#: The ``predict_error`` of a run whose agent has no policy of its own (`agents.core.run.RunAgent.has_policy`).
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
        budget: placements the agent may measure (env steps of `env`), an int >= 0: checked where it entered,
            ``learn`` (`placement_gym.evaluation.check_budget`).
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
        budget: placements the agent may measure (less, within `share`); done: whether the budget is spent (or a
            callback stopped the run); remaining: placements left.
        steps: placements measured so far; best_latency_s / best_placement / best_step: the best seen so far
            (by the drift-corrected latency measured during the run, ``info["latency_corrected_s"]``); curve:
            ``[[steps, latency_s], ...]`` each time the best improved; history: one dict of statistics per update;
            details: what the agent reports about its run (a planner's plan, e.g. the optimum's proven bound),
            JSON-able.
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
        self.budget = budget
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
        of such a run (`agents.core.run.train_in_turns`). Then there is no single graph whose best placement the
        policy should end on: no heuristic start, coarse to fine, self-imitation or final distillation."""
        return self.base.multi_graph

    @contextlib.contextmanager
    def share(self, placements: int) -> Iterator["RunLoop"]:
        """Within the block, the run ends (``done``, and the recorder refuses to measure more) once `placements`
        more have been measured, at most `remaining`: an agent's share of a run whose rest another part of the
        run measures after it (`agents.search.hybrid.SearchAround`). ``budget`` is the share's end meanwhile, as
        the agent reads it; the run's own budget again after the block."""
        budget = self.budget
        self.budget = self.steps + min(max(0, placements), self.remaining)
        try:
            yield self
        finally:
            self.budget = budget

    def turn(self, model: str, budget: int, max_nodes: int | None = None) -> "RunLoop":
        """A run of at most `budget` placements on graph `model` of this multi-graph run
        (`agents.core.run.train_in_turns`): it steps a single-graph env of that graph (`DevicePlacementEnv.one_graph`;
        shown coarsened to at most `max_nodes` clusters unless None) and records every step into this run (its
        budget, best per graph, curve, callback)."""
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
        against the budget. `predict` None: the agent has no policy of its own
        (`agents.core.run.RunAgent.has_policy`); its ``predict_latency_s`` is None.

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
