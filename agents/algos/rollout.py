"""Experience collection and advantages, shared by the REINFORCE and the PPO trainer.

Two ways to collect (the trainers' ``mode``):

``collect_placements`` (bandit mode; one-step envs such as `DevicePlacement-v0`, where a step is a whole
    placement and its reward does not depend on earlier steps): K placements drawn from ONE encoding of the
    observation, each measured (K env steps). Sampling several placements per forward pass is what keeps the
    agent's compute per placement small.
``collect_episode`` (episodic mode; multi-step envs such as the node-by-node `DevicePlacementNode-v0`): one
    episode, one action per step, with its per-step rewards.

``AdvantageEstimator`` turns rewards (or returns) into advantages: minus a moving-average baseline (one per
step index in episodic mode, as Placeto) or minus a critic's values, divided by a moving RMS so the step size
does not depend on the reward's units.

Env whose graph changes at reset (``model=[...]`` or ``"dataset:SPLIT"``: each reset draws a graph): the K
placements of one bandit decision are all of the graph they were drawn for (between them the env is reset to
that same graph, ``options={"model": ...}``; only after the last one does a plain reset draw the next graph), and
the baseline and the RMS are kept per graph (``Decision.graph``), so a graph where every placement is fast
does not lift the baseline of one where none is.

``EliteSet`` keeps the fastest placements measured so far: what the imitation term both trainers can add
imitates (``imitation_coef``: the policy learns to produce the run's elite placements itself, so it ends on
what its search found), and the elites of Post's cross-entropy step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from agents.core.loop import RunLoop
from agents.nn.policy import PolicySample

__all__ = ["AdvantageEstimator", "Decision", "EliteSet", "Measured", "collect_argmax", "collect_episode", "collect_placements", "discounted_returns"]


@dataclass
class Decision:
    """One call of the policy's ``act`` and what the env answered.

    Attributes:
        obs: the observation the policy acted on.
        sample: its `PolicySample` (K actions; log-probabilities with or without a graph, see the collectors).
        rewards: (n,) reward of each action that was measured (n <= K: a callback may stop a run); float32 for
            placements, float64 for episode steps (their returns are summed in full precision).
        latencies: (n,) the drift-corrected latency (s) of the placement each action led to.
        placements: (n,) those placements ((N,) int64 each), as the policy sees the graph: on a coarsened graph
            (`agents.core.run`, big graphs) the clusters' devices the policy sent, not the full-size placement
            the recorder measured, so the elites and Post's cross-entropy step score what the policy can produce.
        graph: the graph the actions were for (``info["model"]`` of an env that draws graphs at reset; None for
            a single-graph env): the key of its baseline (`AdvantageEstimator`).
    """

    obs: Any
    sample: PolicySample
    rewards: Tensor
    latencies: list[float] = field(default_factory=list)
    placements: list[np.ndarray] = field(default_factory=list)
    graph: str | None = None


@dataclass
class Measured:
    """Placements measured beside the policy's samples (the trainers' cost-guided proposals, ``search_proposals``):
    no sample to score, only what the elites, coarse to fine and Post's cross-entropy pool read of a `Decision`.

    Attributes:
        latencies: the drift-corrected latency (s) of each placement (inf or a penalty for a failed one).
        placements: (N,) int64 each, as the policy's actions address the graph.
    """

    latencies: list[float]
    placements: list[np.ndarray]


def collect_placements(policy: nn.Module, run: RunLoop, env: gym.Env, obs: Any, k: int,
                       track_grad: bool = True,
                       fit: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[Decision, Any]:
    """K placements from one encoding of `obs`, each measured; returns the decision and the next observation.

    `track_grad`: keep the autograd graph of the log-probabilities (REINFORCE steps on it directly; PPO
    re-scores the decisions with ``policy.evaluate`` and collects without one).

    `fit`: (K, N) sampled actions -> the (K, N) placements to measure instead (the trainers' ``fit_memory``).
    The decision keeps the samples' log-probabilities and the placements measured: to the policy the fit is part
    of the environment, as the env's repair of ops a device cannot run is.

    When the run was given a vector env (``run.vector``) and `env` is the run's own env, the placements are
    measured ``num_envs`` at a time in one step of the vector env (the rest, fewer than ``num_envs``, one by one).

    An episode that ends between two of the K placements is restarted on the same graph (the env's
    ``info["model"]``, where it names one), so all K belong to the graph `obs` shows; after the last one a plain
    reset lets an env that draws graphs draw the next."""
    with torch.set_grad_enabled(track_grad):
        sample = policy.act(obs, num_samples=k)
    return _measure(sample, run, env, obs, fit)


def _measure(sample: PolicySample, run: RunLoop, env: gym.Env, obs: Any,
             fit: Callable[[np.ndarray], np.ndarray] | None) -> tuple[Decision, Any]:
    """Measure the actions of `sample` (`collect_placements`' second half)."""
    rewards, latencies, placements = [], [], []
    next_obs, graph = obs, None
    actions = sample.actions.detach().cpu().numpy()
    if fit is not None:
        actions = fit(actions)
    batch = run.vector if env is run.env else None
    start = 0
    while start < len(actions):
        if batch is not None and len(actions) - start >= batch.num_envs:
            results = batch.step(actions[start:start + batch.num_envs])
        else:
            next_obs, reward, terminated, truncated, info = env.step(actions[start])
            results = [(reward, info)]
            graph = info.get("model", graph)
            if terminated or truncated:
                last = start + 1 == len(actions) or run.done
                next_obs, _ = env.reset() if last or graph is None else env.reset(options={"model": graph})
        sent = actions[start:start + len(results)]
        start += len(results)
        for (reward, info), action in zip(results, sent):
            rewards.append(float(reward))
            latencies.append(float(info["latency_corrected_s"]))
            measured = np.asarray(info["placement"])
            placements.append(measured if measured.shape == action.shape else np.asarray(action, dtype=np.int64))
        if run.stopped:
            break
    r = torch.as_tensor(rewards, dtype=torch.float32, device=sample.log_prob.device)
    return Decision(obs, sample, r, latencies, placements, graph), next_obs


def collect_argmax(policy: nn.Module, run: RunLoop, env: gym.Env, obs: Any,
                   fit: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[Decision, Any]:
    """The policy's deterministic placement for `obs` (its argmax), measured once (`fit` as `collect_placements`'):
    a `Decision` of one action (no gradient), and the next observation."""
    with torch.no_grad():
        sample = policy.act(obs, num_samples=1, deterministic=True)
    return _measure(sample, run, env, obs, fit)


def collect_episode(policy: nn.Module, run: RunLoop, env: gym.Env, track_grad: bool = True) -> list[Decision]:
    """One episode from a fresh ``env.reset()``, one action per step, until it ends or the run does."""
    obs, _ = env.reset()
    steps: list[Decision] = []
    done = False
    while not done and not run.done:
        with torch.set_grad_enabled(track_grad):
            sample = policy.act(obs, num_samples=1)
        next_obs, reward, terminated, truncated, info = env.step(sample.actions[0].detach().cpu().numpy())
        steps.append(Decision(obs, sample, torch.tensor([float(reward)], dtype=torch.float64),
                              [float(info["latency_corrected_s"])], [np.asarray(info["placement"])]))
        obs, done = next_obs, terminated or truncated
    return steps


def discounted_returns(rewards: "list[float] | np.ndarray", gamma: float) -> Tensor:
    """(T,) G_t = sum_{t' >= t} gamma^(t' - t) r_t'."""
    returns = np.zeros(len(rewards))
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return torch.as_tensor(returns, dtype=torch.float32)


class AdvantageEstimator:
    """(r - b) / scale, with b a moving-average baseline (per step index `slot` in episodic mode) or given
    values (a critic's), and scale a moving RMS of (r - b); both kept per graph (`key`) when rewards come from
    several graphs.

    Args:
        baseline: subtract the moving average (False: raw rewards, as the HSDAG authors' code).
        decay: the moving averages' decay.
        normalize: divide by the moving RMS.

    The running statistics persist across calls (and `learn` calls), so training can be resumed.
    """

    def __init__(self, baseline: bool = True, decay: float = 0.9, normalize: bool = True) -> None:
        self.use_baseline, self.decay, self.normalize = baseline, decay, normalize
        self.baselines: dict[str | None, float] = {}     # bandit: moving average of the reward, per graph
        self.step_baselines: list[float] = []            # episodic: moving average of the return at each step index
        self.mean_squares: dict[str | None, float] = {}  # moving average of (r - b)**2, per graph
        self.key: str | None = None                      # the graph of the last call

    @property
    def baseline(self) -> float | None:
        """The bandit baseline of the last call's graph (None before any)."""
        return self.baselines.get(self.key)

    def __call__(self, r: Tensor, slot: int | None = None, values: Tensor | None = None,
                 key: str | None = None) -> Tensor:
        """Advantages of the rewards `r` (K,) of graph `key` (None: the env has one graph). The first batch of a
        graph initialises its baseline with its own mean."""
        self.key = key
        if values is not None:
            centred = r - values
        elif self.use_baseline:
            centred = r - self._update_baseline(float(r.mean()), slot, key)
        else:
            centred = r
        if not self.normalize:
            return centred
        sq = float((centred ** 2).mean())
        previous = self.mean_squares.get(key)
        self.mean_squares[key] = sq if previous is None else self.decay * previous + (1 - self.decay) * sq
        return centred / (math.sqrt(self.mean_squares[key]) + 1e-8)

    def per_step(self, returns: Tensor) -> Tensor:
        """(T,) advantages of an episode's returns (T,), each against the baseline of its step index."""
        return torch.cat([self(returns[t:t + 1], slot=t) for t in range(len(returns))]) if len(returns) else returns

    def _update_baseline(self, mean: float, slot: int | None, key: str | None) -> float:
        """The baseline before this batch (this batch's mean on the first one), then fold the batch in."""
        if slot is None:
            previous = self.baselines.get(key)
            b = mean if previous is None else previous
            self.baselines[key] = self.decay * b + (1 - self.decay) * mean
            return b
        while len(self.step_baselines) <= slot:
            self.step_baselines.append(math.nan)
        previous = self.step_baselines[slot]
        b = mean if math.isnan(previous) else previous
        self.step_baselines[slot] = self.decay * b + (1 - self.decay) * mean
        return b


class EliteSet:
    """The `size` fastest distinct placements measured so far (every placement a collected action led to) on
    ONE graph: imitating them means scoring them on that graph's observation.

    Args:
        size: how many placements to keep (0: none).
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"the elite set's size must be >= 0, got {size}")
        self.size = size
        self.members: list[tuple[float, bytes, np.ndarray]] = []  # (latency, key, placement), fastest first
        self.graph: tuple | None = None  # which graph the members are placements of
        self.active = True

    def bind(self, graph: tuple | None) -> None:
        """Start a run on `graph` (a key naming it; None: a run over many graphs). The members are kept when the
        run continues on the same graph (resumed training); another graph starts an empty set; over many graphs
        the set stays empty (an elite of one graph is no placement of another, and a run over many graphs has
        no single observation to imitate it on)."""
        if graph != self.graph:
            self.members = []
        self.graph, self.active = graph, graph is not None

    def offer(self, decisions: "list[Decision | Measured]") -> None:
        """Every placement measured by `decisions` is a candidate."""
        for decision in decisions:
            for latency, placement in zip(decision.latencies, decision.placements):
                self._offer(latency, placement)

    def _offer(self, latency: float, placement: np.ndarray) -> None:
        if self.size == 0 or not self.active or not math.isfinite(latency):
            return
        if len(self.members) == self.size and latency >= self.members[-1][0]:
            return
        key = np.ascontiguousarray(placement).tobytes()
        if any(key == k for _, k, _ in self.members):
            return
        self.members.append((latency, key, np.array(placement, dtype=np.int64)))
        self.members.sort(key=lambda member: member[0])
        del self.members[self.size:]

    @property
    def latencies(self) -> list[float]:
        return [latency for latency, _, _ in self.members]

    @property
    def placements(self) -> list[np.ndarray]:
        return [placement for _, _, placement in self.members]
