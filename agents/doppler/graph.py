"""What DOPPLER's two policies read about one graph, computed once per graph (`GraphContext`), and the per-device
state they read at each step of an episode (`device_state`).

DOPPLER (Yao et al., ICLR 2026; github.com/xinyuyao/Doppler, ``utils.get_rl_graph``, ``env/env.py``) describes an
op by its compute cost, its bottom and top level (longest path to a sink / from a source), and the summed
communication cost of its inputs and of its outputs; an edge by its tensor's communication cost. Its devices are
identical; here they are not, so an op's cost is its mean time over the devices that can run it (and its fastest
time, a feature of ours), an edge's its mean transfer time over pairs of distinct devices, as the critical-path
heuristic averages them (`agents.baselines.critical_path`).

The costs come from the observation (``node_device_cost``: each op's seconds on each device; ``edge_features``:
each tensor's bytes; ``device_features``: each device's link bandwidth), so a trained policy places any graph from
its observation. The observation describes each device's slowest link, not each pair of devices, so a tensor
crossing from device ``a`` to ``b`` is priced with the link table of the devices the policy was trained on where
there is one (`link_table`: the simulated profile's ``latency + bytes / bandwidth`` per directed pair, what the
simulator and the critical-path teacher charge), else ``bytes / min(link_a, link_b)``; a device change adds the
observation's ``submodel_overhead`` (HETERO's cost per extra submodel), as the heuristic prices it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from agents.baselines.costs import CostModel
from agents.baselines.critical_path import ListSchedule, mean_times, bottom_levels, top_levels
from placement_gym.backends.base import DEVICE_FEATURES
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.env import UNSUPPORTED_COST_S
from placement_gym.features import bytes_from_edge_features

__all__ = ["DEVICE_STATE", "GraphContext", "NODE_FEATURES", "device_state", "link_table", "observed_costs"]

#: The node features of DOPPLER's ``get_rl_graph`` (with the fastest time added, ours), in log10(1 + microseconds).
NODE_FEATURES = ("mean_op_time", "min_op_time", "bottom_level", "top_level", "input_transfer", "output_transfer")
#: The per-device state of DOPPLER's ``Env._compute_device_state`` (its first five), then two of ours for devices of
#: different speeds: the op's own time on the device and when it would finish there.
DEVICE_STATE = ("compute_on_device", "input_compute_on_device", "inputs_first_start", "inputs_last_end",
                "earliest_start", "op_time", "earliest_finish")
_LINK = DEVICE_FEATURES.index("log10_link_Bps")


def link_table(backend: Any) -> np.ndarray | None:
    """(D, D, 2) float64 per directed device pair ``[a, b]``: the link's fixed seconds per tensor and seconds per
    byte (0 where unlimited), from a simulated backend's profile (``Profile.link_between``, what its simulator
    charges); None for a backend without a profile (the real one), whose observation is all there is."""
    if not isinstance(backend, SimulatedBackend):
        return None
    profile = backend.profile
    names = [device.name for device in profile.devices]
    table = np.zeros((len(names), len(names), 2))
    for a, src in enumerate(names):
        for b, dst in enumerate(names):
            if a != b:
                link = profile.link_between(src, dst)
                table[a, b] = link.latency_s, 0.0 if link.bandwidth_Bps is None else 1.0 / link.bandwidth_Bps
    return table


def observed_costs(obs: Mapping[str, Any], links: np.ndarray | None = None) -> CostModel:
    """The cost model an observation describes (module docstring): op seconds (N, D) from ``node_device_cost``
    (`UNSUPPORTED_COST_S` where ``action_mask`` forbids the device), transfer seconds (E, D, D) from the tensors'
    bytes, priced by `links` (`link_table`, used where it has the observation's device count) or else over the
    slower link of the two devices (0 on the diagonal), the submodel overhead from ``submodel_overhead`` (0 where
    the observation has none)."""
    cost = np.asarray(obs["node_device_cost"], dtype=np.float64)
    mask = np.asarray(obs["action_mask"], dtype=bool) if "action_mask" in obs else np.ones(cost.shape, dtype=bool)
    op_time = np.where(mask & np.isfinite(cost), cost, UNSUPPORTED_COST_S)
    d = cost.shape[1]
    edge_bytes = bytes_from_edge_features(np.asarray(obs["edge_features"])[:, 0]) if "edge_features" in obs \
        else np.zeros(np.shape(obs["edge_index"])[1])
    if links is not None and links.shape[:2] == (d, d):
        edge_time = links[None, :, :, 0] + edge_bytes[:, None, None] * links[None, :, :, 1]
    else:
        link = 10.0 ** np.asarray(obs["device_features"], dtype=np.float64)[:, _LINK]
        slower = np.minimum(link[:, None], link[None, :])  # (D, D)
        edge_time = edge_bytes[:, None, None] / slower[None]
    edge_time[:, np.arange(d), np.arange(d)] = 0.0
    overhead = float(np.asarray(obs["submodel_overhead"]).reshape(-1)[0]) if "submodel_overhead" in obs else 0.0
    return CostModel(op_time_s=op_time, edge_time_s=edge_time, submodel_overhead_s=overhead,
                     source="the observation")


def _log_us(seconds: np.ndarray) -> np.ndarray:
    return np.log10(1.0 + np.asarray(seconds, dtype=np.float64) * 1e6)


def _path_sums(edge_index: np.ndarray, levels: np.ndarray, edge_mean: np.ndarray, n: int,
               forward: bool) -> Tensor:
    """(N, N) sparse 0/1: row i marks the ops of op i's longest path to a sink (`forward`) or from a source, the
    path whose length is its bottom (top) level (DOPPLER's ``b_level_dict`` / ``t_level_dict``): summing the
    embeddings of a row's ops is DOPPLER's ``compute_level_embedding``."""
    src, dst = edge_index
    nxt = np.full(n, -1)  # the next op on each op's path (-1: it ends there)
    best = np.full(n, -np.inf)
    for e in range(src.size):
        u, v = (int(src[e]), int(dst[e])) if forward else (int(dst[e]), int(src[e]))
        if u == v:
            continue
        length = edge_mean[e] + levels[v]
        if length > best[u]:
            best[u], nxt[u] = length, v
    rows, cols = [], []
    for i in range(n):
        j = i
        while j >= 0:
            rows.append(i)
            cols.append(j)
            j = nxt[j]
    index = torch.tensor([rows, cols], dtype=torch.long)
    return torch.sparse_coo_tensor(index, torch.ones(len(rows)), (n, n), check_invariants=False).coalesce()


@dataclass
class GraphContext:
    """One graph as DOPPLER's policies read it (module docstring).

    Attributes:
        costs: the observation's cost model (`observed_costs`); the episode's schedule is priced with it.
        edge_index: (2, E) int64 producer -> consumer pairs (numpy, for the schedule).
        node_features: (N, 6) float32, `NODE_FEATURES`.
        message_index: (2, 2E) the edges both ways (DOPPLER's MPNN runs on the bidirected graph);
        message_features: (2E, 1) each edge's mean transfer, log10(1 + us), standardised.
        bottom_path, top_path: (N, N) sparse, the ops of each op's longest path to a sink / from a source.
        action_mask: (N, D) bool, which device may run which op.
        device_features: (D, K) float32, the observation's static device description.
    """

    costs: CostModel
    edge_index: np.ndarray
    node_features: Tensor
    message_index: Tensor
    message_features: Tensor
    bottom_path: Tensor
    top_path: Tensor
    action_mask: np.ndarray
    device_features: Tensor

    @property
    def n_ops(self) -> int:
        return int(self.costs.op_time_s.shape[0])

    @property
    def n_devices(self) -> int:
        return int(self.costs.op_time_s.shape[1])

    @classmethod
    def of_observation(cls, obs: Mapping[str, Any], links: np.ndarray | None = None) -> "GraphContext":
        """The context of the graph of one (unpadded) `DevicePlacement-v0` observation, its transfers priced by
        `links` (`observed_costs`)."""
        costs = observed_costs(obs, links)
        edge_index = np.asarray(obs["edge_index"], dtype=np.int64)
        n = costs.op_time_s.shape[0]
        op_mean, edge_mean = mean_times(edge_index, costs)
        usable = costs.op_time_s < UNSUPPORTED_COST_S
        op_min = np.where(usable, costs.op_time_s, np.inf).min(axis=1)
        op_min = np.where(np.isfinite(op_min), op_min, op_mean)
        bottom, top = bottom_levels(edge_index, costs), top_levels(edge_index, costs)
        incoming, outgoing = np.zeros(n), np.zeros(n)
        np.add.at(incoming, edge_index[1], edge_mean)
        np.add.at(outgoing, edge_index[0], edge_mean)
        features = np.stack([_log_us(op_mean), _log_us(op_min), _log_us(bottom), _log_us(top), _log_us(incoming),
                             _log_us(outgoing)], axis=1)
        both = np.concatenate([edge_index, edge_index[::-1]], axis=1)
        message = _log_us(np.concatenate([edge_mean, edge_mean]))[:, None]
        message = (message - message.mean()) / (message.std() + 1e-6) if message.size else message
        return cls(
            costs=costs, edge_index=edge_index,
            node_features=torch.as_tensor(features, dtype=torch.float32),
            message_index=torch.as_tensor(both, dtype=torch.long),
            message_features=torch.as_tensor(message, dtype=torch.float32),
            bottom_path=_path_sums(edge_index, bottom, edge_mean, n, forward=True),
            top_path=_path_sums(edge_index, top, edge_mean, n, forward=False),
            action_mask=np.asarray(obs["action_mask"], dtype=bool) if "action_mask" in obs
            else np.ones(costs.op_time_s.shape, dtype=bool),
            device_features=torch.as_tensor(np.asarray(obs["device_features"]), dtype=torch.float32),
        )


def device_state(schedule: ListSchedule, op: int) -> np.ndarray:
    """(D, 7) float64, `DEVICE_STATE` for placing ready `op` next on each device of `schedule` (DOPPLER's
    ``_compute_device_state``): compute already on the device, compute of the op's inputs there, the first start
    and last end of those inputs (0 without any), the op's earliest start there, and (ours) its time there and
    its earliest finish."""
    costs = schedule.costs
    d = schedule.n_devices
    start = schedule.start_times(op)
    own = costs.op_time_s[op]
    inputs = np.zeros(d)
    first, last = np.zeros(d), np.zeros(d)
    for device, producers in enumerate(schedule.inputs_by_device(op)):
        if producers:
            inputs[device] = costs.op_time_s[producers, device].sum()
            first[device] = schedule.start_s[producers].min()
            last[device] = schedule.finish_s[producers].max()
    return np.stack([schedule.device_compute_s, inputs, first, last, start, own, start + own], axis=1)
