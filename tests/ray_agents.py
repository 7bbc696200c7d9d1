"""Agents for the Ray tests, imported by the Ray workers by module path (``tests.ray_agents:WorkerKiller``)."""
from __future__ import annotations

import os
import signal

from agents.baselines import RandomSearch


class WorkerKiller(RandomSearch):
    """Random search that, when built with ``die=True``, kills its own process (SIGKILL, no clean-up) as soon
    as it starts to learn: a Ray worker lost in the middle of a compare job, every time the job is retried.

    Built with ``die=False`` (the default) it is plain random search, so building it (compare --ray's planning
    step does, in every worker) never kills anything."""

    name = "worker-killer"

    def __init__(self, die: bool = False) -> None:
        super().__init__()
        self.die = die

    def hyperparameters(self) -> dict:
        return {"die": self.die}

    def learn(self, env, budget, seed=None, callback=None):
        if self.die:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().learn(env, budget, seed, callback)
