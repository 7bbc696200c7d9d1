"""Stable-Baselines3 models as placement agents: `SB3Agent` (any SB3 model) and `PPOAgent` (PPO with the
graph policy, `agents.algos.sb3.GraphPolicy`).

>>> env = gym.make("DevicePlacement-v0", model="bert", backend="simulated")
>>> agent = PPOAgent(seed=0).learn(env, budget=2_000)
>>> SB3Agent(PPO("MultiInputPolicy", env)).learn(env, budget=64)      # your own SB3 model

Both run ``model.learn`` inside the shared run loop (`agents.core.run`): the budget is exact (SB3 collects
whole rollouts; here collection stops when the budget is spent, so the last, partial rollout is measured but not
trained on), the best placement is kept and re-measured afresh at the end, callbacks see every step and update,
and the summary reports the agent's compute per placement. On `DevicePlacement-v0` (one-step episodes) PPO's
advantage is simply r - V(s). Checkpoints hold the policy's tensors, its spaces and the settings as plain data
(`agents.core.checkpoint`), not SB3's pickled zip: loading one never executes code from the file.

With `GraphPolicy` (no graph size or device count in its weights) a trained or loaded agent predicts on any
graph and device set (the policy is called directly, `agents.algos.sb3.policy_action`: SB3's ``predict``
checks shapes against the spaces the model was built with), and ``learn`` on an env of another size rebuilds
the SB3 algorithm for that env around the same policy weights (a fresh optimizer and rollout buffer). Another
SB3 policy (``MultiInputPolicy``) has N and D in its weights: it says so.
"""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import MultiInputActorCriticPolicy

from agents.core.checkpoint import (
    SETTINGS, CheckpointError, check_tensor_shapes, read_checkpoint, rebuilding, resolve_agent_class,
    renamed, restore_run_state, saved_options, write_checkpoint,
)
from agents.core.base import DEVICE, available_device
from agents.core.loop import RunLoop
from agents.core.run import RunAgent, agent_predict
from agents.core.bounds import (
    COEFFICIENT, DEPTH, FLAG, GROUPS, LEARNING_RATE, SHARE, STEPS, WIDTH, check_settings, part, setting,
)
from agents.core.settings import field_values, take_settings
from agents.algos.learned import LEARNED_RUN, DistillSettings, run_learned
from agents.algos.policy_gradient import DISTILL_SECONDS, distill, distill_cap
from agents.algos.sb3 import DISTRIBUTIONS, GraphActorCriticPolicy, GraphPolicy, log_without_folder, policy_action
from agents.nn.device_head import enable_graph_cost
from agents.nn.policy import group_majority_placement
from agents.search.attach import SearchLayer
from agents.search.coarse_to_fine import StallDetector, split_until_expressible
from agents.search.config import OUTSIDE_TRAINING
from agents.search.config import SearchConfig
from agents.search.heuristic_start import ZERO_SHOT_OVERRIDE
from agents.search.node_by_node import NodeGroups, TeacherForcing, graph_key
from placement_gym.env import strip_padding
from placement_gym.schema import (
    Found, Integer, ListOf, MapOf, Number, OneOf, Optional, Plain, Record, Tagged, Text, Where, mismatch,
)
from placement_gym.wrappers import STARTS, NodePlacementWrapper, contiguous_groups, place_node_by_node

__all__ = ["GraphPolicySettings", "PPOAgent", "PPONodeAgent", "PPOSettings", "SB3Agent", "SB3PPOSettings"]


class _BudgetSpent(Exception):
    """Raised by `_RunBridge` to end SB3's ``learn`` between two rollouts once the budget is spent."""


class _RunBridge(BaseCallback):
    """SB3 callback: stops collecting once the run has measured `stop_at` placements (or a callback asked to
    stop), and reports every PPO update's ``train/`` statistics and duration to the run.

    A rollout that the budget's last placement completes is still trained on (SB3 then starts another, which
    `_BudgetSpent` ends before it measures anything): with a budget of whole rollouts (a turn of one rollout,
    `PPOAgent._placements_per_turn`) every placement is learned from."""

    def __init__(self, run: RunLoop, stop_at: int) -> None:
        super().__init__()
        self.run, self.stop_at = run, stop_at
        self._update_started: float | None = None

    def record_update(self) -> None:
        """Report the update SB3 ran since the last rollout ended, if any (at the next rollout's start, or when
        ``learn`` returns)."""
        if self._update_started is not None:
            stats = {k.split("/", 1)[1]: float(v) for k, v in self.logger.name_to_value.items()
                     if k.startswith("train/") and isinstance(v, (int, float))}
            self.run.record_update({**stats, "update_s": time.perf_counter() - self._update_started})
            self._update_started = None

    def _on_rollout_start(self) -> None:
        self.record_update()
        if self.run.stopped or self.run.steps >= self.stop_at:
            raise _BudgetSpent

    def _on_rollout_end(self) -> None:
        self._update_started = time.perf_counter()

    def _on_step(self) -> bool:
        if self.run.stopped:
            return False
        # SB3 calls this after the step's env.step and before counting it in the rollout (`n_steps`).
        completes_rollout = self.locals.get("n_steps", -2) + 1 == self.locals.get("n_rollout_steps")
        return self.run.steps < self.stop_at or completes_rollout


class _CoarseToFine(BaseCallback):
    """SB3 callback: coarse-to-fine action groups (the search layer's ``split_patience``). Counts the placements
    measured without a new best (`stall`, the layer's `agents.search.coarse_to_fine.StallDetector`) and, between
    two rollouts (after an update, so a rollout is collected and trained on under one grouping), halves the
    policy's groups and calls `on_split` (the agent's refit of its best placement)."""

    def __init__(self, stall: StallDetector, on_split) -> None:
        super().__init__()
        self.stall, self.on_split, self.stalled = stall, on_split, False

    def _on_step(self) -> bool:
        latencies = [info.get("latency_s", math.inf) for info in self.locals.get("infos", [])]
        self.stalled = self.stall.offer(latencies) or self.stalled
        return True

    def _on_rollout_start(self) -> None:
        if self.stalled:
            self.stalled = False
            if self.model.policy.split_action_groups():
                self.on_split()


class SB3Agent(RunAgent):
    """A Stable-Baselines3 model (``PPO("MultiInputPolicy", env)``, ...) as a placement agent.

    Args:
        model: the SB3 model; it learns on the run's env (``model.set_env``), which must have its spaces.
        seed, torch_threads, coarsen_above, max_nodes: see `agents.core.run.RunAgent` (an SB3 model's spaces
            fix the graph size, so a coarsened graph is the one size it runs on).
        search: the search layer around SB3's learning (`agents.search.config.SearchConfig`; None: none): its
            starts (``heuristic_start``: ``"refit"`` distils the best start into the policy before SB3 collects;
            ``finetune_from_predict``) and the zero-shot override; `PPOAgent` also runs ``split_patience``.
        distill_steps, distill_seconds: after the run, fit the policy to the best placement until ``predict``
            returns it (`agents.algos.learned.DistillSettings`; off by default).
    """

    name = "sb3"
    #: The search layer it composes (an object it holds when built with search) and the layer's components it runs.
    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = OUTSIDE_TRAINING

    def __init__(self, model: BaseAlgorithm | None = None, **options: Any) -> None:
        options = self._hybrid_form(options)
        distillation = DistillSettings.take(options)
        super().__init__(**options)  # the run's settings (`agents.core.settings.RunSettings`), a subclass's own
        #: The final distillation's settings (`agents.algos.learned.DistillSettings`).
        self.distillation = distillation
        self.model = model

    @classmethod
    def _base_option_defaults(cls) -> dict[str, Any]:
        """The distillation's keywords, then the run's."""
        return {**field_values(DistillSettings()), **super()._base_option_defaults()}

    def _owned_settings(self) -> list[Any]:
        return [*super()._owned_settings(), self.distillation]

    # ------------------------------------------------------------------ for subclasses
    def _make_model(self, env: gym.Env, seed: int | None) -> BaseAlgorithm:
        """The model to train on `env` when the agent has none yet."""
        raise ValueError("SB3Agent needs a model: SB3Agent(PPO('MultiInputPolicy', env)), or load(path)")

    def _kept_back(self, env: gym.Env, run: RunLoop) -> int:
        """Placements of the budget kept back from SB3's collection for `_after_collection` (none here)."""
        return 0

    def _after_collection(self, env: gym.Env, run: RunLoop) -> None:
        """Spend the placements kept back (nothing here)."""

    # ------------------------------------------------------------------ the learned-agent script and its steps
    def train(self, run: RunLoop, seed: int | None) -> None:
        """The learned-agent script (`agents.algos.learned.run_learned`) over this class's steps."""
        run_learned(self, run, seed)

    def _agent_env(self, env: gym.Env) -> gym.Env:
        """The env SB3 learns on: the run's env itself here (`PPOAgent`: the node-by-node variant)."""
        return env

    def _start_training(self, run: RunLoop, env: gym.Env, seed: int | None, trained: bool) -> None:
        """Nothing to set up: SB3's ``learn`` does it."""

    def _split_to_express(self, run: RunLoop) -> bool:
        """Make the run's best placement one the policy can return: nothing here (`PPOAgent`'s groups)."""
        return False

    def _refit_best(self, run: RunLoop) -> None:
        """Fit the run's best placement so far into the policy (after a coarse-to-fine split):
        `agents.algos.learned.DistillSettings.refit_steps` steps at most."""
        self._fit_best(run, self.distillation.refit_steps)

    def _prepare_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> bool:
        trained = self.model is not None
        if self.model is None:
            self.model = self._make_model(env, seed)
        elif self._graph_policy and not self._fits({k: space.shape for k, space in env.observation_space.spaces.items()}):
            self.model = self._rebuilt_model(env, seed)
        else:
            self._check_fits({k: space.shape for k, space in env.observation_space.spaces.items()})
            self.model.set_env(env)
            if seed is not None:
                self.model.set_random_seed(seed)
        enable_graph_cost(self.model.policy, self.model.policy.optimizer,
                          build=run.many_graphs and self.whole_graph_cost)
        return trained

    def _learn_policy(self, run: RunLoop, env: gym.Env, seed: int | None) -> None:
        """SB3's own ``model.learn``, stopped when the run's budget is spent."""
        bridge = _RunBridge(run, stop_at=run.budget - self._kept_back(env, run))
        callbacks = [bridge] + self._extra_callbacks(run)
        if run.budget > 0:
            log_without_folder(self.model)  # SB3's default logger leaves an SB3-<date> folder in the temp folder
            try:
                self.model.learn(total_timesteps=run.budget, callback=callbacks, reset_num_timesteps=False)
            except _BudgetSpent:
                pass
            bridge.record_update()  # SB3's loop may end right after an update
        self._after_collection(env, run)

    def _extra_callbacks(self, run: RunLoop) -> list[BaseCallback]:
        """SB3 callbacks of the run besides the budget's (subclasses: `PPOAgent`'s coarse to fine)."""
        return []

    def _fit_best(self, run: RunLoop, max_steps: int) -> int:
        return distill(self.predict, self._imitate, self.model.policy.optimizer, self.model.policy, run.best_action,
                       self.imitation_obs, max_steps, getattr(self.model, "max_grad_norm", None), run.as_measured,
                       distill_cap(self.distillation.distill_seconds, run), self._expressible, self._reproduces)

    def _expressible(self, placement: np.ndarray) -> np.ndarray:
        """(N,) the placement nearest `placement` that ``predict`` can return (`distill`'s target): itself here."""
        return placement

    #: ``reproduces(placement) -> bool`` where a subclass tells faster than ``predict`` whether ``predict`` returns
    #: `placement` (`agents.algos.policy_gradient.PolicyGradientAgent._reproduces`); None: `distill` calls ``predict``.
    _reproduces: Callable[[np.ndarray], bool] | None = None

    def _rebuilt_model(self, env: gym.Env, seed: int | None) -> BaseAlgorithm:
        """A new SB3 model for `env` (another graph size or device count) around the current policy's weights:
        SB3 fixes its spaces, rollout buffer and ``set_env`` checks to one env, the graph policy's weights do not
        (a fresh optimizer: Adam's moments were for the old env's gradients)."""
        model = self._make_model(env, seed)
        model.policy.load_state_dict(self.model.policy.state_dict())
        return model

    @property
    def _graph_policy(self) -> bool:
        """True when the model's policy is `GraphPolicy`: no graph size or device count in its weights."""
        return isinstance(self.model.policy, GraphActorCriticPolicy)

    def _imitate(self, placement: np.ndarray) -> torch.Tensor:
        """() log-likelihood, per decision, that the model's policy takes `placement` (N,) on the run's graph
        (SB3's ``evaluate_actions``), for `distill`."""
        policy = self.model.policy
        obs_tensor, _ = policy.obs_to_tensor(self.imitation_obs)
        _, log_prob, _ = policy.evaluate_actions(obs_tensor, torch.as_tensor(placement, device=policy.device)[None])
        return log_prob[0] / len(placement)

    @property
    def policy(self) -> torch.nn.Module | None:
        return None if self.model is None else self.model.policy

    @agent_predict
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """The model's action for `obs` ((N,) int64 placement on `DevicePlacement-v0`)."""
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__} has no policy yet: call learn(env, ...) or load(path) first")
        if self._graph_policy:  # any graph and device set
            if getattr(self.model.policy, "n_groups", None) is not None:
                obs = strip_padding(obs)  # groups of ops are one graph's: a padded observation's graph alone
            return policy_action(self.model.policy, obs, deterministic)
        self._check_fits({k: np.shape(v) for k, v in obs.items()})
        action, _ = self.model.predict(obs, deterministic=deterministic)
        return np.asarray(action, dtype=np.int64)

    def _fits(self, shapes: Mapping[str, tuple]) -> bool:
        """True when the observation `shapes` are those the SB3 model's spaces were built for: the same keys (a
        padded multi-graph env adds masks) of the same shapes."""
        expected = self.model.observation_space.spaces
        return set(shapes) == set(expected) and all(tuple(shapes[k]) == expected[k].shape for k in expected)

    def _check_fits(self, shapes: Mapping[str, tuple]) -> None:
        """ValueError unless the observation `shapes` are those the SB3 model was built for (a policy other than
        `GraphPolicy` has the graph size in its weights)."""
        if not self._fits(shapes):
            graph = self.trained_for.get("graph", "another graph")
            expected = self.model.observation_space.spaces
            raise ValueError(
                f"this {self.name} policy's SB3 spaces were built for {graph} "
                f"({expected['placement'].shape[0]} ops); the observation has {shapes['placement'][0]} ops "
                "(this SB3 policy has the graph size in its weights; GraphPolicy runs on any graph)")

    def hyperparameters(self) -> dict[str, Any]:
        """A subclass's own settings (``SETTINGS``), the distillation's, the seed and threads, the coarsening and
        the search."""
        return {**self._own_settings(), **field_values(self.distillation), "seed": self.seed,
                "torch_threads": self.torch_threads,
                **self._coarsen_options(), **self._search_options()}

    # ------------------------------------------------------------------ persistence
    def save(self, path: "str | Path", overwrite: bool = False) -> Path:
        """Save the policy's tensors, its spaces and the settings (`agents.core.checkpoint`: tensors and plain
        data only, not SB3's pickled zip; ``agent.model.save(...)`` still writes one). Refuses to overwrite an
        existing file unless `overwrite`."""
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__} has nothing to save yet: call learn(env, ...) first")
        algorithm = _name_of(type(self.model), SB3_ALGORITHMS, "algorithm")
        policy = _name_of(self.model.policy_class, SB3_POLICIES, "policy")
        return write_checkpoint(path, self, self.model.policy.state_dict(), {
            "algorithm": algorithm, "policy": policy, "policy_kwargs": dict(self.model.policy_kwargs),
            "observation_space": space_to_data(self.model.observation_space),
            "action_space": space_to_data(self.model.action_space)}, overwrite)

    @classmethod
    def load(cls, path: "str | Path", device: "str | torch.device" = "cpu") -> "SB3Agent":
        """Rebuild an agent saved with `save`: the SB3 model is built anew from the recorded algorithm, policy
        class (known names only) and spaces, and its policy's tensors are loaded. Nothing in the file is
        executed or imported, and the model is built only once its settings are known to build exactly the
        stored tensors (`agents.core.checkpoint.check_tensor_shapes`)."""
        data = read_checkpoint(path, extra=SB3_FIELDS)
        agent_cls = resolve_agent_class(data, cls, path)
        extra = data["extra"]
        policy_kwargs = dict(extra["policy_kwargs"])
        settings = {f"extra.policy_kwargs.{k}": v for k, v in policy_kwargs.items()}  # what the policy is built from
        if extra["policy"] == "GraphPolicy":  # its width and depth under an earlier release's names
            policy_kwargs = renamed(policy_kwargs)
        with rebuilding(path, agent_cls):
            options = saved_options(data["hyperparameters"], agent_cls.option_names())
            agent = agent_cls(**agent_cls._load_kwargs(options, device))
            algorithm, policy = SB3_ALGORITHMS[extra["algorithm"]], SB3_POLICIES[extra["policy"]]
            model = algorithm(policy, env=None, device=device, policy_kwargs=policy_kwargs,
                              _init_setup_model=False, **agent._algorithm_kwargs())  # its settings only, no arrays
            check_space_sizes(path, extra, model.n_steps)
            observation_space = space_from_data(extra["observation_space"])
            action_space = space_from_data(extra["action_space"])
            # The policy as SB3's _setup_model builds it (its learning rate does not shape it).
            check_tensor_shapes(path, data, lambda: policy(observation_space, action_space, lambda _: 0.0,
                                                           **policy_kwargs), settings)
            model.observation_space, model.action_space = observation_space, action_space
            model.n_envs = 1
            model._setup_model()
            model.policy.load_state_dict(data["state_dict"])
        agent.model = model
        restore_run_state(agent, data)
        return agent

    def _algorithm_kwargs(self) -> dict[str, Any]:
        """The algorithm's constructor settings for rebuilding a saved model (SB3's defaults here)."""
        return {}

    @classmethod
    def _load_kwargs(cls, hyperparameters: Mapping[str, Any], device) -> dict:
        return dict(hyperparameters)


#: The SB3 algorithms and policy classes a checkpoint may name (by name: nothing is imported from a file).
SB3_ALGORITHMS: dict[str, type[BaseAlgorithm]] = {"PPO": PPO}
SB3_POLICIES: dict[str, type] = {"GraphPolicy": GraphPolicy, "MultiInputPolicy": MultiInputActorCriticPolicy}

#: The most elements one space of a saved SB3 model may have (`space_from_data` allocates its bounds, SB3's
#: rollout buffer a number of steps of it): a graph's node features at the largest size, with room to spare.
MAX_SPACE_ELEMENTS = 1 << 25
_SHAPE = Where(ListOf(Integer(0, MAX_SPACE_ELEMENTS), min_len=1, max_len=4),
               lambda shape: math.prod(shape) <= MAX_SPACE_ELEMENTS,
               f"a shape (a list of 1 to 4 sizes) of at most {MAX_SPACE_ELEMENTS} elements in all")
_BOUND = OneOf(Number(finite=False), Plain(max_depth=4, max_len=MAX_SPACE_ELEMENTS))  # one number, or one per element
_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool")
_LEAF_SPACES = {
    "Box": Record({"type": Text(), "low": _BOUND, "high": _BOUND, "shape": _SHAPE, "dtype": Text(choices=_DTYPES)},
                  others=None),
    "Discrete": Record({"type": Text(), "n": Integer(1, 1 << 31)}, others=None),
    "MultiDiscrete": Record({"type": Text(), "nvec": ListOf(Integer(1, 1 << 31), min_len=1,
                                                            max_len=MAX_SPACE_ELEMENTS)}, others=None),
    "MultiBinary": Record({"type": Text(), "n": _SHAPE}, others=None),
}
#: What `space_to_data` writes: a Box, Discrete, MultiDiscrete or MultiBinary space, or a Dict of them.
SPACE = Tagged("type", {**_LEAF_SPACES, "Dict": Record(
    {"type": Text(), "spaces": MapOf(Tagged("type", _LEAF_SPACES), max_len=64)}, others=None)})
#: The most bytes the arrays of a saved SB3 model's spaces may take, observation and action together
#: (`space_bytes`): `space_from_data` builds them from the file's shapes, and gymnasium's Box keeps a few arrays
#: of its shape (bounds, boundedness), so what building costs is a small multiple of this. The observations of a
#: graph of `placement_gym.schema.MAX_OPS` ops with the default features on a preset of up to 30 devices fit.
MAX_SPACE_BYTES = 1 << 27
#: The most bytes SB3's rollout buffer of a loaded model may take (``n_steps`` steps of its spaces, allocated when
#: the model is set up: numpy's zeros take memory only as steps are written, but refuse outright what the machine
#: could never hold): 16 steps of the largest spaces fit four times.
MAX_ROLLOUT_BYTES = 1 << 33
#: What a checkpoint of an `SB3Agent` holds in ``extra`` besides every agent's fields (`SB3Agent.save`).
SB3_FIELDS = {"algorithm": Text(choices=tuple(SB3_ALGORITHMS)), "policy": Text(choices=tuple(SB3_POLICIES)),
              "policy_kwargs": SETTINGS, "observation_space": SPACE, "action_space": SPACE}


def _name_of(value: type, known: Mapping[str, type], what: str) -> str:
    for name, candidate in known.items():
        if value is candidate:
            return name
    raise ValueError(f"cannot save an SB3 {what} {value.__name__} in a placement-gym checkpoint (known: "
                     f"{sorted(known)}); save the SB3 model itself with agent.model.save(path)")


def space_to_data(space: gym.Space) -> dict:
    """A gymnasium space as plain data (`space_from_data` rebuilds it): Box, Discrete, MultiDiscrete, MultiBinary,
    Dict."""
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_data(v) for k, v in space.spaces.items()}}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.atleast_1d(space.n).tolist()}
    if isinstance(space, gym.spaces.Box):
        def bound(values: np.ndarray):  # one number where the bound is uniform (the usual case), else a list
            flat = values.reshape(-1)
            return flat[0].item() if flat.size and (flat == flat[0]).all() else values.tolist()

        return {"type": "Box", "low": bound(space.low), "high": bound(space.high), "shape": list(space.shape),
                "dtype": str(space.dtype)}
    raise ValueError(f"cannot save a {type(space).__name__} space in a placement-gym checkpoint")


def space_bytes(data: Mapping[str, Any]) -> int:
    """The bytes of the arrays of the space `data` describes (checked against `SPACE`), from its declared sizes
    alone: elements x item size of a Box or MultiBinary, 8 per entry of a MultiDiscrete (its ``nvec``) or a
    Discrete, the sum of a Dict's spaces."""
    kind = data["type"]
    if kind == "Dict":
        return sum(space_bytes(space) for space in data["spaces"].values())
    if kind == "Box":
        return math.prod(data["shape"]) * np.dtype(data["dtype"]).itemsize
    if kind == "MultiBinary":
        return math.prod(data["n"])
    return 8 * (len(data["nvec"]) if kind == "MultiDiscrete" else 1)


def check_space_sizes(path: "str | Path", extra: Mapping[str, Any], n_steps: int) -> None:
    """`CheckpointError` unless the spaces of an SB3 checkpoint's `extra` (checked against `SB3_FIELDS`) take at
    most `MAX_SPACE_BYTES` together, and SB3's rollout buffer of `n_steps` steps of them (the model's setting)
    at most `MAX_ROLLOUT_BYTES`, before any is built: each space's own bound (`MAX_SPACE_ELEMENTS`) leaves a Dict
    of many such spaces, or a wide dtype, gigabytes."""
    sizes = {key: space_bytes(extra[key]) for key in ("observation_space", "action_space")}
    total = sum(sizes.values())
    if total > MAX_SPACE_BYTES:
        key, other = sorted(sizes, key=sizes.get, reverse=True)
        raise mismatch(path, f"extra.{key}", Found(f"spaces of {sizes[key]} bytes (elements x item size; "
                                                   f"{other} {sizes[other]} more)"),
                       f"observation and action spaces of at most {MAX_SPACE_BYTES} bytes in all",
                       error=CheckpointError)
    if n_steps * total > MAX_ROLLOUT_BYTES:
        raise mismatch(path, "hyperparameters.n_steps", n_steps, f"at most {MAX_ROLLOUT_BYTES // total} steps of "
                       f"its spaces ({total} bytes a step; SB3's rollout buffer holds n_steps of them, at most "
                       f"{MAX_ROLLOUT_BYTES} bytes)", error=CheckpointError)


def space_from_data(data: Mapping[str, Any]) -> gym.Space:
    """The space `space_to_data` described (its size checked first: `check_space_sizes`)."""
    kind = data["type"]
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_data(v) for k, v in data["spaces"].items()})
    if kind == "Discrete":
        return gym.spaces.Discrete(int(data["n"]))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.asarray(data["nvec"], dtype=np.int64))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary([int(n) for n in data["n"]])
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        if dtype.kind not in "fiub":
            raise ValueError(f"a Box of dtype {dtype} is not a placement-gym space")
        shape = tuple(int(n) for n in data["shape"])

        def bound(value):  # one number as it is (the Box spreads it over the shape once), a list as an array
            if isinstance(value, (int, float)):
                return value
            return np.broadcast_to(np.asarray(value, dtype=dtype), shape).copy()

        return gym.spaces.Box(bound(data["low"]), bound(data["high"]), shape, dtype)
    raise ValueError(f"unknown space type {kind!r}")


#: PPO's step sizes and entropy term before its per-op defaults: `PPONodeAgent` keeps them, and the hybrid form was
#: tuned with them (`PPOAgent.HYBRID_SETTINGS`).
EARLIER_SETTINGS = {"learning_rate": 1e-3, "n_steps": 32, "batch_size": 32, "entropy_per_node": True}


@dataclasses.dataclass(frozen=True)
class SB3PPOSettings:
    """SB3 `PPO`'s settings (its keywords), with `PPOAgent`'s defaults.

    Args:
        learning_rate: Adam step size (summed log-probabilities over many nodes make PPO's ratio jumpy:
            keep it small).
        n_steps: placements per rollout (= per update).
        batch_size, n_epochs, clip_range, target_kl, ent_coef, vf_coef, max_grad_norm, gamma, gae_lambda:
            SB3 PPO's settings (``ent_coef`` multiplies the entropy term, `GraphPolicySettings.entropy_per_node`).
    """

    learning_rate: float = setting(3e-4, LEARNING_RATE)
    n_steps: int = setting(16, STEPS)
    batch_size: int = setting(16, STEPS)
    n_epochs: int = setting(4, Integer(1, 1000))
    clip_range: float = setting(0.2, Number(positive=True, high=1.0))
    target_kl: float | None = setting(0.05, Optional(Number(positive=True, high=100.0)))
    ent_coef: float = setting(0.01, COEFFICIENT)
    vf_coef: float = setting(0.5, COEFFICIENT)
    max_grad_norm: float = setting(0.5, Number(positive=True, high=1e6))
    gamma: float = setting(1.0, SHARE)
    gae_lambda: float = setting(0.95, SHARE)

    def __post_init__(self) -> None:
        check_settings(self)  # numpy integers from a config are kept as plain ints


@dataclasses.dataclass(frozen=True)
class GraphPolicySettings:
    """`GraphPolicy`'s settings (its ``policy_kwargs``), with `PPOAgent`'s defaults.

    Args:
        hidden_channels, num_layers, distribution, entropy_per_node: `GraphPolicy` settings (``distribution="stock"``
            uses SB3's slow per-node multi-categorical, for comparison).
        n_groups: on the whole-placement env, draw one device per group of G contiguous ops (topological
            order) instead of one per op (`GraphPolicy`'s ``n_groups``; None, the default = per op, exactly
            ``PPO(GraphPolicy, env)``). Groups move runs of ops at once (on the ``paper`` preset, where any op
            moved alone adds cuts, they found mixed placements that per-op PPO missed) but their space cannot
            express a placement that changes device often (``ai_pc``): the hybrid form keeps G=8, halved coarse
            to fine (`PPOAgent.HYBRID_SETTINGS`).
            Ignored on the node-by-node env (its groups are ``node_groups``).
    """

    hidden_channels: int = setting(64, WIDTH)
    num_layers: int = setting(3, DEPTH)
    distribution: str = setting("vectorized", Text(choices=DISTRIBUTIONS))
    entropy_per_node: bool = setting(False, FLAG)
    n_groups: int | None = setting(None, Optional(GROUPS))

    def __post_init__(self) -> None:
        check_settings(self)


@dataclasses.dataclass(frozen=True)
class PPOSettings:
    """`PPOAgent`'s own settings (its keywords besides the torch device and the run's), with their defaults: SB3
    PPO's (`SB3PPOSettings`), `GraphPolicy`'s (`GraphPolicySettings`), each keyword by its own name, and the
    node-by-node variant's.

    Args:
        sb3: `SB3PPOSettings`.
        policy: `GraphPolicySettings`.
        node_groups: None (default) trains on the env as given (one whole placement per step); an int G wraps
            a whole-placement env into the node-by-node variant (`NodePlacementWrapper`, G contiguous groups
            of ops) so that PPO re-places one group per step like Placeto; `predict` then builds a whole
            placement group by group (the other way, besides ``n_groups``, of moving runs of ops at once).
            The training graph's groups are split where its best placement changes device, when it has to
            (`agents.search.node_by_node`, as `PlacetoAgent`'s), so ``predict`` returns that best.
        start: node-by-node only: where training episodes start (`PlacetoAgent`'s ``start``; ``"random"`` favours
            no device, ``"reference"`` starts from everything on device 0, ``"best"`` from the best so far; a
            fine-tuning run's from its best so far).
        greedy_final: spend the budget's last placement on the policy's deterministic placement (a search
            component beyond the paper, off by default; `PPOAgent._kept_back`).
    """

    sb3: SB3PPOSettings = part(SB3PPOSettings)
    policy: GraphPolicySettings = part(GraphPolicySettings)
    node_groups: int | None = setting(None, Optional(GROUPS))
    start: str = setting("random", Text(choices=STARTS))
    greedy_final: bool = setting(False, FLAG, component=True)

    def __post_init__(self) -> None:
        check_settings(self)  # numpy integers from a config are kept as plain ints


class PPOAgent(SB3Agent):
    """SB3 PPO with `GraphPolicy` (see the module docstring).

    Keywords: its own settings (`PPOSettings`: SB3 PPO's, `GraphPolicy`'s and the node-by-node variant's, each by
    its own name),
    ``device`` (the torch device of the policy) and the run's (``seed``, ``torch_threads``, ``coarsen_above``,
    ``max_nodes``, ``search``: `agents.core.settings.RunSettings`). Of ``search`` (see `SB3Agent`), here
    ``split_patience`` halves the action groups after that many placements without a new best (coarse to fine,
    the run's best refit into the policy after each split) and ``greedy_final`` spends the budget's last placement
    on the policy's deterministic placement.
    """

    name = "ppo"
    #: The search layer's starts and coarse to fine over the action groups (each split refits the best).
    SEARCH_OPTIONS = SB3Agent.SEARCH_OPTIONS | {"split_patience"}
    #: The hybrid form's search layer and the search-like settings of its own code (the greedy final placement,
    #: the distillation): this agent's defaults before the search became a layer of its own.
    HYBRID = SearchConfig(heuristic_start="measure", split_patience=40, zero_shot_override=ZERO_SHOT_OVERRIDE,
                          finetune_from_predict=True)
    HYBRID_COMPONENTS = {"greedy_final": True, "distill_steps": 1000, "distill_seconds": DISTILL_SECONDS}

    #: The agent settings of the hybrid form (`agents.search.hybrid.build_agent`): 8 action groups, split coarse to
    #: fine, and the step sizes as when the hybrid was tuned.
    HYBRID_SETTINGS = {**EARLIER_SETTINGS, "n_groups": 8}

    #: Its own settings (`PPOSettings`) with their defaults; the run's, with the learned agents' coarsening.
    SETTINGS = PPOSettings()
    RUN = LEARNED_RUN

    def __init__(self, *, device: "str | torch.device" = DEVICE, **options: Any) -> None:
        super().__init__(**options)  # its own settings, the distillation's and the run's
        #: The policy's torch device (`agents.core.base.DEVICE` unless given), checked to be on this machine.
        self.device = available_device(device)
        self.node_grouping = None if self.node_groups is None else NodeGroups(self.node_groups)
        self.teacher = TeacherForcing(self._node_logits)

    @classmethod
    def _base_option_defaults(cls) -> dict[str, Any]:
        """`SB3Agent`'s keywords and the policy's torch ``device``."""
        return {**super()._base_option_defaults(), "device": DEVICE}

    @classmethod
    def _load_kwargs(cls, hyperparameters: Mapping[str, Any], device) -> dict:
        return {**hyperparameters, "device": device}

    def _algorithm_kwargs(self) -> dict[str, Any]:
        return dict(dataclasses.asdict(self.settings.sb3), verbose=0)

    # ------------------------------------------------------------------ learning
    def _make_model(self, env: gym.Env, seed: int | None) -> PPO:
        policy_kwargs = dataclasses.asdict(self.settings.policy)
        if not isinstance(env.action_space, gym.spaces.MultiDiscrete):  # node-by-node: one node per step
            policy_kwargs["n_groups"] = None
        return PPO(GraphPolicy, env, policy_kwargs=policy_kwargs, seed=seed, device=self.device,
                   **self._algorithm_kwargs())

    def _extra_callbacks(self, run: RunLoop) -> list[BaseCallback]:
        """With ``split_patience`` and action groups: coarse to fine, the best placement refit after a split."""
        stall = None if self._search is None else self._search.stall_detector()
        if stall is None or self.model.policy.n_groups is None or run.many_graphs:
            return []
        return [_CoarseToFine(stall, lambda: self._refit_best(run))]

    def _placements_per_turn(self, graph) -> int | None:
        """Over several graphs: on the padded multi-graph env as it is when the policy draws per op (`GraphPolicy`
        masks the padding); with action groups or node by node (both built for one graph), one graph at a
        time, a rollout per turn (`agents.core.run.train_in_turns`): ``n_steps`` placements, node by node
        plus the random start each episode measures (the last one's start is not measured: the turn is over)."""
        n_steps = self.n_steps
        if self.node_groups is not None:
            return n_steps + (math.ceil(n_steps / min(self.node_groups, graph.n_ops)) if self.start != "reference" else 0)
        return None if self.n_groups is None else n_steps

    def _groups(self, obs: Mapping[str, Any]) -> np.ndarray:
        """Node by node: (N,) group of every op of the graph of `obs` (or its space), ``node_groups`` contiguous
        groups or those a run refined on it (`_split_to_express`)."""
        return self.node_grouping.of(graph_key(obs))

    def _agent_env(self, env: gym.Env) -> gym.Env:
        """The run's env as is, or (``node_groups`` set) wrapped into the node-by-node variant."""
        if self.node_groups is None or "current_node" in env.observation_space.spaces:
            return env
        # The groups of the graph the env places: its ops, or the clusters of a coarsened graph.
        return NodePlacementWrapper(env, groups=self._groups(env.observation_space), start=self.start)

    def _kept_back(self, env: gym.Env, run: RunLoop) -> int:
        """Whole-placement env on one graph: the last placement of the budget is kept for the policy's own
        (greedy) placement; sampled placements stay noisy (each node is drawn independently) long after its mode
        is good. Not in a turn of training over many graphs (`_placements_per_turn`): that is one rollout."""
        greedy = (self.greedy_final and run.budget > 1 and not run.many_graphs
                  and isinstance(env.action_space, gym.spaces.MultiDiscrete))
        return int(greedy)

    def _after_collection(self, env: gym.Env, run: RunLoop) -> None:
        """Measure the policy's deterministic placement as the last placement of the budget."""
        if self._kept_back(env, run) and not run.done:
            obs, _ = env.reset()
            env.step(self.predict(obs, deterministic=True))

    def _imitate(self, placement: np.ndarray) -> torch.Tensor:
        """Node by node: the mean log-probability of the steps that build `placement` the way ``predict`` does,
        in one batched pass (`agents.search.node_by_node.TeacherForcing`); whole placements: `SB3Agent._imitate`."""
        if self.node_groups is None:
            return super()._imitate(placement)
        return self.teacher.log_prob(self.imitation_obs, self._groups(self.imitation_obs), placement,
                                     int(self.model.policy.action_space.n))

    @property
    def _reproduces(self) -> Callable[[np.ndarray], bool] | None:
        """Node by node: whether ``predict`` returns `placement` (`expressible`), from one batched pass (None on
        whole placements: `distill` calls ``predict``)."""
        if self.node_groups is None:
            return None
        return lambda placement: self.teacher.reproduces(self.imitation_obs, self._groups(self.imitation_obs),
                                                         placement, int(self.model.policy.action_space.n))

    def _node_logits(self, stacked: dict[str, np.ndarray]) -> torch.Tensor:
        """(S, D) the policy's device logits for S node-level observations (arrays with a leading S)."""
        policy = self.model.policy
        batch = {k: torch.as_tensor(v, device=policy.device) for k, v in stacked.items()}
        return policy.get_distribution(batch).distribution.logits

    def _expressible(self, placement: np.ndarray) -> np.ndarray:
        """Every group of ops (node by node: ``node_groups``; whole placements: the current ``n_groups``) on
        the device most of its ops have: what ``predict`` can return."""
        n, policy = len(placement), self.model.policy
        if self.node_groups is not None:
            groups, n_devices = self._groups(self.imitation_obs), int(policy.action_space.n)
        elif getattr(policy, "n_groups", None) is not None:
            groups = contiguous_groups(n, min(policy.n_groups, n))
            n_devices = int(np.max(policy.action_space.nvec))
        else:
            return placement
        return group_majority_placement(groups, placement, n_devices, self.imitation_obs.get("action_mask"))

    def _split_to_express(self, run: RunLoop) -> bool:
        """Make the run's best placement (e.g. a heuristic start's per-op placement) one the policy can return:
        node by node, refine the groups of the run's graph (`agents.search.node_by_node`); with coarse-to-fine
        action groups (``split_patience``), split them until it can. True if the groups changed."""
        policy = self.model.policy
        if self.node_groups is not None:
            return self.node_grouping.refine_to_express(graph_key(self.imitation_obs), run.best_action)
        return (self._search is not None and self._search.coarse_to_fine
                and getattr(policy, "n_groups", None) is not None
                and split_until_expressible(run.best_action, self._expressible, policy.split_action_groups))

    # ------------------------------------------------------------------ inference
    @agent_predict
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """The action for `obs`: (N,) int64 placement for `DevicePlacement-v0` (the current node's device for
        the node-by-node env; a node policy deployed on a whole graph places it group by group)."""
        if self.model is not None and self.node_groups is not None and "current_node" not in obs:
            obs = strip_padding(obs)  # a multi-graph env's observation: place its graph alone

            def choose(node_obs) -> int:
                return int(SB3Agent.predict(self, node_obs, deterministic))

            return place_node_by_node(obs, self._groups(obs), choose)
        return super().predict(obs, deterministic)


class PPONodeAgent(PPOAgent):
    """`PPOAgent` on the node-by-node variant (``node_groups=16`` by default): PPO re-places one group of ops
    per step, as Placeto does, instead of sampling every op's device independently at once."""

    name = "ppo-node"
    #: `PPOAgent`'s hybrid search without coarse to fine, which splits action groups: node by node has none.
    HYBRID = dataclasses.replace(PPOAgent.HYBRID, split_patience=None)
    SEARCH_OPTIONS = PPOAgent.SEARCH_OPTIONS - {"split_patience"}

    #: Node by node (16 groups), with the step sizes and rollouts chosen before `PPOAgent`'s per-op defaults (one
    #: device per step: no summed log-probability over many decisions to temper).
    SETTINGS = take_settings(PPOAgent.SETTINGS, {"node_groups": 16, **EARLIER_SETTINGS})
