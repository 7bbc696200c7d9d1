"""What the run commands build from their settings: ``KEY=VALUE`` options, one backend and the env factory on it,
and compare's agents with their constructor options.

Shared by the commands (`placement_gym.commands.run`, `.compare`, `.deploy`, `.benchmark`) and by the Ray
workers of ``compare --ray`` (`placement_gym.commands.compare.compare_plan`), which rebuild the driver's env
factory and agents from the same settings.
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import registry
from ..schema import check, loads
# A model argument naming a split of the graph dataset (``dataset:train``): the env draws from its graphs.
from ..models.dataset import DATASET_PREFIX as DATASET_SPLIT_PREFIX

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..env import DevicePlacementEnv


#: Placements each agent may measure per seed, unless --budget says (`place` of a saved agent: 0, zero-shot).
BUDGET = 500


def seeds_of(args: argparse.Namespace) -> list[int]:
    """The run commands' seeds: ``--seed S...`` where given, else ``0..--seeds - 1`` (both checked by the argument
    parser: each seed once, a count >= 1)."""
    return list(args.seed) if args.seed is not None else list(range(args.seeds))


def key_values(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` -> dict, a value that is written as JSON (``0.01``, ``false``, ``null``, ``[1, 2]``,
    ``"text"``; also Python's ``None``, ``True``, ``False``, which would otherwise arrive as strings) parsed as
    strict JSON, every other value kept as a string (``place=group``). A JSON value is plain data as a benchmark
    manifest reads it back (`registry.AGENT_OPTIONS`: no ``NaN``, no infinity, no number beyond a float, nested at
    most 3 deep, at most 10,000 items), parsed with bounded memory (`placement_gym.schema.loads`), or ValueError
    in one line naming the option."""
    python_spellings = {"None": None, "True": True, "False": False}
    spec = registry.AGENT_OPTIONS.value
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE (JSON values: 0.01, false, null), got {item!r}")
        name = key.replace("-", "_")
        if value in python_spellings:
            out[name] = python_spellings[value]
        elif value[:1] in _JSON_STARTS or value in _JSON_WORDS:
            out[name] = check(loads(value, f"{flag} {key}", max_items=spec.max_len, max_depth=spec.max_depth,
                                    what="JSON value", error=ValueError), spec, flag, at=key, error=ValueError)
        else:
            out[name] = value
    return out


#: How a JSON value other than a string starts: `key_values` parses these (and refuses them when they are not
#: strict JSON), and keeps anything else as text.
_JSON_STARTS = frozenset('[{"-0123456789')
_JSON_WORDS = frozenset({"true", "false", "null", "NaN", "Infinity"})


def env_factory(args: argparse.Namespace) -> tuple[Callable[..., DevicePlacementEnv], Backend]:
    """``(make_env(model, feature_families), backend)``: one backend for every env of the command, so the real
    backend's measurement cache and the reference placement are shared, and one graph object per model."""
    from ..backends import make_backend
    from ..backends.published import published_backend_of
    from ..env import DevicePlacementEnv
    from ..models import load_graph
    from ..models.published import is_published

    options = key_values(args.backend_option, "--backend-option")
    for key in ("warmup", "repeats", "profile", "objective"):  # given flags only: the backend's defaults otherwise
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    graphs: dict = {}
    models = getattr(args, "models", None) or [getattr(args, "model", None)]
    models = [m for m in (models if isinstance(models, (list, tuple)) else [models]) if isinstance(m, str)]
    # A published benchmark carries its costs: its authors' cost model prices it (one backend for all models,
    # which must share the family and the device set; the backend refuses a model that does not).
    graphs.update({m: load_graph(m) for m in models if is_published(m)})
    backend = published_backend_of([graphs.get(m, m) for m in models], args.backend, args.devices or "auto",
                                   **options) or make_backend(args.backend, args.devices or "auto", **options)

    def make_env(model: "str | Sequence[str]", families=None):
        """An env of one model, or of several (a list, or one ``dataset:SPLIT``), one drawn per reset."""
        features = {} if families is None else {"features": families}
        if not isinstance(model, str) or model.startswith(DATASET_SPLIT_PREFIX):
            # The env loads and draws the graphs itself (`DevicePlacementEnv` with a list or "dataset:SPLIT").
            many = list(model) if not isinstance(model, str) else model
            return DevicePlacementEnv(many, backend=backend, unsupported=args.unsupported, **features)
        if model not in graphs:
            graphs[model] = load_graph(model)
        return DevicePlacementEnv(graphs[model], backend=backend, unsupported=args.unsupported, **features)

    return make_env, backend


def compare_agent_options(items: Sequence[str] | None, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """compare's ``--agent-option [AGENT:]KEY=VALUE`` items -> {agent name: its constructor options}: a scoped one
    for that agent only, an unscoped one for every agent of `names` whose constructor takes KEY (a baseline
    without the setting is left alone). ValueError for an agent not compared or a KEY no compared agent takes."""
    scoped: dict[str, list[str]] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        agent, colon, key = key.rpartition(":")  # rpartition: a user's class path has a colon of its own
        if colon and agent not in names:
            raise ValueError(f"--agent-option {item!r} names agent {agent!r}, which is not compared "
                             f"(--agents {' '.join(names)})")
        scoped.setdefault(agent if colon else "", []).append(f"{key}{sep}{value}")
    common = key_values(scoped.pop("", None), "--agent-option")
    options: dict[str, dict[str, Any]] = {name: {} for name in names}
    for key, value in common.items():
        takers = [name for name in names if _takes(name, key)]
        if not takers:
            raise ValueError(f"--agent-option {key}: none of the compared agents ({', '.join(names)}) takes it")
        for name in takers:
            options[name][key] = value
    for name, own in scoped.items():
        options[name].update(key_values(own, "--agent-option"))
    return options


def _takes(name: str, key: str) -> bool:
    """Whether agent `name` takes keyword `key`: one of its search settings, or a keyword its class declares
    (``option_names()``, `agents.core.settings.AgentSettings`; an agent class without it, one that is not a
    ``RunAgent``, takes only the options scoped to it). False for an agent that cannot be loaded: compare
    reports it as missing."""
    try:
        cls = registry.load_agent_class(name)
    except ValueError:
        return False
    if key in getattr(cls, "SEARCH_OPTIONS", ()):  # a search setting: taken by the agents built with a search
        return True
    option_names = getattr(cls, "option_names", None)
    return option_names is not None and key in option_names()


def agent_rows(names: Sequence[str], device_names: Sequence[str],
               options: dict[str, dict[str, Any]] | None = None) -> tuple[dict, dict[str, str], list[dict]]:
    """``(factories, rows, missing)`` of compare's agents (`options`: each agent's constructor options, from
    `compare_agent_options`): table row -> agent factory, table row -> registry name, and ``{"model": "*",
    "agent", "seeds": [], "reason"}`` for each agent that cannot be built here."""
    factories: dict = {}
    rows: dict[str, str] = {}  # compare --ray rebuilds each row's agent in a worker from its registry name
    missing = []
    for name in names:
        try:
            made = registry.agent_factories([name], device_names, (options or {}).get(name))
        except ValueError as exc:
            missing.append({"model": "*", "agent": name, "seeds": [], "reason": str(exc)})
            continue
        factories.update(made)
        rows.update({label: name for label in made})
    return factories, rows, missing
