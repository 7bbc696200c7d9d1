"""Coarse-to-fine op groups: a placer that decides per contiguous group halves its groups when its search stalls.

A placer with one decision per group of contiguous ops (Post's per-group distributions) can only cut the
topological order at its group boundaries: with 16 groups of Inception-V3's 310 ops the nearest boundary to the
best cut of the simulated ``paper`` preset is 4 ops away, and every seed ended at that boundary, above the
optimum, however long it trained. Starting with fine groups instead is slow (one distribution per op ended far
above the optimum within the budget). Coarse to fine keeps both: search with coarse groups, and when
``patience`` placements in a row found nothing faster than the run's best so far, split every group in two
(`split_groups`, each half inheriting its parent's distribution, so the placements sampled do not change at the
moment of the split), down to one group per op. The best cut found so far stays expressible at every level.

`StallDetector` is the trigger, `split_groups` the new grouping; `SPLIT_PATIENCE` the default patience of the RNN
and GO's single-graph search (Post starts from 4 groups and splits after 30, PPO from 8 after 40: `agents.post`,
`agents.ppo`), `REFIT_STEPS` the step limit of the refit after a split where the final distillation is off.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from placement_gym.wrappers import contiguous_groups

__all__ = ["REFIT_STEPS", "SPLIT_PATIENCE", "StallDetector", "check_split_patience", "split_groups",
           "split_until_expressible"]

#: Default ``split_patience``, chosen on the simulated ``paper`` preset: for Post with 16
#: groups 80 reached the optimum on Inception on more seeds than 60 or 100, and 20-40 split before the coarse
#: search had converged; the RNN and GO use the same value (PPO with 16 groups, too, came closer to the optimum
#: on ResNet and Inception with 80 than with the groups fixed).
SPLIT_PATIENCE = 80

#: Gradient steps of the refit after a split (the run's best placement fitted into the policy) when the agent's
#: final distillation is off (``distill_steps=0``); otherwise the refit takes ``distill_steps``.
REFIT_STEPS = 1000


def check_split_patience(patience: int | None) -> int | None:
    """`patience` unchanged if it is None (never split) or >= 1; else a ValueError saying so."""
    if patience is not None and patience < 1:
        raise ValueError(f"split_patience must be >= 1 or None (never split), got {patience}")
    return patience


def split_groups(n_ops: int, n_groups: int) -> tuple[np.ndarray, int]:
    """((N,) int64 groups, G'): `n_ops` ops in G' = min(2 `n_groups`, N) contiguous groups (`contiguous_groups`).
    Every new group lies inside one old group, so a placement constant on the old groups is constant on the new."""
    g = min(2 * int(n_groups), int(n_ops))
    return contiguous_groups(n_ops, g), g


def split_until_expressible(placement: np.ndarray, expressible: Callable[[np.ndarray], np.ndarray],
                            split: Callable[[], bool]) -> bool:
    """Call `split` (halve a placer's groups; False when it cannot) until `expressible(placement)` (the placement
    nearest `placement` the placer can return) is `placement` itself; True if it split at least once."""
    did_split = False
    while not np.array_equal(expressible(placement), placement) and split():
        did_split = True
    return did_split


class StallDetector:
    """Says when a search has stalled: `patience` placements in a row without a latency below the best seen.

    Args:
        patience: placements without a new best that make a stall (>= 1).
    """

    def __init__(self, patience: int) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = int(patience)
        self.best = math.inf
        self.since_best = 0

    def offer(self, latencies: Iterable[float]) -> bool:
        """Count the placements measured (their latencies, seconds; a failed one is inf); True when they
        complete a stall, and then the count starts again (so a split is followed by `patience` placements at
        the new grouping before the next)."""
        for latency in latencies:
            if latency < self.best:
                self.best, self.since_best = float(latency), 0
            else:
                self.since_best += 1
        if self.since_best >= self.patience:
            self.since_best = 0
            return True
        return False
