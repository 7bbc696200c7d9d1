"""`PPOAgent`: Stable-Baselines3 PPO with the graph policy (`agents.common.sb3.GraphPolicy`), behind the
interface every placement agent has.

>>> env = gym.make("DevicePlacement-v0", model="bert", backend="simulated")
>>> agent = PPOAgent(seed=0).learn(env, budget=2_000)

This is the same thing as ``PPO(GraphPolicy, env).learn(...)`` plus what the other agents do: the budget is
exact (SB3 collects whole rollouts; here collection stops at `budget` placements, so the last, partial rollout
is measured but not trained on), the best placement seen is kept and re-measured at the end, the shared
`agents.common.callbacks.Callback` (progress bar, TensorBoard) sees every step and update, and
``train_summary`` reports time per update and per placement. On `DevicePlacement-v0` (one-step episodes) PPO's
advantage is simply r - V(s). Checkpoints are SB3 zip files (`save` / `load`).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from agents.common.base import BaseAgent, PolicySpec, set_seed
from agents.common.callbacks import Callback, make_callback
from agents.common.reinforce import remeasure
from agents.common.sb3 import GraphPolicy
from placement_gym.wrappers import NodePlacementWrapper, contiguous_groups, place_node_by_node

__all__ = ["PPOAgent", "PPONodeAgent"]


class _StepTimer(gym.Wrapper):
    """Adds up the seconds spent in the wrapped env's step/reset (to split env time from agent time)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.env_s = 0.0

    def step(self, action):
        t = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.env_s += time.perf_counter() - t

    def reset(self, **kwargs):
        t = time.perf_counter()
        try:
            return self.env.reset(**kwargs)
        finally:
            self.env_s += time.perf_counter() - t


class _Bridge(BaseCallback):
    """SB3 callback: enforces the budget, tracks the best placement, times updates and forwards steps and
    updates to a placement-gym `Callback`."""

    def __init__(self, budget: int, callback: Callback, config: Mapping[str, Any], stop_at: int | None = None) -> None:
        super().__init__()
        self.budget, self.user, self.config = budget, callback, dict(config)
        self.stop_at = budget if stop_at is None else stop_at  # SB3 collects until this many steps
        self.steps = 0
        self.best = (math.inf, None, 0)  # latency, placement, step
        self.update_times: list[float] = []
        self.history: list[dict] = []
        self._update_started: float | None = None

    def _on_training_start(self) -> None:
        self.user.on_training_start(self.budget, self.config)

    def _on_rollout_start(self) -> None:
        if self._update_started is not None:  # an update ran since the last rollout ended
            self.update_times.append(time.perf_counter() - self._update_started)
            stats = {k.split("/", 1)[1]: float(v) for k, v in self.logger.name_to_value.items()
                     if k.startswith("train/") and isinstance(v, (int, float))}
            stats.update(update_s=self.update_times[-1], best_latency_s=self.best[0], step=self.steps)
            self.history.append(stats)
            self.user.on_update(self.steps, stats)
            self._update_started = None

    def _on_rollout_end(self) -> None:
        self._update_started = time.perf_counter()

    def _on_step(self) -> bool:
        keep_going = True
        actions, infos, rewards = self.locals["actions"], self.locals["infos"], self.locals["rewards"]
        new_obs = self.locals["new_obs"]
        for i, info in enumerate(infos):
            self.steps += 1
            latency = info.get("latency_s", math.inf)
            if info.get("ok", True) and latency < self.best[0]:
                self.best = (float(latency), self._placement(actions[i], info, new_obs, i), self.steps)
            keep_going = (self.user.on_step(self.steps, float(rewards[i]), info) is not False) and keep_going
        return keep_going and self.steps < self.stop_at

    @staticmethod
    def _placement(action, info, new_obs, i) -> np.ndarray:
        """The placement just measured: the action itself (whole-placement env) or, for the node-by-node env,
        the observed placement (the terminal observation when the episode ended)."""
        action = np.asarray(action)
        if action.ndim == 1:
            return action.astype(np.int64).copy()
        obs = info.get("terminal_observation")
        placement = obs["placement"] if obs is not None else new_obs["placement"][i]
        return np.asarray(placement, dtype=np.int64).copy()


class PPOAgent(BaseAgent):
    """SB3 PPO with `GraphPolicy` (see the module docstring).

    Args:
        learning_rate: Adam step size (summed log-probabilities over many nodes make PPO's ratio jumpy:
            keep it small).
        n_steps: placements per rollout (= per update); with budget 500 the default 32 gives 15 updates.
        batch_size, n_epochs, clip_range, target_kl, ent_coef, vf_coef, max_grad_norm, gamma, gae_lambda:
            SB3 PPO's settings (``ent_coef`` multiplies the per-node mean entropy).
        hidden_dim, n_layers, distribution, entropy_per_node: `GraphPolicy` settings (``distribution="stock"``
            uses SB3's slow per-node multi-categorical, for comparison).
        action_groups: on the whole-placement env, draw one device per group of G contiguous ops (topological
            order) instead of one per op (`GraphPolicy`'s ``action_groups``; None = per op, exactly
            ``PPO(GraphPolicy, env)``). Measured on the simulated ``paper`` preset (budget 500, seeds 0-5): per op,
            PPO on ResNet-50 ended at exactly GPU-only (11.321 ms) on 4 seeds, 11.286 ms on one and CPU-only
            (17.809 ms) on one, because any op moved alone adds cuts and loses; with G=16 it beat GPU-only on 6/6
            seeds of ResNet (mean 10.846 ms) and Inception-V3 (12.129 vs 12.362 ms); G=8 gave 10.831 / 12.078 ms
            on every seed, G=32 and 64 stayed closer to GPU-only.
            Ignored on the node-by-node env (its groups are ``node_groups``).
        greedy_final: on the whole-placement env, spend the last placement of the budget on the policy's
            deterministic placement (the sampled ones stay noisy: every op or group is drawn independently).
        node_groups: None (default) trains on the env as given (one whole placement per step); an int G wraps
            a whole-placement env into the node-by-node variant (`NodePlacementWrapper`, G contiguous groups
            of ops) so that PPO re-places one group per step like Placeto; `predict` then builds a whole
            placement group by group (the other way, besides ``action_groups``, of moving runs of ops at once).
        progress_bar, tensorboard_log: shared callbacks (`agents.common.callbacks.make_callback`).
        seed, device: see `BaseAgent`.
    """

    name = "ppo"

    def __init__(self, learning_rate: float = 1e-3, n_steps: int = 32, batch_size: int = 32, n_epochs: int = 4,
                 clip_range: float = 0.2, target_kl: float | None = 0.05, ent_coef: float = 0.01,
                 vf_coef: float = 0.5, max_grad_norm: float = 0.5, gamma: float = 1.0, gae_lambda: float = 0.95,
                 hidden_dim: int = 64, n_layers: int = 3, distribution: str = "vectorized",
                 entropy_per_node: bool = True, action_groups: int | None = 16, greedy_final: bool = True,
                 node_groups: int | None = None, *,
                 progress_bar: bool = False, tensorboard_log: str | None = None, seed: int | None = None,
                 device: "str | torch.device" = "cpu") -> None:
        super().__init__(seed=seed, device=device)
        if n_steps < 1 or batch_size < 1:
            raise ValueError(f"n_steps and batch_size must be >= 1, got {n_steps}, {batch_size}")
        self.ppo_kwargs = dict(learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs,
                               clip_range=clip_range, target_kl=target_kl, ent_coef=ent_coef, vf_coef=vf_coef,
                               max_grad_norm=max_grad_norm, gamma=gamma, gae_lambda=gae_lambda)
        self.policy_kwargs = dict(hidden_dim=hidden_dim, n_layers=n_layers, distribution=distribution,
                                  entropy_per_node=entropy_per_node, action_groups=action_groups)
        self.greedy_final = greedy_final
        if node_groups is not None and (not isinstance(node_groups, (int, np.integer)) or node_groups < 1):
            raise ValueError(f"node_groups must be None (whole placements) or a positive number of groups, got {node_groups!r}")
        self.node_groups = None if node_groups is None else int(node_groups)
        self.progress_bar, self.tensorboard_log = progress_bar, tensorboard_log
        self.model: PPO | None = None

    def hyperparameters(self) -> dict[str, Any]:
        return dict(**self.ppo_kwargs, **self.policy_kwargs, greedy_final=self.greedy_final,
                    node_groups=self.node_groups, seed=self.seed)

    def build_policy(self, spec: PolicySpec) -> torch.nn.Module:
        raise NotImplementedError(
            "PPOAgent's policy is built by Stable-Baselines3 from the env's spaces in learn(); load a saved "
            "PPOAgent with PPOAgent.load(path)"
        )

    # ------------------------------------------------------------------ learning
    def learn(self, env, budget: int, seed: int | None = None, callback: Callback | None = None) -> "PPOAgent":
        """Train for exactly `budget` placements measured; sets `best_placement`, `best_latency_s`, `history`
        and `train_summary` (wall/env/agent seconds, ``update_s_mean``, ``ms_per_placement``). Calling it again
        continues training."""
        if not isinstance(budget, (int, np.integer)) or budget < 1:
            raise ValueError(f"budget must be a positive number of env steps (placements), got {budget!r}")
        seed = self.seed if seed is None else seed
        set_seed(seed)
        env = self._node_env(env)
        timed = _StepTimer(env)
        if self.model is None:
            policy_kwargs = dict(self.policy_kwargs)
            if not isinstance(env.action_space, gym.spaces.MultiDiscrete):  # node-by-node: one node per step
                policy_kwargs["action_groups"] = None
            self.model = PPO(GraphPolicy, timed, policy_kwargs=policy_kwargs, seed=seed, device=self.device,
                             verbose=0, **self.ppo_kwargs)
        else:
            self.model.set_env(timed)
            if seed is not None:
                self.model.set_random_seed(seed)
        self.policy = self.model.policy
        user = make_callback(callback, progress_bar=self.progress_bar, tensorboard_log=self.tensorboard_log)
        # Whole-placement env: keep the last placement of the budget for the policy's own (greedy) placement.
        # Sampled placements stay noisy (each node is drawn independently) long after the policy's mode is good.
        greedy = self.greedy_final and budget > 1 and isinstance(env.action_space, gym.spaces.MultiDiscrete)
        bridge = _Bridge(int(budget), user, self.hyperparameters(), stop_at=int(budget) - int(greedy))
        start = time.perf_counter()
        self.model.learn(total_timesteps=int(budget), callback=bridge, reset_num_timesteps=False)
        if greedy:
            self._measure_greedy(timed, bridge)
        learn_s = time.perf_counter() - start

        best_seen, best_placement, best_step = bridge.best
        best_latency, remeasure_s = best_seen, 0.0
        if best_placement is not None:
            t = time.perf_counter()
            fresh = remeasure(env, best_placement)
            remeasure_s = time.perf_counter() - t
            best_latency = best_seen if fresh is None else fresh
        self.best_placement, self.best_latency_s = best_placement, best_latency
        self.history = bridge.history
        updates = bridge.update_times
        self.train_summary = {
            "best_latency_s": best_latency, "best_latency_seen_s": best_seen, "best_step": best_step,
            "steps": bridge.steps, "updates": len(updates), "wall_s": learn_s + remeasure_s, "env_s": timed.env_s,
            "agent_s": learn_s - timed.env_s, "remeasure_s": remeasure_s,
            "update_s_mean": float(np.mean(updates)) if updates else float("nan"),
            "ms_per_placement": 1e3 * learn_s / max(bridge.steps, 1),
            "agent_ms_per_placement": 1e3 * (learn_s - timed.env_s) / max(bridge.steps, 1),
        }
        user.on_training_end(self.train_summary)
        return self

    def _groups(self, n_ops: int) -> np.ndarray:
        return contiguous_groups(n_ops, min(self.node_groups, n_ops))

    def _node_env(self, env):
        """`env` as is, or (``node_groups`` set) wrapped into the node-by-node variant."""
        if self.node_groups is None or "current_node" in getattr(env.observation_space, "spaces", {}):
            return env
        return NodePlacementWrapper(env, groups=self._groups(env.unwrapped.graph.n_ops))

    def _measure_greedy(self, env, bridge: "_Bridge") -> None:
        """Measure the policy's deterministic placement as one more step (counted in the budget)."""
        obs, _ = env.reset()
        placement = self.predict(obs, deterministic=True)
        _, reward, _, _, info = env.step(placement)
        bridge.steps += 1
        latency = info.get("latency_s", math.inf)
        if info.get("ok", True) and latency < bridge.best[0]:
            bridge.best = (float(latency), placement.copy(), bridge.steps)
        bridge.user.on_step(bridge.steps, float(reward), info)

    # ------------------------------------------------------------------ inference and persistence
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """The action for `obs`: (N,) int64 placement for `DevicePlacement-v0` (the current node's device for
        the node-by-node env)."""
        if self.model is None:
            raise RuntimeError("PPOAgent has no policy yet: call learn(env, ...) or PPOAgent.load(path) first")
        if self.node_groups is not None and "current_node" not in obs:  # deploy the node policy on a whole graph
            def choose(node_obs) -> int:
                return int(self.model.predict(node_obs, deterministic=deterministic)[0])

            return place_node_by_node(obs, self._groups(len(obs["placement"])), choose)
        action, _ = self.model.predict(obs, deterministic=deterministic)
        return np.asarray(action, dtype=np.int64)

    def save(self, path: "str | Path", overwrite: bool = False) -> Path:
        """Save as an SB3 zip (model, optimizer, hyperparameters, best placement). Refuses to overwrite an
        existing file unless `overwrite`."""
        if self.model is None:
            raise RuntimeError("PPOAgent has nothing to save yet: call learn(env, ...) first")
        path = Path(path)
        if not path.suffix:
            path = path.with_suffix(".zip")  # SB3 adds ".zip" to a path without a suffix; check that name
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists; choose another path or pass overwrite=True")
        self.model.placement_gym_agent = {
            "hyperparameters": self.hyperparameters(),
            "best_placement": None if self.best_placement is None else [int(v) for v in self.best_placement],
            "best_latency_s": self.best_latency_s,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        self.model.save(path)
        return path

    @classmethod
    def load(cls, path: "str | Path", device: "str | torch.device" = "cpu") -> "PPOAgent":
        """Rebuild a `PPOAgent` saved with `save` (an SB3 zip; a plain SB3 PPO zip with GraphPolicy works too)."""
        path = Path(path)
        if not path.exists() and not path.suffix and path.with_suffix(".zip").exists():
            path = path.with_suffix(".zip")
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint at {path}")
        model = PPO.load(path, device=device)
        saved = getattr(model, "placement_gym_agent", None) or {}
        agent = cls(**saved.get("hyperparameters", {}), device=device)
        agent.model, agent.policy = model, model.policy
        if saved.get("best_placement") is not None:
            agent.best_placement = np.asarray(saved["best_placement"], dtype=np.int64)
        agent.best_latency_s = saved.get("best_latency_s")
        return agent


class PPONodeAgent(PPOAgent):
    """`PPOAgent` on the node-by-node variant (``node_groups=16`` by default): PPO re-places one group of ops
    per step, as Placeto does, instead of sampling every op's device independently at once."""

    name = "ppo-node"

    def __init__(self, *args: Any, node_groups: int | None = 16, **kwargs: Any) -> None:
        super().__init__(*args, node_groups=node_groups, **kwargs)
