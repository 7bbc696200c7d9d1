"""What the node-by-node placers (Placeto, PPO on ``DevicePlacementNode-v0``) share: their groups of ops, refined
so that the best placement a run found is one ``predict`` can return, and the teacher-forced steps that fit it.

A node-by-node placer re-places one *node* (a group of ops that share a device) per step, the groups being the
topological order cut into G contiguous chunks (`placement_gym.wrappers.contiguous_groups`). Its ``predict`` can
only return placements constant on those groups: with G = 16 a best placement that puts neighbouring ops on
different devices (the heuristic start's "every op on its cheapest device" on ``ai_pc``: ResNet-50's 16 groups
split where it changes device are many times more) is out of reach, and ``predict`` ended far above the run's
best there.

`NodeGroups` fixes that the way Post's coarse-to-fine groups do, once, at the end of a run: where the best is
not constant on a group, the group is split at every op where the best changes device (`refine_groups`, the
coarsest such refinement), and these groups, for that graph only, are what ``predict`` and later episodes on
it use; other graphs keep G contiguous groups. The final distillation then fits the policy to the refined
episode, one batched forward pass per gradient step (`TeacherForcing`), since a sequential episode of 100-200
nodes per step would cost seconds.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from placement_gym.wrappers import contiguous_groups, place_node_by_node

from agents.nn.policy import group_majority

logger = logging.getLogger(__name__)

__all__ = ["MAX_EPISODE_NODES", "NodeGroups", "TeacherForcing", "graph_key", "refine_groups"]

#: The most (groups x ops) a refinement may give one graph: one teacher-forced forward pass holds every step's
#: observation of the whole graph. The limit leaves room for Inception-V3's refinement on ``ai_pc`` (its groups x
#: 310 ops), whose distillation steps still take modest time and memory; a bigger one keeps the contiguous groups
#: (its ``predict`` is then their majority of the best, and a warning says so).
MAX_EPISODE_NODES = 65_536


def refine_groups(groups: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """(N,) int64 the coarsest refinement of contiguous `groups` (N,) on which `placement` (N,) is constant: each
    group split at every op whose device differs from the op before it; labels 0..G'-1 in op order."""
    groups, placement = np.asarray(groups), np.asarray(placement)
    starts = np.ones(len(groups), dtype=bool)
    starts[1:] = (groups[1:] != groups[:-1]) | (placement[1:] != placement[:-1])
    return np.cumsum(starts).astype(np.int64) - 1


def graph_key(obs: Mapping[str, Any]) -> tuple[int, int]:
    """(ops, edges) of the graph of a `DevicePlacement-v0` observation (or its observation space): what refined
    groups are kept under."""
    def size(value) -> int:  # arrays, tensors and the observation space's Boxes alike
        return int((value.shape if hasattr(value, "shape") else np.shape(value))[-1])

    return size(obs["placement"]), size(obs["edge_index"])


class NodeGroups:
    """A node-by-node placer's groups of ops: G contiguous groups (None: one per op), refined per graph.

    Args:
        n_groups: G.

    Attributes:
        refined: {(ops, edges): (N,) int64 groups} of the graphs a run refined them for (`refine_to_express`).
    """

    def __init__(self, n_groups: int | None) -> None:
        self.n_groups = n_groups
        self.refined: dict[tuple[int, int], np.ndarray] = {}

    def of(self, key: tuple[int, int]) -> np.ndarray:
        """(N,) int64 group of every op of the graph with `key` = (N ops, E edges), in episode order."""
        refined = self.refined.get(key)
        if refined is not None:
            return refined
        n = key[0]
        return np.arange(n, dtype=np.int64) if self.n_groups is None else contiguous_groups(n, min(self.n_groups, n))

    def refine_to_express(self, key: tuple[int, int], placement: np.ndarray) -> bool:
        """Refine the groups of graph `key` so that `placement` is constant on each (`refine_groups`), unless the
        refined episode would exceed `MAX_EPISODE_NODES`; True if they changed."""
        groups = self.of(key)
        refined = refine_groups(groups, placement)
        count = int(refined.max()) + 1
        if count == int(groups.max()) + 1:
            return False
        if count * len(refined) > MAX_EPISODE_NODES:
            logger.warning("the best placement needs %d node groups of %d ops, over MAX_EPISODE_NODES (%d) for a "
                           "node-by-node placer: its groups stay, predict returns their majority of it",
                           count, len(refined), MAX_EPISODE_NODES)
            return False
        self.refined[key] = refined
        return True

    def to_data(self) -> list:
        """The refined groups as plain data (a checkpoint's)."""
        return [[list(key), groups.tolist()] for key, groups in self.refined.items()]

    def load_data(self, data: list | None) -> None:
        """Restore what `to_data` wrote."""
        self.refined = {tuple(int(v) for v in key): np.asarray(groups, dtype=np.int64) for key, groups in data or []}


class TeacherForcing:
    """The steps of a node-by-node ``predict`` that builds a given placement, stacked for one forward pass.

    ``predict`` visits the groups in order from ``obs["placement"]`` (`place_node_by_node`), each given a device;
    to build `placement` each group takes the device most of its ops have in it (`group_majority`). Those steps'
    node-level observations are known in advance, so the policy scores all of them at once:
    ``node_logits(stacked_obs)`` -> (S, D) logits of the S steps. The steps of the last placement asked for are
    kept (a distillation asks for the same one every gradient step).

    Args:
        node_logits: the policy's device logits for a batch of node-level observations (arrays with a leading S).
    """

    def __init__(self, node_logits: Callable[[dict[str, np.ndarray]], Tensor]) -> None:
        self.node_logits = node_logits
        self._obs: Mapping[str, Any] | None = None  # held, so that its id in the key cannot be reused
        self._key: tuple | None = None
        self._steps: tuple[dict[str, np.ndarray], Tensor] | None = None

    def steps(self, obs: Mapping[str, Any], groups: np.ndarray, placement: np.ndarray, n_devices: int,
              sweeps: int = 1) -> tuple[dict[str, np.ndarray], Tensor]:
        """(stacked node-level observations (S, ...), devices (S,) int64) of the steps that build `placement`."""
        key = (groups.tobytes(), np.asarray(placement).tobytes(), n_devices, sweeps)
        if obs is not self._obs or key != self._key:
            target = group_majority(groups, placement, n_devices, obs.get("action_mask"))
            observations, devices = [], []

            def choose(node_obs) -> int:
                device = int(target[groups[np.argmax(node_obs["current_node"] > 0)]])
                observations.append(node_obs)
                devices.append(device)
                return device

            place_node_by_node(obs, groups, choose, sweeps)
            stacked = {k: np.stack([np.asarray(o[k]) for o in observations]) for k in observations[0]}
            self._obs, self._key, self._steps = obs, key, (stacked, torch.as_tensor(devices))
        return self._steps

    def log_prob(self, obs: Mapping[str, Any], groups: np.ndarray, placement: np.ndarray, n_devices: int,
                 sweeps: int = 1) -> Tensor:
        """() mean log-probability of the steps that build `placement` (differentiable): the placer's ``imitate``."""
        stacked, devices = self.steps(obs, groups, placement, n_devices, sweeps)
        logits = self.node_logits(stacked)
        return torch.log_softmax(logits, -1).gather(1, devices.to(logits.device).view(-1, 1)).mean()

    def reproduces(self, obs: Mapping[str, Any], groups: np.ndarray, placement: np.ndarray, n_devices: int,
                   sweeps: int = 1) -> bool:
        """Whether the deterministic ``predict`` builds `placement`'s group-majority placement: every step's most
        likely device is the one that builds it (then the episode follows these very steps). One forward pass
        instead of one per group."""
        stacked, devices = self.steps(obs, groups, placement, n_devices, sweeps)
        with torch.no_grad():
            return bool((self.node_logits(stacked).argmax(-1).cpu() == devices).all())
