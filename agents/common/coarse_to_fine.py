"""Coarse-to-fine op groups: a placer that decides per contiguous group halves its groups when its search stalls.

A placer with one decision per group of contiguous ops (Post's per-group distributions) can only cut the
topological order at its group boundaries: with 16 groups of Inception-V3's 310 ops the nearest boundary to the
best cut of the simulated ``paper`` preset is 4 ops away, and every seed ended at that boundary, 0.9% above the
optimum, however long it trained. Starting with fine groups instead is slow (one distribution per op ended
60-90% above the optimum at 500 placements). Coarse to fine keeps both: search with coarse groups, and when
``patience`` placements in a row found nothing faster than the run's best so far, split every group in two
(`split_groups`, each half inheriting its parent's distribution, so the placements sampled do not change at the
moment of the split), down to one group per op. The best cut found so far stays expressible at every level.

`StallDetector` is the trigger, `split_groups` the new grouping.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from placement_gym.wrappers import contiguous_groups

__all__ = ["StallDetector", "split_groups"]


def split_groups(n_ops: int, n_groups: int) -> tuple[np.ndarray, int]:
    """((N,) int64 groups, G'): `n_ops` ops in G' = min(2 `n_groups`, N) contiguous groups (`contiguous_groups`).
    Every new group lies inside one old group, so a placement constant on the old groups is constant on the new."""
    g = min(2 * int(n_groups), int(n_ops))
    return contiguous_groups(n_ops, g), g


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
