"""`DevicePlacement-v0` as a native Gymnasium vector env: K sub-envs, one batched measurement per step.

``gym.make_vec("DevicePlacement-v0", num_envs=K)`` (or ``vectorization_mode="vector_entry_point"``) builds a
`DevicePlacementVectorEnv`: K `DevicePlacementEnv` sub-envs on one graph that share one backend, so that
``step(actions)`` prices all K placements with ONE ``Backend.measure_many`` call (the simulated backend prices
them together with array operations; a backend without a batched form measures them one after another).

One graph only: a multi-graph ``model`` (a list, ``"dataset:SPLIT"``) is refused (its sub-envs would draw
different graphs, which one batched measurement cannot price); use ``gym.make`` for it.

Autoreset: ``AutoresetMode.SAME_STEP`` (``metadata["autoreset_mode"]``). Gymnasium's default, ``NEXT_STEP``,
spends every second ``step`` of a one-step env on resets that drop the actions and return reward 0; here a
sub-env whose episode ends is reset within the same ``step``, so every ``step`` measures exactly one placement per
sub-env. As that mode requires, such a sub-env's row of the returned observation is its reset observation, and
``info["final_obs"]`` / ``info["final_info"]`` (masked by ``info["_final_obs"]`` / ``info["_final_info"]``) hold
the observation and info of the step that ended its episode: the measured placement, its latency, ok/error, ...
(the same keys as `DevicePlacementEnv.step`'s info). The other info keys are the reset info where a sub-env was
reset.

Observation: the sub-env observations stacked (`gymnasium.vector.utils.batch_space` of the single space: a
``Dict`` whose arrays gain a leading K axis, e.g. ``placement`` (K, N) int64, ``node_features`` (K, N, F)). Every
array returned is fresh (the caller may keep or modify it), unless the env is built with ``copy=False``
(``gym.make_vec(..., copy=False)``, the name of Gymnasium's ``SyncVectorEnv`` option): then the arrays that are the
same on every step (all but ``placement``, in the observation and in ``final_obs``) are read-only views of arrays
the env keeps, shared between calls and sub-envs (a write raises instead of changing what later calls return),
which saves copying them (a graph's features and masks per placement and step); ``placement`` arrays stay fresh.
With one-step episodes the same goes for the info arrays that never change (the masks, the reset info,
``final_info``'s objective and model) and for ``final_info["placement"]`` (the measured placements, which
`step_infos` is built from later): read-only instead of copied.
Action: (K, N) int, a placement per sub-env. A batch is checked whole (shape, dtype, every row's values) before
any sub-env steps: a bad one raises a one-line ``ValueError`` and changes nothing.
Reward, terminated, truncated: (K,) arrays.
Seeding: ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i`` (a list gives each its own), as Gymnasium's
``SyncVectorEnv`` does.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .backends import Backend
from .backends.base import info_column, measure_batch
from .env import DevicePlacementEnv, _backend, as_device_indices, model_list
from .graph import ComputationGraph
from .models import load_graph

__all__ = ["DevicePlacementVectorEnv"]


class DevicePlacementVectorEnv(VectorEnv):
    """K `DevicePlacementEnv` sub-envs sharing one graph and one backend (see the module docstring).

    Args:
        num_envs: K, the number of sub-envs (placements measured per ``step``).
        model, devices, backend, backend_options, profile, warmup, repeats, objective: as for
            `DevicePlacementEnv`; the graph is loaded and the backend built once and shared by every sub-env.
        copy: False: the observation and info arrays that never change, and the measured placements in the
            info, are handed out read-only instead of as fresh copies (module docstring).
        env_kwargs: the other `DevicePlacementEnv` arguments (``reward``, ``horizon``, ``features``,
            ``failure_penalty``, ``unsupported``, ``reference_every``, ``render_mode``), the same for every sub-env.

    Attributes:
        envs: the K sub-envs (each keeps its own episode, counters and random generator).
        graph, backend: what they share.
        step_infos: each sub-env's info of the last ``step``, as `DevicePlacementEnv.step` returned it (the dicts
            batched into ``info["final_info"]`` where an episode ended); what a run loop records per placement.
    """

    metadata = {**DevicePlacementEnv.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        num_envs: int = 1,
        model: Any = "resnet",
        devices: "str | Sequence[str]" = "auto",
        backend: "str | Backend" = "auto",
        backend_options: dict | None = None,
        profile: Any = None,
        warmup: int | None = None,
        repeats: int | None = None,
        objective: str | None = None,
        copy: bool = True,
        **env_kwargs: Any,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if model_list(model) is not None:
            raise ValueError(f"the vector env measures one graph; model={model!r} names several. Use "
                             "gym.make('DevicePlacement-v0', model=...) for a multi-graph env")
        self.graph = model if isinstance(model, ComputationGraph) else load_graph(model)
        self.backend = _backend(backend, devices, backend_options, profile=profile, warmup=warmup, repeats=repeats,
                                objective=objective)
        self.envs = [DevicePlacementEnv(self.graph, backend=self.backend, **env_kwargs) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = self.envs[0].render_mode
        # One-step episodes (the default, horizon 1) end on every step: `step` then does every sub-env's
        # bookkeeping in batch (`_step_ending_every_episode`). Each sub-env's observation is fixed but for its
        # placement: its other arrays are stacked once here, and copied per step unless `copy` is False.
        self._every_step_ends = self.envs[0].horizon == 1
        self.copy = copy
        self._fixed_obs = {key: np.stack([env.observation()[key] for env in self.envs])
                           for key in self.single_observation_space.spaces if key != "placement"}
        for array in self._fixed_obs.values():
            array.flags.writeable = False  # what `copy=False` hands out; copies of it are writeable
        self._shared_obs = {key: self._fixed_obs.get(key) for key in self.single_observation_space.spaces}
        # Each sub-env's observation with its fixed arrays as views (`copy=False`), in the key order of
        # `DevicePlacementEnv.observation`: a step copies the dict and puts in the placement.
        self._fixed_rows = [{key: None if key == "placement" else self._fixed_obs[key][i]
                             for key in self.single_observation_space.spaces} for i in range(num_envs)]
        self._step_infos: list[dict] | None = []
        self._last_step: tuple | None = None  # what `step_infos` is built from, on first read
        self._constant: dict | None = None  # built by `_references` on the first one-step `step`
        self._every = np.ones(num_envs, dtype=bool)  # the `_key` mask of an info column every sub-env has

    # ------------------------------------------------------------------------------------ properties
    @property
    def device_names(self) -> list[str]:
        return self.envs[0].device_names

    @property
    def step_infos(self) -> list[dict]:
        """Each sub-env's info of the last ``step``, as `DevicePlacementEnv.step` returns it (built on first read
        after a batched step)."""
        if self._step_infos is None:
            placements, repaired, batch, now, first = self._last_step
            measurements = batch.measurements()
            self._step_infos = [
                {**env._info(placement, m, reference), "repaired_ops": count, "model": self.graph.name}
                for env, placement, count, m, reference in zip(self.envs, placements, repaired.tolist(),
                                                                measurements, zip(now.tolist(), first.tolist()))]
        return self._step_infos

    @property
    def placements_measured(self) -> int:
        """Placements measured by all sub-envs' steps (references and drift re-measurements not counted)."""
        return sum(env.placements_measured for env in self.envs)

    # ---------------------------------------------------------------------------------------- gym API
    def reset(self, *, seed: "int | Sequence[int | None] | None" = None, options: dict | None = None):
        """Reset every sub-env (``seed + i`` for sub-env ``i``; `options` go to each); returns the stacked
        observations and the reset infos (`VectorEnv` info format: an array per key, masked by ``_key``)."""
        super().reset(seed=seed if isinstance(seed, int) else None)
        if seed is None:
            seeds: Sequence[int | None] = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} sub-envs")
        observations, infos = [], []
        for env, env_seed in zip(self.envs, seeds):
            obs, info = env.reset(seed=env_seed, options=options)
            observations.append(obs)
            infos.append(info)
        return self._observations(np.stack([obs["placement"] for obs in observations])), self._batch_infos(infos)

    def step(self, actions):
        """Measure one placement per sub-env (row ``i`` of `actions`, (K, N) ints) with one ``measure_many`` call;
        a sub-env whose episode ends is reset in the same step (module docstring). A batch with anything wrong
        (its shape, its dtype, any row's values) is refused with a ``ValueError`` before any sub-env is touched:
        no sub-env steps, re-measures its reference or counts a placement."""
        placements = self._validate(actions)
        if self._every_step_ends:
            return self._step_ending_every_episode(placements)
        begun = [env.begin_step(placement) for env, placement in zip(self.envs, placements)]
        measurements = self.backend.measure_many(self.graph, np.stack([placement for placement, _ in begun]))
        rewards = np.zeros(self.num_envs)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        observations, infos, step_infos = [], [], []
        for i, (env, (placement, repaired), measurement) in enumerate(zip(self.envs, begun, measurements)):
            obs, rewards[i], terminations[i], truncations[i], info = env.end_step(placement, repaired, measurement)
            step_infos.append(info)
            if terminations[i] or truncations[i]:
                final = {"final_obs": obs, "final_info": info}
                obs, info = env.reset()
                info = {**final, **info}
            observations.append(obs)
            infos.append(info)
        self._step_infos = step_infos
        return (self._observations(np.stack([obs["placement"] for obs in observations])), rewards, terminations,
                truncations, self._batch_infos(infos))

    def _step_ending_every_episode(self, placements: np.ndarray):
        """`step` of the validated (K, N) int64 `placements` (`_validate`; repaired here in place) when every
        sub-env's episode ends with it (horizon 1): the same outputs as the general path (each sub-env's
        `begin_step`, one ``measure_many``, each `end_step` and reset), with the per-sub-env work done in batch:
        the infos built a column at a time, the observations copied from arrays stacked once. Tested equal to
        Gymnasium's ``SyncVectorEnv`` over the same sub-envs."""
        envs, k = self.envs, self.num_envs
        repaired = np.zeros(k, dtype=np.int64)
        if envs[0].unsupported == "repair":
            for i, env in enumerate(envs):
                placements[i], repaired[i] = env.repair(placements[i])
        if envs[0].reference_every:  # `begin_step`'s drift correction (no sub-env counts without it)
            for env in envs:
                if env._g.since_reference >= env.reference_every:
                    env._remeasure_reference()
                env._g.since_reference += 1
        # In columns: no `Measurement` object is built unless `step_infos` is read.
        batch = measure_batch(self.backend, self.graph, placements)
        now, first = self._references()
        # `end_step`'s count, then the same-step reset: each sub-env starts again at its reference placement (a
        # read-only row of the start placements: the env never writes into its placement array, it replaces it).
        for env, start in zip(envs, self._constant["start_rows"]):
            env.placements_measured += 1
            env._restart(start)
        self._step_infos, self._last_step = None, (placements, repaired, batch, now, first)

        # The step's infos a column at a time: what `DevicePlacementEnv._info` computes per sub-env. What the env
        # keeps (the placements and the batch's columns that `step_infos` is built from later, the arrays that
        # never change) is handed out as copies, but with `copy` False the placements and the constant arrays
        # as themselves, read-only (small columns copy as fast as they are made read-only).
        if not self.copy:
            placements.setflags(write=False)
        final_constant, constant = self._constant_arrays("final_info"), self._constant_arrays("info")
        measured = batch.columns
        ok = measured["ok"]
        latency = np.where(ok, measured["latency_s"], envs[0].failure_penalty * now)
        speedup = now / latency
        corrected = latency * first / now
        reward_name = envs[0].reward_name  # `DevicePlacementEnv._reward`, a column at a time
        reward = speedup - 1.0 if reward_name == "speedup" else -corrected if reward_name == "neg_latency" else \
            1.0 / corrected
        final_info = {"placement": placements if not self.copy else placements.copy(), "latency_s": latency,
                      "speedup": speedup, "latency_corrected_s": corrected, "reference_latency_s": now.copy(),
                      "latency_raw_s": np.where(ok, measured["raw_latency_s"], latency)}
        final_info.update(latency_interval_s=measured["interval_s"], spread_s=measured["spread_s"],
                          compile_s=measured["compile_s"], n_submodels=measured["n_submodels"].copy(), ok=ok,
                          error=measured["error"], simulated=measured["simulated"])
        breakdown = final_info["breakdown"] = {}
        for key, column in batch.breakdown.items():
            breakdown[key], breakdown[f"_{key}"] = column.copy(), batch.breakdown_present[key].copy()
        final_info["objective"] = final_constant["objective"]
        final_info["throughput_per_s"] = 1.0 / latency
        final_info["repaired_ops"] = repaired  # int64, as `_add_info` types a column of ints
        final_info["model"] = final_constant["model"]
        if "final_info_masks" not in self._constant:  # the same keys on every step: their mask names, once
            self._constant["final_info_masks"] = [f"_{key}" for key in final_info if f"_{key}" not in final_info]
        masks = self._constant["final_info_masks"]
        if self.copy:
            final_info.update(zip(masks, np.ones((len(masks), k), dtype=bool)))
        else:
            final_info.update(dict.fromkeys(masks, self._every))

        # Each sub-env's final observation: its own placement array; its other arrays shared views (`copy=False`)
        # or arrays of its own (small ones: the allocator reuses their memory, where one fresh (K, N, F) batch
        # would cost page faults on every step).
        rows = [row.copy() for row in self._fixed_rows] if not self.copy else [
            {key: None if value is None else value.copy() for key, value in row.items()} for row in self._fixed_rows]
        for obs, placement in zip(rows, placements.copy()):
            obs["placement"] = placement
        final_obs = np.fromiter(rows, dtype=object, count=k)  # an object array of the K dicts
        info = {"final_obs": final_obs, "final_info": final_info, **constant}  # + their masks and the reset info
        observations = self._observations(self._constant["starts"])
        return observations, reward, np.ones(k, dtype=bool), np.zeros(k, dtype=bool), info

    def _references(self) -> tuple[np.ndarray, np.ndarray]:
        """(K,) float64 each sub-env's `current_reference_s` and its first reference latency, and with them the
        parts of a one-step `step`'s output that do not change from step to step (``self._constant``); kept while
        no drift correction can change them."""
        envs = self.envs
        if self._constant is None or envs[0].reference_every:
            now = np.array([env.current_reference_s for env in envs])
            first = np.array([env.reference.latency_s for env in envs])
            if self._constant is None:
                names, device, k = self.device_names, envs[0].reference_device, self.num_envs
                starts = np.stack([env.reference_placement for env in envs])
                # The info arrays that are the same on every step, read-only (`copy=False` hands them out as they
                # are): the final info's objective and model columns; the masks of "final_obs" and "final_info"
                # and the reset info of every sub-env (`DevicePlacementEnv.reset`), batched.
                final_info = {key: self._columns({key: [value] * k})[key]
                              for key, value in (("objective", envs[0].objective), ("model", self.graph.name))}
                info = {"_final_obs": self._every, "_final_info": self._every,
                        **self._columns({"reference_latency_s": first.tolist(), "devices": [list(names) for _ in envs],
                                         "reference_device": [device] * k, "model": [self.graph.name] * k})}
                for array in (starts, *final_info.values(), *info.values()):
                    array.flags.writeable = False
                self._constant = {"starts": starts, "start_rows": list(starts), "final_info": final_info,
                                  "info": info}
            self._constant["now"], self._constant["first"] = now, first
        return self._constant["now"], self._constant["first"]

    def render(self) -> tuple | None:
        """Each sub-env's `DevicePlacementEnv.render` (None without a render mode)."""
        if self.render_mode is None:
            return None
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        self.backend.close()  # shared: closed once, here

    # ---------------------------------------------------------------------------------------- helpers
    def _batch_infos(self, infos: list[dict]) -> dict:
        """The sub-envs' infos (``infos[i]``: sub-env ``i``'s) in Gymnasium's vector format (per key an array over
        the sub-envs and a bool mask ``_key``), by Gymnasium's own `VectorEnv._add_info`, as `SyncVectorEnv`."""
        batched: dict[str, Any] = {}
        for i, info in enumerate(infos):
            batched = self._add_info(batched, info, i)
        return batched

    def _validate(self, actions: Any) -> np.ndarray:
        """(K, N) int64 copy of `actions` (one placement per sub-env), the whole batch checked at once (shape,
        dtype, every row's values: `as_device_indices`, the check of `DevicePlacementEnv.validate_action`), or a
        one-line ``ValueError`` naming what is wrong and the expected (K, N) batch."""
        k, n, d = self.num_envs, self.graph.n_ops, self.envs[0].n_devices
        expected = (f"an integer array of shape ({k}, {n}) with values in 0..{d - 1} (one placement per sub-env, "
                    "one device per compute op)")
        return as_device_indices(actions, [(k, n)], d, expected, name="actions")

    def _observations(self, placements: np.ndarray) -> dict[str, np.ndarray]:
        """The batch observation of sub-envs whose placements are `placements` ((K, N) int64), in the key order of
        `DevicePlacementEnv.observation`: fresh arrays, or with `copy` False the fixed ones as shared read-only
        arrays (module docstring)."""
        if self.copy:
            return {key: placements.copy() if key == "placement" else self._fixed_obs[key].copy()
                    for key in self.single_observation_space.spaces}
        observations = self._shared_obs.copy()  # the shared read-only arrays, in key order
        observations["placement"] = placements.copy()
        return observations

    def _constant_arrays(self, part: str) -> dict[str, np.ndarray]:
        """The info arrays of ``self._constant[part]`` (they never change): themselves, read-only, with `copy`
        False, else fresh copies."""
        arrays = self._constant[part]
        return arrays if not self.copy else {key: value.copy() for key, value in arrays.items()}

    def _columns(self, columns: dict[str, list]) -> dict[str, Any]:
        """Info columns (per key, one value per sub-env, None where a sub-env has none) as Gymnasium's
        `VectorEnv._add_info` batches them (`info_column`): per key the array and the mask ``_key``."""
        batched: dict[str, Any] = {}
        for key, values in columns.items():
            batched[key], batched[f"_{key}"] = info_column(values)
        return batched
