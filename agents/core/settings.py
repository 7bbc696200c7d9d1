"""An agent's settings and its default file: `RunSettings`, the run's settings every agent takes, and
`AgentSettings`, the part of `agents.core.run.RunAgent` that says what the agent is built from, apart from the run's
books.

Each setting is declared once, in the dataclass of what runs it, whose instance on the class holds the defaults:

* the agent's own settings: ``SETTINGS``, an instance of the agent's settings dataclass (``HSDAGSettings()``), whose
  ``__post_init__`` checks them. Settings that another object runs are a part of it (`agents.core.bounds.part`):
  the dataclass of their owner, nested (``HSDAGSettings.policy``, an `agents.hsdag.agent.HSDAGPolicySettings`,
  handed to the policy as it is: ``HSDAGPolicy(spec, **asdict(settings.policy))``). The keywords still name each
  setting alone (``HSDAGAgent(place="op")``): `field_values` lists a part's settings in its place and
  `take_settings` hands each keyword to the part that owns it, so nothing filters settings by lists of names;
* the trainer's: ``TRAINER``, an instance of the agent's trainer form (`agents.algos.reinforce.TrainerSettings`
  and its forms: the mode and the keywords the agent takes; `agents.algos.policy_gradient.PolicyGradientAgent`);
* the run's: ``RUN``, a `RunSettings` (seed, threads, coarsening, search);
* the search layer's: `agents.search.config.SearchConfig` (the ``search`` setting, resolved by the class's search
  layer, `agents.core.run.RunAgent.SEARCH_LAYER`).

The constructor takes them all as keywords (``HSDAGAgent(hidden_channels=32, learning_rate=0.01, seed=0)``),
refuses any other in one line naming those it accepts, and keeps the agent's own as attributes of the same name.
`AgentSettings.option_names` lists them (the command line's ``--agent-option`` reads it), the class's
``__signature__`` shows them with their defaults (``help()``, IDEs), and `AgentSettings.hyperparameters` reads
back the keywords that rebuild the agent (``cls(**hyperparameters)``). The default `AgentSettings.save` writes them
as plain JSON with the last run's best placement; the default `AgentSettings.load` checks such a file against
`AGENT_FILE` before it builds anything (nothing in it is imported or run). Agents with learned state (weights,
tables) override both (`agents.core.base.BaseAgent`, the SB3 agents).

A user's own agent may instead take its settings in a plain constructor, ``def __init__(self, tries: int = 3)``,
keeping each as an attribute of the same name (docs/custom-agents.md): for a class that declares no ``SETTINGS``,
`constructor_keywords` reads them from the constructor's signature, the one place a signature is read.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Iterable

import numpy as np

from placement_gym.coarsen import MAX_NODES
from placement_gym.files import write_json
from placement_gym.schema import (
    MAX_DEVICES, MAX_OPS, Found, Integer, ListOf, Number, Optional, Record, SchemaError, Text, check, mismatch,
    read_json,
)

from agents.core.bounds import GROUPS, SEED, THREADS, check_settings, is_part, setting
from agents.core.checkpoint import SETTINGS, CheckpointError

__all__ = ["AGENT_FILE", "AgentSettings", "RunSettings", "constructor_keywords", "field_values", "take_settings"]


_MISSING = object()
#: What the default `AgentSettings.save` writes, as the default `AgentSettings.load` checks it.
AGENT_FILE = Record({
    "agent": Text(max_len=500), "hyperparameters": SETTINGS,
    "best_placement": Optional(ListOf(Integer(0, MAX_DEVICES - 1), max_len=MAX_OPS)),
    "best_latency_s": Optional(Number(positive=True)),
})
MAX_AGENT_FILE_BYTES = 16 << 20


def field_values(settings: Any) -> dict[str, Any]:
    """``{name: value}`` of every setting of the settings dataclass instance `settings`, in declaration order, a
    part's (`agents.core.bounds.part`) in its place: the keywords an agent takes for them (values as they are:
    unlike `dataclasses.asdict`, nested objects are not copied)."""
    values: dict[str, Any] = {}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if is_part(f):
            values.update(field_values(value))
        else:
            values[f.name] = value
    return values


def take_settings(settings: Any, options: dict[str, Any]) -> Any:
    """`settings` (a settings dataclass instance: a class's defaults) with the values `options` gives for its
    settings, each handed to the part that owns it (`agents.core.bounds.part`); those keywords are popped from
    `options`, so what is left is someone else's. Each dataclass checks its own (``__post_init__``)."""
    given: dict[str, Any] = {}
    for f in fields(settings):
        if is_part(f):
            given[f.name] = take_settings(getattr(settings, f.name), options)
        elif f.name in options:
            given[f.name] = options.pop(f.name)
    return replace(settings, **given)


@dataclass(frozen=True)
class RunSettings:
    """The run's settings, every agent's (`agents.core.run.RunAgent`); a class's ``RUN`` holds its defaults.

    Args:
        seed: default seed of `learn` (its own `seed` argument wins).
        torch_threads: torch threads while learning (None: leave torch's setting alone).
        coarsen_above: learn and predict on graphs of more ops than this coarsened to at most `max_nodes`
            clusters (`agents.core.run`, "Big graphs"); None or 0: never (the default here; the learned agents
            set `placement_gym.coarsen.COARSEN_ABOVE`). At least `max_nodes`, so a coarse graph is never
            coarsened again.
        max_nodes: clusters of a coarsened graph, at most.
        search: the search layer around the agent's own method (`agents.search.config.SearchConfig`, a dict of its
            fields, ``"off"``/None: none, the default; ``"hybrid"``: the class's hybrid form), for a class that
            composes the layer (`agents.core.run.RunAgent.SEARCH_LAYER`).
    """

    seed: int | None = setting(None, Optional(SEED))
    torch_threads: int | None = setting(1, Optional(THREADS))
    coarsen_above: int | None = setting(None, Optional(Integer(0)))
    max_nodes: int = setting(MAX_NODES, GROUPS)
    search: Any = None  # resolved by the class's search layer (`agents.core.run.RunAgent.SEARCH_LAYER`)

    def __post_init__(self) -> None:
        check_settings(self)  # each field's declared values (`agents.core.bounds`)
        above = self.coarsen_above
        if above and above < self.max_nodes:
            raise ValueError(f"coarsen_above must be None or 0 (never coarsen) or a number of ops >= max_nodes "
                             f"({self.max_nodes}), so a coarsened graph is not coarsened again; got {above!r}")


def _is_plain(value: Any) -> bool:
    """Whether `value` is a setting the default `AgentSettings.load` takes back: plain data as `SETTINGS` accepts it
    for any setting (None, bool, int, float, str, lists and dicts of them, bounded)."""
    try:
        check(value, SETTINGS.others, "hyperparameters")
    except SchemaError:
        return False
    return True


def constructor_keywords(cls: "type[AgentSettings]") -> tuple[str, ...]:
    """The keywords the constructor of `cls` takes, read from its signature and, where it passes ``**kwargs`` on,
    its base classes' (each once, in order; up to `RunAgent`'s, which takes the declared run settings,
    `AgentSettings._base_option_defaults`). Only for a class that declares no ``SETTINGS``: a user's own agent
    with a plain constructor, or a baseline (module docstring); the agents shipped here declare theirs."""
    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters.values()
        names += [p.name for p in parameters if p.name != "self" and p.name not in names
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return tuple(names)  # a plain constructor that passes nothing on
    return tuple(names) + tuple(name for name in cls._base_option_defaults() if name not in names)


class AgentSettings:
    """Mixin of `agents.core.run.RunAgent`: the agent's declared settings, the keywords its constructor takes, and
    its default plain-JSON ``save`` / ``load`` (module docstring). It reads the agent's ``best_placement`` and
    ``best_latency_s`` (set by ``RunAgent``)."""

    #: The agent's own settings with their defaults: an instance of its settings dataclass, whose fields are
    #: constructor keywords kept as attributes of the same name. None: a class that takes its own settings in a
    #: plain constructor (module docstring).
    SETTINGS: ClassVar[Any] = None
    #: The run's settings with this class's defaults (the learned agents coarsen big graphs).
    RUN: ClassVar[RunSettings] = RunSettings()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # help() and IDEs show the declared keywords of a class that takes them as ``**options``; a class with a
        # plain constructor shows its own (None: inspect reads the constructor).
        cls.__signature__ = None if cls.SETTINGS is None else inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
             for name, default in cls.option_defaults().items()])

    @classmethod
    def _own_setting_names(cls) -> tuple[str, ...]:
        """The names of the agent's own settings: the fields of ``SETTINGS`` (none for a class without one)."""
        return () if cls.SETTINGS is None else tuple(field_values(cls.SETTINGS))

    @classmethod
    def _base_option_defaults(cls) -> dict[str, Any]:
        """The keywords the base classes take, with this class's defaults: here the run's (``RUN``); subclasses
        add theirs (the torch device, the trainer's)."""
        return field_values(cls.RUN)

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        """Every keyword a class with ``SETTINGS`` takes, with its default: its own settings, then the base
        classes' (`_base_option_defaults`)."""
        own = {} if cls.SETTINGS is None else field_values(cls.SETTINGS)
        return {**own, **cls._base_option_defaults()}

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The keywords the constructor takes (what ``--agent-option KEY=VALUE`` may name): the declared ones
        (`option_defaults`), or, for a class with a plain constructor, its signature's (`constructor_keywords`)."""
        return tuple(cls.option_defaults()) if cls.SETTINGS is not None else constructor_keywords(cls)

    @classmethod
    def _refusal(cls, unknown: Iterable[str]) -> TypeError:
        """The one-line error for keywords the constructor does not take, naming those it does."""
        return TypeError(f"{cls.__name__} takes no {', '.join(sorted(unknown))}; accepted: "
                         f"{', '.join(cls.option_names())}")

    def _take_own_settings(self, options: dict[str, Any]) -> None:
        """Build the agent's own settings from the constructor's `options` (popped from it): ``SETTINGS`` with the
        given values replaced, checked by its dataclass, kept as ``self.settings`` and each as an attribute of
        the same name (what the agent's code and `_own_settings` read)."""
        if self.SETTINGS is None:
            return
        self.settings = take_settings(self.SETTINGS, options)
        for name, value in field_values(self.settings).items():
            setattr(self, name, value)

    def _own_settings(self) -> dict[str, Any]:
        """The agent's own settings by name (`_own_setting_names`), as its attributes hold them."""
        return {name: getattr(self, name) for name in self._own_setting_names()}

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild this agent (plain Python values only).

        This default reads each keyword the constructor takes (`option_names`) from the attribute of the same
        name, where one holds a plain value (None, bool, int, float, str, or lists / dicts of them); a keyword
        without such an attribute is left to its default. Override it when the attributes are named otherwise."""
        return {name: getattr(self, name) for name in self.option_names()
                if _is_plain(getattr(self, name, _MISSING))}

    def save(self, path: "str | Path", overwrite: bool = False) -> Path:
        """Write the agent to `path`; refuses to replace an existing file unless `overwrite`.

        This default writes plain JSON: the class, `hyperparameters` and the last run's best placement. An agent
        with learned state (weights, tables) overrides it (and `load`)."""
        return write_json(path, {
            "agent": f"{type(self).__module__}:{type(self).__qualname__}",
            "hyperparameters": self.hyperparameters(),
            "best_placement": None if self.best_placement is None else np.asarray(self.best_placement).tolist(),
            "best_latency_s": self.best_latency_s,
        }, overwrite=overwrite)

    @classmethod
    def load(cls, path: "str | Path") -> "AgentSettings":
        """Rebuild an agent written by the default `save` (plain JSON checked against `AGENT_FILE` before anything
        is built: nothing in it is imported or run; the file must name this class)."""
        data = read_json(path, AGENT_FILE, max_bytes=MAX_AGENT_FILE_BYTES, what=f"agent saved by {cls.__name__}.save",
                         error=CheckpointError)
        expected = f"{cls.__module__}:{cls.__qualname__}"
        if data["agent"] != expected:
            raise mismatch(path, "agent", data["agent"], f"{expected!r} (a file written by {cls.__name__}.save)",
                           CheckpointError)
        try:
            agent = cls(**data["hyperparameters"])
        except (TypeError, ValueError) as exc:  # settings this class does not take, or refuses
            raise mismatch(path, "hyperparameters", Found(str(exc).splitlines()[0][:200]),
                           f"the settings {cls.__name__} takes", CheckpointError) from None
        best = data["best_placement"]
        agent.best_placement = None if best is None else np.asarray(best, dtype=np.int64)
        agent.best_latency_s = data["best_latency_s"]
        return agent
