"""`TrainingHooks`: the named points inside a trainer's run where the search layer acts, doing nothing here.

A trainer (`agents.algos.reinforce`, `agents.algos.ppo`) computes losses and updates; it does not search. Where a
hybrid's search acts inside the training loop, the trainer calls one of these points, in this order per update::

    fit_samples   before the samples are measured: a function that fits each sampled placement to the devices'
                  memory (``fit_memory``), or None (measure the samples as drawn);
    proposals     after the gradient step: placements measured beside the policy's samples (``search_proposals``),
                  or None;
    after_update  after the agent's own ``on_update``, with everything measured since the last update: True when
                  the policy should halve its groups now (coarse to fine, ``split_patience``).

The class here is a pure agent's: no fit, no proposals, never a split. The search layer's implementation,
`agents.search.attach.SearchDuringTraining`, is built from above (the agent's search layer, an object it holds)
and handed to the trainer, so that nothing in `agents.algos` imports `agents.search` or reads its settings.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    from agents.core.loop import RunLoop

    from .rollout import Decision, Measured

__all__ = ["TrainingHooks"]


class TrainingHooks:
    """The search layer's points inside a trainer's run (module docstring); every one does nothing here."""

    def check(self, policy, mode: str) -> None:
        """ValueError, in one line, if what these hooks run does not go with the trainer's `policy` and its `mode`
        (``"bandit"`` or ``"episodic"``): nothing to check here."""

    def fit_samples(self, run: "RunLoop", obs) -> Callable[[np.ndarray], np.ndarray] | None:
        """(K, N) sampled actions -> the actions to measure, or None: measure them as drawn. `obs`: the graph as
        the policy sees it."""
        return None

    def proposals(self, run: "RunLoop", obs) -> "Measured | None":
        """Placements measured after an update beside the policy's samples (from the run's budget), or None."""
        return None

    def after_update(self, run: "RunLoop", measured: "Sequence[Decision | Measured]") -> bool:
        """Whether the policy should split its groups now, given what was `measured` since the last update."""
        return False

    def after_split(self, run: "RunLoop") -> None:
        """Called after the policy split its groups (when `after_update` said so and the policy could split)."""
