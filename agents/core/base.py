"""The base class of the agents with a torch policy: policy spec, lazy policy building, torch checkpoints.

    agent = SomeAgent(seed=0, ...)            hyperparameters in the constructor
    agent.learn(env, budget=500, seed=0)      budget = placements measured (env steps); returns the agent
    agent.best_placement, agent.best_latency_s   the run's best placement and its latency re-measured at the end
    action = agent.predict(obs)               (N,) int64 for the DevicePlacement-v0 Dict observation
    agent.save("hsdag.pt")                    refuses to overwrite an existing file unless overwrite=True
    agent = SomeAgent.load("hsdag.pt")        (or BaseAgent.load: finds the class recorded in the file)

`learn` is the shared run loop (`agents.core.run.RunAgent`); a subclass provides `train(run, seed)` (its
algorithm), `hyperparameters()` (constructor keyword arguments, plain Python values) and `build_policy(spec)`
(the torch module for a `PolicySpec`). The policy is built lazily from the first env it sees (`setup`); the
spec is saved with the weights so `load` can rebuild it. Policies have no graph size or device count in their
parameters (``size_free``; their device head reads the env's device descriptions,
`agents.nn.device_head.DeviceScorer`), so a policy built on one graph and device set learns and predicts on
any other with the same node, edge and device feature widths; an agent whose parameters are per op of its
training graph (Post) sets ``size_free = False`` and says why in ``size_bound_reason``.

Feature families: an agent that needs particular node features sets ``feature_families``; whoever builds its
env (the CLI, the evaluation harness) passes ``features=agent.feature_families`` to the env.
`PolicySpec.from_env` refuses an env whose observation was built with other families.
"""
from __future__ import annotations

import abc
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from placement_gym.schema import MAX_DEVICES, MAX_OPS, Integer, ListOf, Optional, Record, Spec, Text, check

from .checkpoint import (
    CheckpointError, check_tensor_shapes, read_checkpoint, rebuilding, resolve_agent_class, restore_run_state,
    saved_options, write_checkpoint,
)
from .run import RunAgent, agent_predict

__all__ = ["BaseAgent", "DEVICE", "PolicySpec", "available_device"]


@dataclass(frozen=True)
class PolicySpec:
    """What a policy network is built for: sizes that come from the env, not from hyperparameters.

    Attributes:
        node_features: F, width of ``obs["node_features"]``.
        edge_features: Fe, width of ``obs["edge_features"]`` (0 if absent).
        n_devices: D, devices an op can be placed on.
        feature_families: the node-feature families F was built from (None if unknown).
        n_ops: N, ops of the env's graph (the most, for a padded multi-graph observation); only policies with
            parameters per op (Post) are built for it, the others serve any graph.
        device_features: K, width of ``obs["device_features"]`` (0 if absent): what a device-aware head
            (`agents.nn.device_head.DeviceScorer`) reads instead of building D into its weights.
    """

    node_features: int
    edge_features: int
    n_devices: int
    feature_families: tuple[str, ...] | None = None
    n_ops: int | None = None
    device_features: int = 0

    @classmethod
    def from_env(cls, env, expected_families: "tuple[str, ...] | None" = None) -> "PolicySpec":
        """Read the spec off an env's spaces (works through wrappers). Checks the feature families when
        `expected_families` is given."""
        obs_space = env.observation_space
        if not isinstance(obs_space, spaces.Dict) or "node_features" not in obs_space.spaces:
            raise ValueError(f"expected a DevicePlacement env with a Dict observation holding node_features, got {obs_space}")
        f = int(obs_space["node_features"].shape[-1])
        fe = int(obs_space["edge_features"].shape[-1]) if "edge_features" in obs_space.spaces else 0
        action_space = env.action_space
        if isinstance(action_space, spaces.MultiDiscrete):
            d = int(np.max(action_space.nvec))
        elif isinstance(action_space, spaces.Discrete):
            d = int(action_space.n)
        else:
            raise ValueError(f"expected a MultiDiscrete or Discrete action space, got {action_space}")
        families = getattr(env.unwrapped, "feature_families", None)
        families = tuple(families) if families is not None else None
        if expected_families is not None and families is not None and tuple(expected_families) != families:
            raise ValueError(
                f"this agent expects node features {tuple(expected_families)} but the env observes {families}; "
                f"create the env with features={tuple(expected_families)!r}"
            )
        k = int(obs_space["device_features"].shape[-1]) if "device_features" in obs_space.spaces else 0
        return cls(f, fe, d, families, int(obs_space["node_features"].shape[-2]), k)


_FEATURES = Integer(0, 1 << 16)  # a feature width
#: What a checkpoint of a `BaseAgent` holds in ``extra`` besides every agent's fields: its `PolicySpec`.
SPEC_FIELDS = {"spec": Record(
    {"node_features": Integer(1, 1 << 16), "edge_features": _FEATURES, "n_devices": Integer(1, MAX_DEVICES)},
    {"feature_families": Optional(ListOf(Text(max_len=100), max_len=100)), "n_ops": Optional(Integer(1, MAX_OPS)),
     "device_features": _FEATURES}, others=None)}


#: The torch device a policy is built on unless the agent's ``device`` says.
DEVICE = "cpu"


def available_device(device: "str | torch.device") -> torch.device:
    """`device` as a torch device this machine has (``cpu``, ``cuda[:i]`` where CUDA sees device i, ``mps`` on a
    Mac that has it), else ValueError in one line: a device torch cannot use here would fail later, in the middle
    of a run, with a long traceback."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a torch device ({str(exc).splitlines()[0]}); expected 'cpu'"
                         f"{' or cuda' if torch.cuda.is_available() else ''}") from None
    counts = {"cpu": lambda: 1, "cuda": torch.cuda.device_count,
              "mps": lambda: int(torch.backends.mps.is_available())}
    count = counts.get(parsed.type, lambda: 0)()
    if count == 0 or (parsed.index or 0) >= count:
        here = [name for name, n in counts.items() if n()]
        raise ValueError(f"device {str(device)!r} is not on this machine; expected one of {', '.join(here)}"
                         + (f" (cuda:0 to cuda:{count - 1})" if parsed.type == "cuda" and count else ""))
    return parsed


class BaseAgent(RunAgent):
    """An agent with a torch policy built lazily for the env's sizes (see the module docstring).

    Keywords: ``device``, the torch device of the policy, and `RunAgent`'s (the run's settings and a subclass's
    own).
    """

    #: True when the policy's parameters hold no graph size (N) or device count (D): it learns and predicts on
    #: any graph and device set. False: `setup` refuses another N or D with ``size_bound_reason``.
    size_free: ClassVar[bool] = True
    #: Why a policy that is not ``size_free`` cannot serve another graph, and what to do instead.
    size_bound_reason: ClassVar[str] = ""
    #: An agent's own state in a checkpoint's ``extra`` beside its spec, and what each field must be when read
    #: (`_saved_state` writes them, `_restore_saved_state` reads them back; a file without one restores nothing).
    SAVED_STATE: ClassVar[Mapping[str, Spec]] = {}

    def __init__(self, *, device: "str | torch.device" = DEVICE, **options: Any) -> None:
        super().__init__(**options)
        #: The policy's torch device (`DEVICE` unless given), checked to be on this machine (`available_device`).
        self.device = available_device(device)
        self.policy: nn.Module | None = None
        self.spec: PolicySpec | None = None

    @classmethod
    def _base_option_defaults(cls) -> dict[str, Any]:
        """The run's keywords and the policy's torch ``device``."""
        return {**super()._base_option_defaults(), "device": DEVICE}

    @abc.abstractmethod
    def build_policy(self, spec: PolicySpec) -> nn.Module:
        """The policy module for `spec` (called once, lazily)."""

    @agent_predict
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """The action for `obs` ((N,) int64 for the DevicePlacement-v0 Dict observation). Uses the policy's
        ``act(obs, num_samples=1, deterministic=...)``: the policy's own placement, which the run summary
        reports as ``predict_latency_s`` next to the best placement the run found."""
        self._require_policy()
        self.policy.eval()
        with torch.no_grad():
            sample = self.policy.act(obs, num_samples=1, deterministic=deterministic)
        return sample.actions[0].cpu().numpy().astype(np.int64)

    # ------------------------------------------------------------------ policy building
    def _setup(self, spec: PolicySpec, seed: int | None = None) -> nn.Module:
        """Build the policy for `spec` if there is none yet; otherwise check that `spec` fits the one built.

        The initial weights are drawn from a generator seeded with `seed` and forked from torch's global one,
        so they depend on the seed alone and the run's sampling starts from the freshly seeded global state."""
        if self.policy is None:
            with torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(int(seed))
                self.spec = spec
                self.policy = self.build_policy(spec).to(self.device)
        else:
            self._check_spec(spec)
        return self.policy

    def _check_spec(self, spec: PolicySpec) -> None:
        """ValueError unless the built policy can read an env with `spec`: the same node, edge and device feature
        widths (any graph size and device count, unless the agent is not ``size_free``)."""
        built = self.spec
        widths = ("node_features", "edge_features", "device_features")
        if any(getattr(spec, w) != getattr(built, w) for w in widths):
            got = ", ".join(f"{w}={getattr(spec, w)}" for w in widths)
            want = ", ".join(f"{w}={getattr(built, w)}" for w in widths)
            raise ValueError(f"this {self.name} policy reads {want} (feature widths of the env it was built on), the "
                             f"env gives {got}; build the env with features=agent.feature_families "
                             f"({built.feature_families}) and a device description of the same width")
        if not self.size_free and (spec.n_ops, spec.n_devices) != (built.n_ops, built.n_devices):
            raise ValueError(f"this {self.name} policy was built for a graph of {built.n_ops} ops on {built.n_devices} "
                             f"devices, the env has {spec.n_ops} ops on {spec.n_devices} devices: {self.size_bound_reason}")

    def _require_policy(self) -> None:
        if self.policy is None:
            raise RuntimeError(f"{type(self).__name__} has no policy yet: call learn(env, ...) or load(path) first")

    # ------------------------------------------------------------------ persistence
    def save(self, path: "str | Path", overwrite: bool = False) -> Path:
        """Save hyperparameters, policy weights, spec and best placement to `path` (`agents.core.checkpoint`:
        tensors and plain data only). Refuses to overwrite an existing file unless `overwrite`."""
        self._require_policy()
        return write_checkpoint(path, self, self.policy.state_dict(),
                                {"spec": asdict(self.spec), **self._saved_state()}, overwrite)

    def _saved_state(self) -> dict[str, Any]:
        """The fields of `SAVED_STATE` as plain data, for the checkpoint."""
        return {}

    def _restore_saved_state(self, saved: Mapping[str, Any]) -> None:
        """Take back what `_saved_state` wrote (the fields of `SAVED_STATE` the file holds, checked)."""

    @classmethod
    def load(cls, path: "str | Path", device: "str | torch.device" = "cpu") -> "BaseAgent":
        """Rebuild an agent saved with `save`. Called on `BaseAgent`, it rebuilds the registered agent the file
        names; called on a class, the file must hold that class (or a registered subclass of it). Nothing in the
        file is executed or imported, and the policy is built only once its settings are known to build exactly
        the stored tensors (`agents.core.checkpoint.check_tensor_shapes`)."""
        data = read_checkpoint(path, extra=SPEC_FIELDS)
        agent_cls = resolve_agent_class(data, cls, path)
        saved = {k: v for k, v in data["extra"].items() if k in agent_cls.SAVED_STATE}
        check(saved, Record({}, agent_cls.SAVED_STATE), path, at="extra", error=CheckpointError)
        stored = data["extra"]["spec"]
        spec = PolicySpec(**{**stored, "feature_families": None if stored.get("feature_families") is None
                             else tuple(stored["feature_families"])})
        settings = {**{f"hyperparameters.{k}": v for k, v in data["hyperparameters"].items()},
                    **{f"extra.spec.{k}": v for k, v in stored.items()}}
        with rebuilding(path, agent_cls):
            agent = agent_cls(**saved_options(data["hyperparameters"], agent_cls.option_names()), device=device)
            check_tensor_shapes(path, data, lambda: agent.build_policy(spec), settings)
            agent._setup(spec)
            agent.policy.load_state_dict(data["state_dict"])
        restore_run_state(agent, data)
        agent._restore_saved_state(saved)
        return agent
