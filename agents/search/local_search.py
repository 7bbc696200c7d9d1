"""Cost-guided block moves: a local search around the best placement, for a fine-tuning run's few placements.

Why. A policy trained over graphs whose optimum is one device (most of the ``ai_pc`` train split) learns a device
bias that is the same for every op (GO's logits on U-Net-m favour the CPU over the next device by nearly the
same margin on every one of its ops), so neither its samples nor a higher sampling temperature
propose the few ops a mixed optimum moves (U-Net's convolutions to the NPU); and 50 placements are three PPO
updates, too few to learn it. The observation does say what each op costs on each device
(``obs["node_device_cost"]``): `BlockSearch` proposes placements that differ from the best one found so far by
moving one or a few contiguous blocks of ops (in topological order) to another device, the blocks and devices
drawn by what the costs say the move saves.

    levels      blocks of N, N/2, ..., 1 op(s) (the halving of `agents.search.coarse_to_fine.split_groups`,
                from one group to one op per group): a whole-graph move (another single device), contiguous
                cuts, and single ops;
    block b     drawn in its level with weight ``gain_b + floor``, gain_b = the block's cost on its current
                devices minus its cost on its cheapest single device (seconds, transfers ignored);
    device d    drawn with weight ``exp(-beta log(cost_bd / min_d' cost_bd'))`` among the devices the block is
                not already all on; ops that cannot run on d (``action_mask``) keep their device;
    merge       after a batch, the moves of every proposal that beat the batch's starting placement are
                applied together (fastest first) and measured first in the next batch (independent gains, e.g.
                one convolution per U-Net stage, add up in one placement).

The settings (the probability of single-op moves, batches of 4, boundary moves) were chosen on ``ai_pc`` U-Net-l,
whose optimum mixes devices, by the best of a short fine-tuning's placements from the all-CPU placement: drawing
single-op moves often beat drawing them less often or drawing levels uniformly.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch

from agents.nn.groups import split_groups
from agents.nn.refine import neighbour_device_shares  # re-exported: the refinement stage's, which the search shares
from placement_gym.backends.profiles import memory_need

from .heuristic_start import cheapest_devices, memory_capacity

if TYPE_CHECKING:
    from agents.core.loop import RunLoop

__all__ = ["AroundBest", "BlockSearch", "neighbour_device_shares", "search_around_best"]


class BlockSearch:
    """Proposals around a placement: block moves guided by per-op device costs (module docstring).

    Args:
        cost: (N, D) seconds of each op alone on each device (``obs["node_device_cost"]``).
        mask: (N, D) bool which device can run each op (``obs["action_mask"]``), or None (all).
        seed: the proposals' random generator.
        edge_index: (2, E) int64 edges between the ops (``obs["edge_index"]``), for boundary moves; None: none.
        boundary: probability that a move is a boundary move (`refine`'s idea, here as a proposal): an op with
            graph neighbours on another device moves to the device most of them are on, which joins islands
            of a device (a move the costs alone never favour: it saves transfers and submodels, not compute).
        fine: probability that a block move acts on a single op (else a block of a coarser level, uniformly).
        moves: mean number of block moves per proposal (at least 1: 1 + Poisson(moves - 1)).
        beta: how sharply a block's device follows its cost (0: uniform over the other devices).
        memory: (N, 2) bytes each op needs on its device (``obs["node_memory_bytes"]``: weights, working set),
            with `capacity` (D,) bytes each device holds, or None: no memory limit. A proposal that would put
            more on a device than it holds (`placement_gym.backends.profiles.memory_need`; measured, it would
            only fail) gives back ops at the edge of that device's region (with a graph neighbour on another
            device, `edge_index`), the ones that save least per byte of weights first, to that neighbour's
            device, until it fits (ops the proposal moved there go last): a block moved onto a full accelerator
            is a swap with ops at its region's edge (``edge`` ResNet-50: its last stage's shortcut convolution
            on the small-memory accelerator in place of the main branch's last ops, closer to the best known).
    """

    def __init__(self, cost: np.ndarray, mask: np.ndarray | None = None, seed: int | None = None,
                 edge_index: np.ndarray | None = None, boundary: float = 0.3, fine: float = 0.8,
                 moves: float = 1.5, beta: float = 3.0, memory: np.ndarray | None = None,
                 capacity: np.ndarray | None = None) -> None:
        cost = np.asarray(cost, dtype=np.float64)
        if cost.ndim != 2 or cost.shape[0] < 1 or cost.shape[1] < 2:
            raise ValueError(f"cost must be (N ops, D >= 2 devices), got shape {cost.shape}")
        for name, value in (("fine", fine), ("boundary", boundary)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value}")
        if moves < 1:
            raise ValueError(f"moves (mean block moves per proposal) must be >= 1, got {moves}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        self.n_ops, self.n_devices = cost.shape
        self.mask = np.ones(cost.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if self.mask.shape != cost.shape:
            raise ValueError(f"mask shape {self.mask.shape} differs from the cost's {cost.shape}")
        # An unsupported (op, device) has no meaningful cost: never count it as a saving.
        self.cost = np.where(self.mask, np.nan_to_num(cost, nan=np.inf, posinf=np.inf), np.inf)
        self.fine, self.moves, self.beta, self.boundary = float(fine), float(moves), float(beta), float(boundary)
        self.memory = None if memory is None else np.asarray(memory, dtype=np.float64)
        self.capacity = None if capacity is None else np.asarray(capacity, dtype=np.float64)
        if (self.memory is None) != (self.capacity is None):
            raise ValueError("memory (N, 2) and capacity (D,) go together: give both or neither")
        if self.memory is not None and (self.memory.shape, self.capacity.shape) != ((self.n_ops, 2), (self.n_devices,)):
            raise ValueError(f"memory must be ({self.n_ops}, 2) and capacity ({self.n_devices},), got "
                             f"{self.memory.shape} and {self.capacity.shape}")
        self.edge_index = None if edge_index is None else torch.as_tensor(np.asarray(edge_index, dtype=np.int64))
        self.rng = np.random.default_rng(seed)
        # Blocks of every level, coarse to fine: 1, 2, 4, ... groups, then one per op.
        self.levels: list[np.ndarray] = []
        groups, count = np.zeros(self.n_ops, dtype=np.int64), 1
        while True:
            self.levels.append(groups)
            if count >= self.n_ops:
                break
            groups, count = split_groups(self.n_ops, count)

    @classmethod
    def of_observation(cls, obs: "Mapping[str, Any]", seed: int | None = None, **options: Any) -> "BlockSearch":
        """A search on one graph's observation: its per-op costs, action mask and edges (``node_device_cost``,
        ``action_mask``, ``edge_index``), with `options` for the settings."""
        if "node_device_cost" not in obs:
            raise ValueError("the cost-guided search reads obs['node_device_cost'] (per-op seconds on each device); "
                             "this env's observation has none")
        if "node_memory_bytes" in obs and "device_features" in obs:
            options = {"memory": obs["node_memory_bytes"], "capacity": memory_capacity(obs), **options}
        return cls(obs["node_device_cost"], obs.get("action_mask"), seed=seed, edge_index=obs["edge_index"], **options)

    def _boundary_move(self, placement: np.ndarray) -> bool:
        """Move one op at a device boundary to its neighbours' majority device (in place); False: no boundary."""
        if self.edge_index is None or self.edge_index.numel() == 0:
            return False
        shares = neighbour_device_shares(torch.as_tensor(placement).view(1, -1), self.edge_index,
                                         self.n_devices)[0].numpy()  # (N, D)
        shares = np.where(self.mask, shares, 0.0)  # only devices the op can run on
        own = shares[np.arange(self.n_ops), placement]
        best = shares.argmax(1)
        candidates = np.flatnonzero((best != placement) & (shares.max(1) > own))
        if candidates.size == 0:
            return False
        op = int(self.rng.choice(candidates))
        placement[op] = best[op]
        return True

    def _move(self, placement: np.ndarray) -> None:
        """One move applied to `placement` (N,) in place: a boundary move (probability `boundary`, where there is a
        boundary) or a block move."""
        if self.boundary > 0 and self.rng.random() < self.boundary and self._boundary_move(placement):
            return
        n, d = self.n_ops, self.n_devices
        coarse = len(self.levels) - 1
        level = coarse if coarse == 0 or self.rng.random() < self.fine else int(self.rng.integers(coarse))
        groups = self.levels[level]
        n_groups = int(groups[-1]) + 1
        current = self.cost[np.arange(n), placement]  # (N,) an op that cannot run where it is: inf
        current = np.where(np.isfinite(current), current, 0.0)
        # What each block would cost on each device: its ops that can run there, the rest where they are.
        effective = np.where(self.mask, self.cost, current[:, None])  # (N, D)
        block_cost = np.zeros((n_groups, d))
        np.add.at(block_cost, groups, effective)
        block_now = np.bincount(groups, weights=current, minlength=n_groups)
        gain = np.maximum(block_now - block_cost.min(1), 0.0)
        weight = gain + 1e-3 * max(float(block_now.mean()), 1e-12)  # every block stays possible
        block = int(self.rng.choice(n_groups, p=weight / weight.sum()))
        members = groups == block
        costs = np.maximum(block_cost[block], 1e-15)  # ops that cost nothing (a test graph's) must not give log(0)
        relative = np.log(costs / costs.min())
        score = np.exp(-self.beta * np.minimum(relative, 50.0))
        # Not a move: a device none of the block's ops can run on, or that all those that can are already on.
        score[[dev for dev in range(d) if np.all(placement[members & self.mask[:, dev]] == dev)]] = 0.0
        if not score.sum() > 0:
            return
        device = int(self.rng.choice(d, p=score / score.sum()))
        movable = members & self.mask[:, device]
        placement[movable] = device

    def fit_memory(self, placement: np.ndarray, base: np.ndarray) -> None:
        """Give back ops of every device `placement` (N,) int64 overfills, in place (the `memory` argument says
        how); ops where it differs from `base` (N,) (what a proposal or a sample moved) go last. No memory: as is."""
        if self.memory is None:
            return
        src, dst = np.zeros((2, 0), dtype=np.int64) if self.edge_index is None else self.edge_index.numpy()
        for _ in range(self.n_ops):
            over = np.flatnonzero(memory_need(self.memory, placement, self.n_devices) > self.capacity)
            if over.size == 0:
                return
            d = int(over[0])
            # The ops of d at its region's edge (a graph neighbour elsewhere), each with that neighbour's device.
            on = placement == d
            across = np.full(self.n_ops, -1)
            for inner, outer in ((src, dst), (dst, src)):
                edge = on[inner] & ~on[outer]
                across[inner[edge]] = placement[outer[edge]]
            if not (across >= 0).any():  # d holds every op (a whole-graph move): any op may go, to its next device
                others = np.where(np.arange(self.n_devices) == d, np.inf, self.cost)
                across = np.where(on & np.isfinite(others.min(1)), others.argmin(1), -1)
            ends = np.flatnonzero(across >= 0)
            ends = ends[self.mask[ends, across[ends]]]
            if ends.size == 0:
                return  # nowhere to give back to: measured, it fails
            kept = ends[placement[ends] == base[ends]]  # prefer ops that were there before the proposal
            ends = kept if kept.size else ends
            loss = self.cost[ends, across[ends]] - self.cost[ends, d]
            op = ends[int(np.argmin(loss / (self.memory[ends, 0] + 1.0)))]
            placement[op] = across[op]

    def propose(self, base: np.ndarray, k: int) -> list[np.ndarray]:
        """`k` placements (N,) int64, each `base` (N,) with 1 + Poisson(moves - 1) block moves."""
        base = np.asarray(base, dtype=np.int64)
        if base.shape != (self.n_ops,):
            raise ValueError(f"base placement has shape {base.shape}, expected ({self.n_ops},)")
        out = []
        for _ in range(k):
            for _ in range(10):  # moves can undo each other (a boundary move back): draw again, a few times
                placement = base.copy()
                for _ in range(1 + int(self.rng.poisson(self.moves - 1.0))):
                    self._move(placement)
                self.fit_memory(placement, base)
                if not np.array_equal(placement, base):
                    break
            out.append(placement)
        return out

    def cheapest(self) -> np.ndarray:
        """(N,) int64 every op on its own cheapest device (among those that can run it): the placement the costs
        alone suggest, ignoring transfers; a candidate far from a single-device start in one step."""
        return cheapest_devices(self.cost, self.mask)

    @staticmethod
    def merge(base: np.ndarray, improving: list[tuple[float, np.ndarray]]) -> np.ndarray | None:
        """`base` with the changes of every placement in `improving` ((latency, placement) pairs that beat
        `base`) applied together, the fastest one's changes winning on the ops they share; None for fewer than
        two (nothing to combine)."""
        if len(improving) < 2:
            return None
        base = np.asarray(base, dtype=np.int64)
        merged = base.copy()
        for _, placement in sorted(improving, key=lambda pair: pair[0], reverse=True):
            changed = placement != base
            merged[changed] = placement[changed]
        return merged


class AroundBest:
    """Measures `BlockSearch` proposals around a run's best placement so far, in batches, each batch led by the
    merge of the previous batch's improving proposals (`BlockSearch.merge`). The merge is kept between calls, so
    the search can be spent in one call (GO's fine-tuning, `search_around_best`) or a few placements at a time
    beside a policy's own samples (the trainers' ``search_proposals``, `agents.algos.reinforce`).

    Args:
        search: the proposals (`BlockSearch`) of the run's graph.
        batch: proposals per batch (the base moves to the run's best after each batch). The default 4 was
            chosen on ``ai_pc`` U-Net-l (module docstring): steadier across seeds than 1, closer to the optimum
            than 8.
        cheapest_first: the first batch is led by every op on its cheapest device (`BlockSearch.cheapest`).
    """

    def __init__(self, search: BlockSearch, batch: int = 4, cheapest_first: bool = False) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self.search, self.batch = search, int(batch)
        self.merged: np.ndarray | None = search.cheapest() if cheapest_first else None  # measured first, as a merge is

    def measure(self, run: "RunLoop", placements: int,
                start: np.ndarray | None = None) -> tuple[list[float], list[np.ndarray]]:
        """Measure up to `placements` proposals through ``run.env`` (a one-graph run) around ``run.best_action``
        (`start` (N,) until one was measured), within the budget.

        Returns:
            latencies: each proposal's ``info["latency_corrected_s"]``, in the order measured.
            placements: the (N,) int64 proposals (as the run's actions address the graph).
        """
        env = run.env
        latencies: list[float] = []
        measured: list[np.ndarray] = []
        while len(measured) < placements and not run.done:
            if run.best_action is None and start is None:
                raise ValueError("no placement to search around: the run has measured none and no start was given")
            base = np.asarray(start if run.best_action is None else run.best_action, dtype=np.int64)
            base_latency = run.best_latency_s
            candidates = self.search.propose(base, min(self.batch, placements - len(measured), run.remaining))
            if self.merged is not None:
                candidates[0] = self.merged
            improving = []
            for placement in candidates:
                env.reset()
                _, _, _, _, info = env.step(placement)
                latency = float(info["latency_corrected_s"])
                latencies.append(latency)
                measured.append(placement)
                if info["ok"] and latency < base_latency:
                    improving.append((latency, placement))
                if run.done:
                    break
            self.merged = self.search.merge(base, improving)
        return latencies, measured


def search_around_best(run: "RunLoop", search: BlockSearch, placements: int, start: np.ndarray,
                       batch: int = 4, cheapest_first: bool = False) -> int:
    """Measure up to `placements` proposals of `search` through ``run.env`` (a one-graph run), in batches of
    `batch` around the run's best placement so far (`start` (N,) until one was measured): `AroundBest` in one
    call. Returns the placements measured."""
    return len(AroundBest(search, batch, cheapest_first).measure(run, placements, start)[1])
