"""`DevicePlacement-v0`: place every operator of a model on a device; the reward comes from its latency.

One step = one complete placement (a device per compute op), measured by a backend: the real one compiles
the model with OpenVINO HETERO and times inference, the simulated one runs a calibrated cost model.

Observation (a `spaces.Dict` of fixed-shape arrays, accepted by Stable-Baselines3)::

    node_features  (N, F) float32   features of each compute op (`placement_gym.features`)
    edge_index     (2, E) int64     producer -> consumer pairs, sources before targets in topological order
    edge_features  (E, 1) float32   log10(1 + bytes) / 10 of the tensors on each edge
    placement      (N,)   int64     the current placement (the reference placement after reset)
    action_mask    (N, D) int8      1 where device d can run op i (operator support of the device)
    device_features (D, K) float32  what each device is (`placement_gym.backends.base.DEVICE_FEATURES`: log10
                                    peak FLOP/s, memory bandwidth, memory capacity, link bandwidth, launch cost)
    node_device_cost (N, D) float32 estimated seconds of op i alone on device d (simulated: what the cost model
                                    charges; real: measured by per-op profiling); `UNSUPPORTED_COST_S` where the
                                    device cannot run the op
    node_memory_bytes (N, 2) float32 what each op needs in its device's memory: its weights (bytes kept resident)
                                    and its working set (bytes of the tensors it reads and writes); a device
                                    needs the weights of its ops plus the largest working set of one of them
                                    (`placement_gym.backends.profiles.memory_need`), which the simulated backend
                                    checks against the device's memory (``device_features``' log10 memory
                                    bytes; 12 = unbounded)
    submodel_overhead (1,) float32  estimated seconds each HETERO submodel beyond the first adds (a cut between
                                    devices; transfers not included): simulated: the profile's
                                    ``boundary_overhead_s``; real: the backend's ``submodel_overhead_s`` option
                                    (``placement-gym calibrate`` fits it); 0 where unknown

Listing the devices in another order permutes the D axes of ``action_mask``, ``device_features`` and
``node_device_cost`` consistently, so a policy that reads them (rather than device indices) can follow a device
wherever it is listed.
Action: ``MultiDiscrete([D] * N)``: the device index of every compute op. ``env.action_masks()`` returns the
flattened (N * D,) bool mask sb3-contrib's ``MaskablePPO`` asks for.
Objective (``objective=``): ``"latency"`` (one synchronous inference) or ``"throughput"`` (steady-state seconds
per inference with several requests in flight, 1 / throughput); ``info["latency_s"]`` is the seconds per
inference of the objective, so every reward below is relative throughput under ``"throughput"``.
Reward (``reward=``)::

    ``"speedup"``      reference latency / latency - 1 (0 for the reference placement; default)
    ``"neg_latency"``  -latency in seconds
    ``"inv_latency"``  1 / latency in seconds (the paper's reward)

Info (step): ``placement`` ((N,) int64, the placement measured), ``latency_s`` (as measured),
``latency_raw_s`` (the median of the timed runs as timed, before the OpenVINO backend's paired-reference
correction), ``latency_interval_s`` (95% interval of the median), ``speedup`` (vs the nearest reference
measurement),
``latency_corrected_s`` (the latency at the machine speed of the first reference measurement),
``reference_latency_s`` (the nearest reference), ``spread_s``, ``compile_s``, ``n_submodels``, ``ok``, ``error``,
``simulated``, ``breakdown``, ``objective``, ``throughput_per_s`` (1 / ``latency_s``).
Reference placement: every op on the first listed device that can run every op and whose memory holds the
model (``"CPU"`` on the presets that list it first); ``env.reference_device`` names it.
Drift correction (real backend): the OpenVINO backend pairs every timed run with a run of the reference
placement by default (``paired_reference``), so each latency is already relative to the machine's current
speed. A backend that times placements alone gets the coarser form: every ``reference_every`` placements the
reference placement is measured afresh, and rewards are taken relative to that nearest reference (``speedup``)
or from the corrected latency, so a machine that slows down or speeds up during a run does not shift the reward.
A placement that fails to compile or run (an op on a device that cannot run it, a device out of memory, a
compile error) counts as ``failure_penalty`` x the reference latency and is reported in ``info["ok"]`` /
``info["error"]``; the episode goes on. With ``unsupported="repair"`` an op placed on a device that cannot run
it is moved to the fastest device that can (``node_device_cost``; the NPU's ops too when it shares the model with
another device, which OpenVINO's HETERO plugin cannot run) before measuring, ``info["placement"]`` is
what was measured and ``info["repaired_ops"]`` how many ops were moved: for agents that do not read the mask. Episodes end after ``horizon`` placements.

Multi-graph env (``model=[spec, ...]`` or ``model="dataset:train"`` / ``"dataset:val"`` / ``"dataset:test"`` /
``"dataset:all"``, `placement_gym.models.dataset`): each ``reset`` draws one graph with ``self.np_random`` (so
``reset(seed=s)`` makes the sequence reproducible); ``reset(options={"model": name})`` picks one. ``env.models``
lists the names, ``env.graph`` is the current graph, ``info["model"]`` names it (every env sets it, on reset and
step). Each graph keeps its own arrays (computed on its first draw), reference placement and latency, drift
correction and measurement cache. The observation is padded to the largest graph (Nmax ops, Emax edges)::

    node_features, placement, node_device_cost, node_memory_bytes   padded rows 0
    edge_index, edge_features                    padding edges (0, 0) with feature 0
    action_mask                                  padded rows allow device 0 only (their choice is ignored)
    node_mask (Nmax,) int8, edge_mask (Emax,) int8   1 = real (padding comes after the real nodes and edges)

Action: ``MultiDiscrete([D] * Nmax)``; the padded positions are ignored, and an action of the current graph's
length N (what an agent's ``predict`` returns) is accepted too. ``info["placement"]`` is (N,). A single-graph env
has no masks and no padding. The native vector env and the node-by-node wrapper take single-graph envs only.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .backends import Backend, Measurement, make_backend
from .backends.base import DEVICE_FEATURES, describe_devices, shareable_devices, submodel_overhead
from .backends.profiles import op_memory_bytes
from .backends.published import published_backend_of
from .features import DEFAULT_FAMILIES, edge_features, node_features
from .graph import ComputationGraph
from .models import load_graph
from .models.dataset import DATASET_PREFIX, dataset_names

logger = logging.getLogger(__name__)

REWARDS = ("speedup", "neg_latency", "inv_latency")
#: Drift correction on a real backend: the reference placement is re-measured after this many placements.
DRIFT_EVERY = 25
#: What a placement putting an op on a device that cannot run it does (``unsupported=``).
UNSUPPORTED_MODES = ("fail", "repair")
#: ``node_device_cost`` of an op on a device that cannot run it (seconds; finite, so networks can read it).
UNSUPPORTED_COST_S = 1.0
#: The observation's per-op arrays (N rows): padded in a multi-graph env, cut back by `strip_padding`.
NODE_KEYS = ("node_features", "placement", "action_mask", "node_device_cost", "node_memory_bytes")


def placement_observation_space(n: int, e: int, f: int, d: int, k: int, masks: bool = False) -> spaces.Dict:
    """The Dict observation space of N nodes, E edges, F node features, D devices and K device features (the
    module docstring says what each key holds); `masks` adds ``node_mask`` (N,) and ``edge_mask`` (E,) (padded
    multi-graph observations). One definition for the env and its coarsened view (`placement_gym.coarsen`)."""
    spaces_ = {
        "node_features": spaces.Box(-np.inf, np.inf, (n, f), np.float32),
        "edge_index": spaces.Box(0, max(n - 1, 0), (2, e), np.int64),
        "edge_features": spaces.Box(0.0, np.inf, (e, 1), np.float32),
        "placement": spaces.Box(0, d - 1, (n,), np.int64),
        "action_mask": spaces.MultiBinary([n, d]),
        "device_features": spaces.Box(-np.inf, np.inf, (d, k), np.float32),
        "node_device_cost": spaces.Box(0.0, np.inf, (n, d), np.float32),
        "node_memory_bytes": spaces.Box(0.0, np.inf, (n, 2), np.float32),
        "submodel_overhead": spaces.Box(0.0, np.inf, (1,), np.float32),
    }
    if masks:
        spaces_.update(node_mask=spaces.MultiBinary(n), edge_mask=spaces.MultiBinary(e))
    return spaces.Dict(spaces_)


class DevicePlacementEnv(gym.Env):
    """Device placement of a model's operators as a Gymnasium env (see the module docstring).

    Args:
        model: a zoo name (``"resnet"``, ``"inception"``, ``"bert"``, ``"tiny_branch"``, ...), ``"synthetic:N"`` or
            ``"synthetic:N:SEED"`` (a DNN-like graph of N ops without an OpenVINO model: simulated backend only;
            `placement_gym.models.synthetic`), a path to an OpenVINO IR ``.xml`` or ONNX file, an ``ov.Model``, or
            a ready `ComputationGraph`; a published benchmark (``"tarnawski:throughput-inputs/LayerGraphs/..."``,
            a Tarnawski et al. ``.json`` input or a DOPPLER ``.txt`` graph: `placement_gym.models.published`), which
            is priced by its authors' cost model (`placement_gym.backends.published`, chosen automatically;
            DOPPLER's device count is ``devices=N``, default 4); or a multi-graph spec: a list of these, or
            ``"dataset:SPLIT"`` (SPLIT one of ``train``, ``val``, ``test``, ``all``; see the module docstring).
        devices: device specs (``["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]``) or ``"auto"``.
        backend: ``"openvino"``, ``"simulated"``, ``"auto"``, or a `Backend` instance.
        reward: one of ``REWARDS``.
        horizon: placements per episode.
        features: node-feature families (`placement_gym.features.FEATURE_FAMILIES`; None: the default ones, so
            ``features=agent.feature_families`` serves an agent that asks for none).
        failure_penalty: a failed placement counts as this many times the reference latency.
        warmup, repeats: shorthands for the real backend's untimed and timed inferences per placement (its
            defaults, 3 and 20, apply when not given; with ``backend="auto"`` they are dropped if it simulates).
        backend_options: more keyword arguments for the backend (``make_backend``): each setting is given once,
            here or as one of the shorthands. None of these apply to a ready `Backend` instance.
        profile: the simulated backend's profile: a preset name (``"paper"``, ``"ai_pc"``, ``"server"``,
            ``"edge"``: `placement_gym.backends.profiles.PRESETS`), a profile JSON file from ``placement-gym
            calibrate``, or a `placement_gym.backends.profiles.Profile`. Giving one with ``backend="auto"``
            selects the simulated backend.
        objective: ``"latency"`` or ``"throughput"`` (see the module docstring); None keeps the backend's
            (``"latency"`` unless a ready backend instance says otherwise).
        unsupported: ``"fail"`` (an op on a device that cannot run it fails the placement) or ``"repair"``
            (it is moved to its fastest device that can run it; see the module docstring).
        reference_every: drift correction: re-measure the reference placement after this many placements
            (not counted as placements); None: every `DRIFT_EVERY` on a real backend that times placements
            alone, never on one that pairs every run with the reference (``paired_reference``, the OpenVINO
            backend's default: each measurement is already relative to it) or on a simulated one (its
            latencies do not drift); 0: never.
        render_mode: ``"ansi"`` (render returns text), ``"human"`` (render prints it) or ``"rgb_array"`` (render
            returns an (H, W, 3) uint8 picture of the placement).
    """

    metadata = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 1}

    def __init__(
        self,
        model: Any = "resnet",
        devices: "str | Sequence[str]" = "auto",
        backend: "str | Backend" = "auto",
        reward: str = "speedup",
        horizon: int = 1,
        features: Sequence[str] | None = DEFAULT_FAMILIES,
        failure_penalty: float = 10.0,
        warmup: int | None = None,
        repeats: int | None = None,
        backend_options: dict | None = None,
        render_mode: str | None = None,
        profile: Any = None,
        reference_every: int | None = None,
        objective: str | None = None,
        unsupported: str = "fail",
    ) -> None:
        if unsupported not in UNSUPPORTED_MODES:
            raise ValueError(f"unsupported must be one of {UNSUPPORTED_MODES}, got {unsupported!r}")
        self.unsupported = unsupported
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; choose one of {REWARDS}")
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        if failure_penalty <= 1.0:
            raise ValueError(f"failure_penalty must be > 1 (a failure must be worse than the reference), got {failure_penalty}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        specs = model_list(model)
        #: True when `model` named several graphs (a list or ``"dataset:SPLIT"``): each reset draws one.
        self.multi_graph = specs is not None
        graphs = [_as_graph(spec) for spec in (specs if self.multi_graph else [model])]
        #: Every graph the env can draw, by name, in the order given.
        self.graphs: dict[str, ComputationGraph] = {}
        for graph in graphs:
            if graph.name in self.graphs:
                raise ValueError(f"two of the models given are both named {graph.name!r}; give distinct graphs")
            self.graphs[graph.name] = graph
        # A published benchmark is priced by its authors' cost model, chosen from the graph.
        given = {k: v for k, v in dict(profile=profile, warmup=warmup, repeats=repeats, objective=objective).items()
                 if v is not None}
        self.backend = published_backend_of(graphs, backend, devices, **{**(backend_options or {}), **given}) or \
            _backend(backend, devices, backend_options, **given)
        self.reward_name, self.horizon, self.failure_penalty = reward, horizon, failure_penalty
        # None: the default families (what an agent without feature needs, ``feature_families = None``, asks for)
        self.feature_families = DEFAULT_FAMILIES if features is None else tuple(features)
        self.render_mode = render_mode
        if reference_every is not None and (not isinstance(reference_every, int) or reference_every < 0):
            raise ValueError(f"reference_every must be None (automatic), 0 (never) or a number of placements, "
                             f"got {reference_every!r}")
        #: Drift correction: re-measure the reference placement after this many placements (0: never).
        corrects_itself = self.backend.simulated or getattr(self.backend, "paired_reference", False)
        self.reference_every = (0 if corrects_itself else DRIFT_EVERY) if reference_every is None else reference_every
        #: How often the reference was re-measured for drift correction (not counted as placements).
        self.reference_remeasures = 0

        # Per-graph arrays and reference state, computed on a graph's first draw (on the real backend that
        # profiles the graph per op, so it is not done upfront for graphs that may never be drawn).
        self._data: dict[str, _GraphData] = {}
        self._g = self._graph_data(graphs[0].name)
        self._submodel_overhead = np.array([submodel_overhead(self.backend)], dtype=np.float32)  # one per backend
        d, k = self.n_devices, len(DEVICE_FEATURES)
        # Multi-graph observations are padded to the largest graph (`observation`).
        n = max(g.n_ops for g in graphs)
        e = max(g.n_edges for g in graphs)
        f = self._g.node_features.shape[1]
        self.observation_space = placement_observation_space(n, e, f, d, k, masks=self.multi_graph)
        self.action_space = spaces.MultiDiscrete(np.full(n, d, dtype=np.int64))
        self._n_max, self._e_max = n, e

        self._placement = self.reference_placement.copy()
        #: The last step's full `Measurement` (its ``cached`` flag says whether it was re-used). Kept out of
        #: ``info`` with the running count below: gymnasium's checker requires the same info for the same
        #: seed and action, and whether a result came from the cache depends on what ran before.
        self.last_measurement: Measurement | None = None
        self.placements_measured = 0
        self._steps = 0

    # ------------------------------------------------------------------------------------ properties
    @property
    def graph(self) -> ComputationGraph:
        """The current graph (in a multi-graph env, the one the last reset drew)."""
        return self._g.graph

    @property
    def models(self) -> list[str]:
        """The names of the graphs the env can draw (one for a single-graph env)."""
        return list(self.graphs)

    @property
    def reference_placement(self) -> np.ndarray:
        """(N,) int64: every op of the current graph on `reference_device` (see `reference`)."""
        return self._g.reference_placement

    @property
    def device_names(self) -> list[str]:
        return list(self.backend.device_names)

    @property
    def n_devices(self) -> int:
        return len(self.backend.device_names)

    @property
    def objective(self) -> str:
        """``"latency"`` or ``"throughput"``: what ``info["latency_s"]`` is the seconds per inference of."""
        return getattr(self.backend, "objective", "latency")

    @property
    def reference_device(self) -> str:
        """The device the reference placement puts every op on."""
        return self.device_names[int(self.reference_placement[0])] if self.graph.n_ops else self.device_names[0]

    @property
    def reference(self) -> Measurement:
        """The current graph's reference measurement (`reference_of`); measured on first use, a side effect."""
        return self._measure_reference(self._g)

    def reference_of(self, model: str) -> Measurement:
        """The reference placement's measurement of graph `model` (a name in `models`), measured once on first
        use: every op on the first listed device that can run every op (`action_mask`) and holds the model (its
        measurement succeeds); a ValueError naming each device's failure where none can."""
        return self._measure_reference(self._graph_data(model))

    def _measure_reference(self, data: "_GraphData") -> Measurement:
        if data.reference is None:
            errors = []
            for device in np.flatnonzero(data.action_mask.all(axis=0)):
                placement = np.full(data.graph.n_ops, device, dtype=np.int64)
                measurement = self.backend.measure(data.graph, placement)
                if measurement.ok:
                    data.reference_placement, data.reference = placement, measurement
                    break
                errors.append(f"{self.device_names[device]}: {str(measurement.error).splitlines()[0][:300]}")
            else:
                # Bad input (a profile's or a published file's memory too small for the graph), not a defect:
                # a ValueError, so the CLI refuses it in one line (exit 2) naming each device's limit and need.
                raise ValueError(
                    f"no single device can run all of {data.graph.name!r}, so there is no reference placement "
                    f"({'; '.join(errors) or 'every device lacks support for some op'}); expected a device that "
                    "supports every op and holds the whole graph in its memory (raise its memory or add one)"
                )
        return data.reference

    def _graph_data(self, model: str) -> "_GraphData":
        """The arrays and reference state of graph `model`, computed on first use and kept."""
        if model not in self.graphs:
            raise ValueError(f"unknown model {model!r} for this env; it draws from {self.models}")
        if model not in self._data:
            graph, d, k = self.graphs[model], self.n_devices, len(DEVICE_FEATURES)
            n = graph.n_ops
            mask, device_features, cost = describe_devices(self.backend, graph)
            if mask.shape != (n, d) or device_features.shape != (d, k):
                raise ValueError(f"backend {self.backend.name!r} returned an action mask of shape {mask.shape} "
                                 f"and device features of shape {device_features.shape}; expected ({n}, {d}) and "
                                 f"({d}, {k})")
            if not mask.any(axis=1).all():
                i = int(np.flatnonzero(~mask.any(axis=1))[0])
                raise ValueError(f"no device of {self.device_names} can run op {graph.op_names[i]!r} "
                                 f"({graph.op_types[i]}) of {graph.name!r}; add a device that supports it")
            data = _GraphData(
                graph=graph,
                node_features=node_features(graph, self.feature_families),
                edge_features=edge_features(graph.edge_bytes),
                action_mask=mask,
                device_features=device_features,
                node_device_cost=np.where(mask & np.isfinite(cost), cost, UNSUPPORTED_COST_S).astype(np.float32),
                node_memory_bytes=op_memory_bytes(graph).astype(np.float32),
                reference_placement=np.zeros(n, dtype=np.int64),
            )
            if self._data and data.node_features.shape[1] != self._g.node_features.shape[1]:
                raise ValueError(f"{graph.name!r} has {data.node_features.shape[1]} node features, the other graphs "
                                 f"{self._g.node_features.shape[1]}; the feature families must give every graph "
                                 "the same number")
            self._data[model] = data
        return self._data[model]

    def repair(self, placement: np.ndarray) -> tuple[np.ndarray, int]:
        """`placement` with every op on a device that cannot run it moved to its fastest device that can, and
        how many ops were moved. A device outside HETERO (`shareable_devices`: the NPU) sharing the model with
        another device counts as one that cannot run its ops: they move to the devices that may share it."""
        mask = self._g.action_mask
        alone = ~shareable_devices(self.backend)
        if alone.any() and len(np.unique(placement)) > 1:
            mask = mask & ~alone
        bad = ~mask[np.arange(self.graph.n_ops), placement]
        if not bad.any():
            return placement, 0
        allowed_cost = np.where(mask, self._g.node_device_cost, np.inf)
        placement = placement.copy()
        placement[bad] = allowed_cost[bad].argmin(axis=1)
        return placement, int(bad.sum())

    def one_graph(self, model: str) -> "DevicePlacementEnv":
        """A single-graph env on graph `model` (a name in `models`) with this env's backend (shared, so its
        measurement cache and compiled models serve both) and settings: what training over several graphs one
        graph at a time steps (`agents.core.run.train_in_turns`)."""
        if model not in self.graphs:
            raise ValueError(f"unknown model {model!r}; this env draws from {self.models}")
        return DevicePlacementEnv(self.graphs[model], backend=self.backend, reward=self.reward_name,
                                  horizon=self.horizon, features=self.feature_families,
                                  failure_penalty=self.failure_penalty, reference_every=self.reference_every,
                                  unsupported=self.unsupported)

    def action_masks(self) -> np.ndarray:
        """(N * D,) bool: the action mask flattened op by op, as sb3-contrib's ``MaskablePPO`` asks of an env
        with a ``MultiDiscrete([D] * N)`` action space (N = Nmax, padded rows included, in a multi-graph env)."""
        return self.observation()["action_mask"].reshape(-1).astype(bool)

    # ---------------------------------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode from the reference placement (or ``options["placement"]``). A multi-graph env first
        draws its graph with ``self.np_random`` (so ``reset(seed=s)`` makes the sequence of graphs reproducible),
        or takes ``options["model"]`` (a name in `models`)."""
        super().reset(seed=seed)
        options = options or {}
        model = options.get("model")
        if model is None and self.multi_graph:
            model = self.models[int(self.np_random.integers(len(self.graphs)))]
        if model is not None:
            self._g = self._graph_data(model)
        reference = self.reference  # measured first: it decides the reference placement
        start = options.get("placement")
        self._restart(self.reference_placement.copy() if start is None else self.validate_action(start))
        return self.observation(), {"reference_latency_s": reference.latency_s, "devices": self.device_names,
                                    "reference_device": self.reference_device, "model": self.graph.name}

    def _restart(self, placement: np.ndarray) -> None:
        """Begin an episode at `placement` ((N,) int64, kept as it is: the env replaces its placement array, never
        writes into it); the vector env's batched step calls it with each sub-env's read-only row of the sub-envs'
        reference placements."""
        self._placement = placement
        self._steps = 0
        self.last_measurement = None

    def step(self, action):
        placement, repaired = self.begin_step(action)
        return self.end_step(placement, repaired, self.backend.measure(self.graph, placement))

    def begin_step(self, action) -> tuple[np.ndarray, int]:
        """The first half of `step`, before measuring: the (N,) int64 placement to measure for `action`
        (`as_measured`) and how many ops were repaired; re-measures the reference first when drift correction is
        due. `step` = `begin_step`, the backend's measurement, `end_step`; the vector env
        (`placement_gym.vector_env`) measures many sub-envs' placements in one ``measure_many`` in between."""
        placement, repaired = self._as_measured(action)
        if self.reference_every and self._g.since_reference >= self.reference_every:
            self._remeasure_reference()
        self._g.since_reference += 1
        return placement, repaired

    def end_step(self, placement: np.ndarray, repaired: int, measurement: Measurement):
        """The second half of `step`: count `measurement` of `placement` (from `begin_step`) as this episode's
        next placement; returns what `step` returns, ``(observation, reward, terminated, truncated, info)``."""
        self.placements_measured += 1
        self._steps += 1
        self._placement, self.last_measurement = placement, measurement
        info = self._info(placement, measurement)
        info["repaired_ops"] = repaired
        info["model"] = self.graph.name
        terminated = self._steps >= self.horizon
        return self.observation(), self._reward(info), terminated, False, info

    def render(self) -> "str | np.ndarray | None":
        """``"ansi"``: a few lines of text (`summary`); ``"human"``: prints them; ``"rgb_array"``: an
        ``(H, W, 3)`` uint8 picture of the current placement (`placement_gym.render`: the graph in layers, ops
        coloured by device, cut edges marked, the last measurement in the legend)."""
        if self.render_mode == "rgb_array":
            from .render import placement_image

            m = self.last_measurement
            measured = m is not None and m.ok
            return placement_image(
                self.graph, self._placement, self.device_names, simulated=self.backend.simulated,
                latency_s=m.latency_s if measured else None, n_submodels=m.n_submodels if measured else None,
                reference_latency_s=self.reference.latency_s if measured else None)
        text = self.summary()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self.backend.close()

    def measure(self, placement, *, fresh: bool = True) -> Measurement:
        """Measure `placement` outside the episode (no step, no reward, not counted in `placements_measured`),
        as a step would: with ``unsupported="repair"`` after `repair` (`as_measured`).

        ``fresh`` bypasses the backend's measurement cache, so a final placement is reported with a new
        measurement rather than the luckiest of many noisy draws.
        """
        return self.backend.measure(self.graph, self.as_measured(placement), use_cache=not fresh)

    def as_measured(self, action) -> np.ndarray:
        """(N,) int64: the placement a step measures for `action`: validated (`validate_action`) and, with
        ``unsupported="repair"``, repaired (`repair`)."""
        return self._as_measured(action)[0]

    def _as_measured(self, action) -> tuple[np.ndarray, int]:
        placement = self.validate_action(action)
        return self.repair(placement) if self.unsupported == "repair" else (placement, 0)

    # ---------------------------------------------------------------------------------------- helpers
    def validate_action(self, action) -> np.ndarray:
        """(N,) int64 copy of `action` for the current graph, or ``ValueError`` saying what is expected
        (`as_device_indices`: only integer dtypes are placements).

        A multi-graph env also takes an action of the padded length Nmax (what its action space samples) and
        keeps its first N entries (the padded positions are ignored)."""
        n, d = self.graph.n_ops, self.n_devices
        shapes = [(n,), (self._n_max,)] if self.multi_graph else [(n,)]
        lengths = f"({n},)" + (f" or the padded ({self._n_max},)" if self.multi_graph and self._n_max != n else "")
        expected = f"an integer array of shape {lengths} with values in 0..{d - 1} (one device per compute op)"
        return as_device_indices(action, shapes, d, expected, keep=n)

    def observation(self, placement: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The observation of the current graph with `placement` ((N,), default: the current one); padded to
        Nmax nodes and Emax edges in a multi-graph env (see the class docstring)."""
        g = self._g
        # Fresh arrays every call: agents (and gymnasium's checker) may keep or modify what they receive.
        obs = {
            "node_features": g.node_features.copy(),
            "edge_index": g.graph.edge_index.copy(),
            "edge_features": g.edge_features.copy(),
            "placement": (self._placement if placement is None else placement).astype(np.int64),
            "action_mask": g.action_mask.astype(np.int8),
            "device_features": g.device_features.copy(),
            "node_device_cost": g.node_device_cost.copy(),
            "node_memory_bytes": g.node_memory_bytes.copy(),
            "submodel_overhead": self._submodel_overhead.copy(),
        }
        if not self.multi_graph:
            return obs
        n, e = g.graph.n_ops, g.graph.n_edges
        padded = {key: _pad(value, self._n_max, axis=0) for key, value in obs.items()
                  if key in NODE_KEYS}
        # A padded op may only go to device 0: its choice is ignored, and a masked policy then spends no
        # probability (or entropy) on it.
        padded["action_mask"][n:, 0] = 1
        padded["edge_index"] = _pad(obs["edge_index"], self._e_max, axis=1)  # padding edges are (0, 0)
        padded["edge_features"] = _pad(obs["edge_features"], self._e_max, axis=0)
        padded["node_mask"] = _pad(np.ones(n, dtype=np.int8), self._n_max, axis=0)
        padded["edge_mask"] = _pad(np.ones(e, dtype=np.int8), self._e_max, axis=0)
        return {**obs, **padded}

    @property
    def current_reference_s(self) -> float:
        """The reference placement's latency nearest in time: its latest re-measurement (drift correction), else
        the first measurement."""
        current = self._g.current_reference_s
        return self.reference.latency_s if current is None else current

    def _remeasure_reference(self) -> None:
        """Drift correction: measure the current graph's reference placement afresh (a failure keeps the previous
        value). Each graph keeps its own count of placements since its last re-measurement."""
        m = self.backend.measure(self.graph, self.reference_placement, use_cache=False)
        if m.ok:
            self._g.current_reference_s = float(m.latency_s)
        self._g.since_reference = 0
        self.reference_remeasures += 1

    def _reward(self, info: dict) -> float:
        if self.reward_name == "speedup":
            return float(info["speedup"] - 1.0)
        if self.reward_name == "neg_latency":
            return float(-info["latency_corrected_s"])
        return float(1.0 / info["latency_corrected_s"])

    def _info(self, placement: np.ndarray, m: Measurement, references: tuple[float, float] | None = None) -> dict:
        """A step's info for `m`, the measurement of `placement`; `references`: (`current_reference_s`, the first
        reference latency) to score it against, default the env's now."""
        reference, first = (self.current_reference_s, self.reference.latency_s) if references is None else references
        # A failure is scored as if it were `failure_penalty` times slower than the reference.
        latency = m.latency_s if m.ok else self.failure_penalty * reference
        return {
            "placement": placement.copy(),
            "latency_s": latency,
            # Relative to the nearest reference, so a machine that slows down or speeds up does not shift it.
            "speedup": reference / latency,
            "latency_corrected_s": latency * first / reference,
            "reference_latency_s": reference,
            "latency_raw_s": m.raw_latency_s if m.ok else latency,
            "latency_interval_s": m.interval_s,
            "spread_s": m.spread_s,
            "compile_s": m.compile_s,
            "n_submodels": m.n_submodels,
            "ok": m.ok,
            "error": m.error,
            "simulated": m.simulated,
            "breakdown": dict(m.breakdown),
            "objective": self.objective,
            "throughput_per_s": 1.0 / latency,
        }

    def summary(self) -> str:
        """A few lines describing the current placement and its last measurement."""
        counts = np.bincount(self._placement, minlength=self.n_devices)
        kind = "simulated" if self.backend.simulated else f"measured with {self.backend.name}"
        lines = [f"{self.graph.name}: {self.graph.n_ops} ops on {self.n_devices} devices ({kind})"]
        for name, virtual, count in zip(self.device_names, self.backend.virtual_devices, counts):
            lines.append(f"  {name}{' (virtual)' if virtual else ''}: {count} ops")
        if self.last_measurement is not None:
            m = self.last_measurement
            status = f"latency {m.latency_s * 1e3:.2f} ms, speedup x{self.reference.latency_s / m.latency_s:.3f}, {m.n_submodels} submodels" if m.ok else f"FAILED: {m.error}"
            lines.append("  last: " + status)
        return "\n".join(lines)


@dataclass
class _GraphData:
    """One graph's arrays (computed once; `DevicePlacementEnv.observation` hands out copies) and its reference
    state (the reference measurement, its latest drift re-measurement, placements since then)."""

    graph: ComputationGraph
    node_features: np.ndarray  # (N, F) float32
    edge_features: np.ndarray  # (E, 1) float32
    action_mask: np.ndarray  # (N, D) bool
    device_features: np.ndarray  # (D, K) float32
    node_device_cost: np.ndarray  # (N, D) float32
    node_memory_bytes: np.ndarray  # (N, 2) float32
    reference_placement: np.ndarray  # (N,) int64
    reference: Measurement | None = None
    current_reference_s: float | None = None
    since_reference: int = 0


def as_device_indices(action: Any, shapes: Sequence[tuple[int, ...]], n_devices: int, expected: str, *,
                      name: str = "action", keep: int | None = None) -> np.ndarray:
    """`action` as a fresh int64 array of device indices, or a one-line ``ValueError`` "`name` has <what is
    wrong>; expected `expected`". The one action check of every env here: the whole-placement env (N,), its
    vector env (K, N), the node-by-node env () and the coarsened env (M,).

    Accepted: anything ``np.asarray`` reads as an array of one of `shapes` (lists, numpy arrays and scalars,
    Python ints, CPU torch tensors) with an integer dtype (signed or unsigned) and values in 0..n_devices-1.
    Bools, floats (even whole ones), strings, objects (None, ints beyond 64 bits), datetimes and timedeltas (which
    numpy counts as integers) are refused rather than guessed at. `keep`: only the first `keep` entries along the
    first axis are returned and range-checked (a multi-graph env ignores its padded positions)."""
    try:
        array = np.asarray(action)
    except (ValueError, TypeError, RuntimeError) as exc:  # ragged nested lists, a torch tensor needing grad, ...
        reason = " ".join(str(exc).split())  # numpy's and torch's messages on one line
        raise ValueError(f"{name} cannot be read as one array ({reason}); expected {expected}") from None
    if array.shape not in shapes:
        raise ValueError(f"{name} has shape {array.shape}; expected {expected}")
    if array.dtype.kind not in "iu":  # timedelta64 is 'm', datetime64 'M', bool 'b': not device indices
        raise ValueError(f"{name} has dtype {array.dtype}; expected {expected}")
    values = array if keep is None else array[:keep]  # (a 0-d array cannot be sliced)
    indices = values.astype(np.int64, copy=True)
    # One pass for both bounds: a negative index (or a uint64 beyond int64, which wraps negative) reads as a huge
    # unsigned one. The slower checks below only run to word the error.
    if indices.size and indices.view(np.uint64).max() >= n_devices:
        where = ""
        if values.ndim == 2:  # a batch: name the first row at fault
            bad_rows = ((values < 0) | (values >= n_devices)).any(axis=1)
            where = f" (first in row {int(np.flatnonzero(bad_rows)[0])})"
        found = f"value {values.item()}" if values.size == 1 else f"values in {values.min()}..{values.max()}"
        raise ValueError(f"{name} has {found}{where}; expected {expected}")
    return indices


def _pad(array: np.ndarray, size: int, axis: int) -> np.ndarray:
    """`array` zero-padded at the end of `axis` to `size` (a new array)."""
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, size - array.shape[axis])
    return np.pad(array, widths)


def strip_padding(obs: Mapping[str, Any]) -> dict[str, Any]:
    """A multi-graph env's padded observation (with ``node_mask`` / ``edge_mask``) as the single-graph env of its
    graph would show it: node arrays cut to the graph's N ops, edge arrays to its E edges (padding is at the end,
    `DevicePlacementEnv.observation`), the masks dropped. Any other observation is returned as it is."""
    if "node_mask" not in obs:
        return dict(obs)
    n, e = int(np.count_nonzero(obs["node_mask"])), int(np.count_nonzero(obs["edge_mask"]))
    out = {key: value for key, value in obs.items() if key not in ("node_mask", "edge_mask")}
    for key in NODE_KEYS:
        if key in out:
            out[key] = out[key][:n]
    out["edge_index"] = obs["edge_index"][:, :e]
    if "edge_features" in out:
        out["edge_features"] = out["edge_features"][:e]
    return out


def model_list(model: Any) -> list | None:
    """The models a multi-graph `model` argument names (a list or tuple of model specs, or ``"dataset:SPLIT"``:
    `placement_gym.models.dataset.dataset_names`), or None for a single model."""
    if isinstance(model, (list, tuple)):
        if not model:
            raise ValueError("model is an empty list; give at least one model")
        return list(model)
    if isinstance(model, str) and model.strip().lower().startswith(DATASET_PREFIX):
        return dataset_names(model.strip()[len(DATASET_PREFIX):])
    return None


def _as_graph(model: Any) -> ComputationGraph:
    if isinstance(model, (list, tuple)):
        raise TypeError(f"a model list holds single models, not another list: {model!r}")
    return model if isinstance(model, ComputationGraph) else load_graph(model)


def _backend(backend: "str | Backend", devices, options: dict | None, **shorthands) -> Backend:
    """The env's backend: `backend` built by `make_backend` from `devices` and the options (``backend_options``
    plus the shorthands the user gave: ``profile``, ``warmup``, ``repeats``), or a ready `Backend` instance,
    which already has its devices and settings."""
    given = {k: v for k, v in shorthands.items() if v is not None}
    if isinstance(backend, str):
        options = dict(options or {})
        twice = sorted(set(given) & set(options))
        if twice:
            raise ValueError(f"{twice} given both as arguments and in backend_options; give each once")
        return make_backend(backend, devices, **options, **given)
    if options or given:
        raise ValueError(f"the backend instance already has its settings; {sorted({*(options or {}), *given})} "
                         "apply only when the env builds the backend (backend='openvino', 'simulated' or 'auto')")
    if devices != "auto" and [str(d) for d in devices] != list(backend.device_names):
        raise ValueError(f"the backend instance runs on {list(backend.device_names)}, not on the devices given "
                         f"({list(devices)}); leave devices='auto' when passing a backend")
    return make_backend(backend)
