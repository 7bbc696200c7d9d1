"""Callbacks of an agent's run: a progress bar, TensorBoard logging, and the base class for your own.

The run loop of every agent (`agents.core.loop.RunLoop`) calls, in order:

    on_training_start(budget, config)      once; budget = env steps (placements) it will take
    on_step(step, reward, info) -> bool    after every env step; return False to stop early
    on_update(step, stats)                 after every update of the agent (loss, best latency so far, ...)
    on_training_end(summary)               once, with `RunSummary.to_dict()` (best latency re-measured, timings)

A callback is passed to ``agent.learn(env, budget, seed, callback=...)``, to `placement_gym.evaluation.evaluate`,
or built by the CLI from ``--tensorboard`` and the progress-bar flags.

>>> agent.learn(env, budget=500, seed=0, callback=make_callback(progress_bar=True, tensorboard_log="runs/hsdag"))
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

__all__ = ["Callback", "CallbackList", "ProgressBarCallback", "TensorBoardCallback", "make_callback"]


class Callback:
    """Base class: every hook does nothing. Override the ones you need."""

    def on_training_start(self, budget: int, config: Mapping[str, Any]) -> None:
        """Called once before the first step. `config`: the agent's name and hyperparameters."""

    def on_step(self, step: int, reward: float, info: Mapping[str, Any]) -> bool:
        """Called after env step number `step` (1-based) with its reward and info. Return False to stop."""
        return True

    def on_update(self, step: int, stats: Mapping[str, float]) -> None:
        """Called after each gradient update; `stats` holds scalars (loss, reward_mean, best_latency_s, ...)."""

    def on_training_end(self, summary: Mapping[str, Any]) -> None:
        """Called once at the end with the training summary."""


class CallbackList(Callback):
    """Several callbacks called in order; training stops when any `on_step` returns False."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        self.callbacks = list(callbacks)

    def on_training_start(self, budget, config):
        for cb in self.callbacks:
            cb.on_training_start(budget, config)

    def on_step(self, step, reward, info):
        keep_going = True
        for cb in self.callbacks:
            keep_going = (cb.on_step(step, reward, info) is not False) and keep_going
        return keep_going

    def on_update(self, step, stats):
        for cb in self.callbacks:
            cb.on_update(step, stats)

    def on_training_end(self, summary):
        for cb in self.callbacks:
            cb.on_training_end(summary)


class ProgressBarCallback(Callback):
    """A tqdm bar over the budget, showing the best latency found so far."""

    def __init__(self, description: str = "training") -> None:
        self.description = description
        self._bar = None

    def on_training_start(self, budget, config):
        from tqdm.auto import tqdm

        self._bar = tqdm(total=budget, desc=self.description, unit="placement")

    def on_step(self, step, reward, info):
        if self._bar is not None:
            self._bar.update(step - self._bar.n)
        return True

    def on_update(self, step, stats):
        if self._bar is not None and math.isfinite(stats.get("best_latency_s", math.inf)):
            self._bar.set_postfix(best_ms=f"{stats['best_latency_s'] * 1e3:.3f}", reward=f"{stats.get('reward_mean', 0.0):.3f}")

    def on_training_end(self, summary):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class TensorBoardCallback(Callback):
    """Writes per-step latency/reward and per-update training statistics to TensorBoard (`log_dir`).

    Scalars: ``step/reward``, ``step/latency_ms``, ``train/<stat>`` for every update statistic, and
    ``final/best_latency_ms``. View with ``tensorboard --logdir <log_dir>``.
    """

    def __init__(self, log_dir: str) -> None:
        self.log_dir = str(log_dir)
        self._writer = None

    def on_training_start(self, budget, config):
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(self.log_dir)
        self._writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in sorted(config.items())))

    def on_step(self, step, reward, info):
        if self._writer is not None:
            self._writer.add_scalar("step/reward", reward, step)
            latency = info.get("latency_s")
            if latency is not None and math.isfinite(latency):
                self._writer.add_scalar("step/latency_ms", latency * 1e3, step)
        return True

    def on_update(self, step, stats):
        if self._writer is not None:
            for key, value in stats.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self._writer.add_scalar(f"train/{key}", value, step)

    def on_training_end(self, summary):
        if self._writer is not None:
            best = summary.get("best_latency_s")
            if isinstance(best, float) and math.isfinite(best):
                self._writer.add_scalar("final/best_latency_ms", best * 1e3, summary.get("steps", 0))
            self._writer.close()
            self._writer = None


def make_callback(callback: "Callback | Iterable[Callback] | None" = None, *, progress_bar: bool = False,
                  tensorboard_log: str | None = None) -> Callback:
    """One `Callback` from a user callback (or list of them) plus the optional progress bar and TensorBoard log."""
    callbacks: list[Callback] = []
    if isinstance(callback, Callback):
        callbacks.append(callback)
    elif callback is not None:
        callbacks.extend(callback)
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(
                    f"callbacks must be placement_gym.callbacks.Callback instances, got {type(cb).__name__}")
    if progress_bar:
        callbacks.append(ProgressBarCallback())
    if tensorboard_log:
        callbacks.append(TensorBoardCallback(tensorboard_log))
    return callbacks[0] if len(callbacks) == 1 else CallbackList(callbacks)
