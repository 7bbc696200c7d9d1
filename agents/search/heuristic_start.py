"""Heuristic start: the placements a learned agent's run on one graph measures before its policy samples any.

A near-uniform policy's first samples put ops on devices at random; on a device set where ops differ in which
device runs them fastest (the simulated ``ai_pc`` preset) the learned agents' samples stayed far behind what the
observation's own per-op costs suggest (each op on its cheapest device, close to the best placement known).
The heuristic start measures the placements the observation suggests first:

    each device alone     every op on device d (where d can run it; elsewhere on the op's cheapest device)
    the cheapest devices  every op on the device where it alone runs fastest (``obs["node_device_cost"]``)

D + 1 placements of the budget at most (fewer when some coincide). The run's best so far is then what a split
of coarse groups refits (coarse to fine) and what the final distillation makes the policy's own placement if the
search finds nothing better. It does not join the self-imitation elites (HSDAG, the RNN): imitating the best single
device from the first update held HSDAG near it, further from the optimum than without. A policy that decides per
group of ops and cannot return that best (Post, PPO's action groups) splits its coarse-to-fine groups until it can
before the final distillation (`PolicyGradientAgent._split_to_express`); Placeto and ppo-node refine their node
groups on that graph instead (`agents.search.node_by_node`). With ``"refit"`` every policy is fitted to that best
before sampling (its search starts around it; it can trap the search there: the RNN on ``server`` stayed on the best
single device). ``"off"`` starts from the policy's own samples, as the methods' papers do.

A fine-tuning run (a trained policy continuing on one graph, e.g. a new one) measures them too, after the
policy's own placement (`agents.search.attach.SearchLayer.start_fine_tuning`): a policy trained on other graphs may
prefer a device this graph does not (on the ``paper`` test graphs, every learned agent's zero-shot placement
was the CPU, above the optimum, and a short fine-tuning did not move it).

Which devices are measured is decided by the observation alone (costs and the action mask), never by their
order in the device list, so the heuristic start adds no device-order bias.

The zero-shot override (`override_zero_shot`, every learned agent's ``zero_shot_override``) is the same idea for a
placement that is not measured first: a policy trained over many graphs places a new graph's ops by what it learned
there; where an op's own time on its cheapest device is lower by more than what moving it there adds (the time its
tensors would then spend on links, `transfer_change`, and a few per-submodel overheads, ``obs["submodel_overhead"]``),
the observation says the policy's choice for it is wrong whatever was learned, and the op moves there
(`move_large_savings`). Where the policy put the whole graph on one device, the moves may start from another
device, the one they gain most from, when that gain outweighs its higher total cost (``rebase``); where it put
runs of ops off its main device, each run must pay for itself the same way or goes back (``consolidate``,
`runs_back_to_base`).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Mapping

import numpy as np
from gymnasium import spaces

from .config import HEURISTIC_STARTS, check_heuristic_start  # re-exported: its settings
from placement_gym.backends.base import DEVICE_FEATURES
from placement_gym.backends.profiles import memory_need
from placement_gym.env import strip_padding
from placement_gym.features import bytes_from_edge_features

__all__ = ["HEURISTIC_START", "HEURISTIC_STARTS", "ZERO_SHOT_OVERRIDE", "check_heuristic_start", "cheapest_devices",
           "fit_to_memory", "measure_start_placements", "memory_capacity", "move_large_savings", "override_zero_shot",
           "runs_back_to_base", "start_placements", "transfer_change"]

#: The learned agents' default ``heuristic_start``.
HEURISTIC_START = "measure"
#: The learned agents' default ``zero_shot_override``: an op moves when it saves more than what the move adds on
#: links plus this many per-submodel overheads. Chosen on the TRAIN split
#: (``benchmarks/learned_placer/transfer_saving_rule.py``): on ``ai_pc`` 2 is the only value where every train graph
#: whose optimum mixes devices gains and none is slower; on ``edge`` from the CPU (the trained policies' placement) no
#: train graph is slower at 2, one is at 1.
ZERO_SHOT_OVERRIDE = 2.0
#: Column of ``obs["device_features"]`` with log10 of each device's slowest link in bytes per second.
LINK_FEATURE = DEVICE_FEATURES.index("log10_link_Bps")
#: Column of ``obs["device_features"]`` with log10 of each device's memory in bytes (12: unbounded).
MEMORY_FEATURE = DEVICE_FEATURES.index("log10_memory_bytes")


def _runnable(cost: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """(N, D) bool the devices each op may take: `mask` (None: those with a finite cost), or every device for an op
    that none can run (the env reports it)."""
    allowed = np.isfinite(cost) if mask is None else np.asarray(mask, dtype=bool)
    return allowed | ~allowed.any(1, keepdims=True)


def cheapest_devices(cost: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """(N,) int64 every op on the device where it alone runs fastest: the argmin of `cost` (N, D) seconds over the
    devices that can run the op (`mask` (N, D) bool; None: those with a finite cost), over every device for an op
    that none can run (the env reports it). The heuristic start's last placement, the ``cheapest`` baseline's and
    the local search's far move (`agents.search.local_search.BlockSearch.cheapest`)."""
    cost = np.asarray(cost, dtype=np.float64)
    return np.argmin(np.where(_runnable(cost, mask), cost, np.inf), axis=1).astype(np.int64)


def _each_device_alone(allowed: np.ndarray, cheapest: np.ndarray) -> list[np.ndarray]:
    """D (N,) int64 placements: every op on device d where `allowed` (N, D) says it can run, else on its `cheapest`
    device (the heuristic start's first placements, the re-based override's starts)."""
    return [np.where(allowed[:, d], d, cheapest).astype(np.int64) for d in range(allowed.shape[1])]


def _on_links(edge_bytes: np.ndarray, device: np.ndarray, other: np.ndarray, link: np.ndarray) -> np.ndarray:
    """(E,) seconds each tensor spends on links between its ends' devices `device` and `other` (E,): bytes over the
    slower of the two devices' slowest links `link` (D,) bytes/s; 0 where both ends are on one device."""
    return np.where(device != other, edge_bytes / np.minimum(link[device], link[other]), 0.0)


def _live_bytes(n: int, src: np.ndarray, dst: np.ndarray, edge_bytes: np.ndarray) -> np.ndarray:
    """(n,) bytes live across each op position: of the tensors u -> w (u < w) produced before it and consumed after
    it (u + 1 .. w - 1; a difference array)."""
    forward = src < dst
    live = np.zeros(n + 1, dtype=np.float64)
    np.add.at(live, src[forward] + 1, edge_bytes[forward])
    np.add.at(live, dst[forward], -edge_bytes[forward])
    return np.cumsum(live)[:-1]


def move_large_savings(placement: np.ndarray, cost: np.ndarray, mask: np.ndarray | None,
                       threshold_s: float, added_s: "np.ndarray | None" = None) -> np.ndarray:
    """(N,) int64: `placement` (N,) with every op whose own time on its cheapest device (`cheapest_devices`) is
    more than `threshold_s` seconds (plus what the move adds, `added_s` (N,) seconds, e.g. `transfer_change` to
    the cheapest devices; None: nothing) below its time where `placement` puts it moved there; the other ops
    stay. An op on a device that cannot run it saves "infinitely" much: it always moves. `cost` (N, D) seconds
    and `mask` (N, D) bool as for `cheapest_devices`. The zero-shot override's rule (`override_zero_shot`) and
    the saving-rule diagnostic's (``benchmarks/learned_placer/transfer_saving_rule.py``)."""
    return _moves_and_gain(placement, cost, mask, threshold_s, added_s)[0]


def _moves_and_gain(placement: np.ndarray, cost: np.ndarray, mask: np.ndarray | None, threshold_s: float,
                    added_s: "np.ndarray | None") -> tuple[np.ndarray, float]:
    """`move_large_savings`'s placement, and the seconds its moves are estimated to save: the sum over the moved
    ops of their saving less what each adds and less `threshold_s` (the submodel overheads a move costs), over the
    ops whose saving is finite (an op moved off a device that cannot run it is not a saving to compare)."""
    placement = np.asarray(placement, dtype=np.int64)
    cost = np.asarray(cost, dtype=np.float64)
    allowed = np.isfinite(cost) if mask is None else np.asarray(mask, dtype=bool)
    cheapest = cheapest_devices(cost, allowed)
    allowed_cost = np.where(allowed, cost, np.inf)
    ops = np.arange(len(placement))
    saving = allowed_cost[ops, placement] - allowed_cost[ops, cheapest]
    if added_s is not None:
        saving = saving - np.asarray(added_s, dtype=np.float64)
    moved = saving > threshold_s
    net = saving[moved & np.isfinite(saving)] - threshold_s
    return np.where(moved, cheapest, placement).astype(np.int64), float(net.sum())


def transfer_change(placement: np.ndarray, to: np.ndarray, edge_index: np.ndarray, edge_bytes: np.ndarray,
                    link_Bps: np.ndarray) -> np.ndarray:
    """(N,) seconds: for each op i, how much longer tensors spend on links if i alone moved from ``placement[i]``
    to ``to[i]`` (the other ops where `placement` puts them): its own input and output tensors (more where they now
    cross devices, less where they stop crossing) and, where it moves, the tensors live across it (produced before
    it and consumed after it in the topological order, which the ops' order is): the move splits its device's run
    of ops into two submodels with i's between them, and HETERO hands those tensors from the first to the second
    (the simulator charges them on the link: moving one convolution off the CPU of ``edge`` U-Net-m costs several
    times more in those tensors than in its own). A tensor costs bytes / the slower of the two
    devices' slowest links (what ``obs["device_features"]`` says of them); link latencies are not observed.

    Args:
        placement, to: (N,) ints, device per op now and after its move.
        edge_index: (2, E) producer and consumer op of each tensor; edge_bytes: (E,) its bytes.
        link_Bps: (D,) bytes per second of each device's slowest link.
    """
    placement, to = np.asarray(placement, dtype=np.int64), np.asarray(to, dtype=np.int64)
    src, dst = np.asarray(edge_index, dtype=np.int64)
    link = np.asarray(link_Bps, dtype=np.float64)
    edge_bytes = np.asarray(edge_bytes, dtype=np.float64)
    change = np.zeros(len(placement), dtype=np.float64)
    for op, other in ((dst, src), (src, dst)):  # each tensor counts for its consumer and for its producer
        np.add.at(change, op, _on_links(edge_bytes, to[op], placement[other], link)
                  - _on_links(edge_bytes, placement[op], placement[other], link))
    live = _live_bytes(len(placement), src, dst, edge_bytes)
    return change + np.where(to != placement, live / link[placement], 0.0)


def runs_back_to_base(placement: np.ndarray, cost: np.ndarray, mask: np.ndarray, base: int, threshold_s: float,
                      edge_index: np.ndarray, edge_bytes: "np.ndarray | None" = None,
                      link_Bps: "np.ndarray | None" = None) -> np.ndarray:
    """(N,) int64: `placement` (N,) with every run of consecutive ops (in op order, which is topological) it puts
    together on one device other than `base` moved to `base`, unless the run's own time there is lower by more than
    what the run adds plus `threshold_s` seconds: the time on links of the tensors that cross its ends (less what
    they would take from `base`), and of the tensors between two ops on `base` that are live across it (the run
    splits `base`'s submodel in two; `transfer_change`'s reasoning). The override's rule for a group of ops, the
    other way round (`move_large_savings`): a run off the main device must pay for itself. Every run is judged
    against `placement` as given; a run with an op `base` cannot run stays. `cost` (N, D) seconds, `mask` (N, D)
    bool; `edge_index` (2, E), `edge_bytes` (E,) and `link_Bps` (D,) as for `transfer_change` (None: no link
    terms)."""
    placement = np.asarray(placement, dtype=np.int64)
    off = placement != base
    if not off.any():
        return placement
    n = len(placement)
    # Run ids: a new run starts where an op off `base` follows an op on another device (or opens the graph).
    starts = off & np.r_[True, placement[1:] != placement[:-1]]
    run = np.where(off, np.cumsum(starts) - 1, -1)
    n_runs = int(starts.sum())
    ops = np.arange(n)
    pays = np.zeros(n_runs)
    np.add.at(pays, run[off], (cost[ops, base] - cost[ops, placement])[off])
    if edge_bytes is not None and link_Bps is not None and np.size(edge_index):
        src, dst = np.asarray(edge_index, dtype=np.int64)
        edge_bytes, link = np.asarray(edge_bytes, dtype=np.float64), np.asarray(link_Bps, dtype=np.float64)
        for inner, outer in ((src, dst), (dst, src)):  # a tensor counts for each end that is in a run
            ends = (run[inner] >= 0) & (run[inner] != run[outer])
            other = placement[outer[ends]]
            now = _on_links(edge_bytes[ends], placement[inner[ends]], other, link)
            from_base = _on_links(edge_bytes[ends], np.full_like(other, base), other, link)
            np.add.at(pays, run[inner[ends]], from_base - now)
        # Tensors between two ops on `base` live across a run's first op (they cannot end inside it: its ops are
        # off `base`), as in `transfer_change`.
        on_base = np.where(~off[src] & ~off[dst], edge_bytes, 0.0)
        pays -= _live_bytes(n, src, dst, on_base)[starts] / link[base]
    can_return = np.ones(n_runs, dtype=bool)
    np.logical_and.at(can_return, run[off], mask[off, base])
    back = can_return & (pays <= threshold_s)
    return np.where(off & back[np.maximum(run, 0)], base, placement).astype(np.int64)


def override_zero_shot(placement: np.ndarray, obs: Mapping[str, Any], overheads: float,
                       rebase: bool = True, consolidate: bool = True) -> np.ndarray:
    """(N,) int64: a policy's `placement` (N,) of the graph of `obs` with every op moved to its cheapest device
    whose own time there is lower by more than what the move adds: the change in its tensors' time on links
    (`transfer_change`, from ``edge_index``, ``edge_features`` and the devices' link bandwidths in
    ``device_features``; 0 where the observation lacks them) plus `overheads` per-submodel overheads
    (``obs["submodel_overhead"]``) (`move_large_savings` on ``node_device_cost`` and ``action_mask``; module
    docstring). `placement` unchanged when `overheads` is 0, when the observation says nothing of the overhead
    (absent or 0: the real backend unless told) and for a node-by-node observation (one op's decision, not a
    placement). A padded multi-graph observation is read as its graph alone (`placement_gym.env.strip_padding`).

    With `rebase`, a `placement` on one device b (every op b can run) may start from another device d instead:
    when the moves from d are estimated to save more than those from b (`_moves_and_gain`), by more than d's
    total time exceeds b's (each device's sum of ``node_device_cost``, what the whole-graph cost term of the
    policies' device head reads, `agents.nn.device_head.graph_cost_inputs`). The policy's base device is
    kept wherever the moves would not change which device is faster in that estimate: its device head weighs
    every device's total, but not what the override gains from each (``ai_pc`` U-Net-l: the GPU alone is a little
    faster than the CPU, but the moves from the CPU save far more than those from the GPU).

    With `consolidate`, first every run of consecutive ops the policy put off its main device (the one holding most
    ops) that does not pay for itself goes back to it (`runs_back_to_base`, at the same threshold): a policy
    trained over many graphs split ``paper`` U-Net-s, whose two devices alone are nearly equal, into runs on both
    and made it much slower than either."""
    overhead = float(np.asarray(obs.get("submodel_overhead", [0.0])).reshape(-1)[0])
    if overheads == 0 or overhead == 0 or "current_node" in obs:
        return placement
    graph = strip_padding(obs)
    cost = np.asarray(graph["node_device_cost"], dtype=np.float64)
    mask = _runnable(cost, graph.get("action_mask"))
    cheapest = cheapest_devices(cost, mask)
    link_Bps = edge_bytes = None
    if "edge_features" in graph and "device_features" in graph:
        link_Bps = 10.0 ** np.asarray(graph["device_features"], dtype=np.float64)[:, LINK_FEATURE]
        edge_bytes = bytes_from_edge_features(graph["edge_features"])

    def override(start: np.ndarray) -> tuple[np.ndarray, float]:
        added = None if link_Bps is None else transfer_change(start, cheapest, graph["edge_index"], edge_bytes,
                                                              link_Bps)
        return _moves_and_gain(start, cost, mask, overheads * overhead, added)

    placement = np.asarray(placement, dtype=np.int64)
    base = int(np.bincount(placement, minlength=cost.shape[1]).argmax())
    if consolidate:
        placement = runs_back_to_base(placement, cost, mask, base, overheads * overhead, graph["edge_index"],
                                      edge_bytes, link_Bps)
    moved, gain = override(placement)
    if not rebase or not np.all(placement[mask[:, base]] == base):
        return moved
    singles = _each_device_alone(mask, cheapest)
    totals = [float(cost[np.arange(len(start)), start].sum()) for start in singles]
    estimate = totals[base] - gain
    for d, start in enumerate(singles):
        if d == base:
            continue
        moved_d, gain_d = override(start)
        if gain_d > gain and totals[d] - gain_d < estimate:
            moved, gain, estimate = moved_d, gain_d, totals[d] - gain_d
    return moved


def memory_capacity(obs: Mapping[str, Any]) -> np.ndarray:
    """(D,) float64 bytes each device's memory holds, from ``obs["device_features"]`` (its log10; 1e12 where
    unbounded), less a millionth: log10 in float32 rounds the capacity by ~1e-7 of itself, either way. inf where
    the feature is 0 or less: a backend that does not describe its devices gives zeros (`describe_devices`), which
    say nothing of memory (not "one byte")."""
    log10_bytes = np.asarray(obs["device_features"], dtype=np.float64)[:, MEMORY_FEATURE]
    return np.where(log10_bytes > 0, 10.0 ** log10_bytes * (1 - 1e-6), np.inf)


def _best_window(saving: np.ndarray, memory: np.ndarray, capacity: float) -> tuple[int, int]:
    """``(i, j)``: the consecutive ops ``i .. j-1`` with the largest summed `saving` (N,) whose weights plus largest
    working set (`memory` (N, 2), ``node_memory_bytes``) fit in `capacity` bytes ((0, 0) when no op fits alone).
    For each start i the ends that fit are ``i+1 .. end(i)``, and end(i) never decreases with i: two monotone
    deques give the window's largest working set and its best end (the largest prefix saving), so O(N)."""
    n = len(saving)
    total_saving = np.concatenate([[0.0], np.cumsum(saving)])
    total_weights = np.concatenate([[0.0], np.cumsum(memory[:, 0])])
    working = memory[:, 1]
    peaks: deque[int] = deque()  # ops of the window, their working sets decreasing
    ends: deque[int] = deque()  # ends of the window, their prefix savings decreasing
    best, window, j = -np.inf, (0, 0), 0
    for i in range(n):
        j = max(j, i)
        for queue, first in ((peaks, i), (ends, i + 1)):
            while queue and queue[0] < first:
                queue.popleft()
        while j < n and total_weights[j + 1] - total_weights[i] + max(working[peaks[0]] if peaks else 0.0,
                                                                      working[j]) <= capacity:
            while peaks and working[peaks[-1]] <= working[j]:
                peaks.pop()
            peaks.append(j)
            j += 1
            while ends and total_saving[ends[-1]] <= total_saving[j]:
                ends.pop()
            ends.append(j)
        if ends and total_saving[ends[0]] - total_saving[i] > best:
            best, window = total_saving[ends[0]] - total_saving[i], (i, ends[0])
    return window


def fit_to_memory(placement: np.ndarray, rest: np.ndarray, cost: np.ndarray, memory: np.ndarray,
                  capacity: np.ndarray) -> np.ndarray:
    """(N,) int64: `placement` (N,) with every device whose memory it exceeds (weights of its ops plus the largest
    working set of one, `placement_gym.backends.profiles.memory_need`) keeping only the window of consecutive ops
    (topological order) that saves most over their `rest` device and fits, its other ops moved to `rest` (N,).
    A window, not the ops that save most per byte: ops left out one by one would leave islands on the device, a
    submodel and two crossings each (on ``edge`` ResNet-50 a window on the small-memory accelerator, the rest on
    the GPU, is close to the best known placement). `cost` (N, D) seconds (the saving of an op is its `rest` device's
    time less its time on the device), `memory` (N, 2) bytes (``obs["node_memory_bytes"]``), `capacity` (D,)
    bytes. Devices are fitted in index order, each from the placement the previous ones left."""
    placement = np.asarray(placement, dtype=np.int64).copy()
    ops = np.arange(len(placement))
    for d in range(len(capacity)):
        on = placement == d
        if memory_need(memory, placement, len(capacity))[d] <= capacity[d] or np.all(rest[on] == d):
            continue  # it fits, or `rest` has nowhere else for its ops
        saving = np.where(on, cost[ops, rest] - cost[:, d], 0.0)
        i, j = _best_window(saving, np.where(on[:, None], memory, 0.0), float(capacity[d]))
        outside = on.copy()
        outside[i:j] = False
        placement[outside] = rest[outside]
    return placement


def start_placements(obs: Mapping[str, Any]) -> list[np.ndarray]:
    """The distinct (N,) int64 placements the heuristic start measures for one graph's observation, in order: each
    device alone (ops it cannot run on their cheapest device instead), then every op on its cheapest device.
    Where the observation says what the ops need in memory (``node_memory_bytes``) and a device cannot hold what a
    placement puts on it (``device_features``' memory bytes; measuring it would only report the failure), that
    device keeps a window of consecutive ops that fits (`fit_to_memory`) and the others go where they run best
    without it: for a device alone, on the other device that holds the whole model and is fastest alone (the ops
    the device cannot run too); for the cheapest devices, each on its cheapest device among those that hold what
    that placement gives them.

    Args:
        obs: a one-graph observation with ``node_device_cost`` (N, D) and optionally ``action_mask`` (N, D) bool,
            ``node_memory_bytes`` (N, 2) and ``device_features`` (D, K).
    """
    cost = np.asarray(obs["node_device_cost"], dtype=np.float64)
    mask = _runnable(cost, obs.get("action_mask", np.ones(cost.shape, dtype=bool)))
    cheapest = cheapest_devices(cost, mask)
    candidates = _each_device_alone(mask, cheapest) + [cheapest]
    if "node_memory_bytes" in obs and "device_features" in obs:
        memory = np.asarray(obs["node_memory_bytes"], dtype=np.float64)
        capacity = memory_capacity(obs)
        n, d = cost.shape
        alone = candidates[:d]
        holds_all = memory_need(memory, np.stack(alone), d)[np.arange(d), np.arange(d)] <= capacity
        totals = np.array([cost[np.arange(n), start].sum() for start in alone])
        for device in np.flatnonzero(~holds_all):
            others = [o for o in range(d) if o != device and holds_all[o]]
            rest = alone[min(others, key=lambda o: totals[o])] if others else \
                cheapest_devices(cost, mask & (np.arange(d) != device))
            # The ops `device` cannot run join the rest too (not their cheapest device: an island each).
            candidates[device] = fit_to_memory(np.where(mask[:, device], device, rest), rest, cost, memory, capacity)
        fits = memory_need(memory, cheapest, d) <= capacity  # (D,) the devices that hold what `cheapest` gives them
        candidates[d] = fit_to_memory(cheapest, cheapest_devices(cost, mask & fits), cost, memory, capacity)
    distinct, seen = [], set()
    for placement in candidates:
        key = placement.tobytes()
        if key not in seen:
            seen.add(key)
            distinct.append(placement)
    return distinct


def measure_start_placements(run, obs: Mapping[str, Any], seed: int | None = None) -> int:
    """Measure `start_placements(obs)` through ``run.env`` (a `agents.core.loop.RunLoop` on one graph; `obs` is
    the graph as the agent's actions address it, coarsened on a coarsened run), within the budget. Returns the
    placements measured."""
    if not isinstance(run.env.action_space, spaces.MultiDiscrete):  # a node-by-node env given directly
        return 0
    spent = 0
    for placement in start_placements(obs):
        if run.done:
            break
        run.env.reset(seed=seed if spent == 0 else None)
        run.env.step(placement)
        spent += 1
    return spent
