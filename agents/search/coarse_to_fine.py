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
from typing import Iterable

# Re-exported here: the grouping helpers (`agents.nn.groups`), the patience check (`agents.search.config`)
# and the refit's step limit (`agents.algos.learned`) live in the layers that use them.
from agents.algos.learned import REFIT_STEPS
from .config import check_split_patience
from agents.nn.groups import split_groups, split_until_expressible

__all__ = ["REFIT_STEPS", "SPLIT_PATIENCE", "StallDetector", "check_split_patience", "split_groups",
           "split_until_expressible"]

#: Default ``split_patience``, chosen on the simulated ``paper`` preset: for Post with 16
#: groups 80 reached the optimum on Inception on more seeds than 60 or 100, and 20-40 split before the coarse
#: search had converged; the RNN and GO use the same value (PPO with 16 groups, too, came closer to the optimum
#: on ResNet and Inception with 80 than with the groups fixed).
SPLIT_PATIENCE = 80


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
