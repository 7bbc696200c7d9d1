"""Env variants built on `DevicePlacementEnv`.

`NodePlacementWrapper` (registered as ``DevicePlacementNode-v0``) is the Placeto-style node-by-node variant:
instead of choosing a device for every op at once, each step re-places ONE node (an op, or a group of ops)
given the current placement, visiting the nodes in topological order. The reward of a step is the latency
improvement it caused, so an episode's rewards add up to (start latency - final latency) / reference latency.

Every step measures one complete placement with the wrapped env's backend (it counts in
``placements_measured``). On the simulated backend that costs microseconds to milliseconds; on the real
OpenVINO backend it is a compile and a benchmark per step, so an episode over all 376 ops of BERT is
376 compiles and benchmarks: use ``backend="simulated"``, or ``groups=`` to re-place groups of ops, on the real one.

>>> import gymnasium as gym, placement_gym
>>> env = gym.make("DevicePlacementNode-v0", model="resnet", groups=16)   # 16 steps per episode

`CoarsenedPlacement` shows a big graph as at most ``max_nodes`` clusters of ops (`placement_gym.coarsen`): the
agent places clusters, every op gets its cluster's device. The learned agents put it around graphs above their
``coarsen_above`` themselves (`agents.core.run`); the node-by-node variant works on top of it (its nodes are
then clusters, or groups of clusters).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .coarsen import MAX_NODES, Coarsening
from .env import DevicePlacementEnv, as_device_indices

STARTS = ("reference", "random", "best")


def contiguous_groups(n_ops: int, n_groups: int) -> np.ndarray:
    """(N,) int64: split the topological order 0..N-1 into `n_groups` contiguous chunks of (nearly) equal size."""
    if not 1 <= n_groups <= n_ops:
        raise ValueError(f"n_groups must be between 1 and the number of ops ({n_ops}), got {n_groups}")
    return (np.arange(n_ops, dtype=np.int64) * n_groups) // n_ops


def group_action_mask(groups: np.ndarray, action_mask: np.ndarray, n_groups: int | None = None) -> np.ndarray:
    """(G, D) bool: the devices that can run every op of each group (the AND of its ops' rows of `action_mask`),
    or every device where none can run the whole group (the env reports or repairs such a placement; the placer
    still has to choose). What a placer that moves a group as one may choose for it.

    Args:
        groups: (N,) int64 group of every op, 0..G-1.
        action_mask: (N, D) which device can run each op (``obs["action_mask"]``).
        n_groups: G (default: the largest label + 1).
    """
    groups = np.asarray(groups, dtype=np.int64)
    action_mask = np.asarray(action_mask) > 0
    allowed = np.ones((int(groups.max()) + 1 if n_groups is None else n_groups, action_mask.shape[1]), dtype=bool)
    np.logical_and.at(allowed, groups, action_mask)
    return allowed | ~allowed.any(1, keepdims=True)


def _as_groups(groups: Any, n_ops: int) -> np.ndarray:
    """Normalise the ``groups=`` argument to (N,) int64 labels 0..G-1, numbered in order of first op."""
    if groups is None:
        return np.arange(n_ops, dtype=np.int64)
    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool):
        return contiguous_groups(n_ops, int(groups))
    labels = np.asarray(groups)
    if labels.shape != (n_ops,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"groups must be None (one node per op), an int (that many contiguous chunks of the topological "
            f"order) or an integer array of shape ({n_ops},) giving each op's group; got {labels.dtype} {labels.shape}"
        )
    # Relabel so that group k is the k-th group met in topological order (the order the episode visits them).
    _, first_index, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first_index), dtype=np.int64)
    rank[np.argsort(first_index)] = np.arange(len(first_index))
    return rank[inverse.reshape(-1)]


class NodePlacementWrapper(gym.Wrapper):
    """Re-place one node per step (Placeto-style) on top of a `DevicePlacementEnv`.

    A *node* is an op (``groups=None``) or a group of ops that always share a device (``groups=``). An
    episode starts from a placement (``start``), then visits the nodes in topological order, ``sweeps`` times;
    each step the action is the device for the current node, the new placement is measured, and the reward is
    ``(previous latency - new latency) / reference latency`` (a failed placement counts as the wrapped env's
    ``failure_penalty`` x reference latency, as in the wrapped env).

    Observation: the wrapped env's Dict (N = ops, its ``placement`` is the current placement) plus::

        current_node  (N,) float32  1 for the ops of the node placed by the next action, else 0
                                    (all 0 once the episode is over)
        visited       (N,) float32  1 for the ops of nodes already placed in this episode

    Action: ``Discrete(D)``, the device of the current node: one integer (a Python int, a numpy integer or a 0-d
    integer array); anything else, one-element lists and arrays included, is refused with a ``ValueError``.
    info: the wrapped env's step info (``placement``: the whole (N,) int64 placement measured, latency_s,
    speedup, ok, error, ...) plus ``node`` (the node just placed) and ``start_latency_s``; reset's info has
    ``latency_s`` of the start placement.

    Args:
        env: a `DevicePlacementEnv` (possibly wrapped by gymnasium's own wrappers), or a `CoarsenedPlacement`,
            whose clusters then play the part of the ops (N = clusters, `groups` are groups of clusters). Its
            ``horizon`` is ignored: the episode length is ``sweeps`` x number of nodes.
        groups: None (every op is a node), an int G (the topological order cut into G contiguous chunks) or
            an (N,) integer array of group labels (e.g. co-location groups).
        sweeps: how many times an episode visits every node.
        start: ``"reference"`` (the env's reference placement: every op on the first device that runs them all and
            holds the model; already measured), ``"random"`` (a random device per
            node among those that can run all its ops, measured at reset: one placement; the reference where an
            agent's run has no placement left to measure it) or ``"best"`` (the best placement measured so far:
            `incumbent`, not measured again; a random start until there is one). ``reset(options={"placement":
            p})`` starts from ``p``, measured.

    Attributes:
        incumbent: ``(placement, latency_s)`` the fastest placement that worked among those measured through this
            wrapper (its starts and steps; drift-corrected latency) or offered to it (`start_from_best`), the
            start of a ``"best"`` episode; None before any.
    """

    def __init__(self, env: gym.Env, groups: Any = None, sweeps: int = 1, start: str = "reference") -> None:
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, DevicePlacementEnv):
            raise TypeError(f"NodePlacementWrapper wraps a DevicePlacementEnv, got {type(base).__name__}")
        if base.multi_graph:  # its groups and spaces are built for one graph
            raise ValueError(f"NodePlacementWrapper needs a single-graph env; this one draws from {base.models}: "
                             "wrap one env per graph instead")
        if int(sweeps) < 1:
            raise ValueError(f"sweeps must be >= 1, got {sweeps}")
        if start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}, got {start!r}")
        self.base: DevicePlacementEnv = base
        # Whose whole placements the nodes are made of: the env's ops, or a coarsened env's clusters.
        self.layer: "DevicePlacementEnv | CoarsenedPlacement" = env if isinstance(env, CoarsenedPlacement) else base
        n = int(self.layer.observation_space["placement"].shape[0])
        self.groups = _as_groups(groups, n)
        self.n_nodes = int(self.groups.max()) + 1
        self.sweeps, self.start = int(sweeps), start
        self.episode_length = self.n_nodes * self.sweeps

        self.observation_space = spaces.Dict({
            **self.layer.observation_space.spaces,
            "current_node": spaces.Box(0.0, 1.0, (n,), np.float32),
            "visited": spaces.Box(0.0, 1.0, (n,), np.float32),
        })
        self.action_space = spaces.Discrete(base.n_devices)

        self._placement = np.zeros(n, dtype=np.int64)  # set by reset
        self._visited = np.zeros(n, dtype=np.float32)
        self._latency = float("nan")
        self._start_latency = float("nan")
        self._t = 0
        self.incumbent: tuple[np.ndarray, float] | None = None

    # ------------------------------------------------------------------ what agents read
    @property
    def graph(self):
        return self.base.graph

    @property
    def n_devices(self) -> int:
        return self.base.n_devices

    @property
    def device_names(self) -> list[str]:
        return self.base.device_names

    @property
    def placements_measured(self) -> int:
        """Placements measured by the wrapped env (one per step, plus one per random start)."""
        return self.base.placements_measured

    @property
    def current_node(self) -> int | None:
        """Index of the node the next action places, or None when the episode is over."""
        return self._t % self.n_nodes if self._t < self.episode_length else None

    @property
    def placement(self) -> np.ndarray:
        """(N,) int64 copy of the current placement (of the clusters, on a `CoarsenedPlacement`)."""
        return self._placement.copy()

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = dict(options or {})
        start_placement = options.pop("placement", None)
        _, info = self.env.reset(seed=seed, options=options or None)
        self._t = 0
        self._visited = np.zeros(len(self.groups), dtype=np.float32)
        reference = self.base.reference.latency_s
        incumbent = self.incumbent if start_placement is None and self.start == "best" else None
        if start_placement is None and incumbent is None and self.start != "reference" and self._can_measure():
            # One device per node (the ops of a node always share a device), uniform among the devices that can run
            # every op of the node (all of them where none can): a start the masked policy could have built itself.
            allowed = group_action_mask(self.groups, self.base.observation()["action_mask"][:self.base.graph.n_ops],
                                        self.n_nodes)
            scores = np.where(allowed, self.np_random.random(allowed.shape), -1.0)
            start_placement = scores.argmax(1)[self.groups]
        if incumbent is not None:  # measured already
            self._placement, self._latency = incumbent[0].copy(), incumbent[1]
        elif start_placement is None:
            self._placement, self._latency = self.layer.reference_placement.copy(), reference
        else:
            self._placement = self.layer.validate_action(start_placement)
            _, _, _, _, step_info = self.env.step(self._placement)  # measures the start placement
            self._latency = float(step_info["latency_corrected_s"])
            self._offer(self._placement, self._latency, step_info["ok"])
        self._start_latency = self._latency
        return self._observation(), {**info, "latency_s": self._latency}

    def start_from_best(self, placement: np.ndarray, latency_s: float) -> None:
        """Start every later episode from the best placement so far (``start="best"``), `placement` (N,) measured
        elsewhere at `latency_s` (drift-corrected, e.g. through the env below this wrapper) unless this wrapper
        has measured a faster one: a fine-tuning run's episodes search around the policy's own placement
        (`agents.search.attach.SearchLayer.start_fine_tuning`)."""
        self.start = "best"
        self._offer(self.layer.validate_action(placement), float(latency_s), ok=True)

    def _offer(self, placement: np.ndarray, latency_s: float, ok: bool) -> None:
        """Keep `placement` as the `incumbent` if it worked (`ok`) and is faster than the incumbent."""
        if ok and (self.incumbent is None or latency_s < self.incumbent[1]):
            self.incumbent = (placement.copy(), latency_s)

    def _can_measure(self) -> bool:
        """Whether a random start may be measured: not when the env below is an agent's run whose budget is spent
        (its recorder says ``placements_left``; e.g. SB3 resets after the last placement of the budget, and
        ``learn(env, 0)``). Then the episode starts from the reference, measured already."""
        try:
            return self.env.get_wrapper_attr("placements_left") > 0
        except AttributeError:  # not under a run: always
            return True

    def step(self, action):
        if self._t >= self.episode_length:
            raise RuntimeError("the episode is over (every node was placed): call reset()")
        device = self._validate_device(action)
        node = self._t % self.n_nodes
        mask = self.groups == node
        placement = self._placement.copy()
        placement[mask] = device
        # The wrapped env's own termination (its horizon) is ignored: this wrapper decides the episode length.
        _, _, _, _, info = self.env.step(placement)
        latency = float(info["latency_corrected_s"])  # drift-corrected, in units of the first reference
        reward = (self._latency - latency) / self.base.reference.latency_s
        self._placement, self._latency = placement, latency
        self._offer(placement, latency, info["ok"])
        self._visited[mask] = 1.0
        self._t += 1
        info = {**info, "node": node, "start_latency_s": self._start_latency}
        return self._observation(), float(reward), self._t >= self.episode_length, False, info

    # ------------------------------------------------------------------ helpers
    def node_mask(self, node: int) -> np.ndarray:
        """(N,) bool: the ops of `node`."""
        return self.groups == node

    def _validate_device(self, action) -> int:
        """The device index `action` names, or a one-line ``ValueError`` naming the accepted forms.

        Accepted: one integer, as a Python int, a numpy integer scalar or a 0-d integer array (or 0-d CPU torch
        tensor): what Gymnasium's ``Discrete.contains`` accepts, and like the whole-placement env's check
        (`as_device_indices`) any integer dtype, unsigned ones included. Refused: one-element sequences
        (``[c]``, ``[[c]]``, ``np.array([c])``, ``torch.tensor([c])``: an action is not a placement), bools
        (``Discrete`` would take Python's ``True`` as 1), floats, timedeltas and other non-integers."""
        d = self.base.n_devices
        expected = (f"one integer device index in 0..{d - 1} (the current node's device) as a Python int, a numpy "
                    "integer or a 0-d integer array")
        return int(as_device_indices(action, [()], d, expected))

    def _observation(self) -> dict[str, np.ndarray]:
        obs = self.layer.observation()  # fresh copies of the static arrays
        obs["placement"] = self._placement.copy()
        current = np.zeros(len(self.groups), dtype=np.float32)
        if self._t < self.episode_length:
            current[self.groups == self._t % self.n_nodes] = 1.0
        obs["current_node"] = current
        obs["visited"] = self._visited.copy()
        return obs


def place_node_by_node(obs: dict, groups: np.ndarray, choose_device, sweeps: int = 1) -> np.ndarray:
    """A whole placement built the way a `NodePlacementWrapper` episode builds it, without measuring anything.

    Starting from ``obs["placement"]`` (a `DevicePlacement-v0` observation), visit the nodes (groups of ops)
    in order, `sweeps` times, and give each the device ``choose_device(node_obs)`` returns for the node-level
    observation (``obs`` plus ``current_node`` and ``visited``, as the wrapper would show it). This is how a
    node-by-node policy (Placeto, PPO on the node variant) is deployed on the whole-placement env.

    Args:
        obs: the whole-placement observation.
        groups: (N,) int64 node of every op (0..G-1, episode order).
        choose_device: ``node_obs -> int`` device for the current node.
        sweeps: visits of every node.

    Returns:
        (N,) int64 placement.
    """
    placement = np.array(obs["placement"], dtype=np.int64, copy=True)
    visited = np.zeros(placement.shape[0], dtype=np.float32)
    for _ in range(int(sweeps)):
        for node in range(int(groups.max()) + 1):
            mask = groups == node
            node_obs = {**obs, "placement": placement.copy(), "current_node": mask.astype(np.float32),
                        "visited": visited.copy()}
            placement[mask] = int(choose_device(node_obs))
            visited[mask] = 1.0
    return placement


class SqrtLatencyReward(gym.Wrapper):
    """Reward ``-sqrt(latency / reference latency)``: Mirhoseini et al.'s (2017) ``-sqrt(runtime)``, made
    unit-free. Faster placements get HIGHER rewards (their public baseline code multiplied log-probabilities by
    ``+sqrt(latency)`` and so reinforced slow placements). A failed placement counts as the wrapped env's
    penalty latency. Works on the whole-placement env and on the node-by-node variant."""

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        reward = -float(np.sqrt(info["latency_s"] / info["reference_latency_s"]))
        return obs, reward, terminated, truncated, info


def make_node_env(groups: Any = None, sweeps: int = 1, start: str = "reference", **env_kwargs) -> NodePlacementWrapper:
    """``gym.make("DevicePlacementNode-v0", ...)``: a `DevicePlacementEnv` built from `env_kwargs`
    (``model``, ``devices``, ``backend``, ...) wrapped in `NodePlacementWrapper(groups, sweeps, start)`."""
    return NodePlacementWrapper(DevicePlacementEnv(**env_kwargs), groups=groups, sweeps=sweeps, start=start)


class CoarsenedPlacement(gym.Wrapper):
    """A `DevicePlacementEnv` seen as at most `max_nodes` clusters of ops (`placement_gym.coarsen`).

    Observation: the env's Dict with M clusters in place of N ops (`Coarsening.observation`: node features
    averaged, ``node_device_cost`` summed, edges between clusters with their bytes summed, ``action_mask`` the
    devices that can run the whole cluster, ``placement`` the majority device of each cluster, ``device_features``
    unchanged). The static arrays are coarsened once, here; a step only recomputes ``placement``.
    Action: ``MultiDiscrete([D] * M)``, a device per cluster; every op gets its cluster's device
    (`Coarsening.expand`) and the wrapped env measures that (N,) placement.
    info: the wrapped env's, unchanged: ``info["placement"]`` is the full (N,) placement measured.
    ``reset(options={"placement": p})`` starts from the coarse placement `p` (M,).

    Args:
        env: a `DevicePlacementEnv`, possibly wrapped (e.g. by the run loop's recorder).
        max_nodes: M, clusters at most (a graph of at most M ops keeps one cluster per op).
    """

    def __init__(self, env: gym.Env, max_nodes: int = MAX_NODES) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, DevicePlacementEnv):
            raise TypeError(f"CoarsenedPlacement wraps a DevicePlacementEnv, got {type(base).__name__}")
        self.base: DevicePlacementEnv = base
        self.coarsening = Coarsening.of(base.observation(), max_nodes)
        self._static = self.coarsening.observation(base.observation())
        self.observation_space = self.coarsening.observation_space(base.observation_space)
        self.action_space = spaces.MultiDiscrete(np.full(self.coarsening.n_clusters, base.n_devices, dtype=np.int64))

    @property
    def reference_placement(self) -> np.ndarray:
        """(M,) int64: the wrapped env's reference placement per cluster (every cluster on its device)."""
        return self.coarsening.majority(self.base.reference_placement, self.base.n_devices)

    def validate_action(self, action) -> np.ndarray:
        """(M,) int64 copy of a coarse `action`, or a one-line ``ValueError`` saying what is expected
        (`as_device_indices`, the whole-placement env's check)."""
        m, d = self.coarsening.n_clusters, self.base.n_devices
        expected = f"an integer array of shape ({m},) with values in 0..{d - 1} (one device per cluster)"
        return as_device_indices(action, [(m,)], d, expected, name="coarse action")

    def observation(self, placement: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The coarse observation (fresh arrays) for the full (N,) `placement` (default: the env's current one)."""
        obs = {k: v.copy() for k, v in self._static.items()}
        full = self.base.observation()["placement"] if placement is None else placement
        obs["placement"] = self.coarsening.majority(full, self.base.n_devices)
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = dict(options or {})
        if "placement" in options:
            options["placement"] = self.coarsening.expand(self.validate_action(options["placement"]))
        obs, info = self.env.reset(seed=seed, options=options or None)
        return self.observation(obs["placement"]), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(self.coarsening.expand(self.validate_action(action)))
        return self.observation(obs["placement"]), reward, terminated, truncated, info
