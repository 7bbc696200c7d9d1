"""The agent registry: name -> where the class lives, in the order the paper's tables list them.

`placement_gym` never imports `agents` at import time: an agent is imported only when a command or a script
asks for it by name. The CLI, the harness and the examples all find agents here.

>>> from placement_gym import registry
>>> registry.agent_factories(["single-device", "hsdag"], device_names=["CPU", "GPU"])
{'CPU-only': <factory>, 'GPU-only': <factory>, 'hsdag': <factory>}
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .evaluation import agent_name

__all__ = ["AGENTS", "AgentEntry", "agent_factories", "load_agent_class", "make_agent"]


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
    """

    target: str
    description: str
    variants: Callable[[Sequence[str]], list[tuple[str, dict]]] | None = None


#: Every registered agent, in table order: single devices and OpenVINO's choice first, then the other
#: baselines, the learned agents, and the exact optimum last.
AGENTS: dict[str, AgentEntry] = {
    "single-device": AgentEntry("agents.baselines:SingleDevice", "every op on one device (one row per device)",
                                _per_device),
    "openvino": AgentEntry("agents.baselines:OpenVINOChoice", "OpenVINO's own choice (AUTO and HETERO rows)",
                           _openvino_policies),
    "random": AgentEntry("agents.baselines:RandomSearch", "uniformly random placements, the best kept"),
    "cheapest": AgentEntry("agents.baselines:CheapestDevice", "each op on the device where it alone runs fastest"),
    "greedy": AgentEntry("agents.baselines:GreedyETF", "Baechi's m-ETF list scheduling on the cost model"),
    "topo": AgentEntry("agents.baselines:TopoBalance", "Baechi's m-TOPO: topological order split by speed"),
    "metis": AgentEntry("agents.baselines:MetisPartition", "METIS graph partitioning weighted by cost"),
    "dp": AgentEntry("agents.baselines:ContiguousDP", "Tarnawski et al.'s dynamic program over contiguous splits"),
    "hsdag": AgentEntry("agents.hsdag:HSDAGAgent", "the paper's method: GNN + graph-parsing pooling + placer"),
    "placeto": AgentEntry("agents.placeto:PlacetoAgent", "node-by-node re-placement with message passing"),
    "rnn": AgentEntry("agents.rnn:RNNAgent", "Mirhoseini et al.'s seq2seq LSTM placer"),
    "post": AgentEntry("agents.post:PostAgent", "Post: per-group softmax placements, PPO + cross-entropy on elites"),
    "go": AgentEntry("agents.go:GOAgent", "GO: GraphSAGE + segment-recurrent attention, PPO over many graphs, "
                     "transfers to new graphs"),
    "ppo": AgentEntry("agents.ppo:PPOAgent", "Stable-Baselines3 PPO with the graph policy"),
    "ppo-node": AgentEntry("agents.ppo:PPONodeAgent", "the same on the node-by-node env"),
    "optimal": AgentEntry("agents.baselines:ExactOptimum", "exact optimum of the simulated cost model (MILP)"),
}


def load_agent_class(name: str) -> type:
    """The class registered as `name`, or a user's own given as an import path ``"package.module:Class"``
    (found from the current directory too, as ``python -m`` would)."""
    entry = AGENTS.get(name)
    target = entry.target if entry is not None else (name if ":" in name else None)
    if target is None:
        raise ValueError(f"unknown agent {name!r}; registered agents: {', '.join(AGENTS)} "
                         "(or give your own class as 'package.module:Class')")
    module_name, _, class_name = target.partition(":")
    if entry is None and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # a ValueError so commands report it cleanly
        raise ValueError(f"agent {name!r} ({target}) could not be imported: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ValueError(f"agent {name!r}: module {module_name} has no class {class_name}")
    return cls


def make_agent(cls: type, options: Mapping[str, Any] | None = None) -> Any:
    """``cls(**options)``, with a ValueError naming the agent when it rejects the options."""
    try:
        return cls(**dict(options or {}))
    except TypeError as exc:
        raise ValueError(f"agent {cls.__name__} rejected the options {dict(options or {})}: {exc}") from exc


def agent_factories(names: Sequence[str], device_names: Sequence[str],
                    options: Mapping[str, Any] | None = None) -> dict[str, Callable[[], Any]]:
    """Table row label -> factory of a fresh agent, for the agents `names` on devices `device_names`.

    A registered agent with variants stands for several rows (``single-device`` -> ``CPU-only``, ...);
    `options` (constructor keyword arguments) go to every agent, after a variant's own. Unknown names raise
    ValueError (`load_agent_class`).
    """
    factories: dict[str, Callable[[], Any]] = {}
    for name in names:
        cls = load_agent_class(name)
        entry = AGENTS.get(name)
        label = name if entry is not None else agent_name(cls)
        rows = entry.variants(device_names) if entry is not None and entry.variants else [(label, {})]
        for row, own in rows:
            factories[row] = (lambda cls=cls, kwargs={**own, **dict(options or {})}: make_agent(cls, kwargs))
    return factories
