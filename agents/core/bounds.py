"""What an agent's settings may hold, declared once: each field of a settings dataclass names the values it takes
(`setting`; `check_settings` checks them in the dataclass's ``__post_init__``), so the constructor, ``--agent-option``
and a saved agent's settings are refused alike, in one line, before anything is built; the bounds the agents share
are here, and `agents.core.checkpoint` reads a saved agent's settings against them too.

Chosen so that one run's memory and time stay in a budget's scale, however the settings were given: a policy 1024
wide and 16 layers deep holds tens of MB of weights (20,000 wide took 6.7 GB on a 24-op graph, a million layers
7.3 GB); more torch threads than 256 is no speed-up (10**6 aborted the process); Placeto's episode is ``sweeps``
visits of every node and the budget counts placements, not visits (10**9 sweeps never ended); a learning rate is
finite and positive (``1e400`` parses as infinity, NaN poisons every update).
"""
from __future__ import annotations

from dataclasses import MISSING, Field, field, fields
from typing import Any

import numpy as np

from placement_gym.schema import MAX_OPS, Boolean, Integer, Number, Spec, check

__all__ = ["COEFFICIENT", "DEPTH", "FLAG", "GROUPS", "HEADS", "LEARNING_RATE", "LEVELS", "SEED", "SHARE", "STEPS",
           "SWEEPS", "THREADS", "WIDTH", "check_settings", "components_of", "is_part", "part", "setting"]

#: A policy's embedding width.
WIDTH = Integer(1, 1024)
#: Its layers of one kind (message passing, attention).
DEPTH = Integer(1, 16)
#: HSDAG's pooling levels (0: none).
LEVELS = Integer(0, 64)
#: Attention heads.
HEADS = Integer(1, 64)
#: torch threads while learning.
THREADS = Integer(1, 256)
#: An optimiser's step size.
LEARNING_RATE = Number(positive=True, high=10.0)
#: Samples, episodes, steps, epochs, minibatches: counts per update.
STEPS = Integer(1, 1 << 16)
#: Visits of every node per node-by-node episode.
SWEEPS = Integer(1, 100)
#: Groups of ops (at most one per op of the largest graph).
GROUPS = Integer(1, MAX_OPS)
#: A share or a discount, from 0 to 1.
SHARE = Number(0.0, 1.0)
#: A weight in a loss (entropy, value, imitation).
COEFFICIENT = Number(0.0, 1e3)
#: A run's seed (what numpy and torch take).
SEED = Integer(0, 2**64 - 1)
#: A switch.
FLAG = Boolean()

#: The metadata key under which a settings field declares the values it takes (`setting`).
_ACCEPTS = "accepts"
_COMPONENT = "component"
#: The metadata key of a field that holds a part (`part`).
_PART = "part"


def setting(default: Any, accepts: Spec, component: bool = False) -> Any:
    """A field of a settings dataclass: its `default` and the values it `accepts` (a `placement_gym.schema` spec:
    type and range), checked by `check_settings` in the dataclass's ``__post_init__``, so that the constructor,
    ``--agent-option`` and a saved agent's settings are refused alike, in one line, before anything is built.

    `component`: the field is a search component beyond the paper's method (self-imitation, exploration, a
    refinement stage, ...) that runs in the owner's own code; its `default` is its off value, and a record lists
    it under ``search`` when it differs (`components_of`). A mutable default (a dict) is given as a factory."""
    metadata = {_ACCEPTS: accepts, _COMPONENT: component}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def part(settings_class: type) -> Any:
    """A field of a settings dataclass that holds a part: the settings dataclass of what owns them (a policy's
    inside its agent's), with its defaults unless given. Each setting keeps one owner, and the agent's keywords
    still name each setting alone (`agents.core.settings.field_values` lists a part's settings in its place,
    `agents.core.settings.take_settings` hands each keyword to the part that owns it); the part's own
    ``__post_init__`` checks them."""
    return field(default_factory=settings_class, metadata={_PART: True})


def is_part(f: Field) -> bool:
    """Whether the dataclass field `f` holds a part (`part`) rather than one setting."""
    return bool(f.metadata.get(_PART))


def components_of(settings: Any) -> list[str]:
    """The names of the fields of the dataclass instance `settings` (its parts' too, `part`) declared as search
    components (`setting`'s ``component``) whose value differs from their default (their off value)."""
    on = []
    for f in fields(settings):
        if is_part(f):
            on += components_of(getattr(settings, f.name))
        elif f.metadata.get(_COMPONENT):
            off = f.default_factory() if f.default is MISSING else f.default
            if getattr(settings, f.name) != off:
                on.append(f.name)
    return on


def check_settings(settings: Any) -> None:
    """ValueError, one line (`placement_gym.schema.check`'s: the dataclass, the field, what was found and what it
    takes), for the first field of the dataclass instance `settings` outside what its `setting` declares. A numpy
    scalar (from a config) is kept as the Python value it holds."""
    for f in fields(settings):
        spec = f.metadata.get(_ACCEPTS)
        if spec is None:
            continue
        value = getattr(settings, f.name)
        if isinstance(value, np.generic):
            value = value.item()
            object.__setattr__(settings, f.name, value)
        check(value, spec, type(settings).__name__, at=f.name, error=ValueError)
