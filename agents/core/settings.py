"""An agent's settings and its default file: `AgentSettings`, the part of `agents.core.run.RunAgent` that says what
the agent is built from, apart from the run's books.

Each setting is written once, in the constructor's signature: `AgentSettings.keep_settings` keeps the constructor's
own keywords as attributes of the same name, `AgentSettings.own_settings` hands them by name to what takes them (a
policy, a trainer), and `AgentSettings.hyperparameters` reads back the keywords that rebuild the agent
(``cls(**hyperparameters)``). The default `AgentSettings.save` writes them as plain JSON with the last run's best
placement; the default `AgentSettings.load` checks such a file against `AGENT_FILE` before it builds anything
(nothing in it is imported or run). Agents with learned state (weights, tables) override both
(`agents.core.base.BaseAgent`, the SB3 agents).
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from placement_gym.results import write_json
from placement_gym.schema import (
    MAX_DEVICES, MAX_OPS, Found, Integer, ListOf, Number, Optional, Record, SchemaError, Text, check, mismatch,
    read_json,
)

from agents.core.checkpoint import SETTINGS, CheckpointError

__all__ = ["AGENT_FILE", "AgentSettings"]


_MISSING = object()
#: What the default `AgentSettings.save` writes, as the default `AgentSettings.load` checks it.
AGENT_FILE = Record({
    "agent": Text(max_len=500), "hyperparameters": SETTINGS,
    "best_placement": Optional(ListOf(Integer(0, MAX_DEVICES - 1), max_len=MAX_OPS)),
    "best_latency_s": Optional(Number(positive=True)),
})
MAX_AGENT_FILE_BYTES = 16 << 20


def _is_plain(value: Any) -> bool:
    """Whether `value` is a setting the default `AgentSettings.load` takes back: plain data as `SETTINGS` accepts it
    for any setting (None, bool, int, float, str, lists and dicts of them, bounded)."""
    try:
        check(value, SETTINGS.others, "hyperparameters")
    except SchemaError:
        return False
    return True


class AgentSettings:
    """Mixin of `agents.core.run.RunAgent`: the agent's own settings and its default plain-JSON ``save`` / ``load``
    (module docstring). It reads the agent's ``best_placement`` and ``best_latency_s`` (set by ``RunAgent``) and
    the class's ``BASE_SETTINGS``: the constructor keywords the base classes keep themselves
    (`agents.core.run.RunAgent.BASE_SETTINGS`, which subclasses extend)."""

    BASE_SETTINGS: ClassVar[frozenset[str]]
    #: The names of the agent's own settings, kept as attributes of the same name (`keep_settings`).
    own_setting_names: tuple[str, ...] = ()

    def keep_settings(self, arguments: Mapping[str, Any]) -> None:
        """Keep the agent's own settings: every constructor keyword in `arguments` (the constructor's ``locals()``,
        taken before it defines anything else) that is not one of ``BASE_SETTINGS``, as an attribute of the same
        name, named in ``own_setting_names``; `own_settings` and `hyperparameters` read them back. So each
        setting is written once, in the constructor's signature."""
        self.own_setting_names = tuple(name for name in arguments
                                       if name not in ("self", "__class__") and name not in self.BASE_SETTINGS)
        for name in self.own_setting_names:
            setattr(self, name, arguments[name])

    def own_settings(self, target: "Callable[..., Any] | None" = None) -> dict[str, Any]:
        """The agent's own settings (`keep_settings`) by name: all of them, or those that `target` (a class or
        function: a policy, a trainer) takes as keywords."""
        names = self.own_setting_names
        if target is not None:
            names = [name for name in names if name in inspect.signature(target).parameters]
        return {name: getattr(self, name) for name in names}

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild this agent (plain Python values only).

        This default reads each keyword of the class's ``__init__`` from the attribute of the same name, where
        one holds a plain value (None, bool, int, float, str, or lists / dicts of them); a keyword without such
        an attribute is left to its default. Override it when the attributes are named otherwise."""
        params = inspect.signature(type(self).__init__).parameters.values()
        return {p.name: getattr(self, p.name) for p in params
                if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and _is_plain(getattr(self, p.name, _MISSING))}

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
