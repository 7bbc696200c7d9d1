"""The agent registry: name -> where the class lives, in the order the paper's tables list them.

`placement_gym` never imports `agents` at import time: an agent is imported only when a command or a script
asks for it by name. The CLI, the harness and the examples all find agents here.

>>> from placement_gym import registry
>>> registry.agent_factories(["single-device", "hsdag", "hybrid:hsdag"], device_names=["CPU", "GPU"])
{'CPU-only': <factory>, 'GPU-only': <factory>, 'hsdag': <factory>, 'hybrid:hsdag': <factory>}

A learned agent by its name runs its paper's method alone; ``hybrid:NAME`` (``hybrid:hsdag``,
``hybrid:mymodule:MyAgent``) is the same agent with the search layer around it (`agents.search`): the agent's own
hybrid preset (``search="hybrid"``) where it has one, else `agents.search.hybrid.SearchAround` around it.
Constructor options that name the search layer's settings (``split_patience``, ``heuristic_start``, ...: the fields
of `agents.search.config.SearchConfig`) go to the agent's ``search``, on top of its hybrid preset for a hybrid name;
any other option is the agent's own keyword.
"""
from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .evaluation import agent_name
from .schema import NAME, MapOf, Plain, SchemaError, check

__all__ = ["AGENTS", "AGENT_METHODS", "AGENT_OPTIONS", "HYBRID_PREFIX", "AgentEntry", "OptionError", "agent_factories",
           "check_options", "is_hybrid", "learns", "load_agent_class", "make_agent", "pretrained_checkpoint"]

#: Where the agents' package builds an agent from constructor options (search settings and the hybrid form
#: included); imported by name, like the agents, so that `placement_gym` never imports `agents` itself.
BUILDER = "agents.search.hybrid:build_agent"
#: The prefix that names an agent's hybrid form (``hybrid:hsdag``, ``hybrid:mymodule:MyAgent``).
HYBRID_PREFIX = "hybrid:"
#: The methods of `placement_gym.evaluation.Agent` that the harness calls on a class it loads by name: a class
#: without them is refused when it is loaded, not minutes later in the middle of a run.
AGENT_METHODS = ("learn", "predict")
#: What agent options may be (``--agent-option`` values, a benchmark manifest's ``options``): plain data, as
#: `placement_gym.benchmark` reads a benchmark's manifest back, so that every benchmark started can be resumed.
AGENT_OPTIONS = MapOf(Plain(max_depth=3, max_len=10_000), max_len=1000, max_key=200)


class OptionError(ValueError):
    """Agent options the agent refuses (a value outside what its settings declare, an unknown keyword): one line
    naming the agent, the option and what it takes."""


def is_hybrid(name: str) -> bool:
    """Whether agent name `name` asks for the hybrid form (``hybrid:NAME``)."""
    return isinstance(name, str) and name.startswith(HYBRID_PREFIX)


def _per_device(device_names: Sequence[str]) -> list[tuple[str, dict]]:
    """The paper's CPU-only / GPU-only rows: one single-device agent per device."""
    return [(f"{name}-only", {"device": d}) for d, name in enumerate(device_names)]


def _openvino_policies(device_names: Sequence[str]) -> list[tuple[str, dict]]:
    """OpenVINO's own choice, both ways: the AUTO plugin's device and HETERO's op-by-op map."""
    return [("openvino-auto", {"policy": "auto"}), ("openvino-hetero", {"policy": "hetero"})]


@dataclass(frozen=True)
class AgentEntry:
    """One registered agent.

    Attributes:
        target: ``"module:Class"``, imported when the agent is needed.
        variants: for agents that stand for several table rows, ``variants(device_names) -> [(row label,
            constructor options), ...]`` (single-device: one row per device); None = one row, the name.
        description: one line for ``--help`` and the docs.
        pretrained: for an agent that ships trained checkpoints, ``"module:function"``: ``function(preset,
            objective, devices) -> Path`` of the one for a simulated preset's device set (`preset`, None for any
            other device set, which `devices` describes) under `objective`, or ValueError, one line naming the
            shipped ones (`pretrained_checkpoint`); None = ships none.
    """

    target: str
    description: str
    variants: Callable[[Sequence[str]], list[tuple[str, dict]]] | None = None
    pretrained: str | None = None


#: Every registered agent, in table order: single devices, OpenVINO's choice and replicate (OpenVINO's own way to use
#: every device for throughput) first, then the other baselines, the learned agents, and the exact optimum last.
AGENTS: dict[str, AgentEntry] = {
    "single-device": AgentEntry("agents.baselines:SingleDevice", "every op on one device (one row per device)",
                                _per_device),
    "openvino": AgentEntry("agents.baselines:OpenVINOChoice", "OpenVINO's own choice (AUTO and HETERO rows)",
                           _openvino_policies),
    "replicate": AgentEntry("agents.baselines.replicate:Replicate", "not a placement: the whole model on every "
                            "device, requests spread (OpenVINO AUTO with CUMULATIVE_THROUGHPUT); under the latency "
                            "objective the best single device"),
    "random": AgentEntry("agents.baselines:RandomSearch", "uniformly random placements, the best kept"),
    "cheapest": AgentEntry("agents.baselines:CheapestDevice", "each op on the device where it alone runs fastest"),
    "greedy": AgentEntry("agents.baselines:GreedyETF", "Baechi's m-ETF list scheduling on the cost model"),
    "critical-path": AgentEntry("agents.baselines:CriticalPath", "the critical-path list scheduling DOPPLER imitates: "
                                "the ready op of longest path to a sink, on the device where it finishes first"),
    "topo": AgentEntry("agents.baselines:TopoBalance", "Baechi's m-TOPO: topological order split by speed"),
    "metis": AgentEntry("agents.baselines:MetisPartition", "METIS graph partitioning weighted by cost"),
    "dp": AgentEntry("agents.baselines:ContiguousDP", "Tarnawski et al.'s dynamic program over contiguous splits"),
    "local-search": AgentEntry("agents.search.hybrid:LocalSearch", "search baseline: the heuristic start, then "
                               "cost-guided block moves around the best (learns nothing)"),
    "hsdag": AgentEntry("agents.hsdag:HSDAGAgent", "the paper's method: GNN + graph-parsing pooling + placer"),
    "placeto": AgentEntry("agents.placeto:PlacetoAgent", "node-by-node re-placement with message passing"),
    "rnn": AgentEntry("agents.rnn:RNNAgent", "Mirhoseini et al.'s seq2seq LSTM placer"),
    "post": AgentEntry("agents.post:PostAgent", "Post: per-group softmax placements, PPO + cross-entropy on elites"),
    "go": AgentEntry("agents.go:GOAgent", "GO: GraphSAGE + segment-recurrent attention, PPO over many graphs, "
                     "transfers to new graphs"),
    "doppler": AgentEntry("agents.doppler:DopplerAgent", "DOPPLER: a selection and a placement policy over message "
                          "passing, imitation of the critical-path heuristic, then REINFORCE"),
    "imitation": AgentEntry("agents.imitation:ImitationAgent", "GO's network trained by imitation of the solvers' "
                            "best placements over many graphs (then optionally PPO); predict is one forward pass; "
                            "a checkpoint per preset and objective ships",
                            pretrained="agents.imitation.shipped:checkpoint_for"),
    "ppo": AgentEntry("agents.ppo:PPOAgent", "Stable-Baselines3 PPO with the graph policy"),
    "ppo-node": AgentEntry("agents.ppo:PPONodeAgent", "the same on the node-by-node env"),
    "optimal": AgentEntry("agents.baselines:ExactOptimum", "exact optimum of the simulated cost model (MILP)"),
}


#: The bases of the agents that learn nothing (the planners and the search baseline), by where they live (imported
#: by name, as the agents are).
NOT_LEARNED = ("agents.baselines.base:PlanningAgent", "agents.search.hybrid:LocalSearch")


def learns(agent: Any) -> bool:
    """Whether `agent` (an instance or a class) learns a policy: a learned agent or a user's, not a planner or the
    search baseline (`NOT_LEARNED`)."""
    cls = agent if isinstance(agent, type) else type(agent)
    for target in NOT_LEARNED:
        module_name, _, class_name = target.partition(":")
        if issubclass(cls, getattr(_import_module(module_name), class_name)):
            return False
    return True


def load_agent_class(name: str) -> type:
    """The class registered as `name`, or a user's own: an import path ``"package.module:Class"`` (found from the
    current directory too, as ``python -m`` would) or a file ``"path/to/my_agent.py:Class"``. A ``hybrid:`` prefix
    is ignored here (the class is the same; `make_agent` builds its hybrid form). Raises ValueError naming what
    is accepted for an unknown name, a module that cannot be imported or a missing class."""
    name = name.removeprefix(HYBRID_PREFIX)
    entry = AGENTS.get(name)
    target = entry.target if entry is not None else (name if ":" in name else None)
    if target is None:
        close = difflib.get_close_matches(name, AGENTS, n=1)
        raise ValueError(f"unknown agent {name!r}{f' (did you mean {close[0]!r}?)' if close else ''}; registered "
                         f"agents: {', '.join(AGENTS)} (or your own class as 'package.module:Class' or "
                         "'path/to/file.py:Class'; prefix 'hybrid:' for the search layer around a learned agent)")
    module_name, _, class_name = target.rpartition(":")
    if not module_name or not class_name:
        raise ValueError(f"agent {name!r} names no {'module' if not module_name else 'class'}; expected "
                         "'package.module:Class' or 'path/to/file.py:Class'")
    module = _import_agent_module(name, module_name)
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ValueError(f"agent {name!r}: module {module_name} has no class {class_name}")
    if entry is None:  # a user's class: what the harness calls and writes of it is checked now
        lacks = [method for method in AGENT_METHODS if not callable(getattr(cls, method, None))]
        if lacks:
            raise ValueError(f"agent {name!r}: class {class_name} has no {' or '.join(lacks)} method; expected an "
                             "agent (subclass agents.core.run.RunAgent, docs/custom-agents.md)")
        try:  # its name goes into records, placed folders and file names, whose readers take NAME only
            check(agent_name(cls), NAME, f"agent {name!r}", at="name")
        except SchemaError as exc:
            raise ValueError(str(exc)) from None
    return cls


def _import_agent_module(name: str, module_name: str) -> Any:
    """The module of agent `name`: the file or the module `module_name`, imported. Whatever importing it raises
    (a syntax error, an exception, even ``sys.exit``: running a user's file at import is running user code) is one
    ValueError naming the agent and the first line of the error, where it happened in the user's file."""
    try:
        return _import_file(module_name) if module_name.endswith(".py") else _import_module(module_name)
    except SyntaxError as exc:
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
        raise ValueError(f"agent {name!r} could not be imported: a syntax error in {where}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # KeyboardInterrupt passes: the user stopped the command
        what = f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else \
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
        raise ValueError(f"agent {name!r} could not be imported: its module raised {what}{_user_frame(exc)}") \
            from None


def _user_frame(exc: BaseException) -> str:
    """`` (at FILE:LINE)``: the innermost place of the traceback of `exc` outside placement-gym and Python's
    import machinery (the user's line that raised), or "" where there is none."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "importlib" not in f.filename and not f.filename.startswith(str(Path(__file__).parent))]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def pretrained_checkpoint(name: str, preset: str | None, objective: str, devices: str = "") -> Path | None:
    """The checkpoint the registered agent `name` ships for the simulated preset `preset`'s device set (None: the
    device set is no preset's; `devices` describes it) under `objective` (`AgentEntry.pretrained`). None when the
    agent ships no checkpoint at all (a ``hybrid:`` name, a user's class, an agent without one); ValueError, one
    line naming the shipped ones, when it ships some but none for this case."""
    entry = AGENTS.get(name)
    if entry is None or entry.pretrained is None:
        return None
    module_name, _, function = entry.pretrained.partition(":")
    return getattr(_import_module(module_name), function)(preset, objective, devices)


def _import_module(module_name: str):
    """Import `module_name`, looking in the current directory too (as ``python -m`` would)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module_name)


def _import_file(path: str):
    """Import the Python file `path` (the user's own agent) once, under a module name derived from its absolute
    path, so a second lookup of the same file (another run, a Ray worker on the same machine) finds the same
    classes."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ImportError(f"no file {file}")
    module_name = f"placement_gym_user_agent_{hashlib.sha1(str(file).encode()).hexdigest()[:12]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # before running it: dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def make_agent(cls: "type | str", options: Mapping[str, Any] | None = None, *, hybrid: bool = False) -> Any:
    """``cls(**options)``, with a ValueError naming the agent when it rejects the options.

    `cls` may be a registered name or an import path (a ``hybrid:`` prefix sets `hybrid`). The agents' package
    builds it (`agents.search.hybrid.build_agent`, found by name like every agent): options that name the search
    layer's settings go to the agent's ``search``, on top of its hybrid preset when `hybrid`; an agent with no
    preset of its own is wrapped in the generic search layer.
    """
    if isinstance(cls, str):
        hybrid = hybrid or is_hybrid(cls)
        cls = load_agent_class(cls)
    module_name, _, function = BUILDER.partition(":")
    build = getattr(importlib.import_module(module_name), function)
    return build(cls, dict(options or {}), hybrid=hybrid)


def check_options(cls: "type | str", options: Mapping[str, Any] | None = None, *, hybrid: bool = False) -> None:
    """`OptionError` (one line) unless agent `cls` (a class or a name, as `make_agent` takes it) takes `options`:
    plain data (`AGENT_OPTIONS`) that its constructor accepts, each within the type and range its settings
    declare. Checked by building the agent once and setting it aside: building one builds no policy (that waits
    for an env), so this costs no memory, and every check an agent makes of its settings is made here, before
    any run, env or folder."""
    label = cls if isinstance(cls, str) else cls.__name__
    try:
        check(dict(options or {}), AGENT_OPTIONS, f"the options of agent {label!r}")
        make_agent(cls, options, hybrid=hybrid)
    except (ValueError, TypeError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OptionError(message if label in message else f"agent {label!r}: {message}") from None


def agent_factories(names: Sequence[str], device_names: Sequence[str],
                    options: Mapping[str, Any] | None = None) -> dict[str, Callable[[], Any]]:
    """Table row label -> factory of a fresh agent, for the agents `names` on devices `device_names`.

    A registered agent with variants stands for several rows (``single-device`` -> ``CPU-only``, ...);
    `options` (constructor keyword arguments) go to every agent, after a variant's own, and are checked now
    (`check_options`: an `OptionError` before any run). Unknown names raise ValueError (`load_agent_class`).
    """
    factories: dict[str, Callable[[], Any]] = {}
    for name in names:
        cls = load_agent_class(name)
        hybrid = is_hybrid(name)
        bare = name.removeprefix(HYBRID_PREFIX)
        entry = AGENTS.get(bare)
        label = (HYBRID_PREFIX if hybrid else "") + (bare if entry is not None else agent_name(cls))
        rows = entry.variants(device_names) if entry is not None and entry.variants else [(label, {})]
        for row, own in rows:
            kwargs = {**own, **dict(options or {})}
            if options:
                check_options(name, kwargs)
            factories[row] = lambda cls=cls, kwargs=kwargs, hybrid=hybrid: make_agent(cls, kwargs, hybrid=hybrid)
    return factories
