"""Contiguous op groups of a group placer: halving them, and splitting until a placement is expressible.

Pure helpers on the groups of ops a placer decides per (Post's distributions, the RNN's and GO's groups, SB3's
grouped action distribution). They live with the networks, below the trainers and the search: a policy's own
``split()`` calls `split_groups`, the trainers' agents call `split_until_expressible` before their final
distillation, and the search layer's coarse to fine (`agents.search.coarse_to_fine`, which re-exports both)
decides when to split.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from placement_gym.wrappers import contiguous_groups

__all__ = ["split_groups", "split_until_expressible"]


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
