"""`ImitationAgent` (``imitation``): GO's network trained by imitation of the solvers' labels over many graphs,
then (optionally) by GO's PPO on measured rewards; ``predict`` on a new graph is one forward pass.

    agent = ImitationAgent(seed=0)
    agent.pretrain(examples, epochs=30)          # examples: [(env of a training graph, label placement), ...]
    agent.learn(env_over_training_graphs, 200)   # optional: PPO on measured rewards (GO's trainer)
    agent.predict(obs_of_a_new_graph)            # every op's most likely device: no search, no measurement

The method:
    1. labels        per training graph and case (preset, objective), the best placement of the planners and the
                     search (`agents.imitation.labels`): the dataset's train split and synthetic graphs only.
    2. network       GO's (`agents.go.policy.GOPolicy`): GraphSAGE encoder, segment-recurrent attention, the shared
                     device head (`agents.nn.device_head.DeviceScorer`) that scores (op, device) pairs from the
                     device features and per-op costs, so one checkpoint runs on any graph and device set; with
                     ``sequential=True`` the ops are decided in topological order, each reading where the ops
                     before it went (`agents.imitation.policy.SequentialGOPolicy`: load, memory, producers).
    3. imitation     cross-entropy of every op's device distribution to its label's device, averaged over the ops
                     (``-placement_log_prob``), one gradient step per graph (`pretrain`), with the optimiser of
                     the trainer that step 4 continues with; optionally ending with the mean of the weights over
                     the last passes (``average_from``).
    4. RL            optional: ``learn`` over many graphs is PPO as GO trains (`agents.algos.ppo`), rewards measured.
    5. zero-shot     ``predict``: the argmax of every op's distribution (in topological order given the ops before
                     it, with ``sequential``). Search is refused: no search layer (no zero-shot override, no
                     start placements) and none of GO's own search-like settings (no distillation).

A checkpoint belongs to one case: the device set (preset) and the objective are not inputs of the network beyond
what the observation's device features and costs say, so each (preset, objective) gets its own checkpoint
(`benchmarks/learned_placer/train_learned_placer.py` writes one per case with a JSON beside it naming the case).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import torch

from agents.algos.learned import LEARNED_RUN
from agents.algos.policy_gradient import PolicyGradientAgent
from agents.algos.reinforce import apply_gradients
from agents.core.base import PolicySpec
from agents.core.loop import torch_threads
from agents.core.bounds import FLAG, setting
from agents.go import GOSettings
from agents.go.agent import build_go_policy, start_policy_run
from agents.go.policy import GOPolicy
from placement_gym.features import DEFAULT_FAMILIES
from agents.search.config import SearchConfig

from .labels import check_placement
from .policy import SequentialGOPolicy

__all__ = ["ImitationAgent", "ImitationSettings"]


@dataclass(frozen=True)
class ImitationSettings(GOSettings):
    """GO's network settings (`agents.go.GOSettings`) and the imitation agent's own.

    Args:
        sequential: decide the ops in topological order, each seeing where the ops before it went
            (`agents.imitation.policy.SequentialGOPolicy`); False: GO's network as it is.
        balance: (with `sequential` only) the placement state's share and pace columns
            (`agents.nn.placement_state`).
    """

    sequential: bool = setting(False, FLAG)
    balance: bool = setting(False, FLAG)

    def __post_init__(self) -> None:
        super().__post_init__()  # GO's network settings, and every field's declared values
        if self.balance and not self.sequential:
            raise ValueError("balance=True adds columns to the placement state, which only the sequential policy "
                             "has; accepted: balance=True with sequential=True, or balance=False")


class ImitationAgent(PolicyGradientAgent):
    """GO's network and PPO, pretrained by imitation of solver labels (module docstring).

    A policy-gradient agent that builds GO's network (`agents.go.agent.build_go_policy`) and starts a run as GO
    does (`agents.go.agent.start_policy_run`); not a subclass of `agents.go.GOAgent`, whose own search (the
    fine-tuning search, the per-group search) never runs here.

    Keywords: its settings (`ImitationSettings`: GO's and ``sequential``, ``balance``), ``algorithm``, ``ppo`` and
    the run's (`agents.algos.policy_gradient.PolicyGradientAgent`); ``search`` must stay None (a hybrid is
    ``hybrid:imitation``, the generic layer around it), and GO's search settings off. The trainer keywords
    (``learning_rate`` ...) are refused: its trainer runs with `agents.algos.reinforce.ReinforceConfig`'s defaults
    (its checkpoints and pinned runs were made so)."""

    name = "imitation"
    feature_families = DEFAULT_FAMILIES
    #: No search preset of its own: ``hybrid:imitation`` is `agents.search.hybrid.SearchAround` around it.
    HYBRID = None

    #: No search layer and no search settings: ``--agent-option`` search keys are not handed to it
    #: (`placement_gym.commands.settings`).
    SEARCH_LAYER = None
    SEARCH_OPTIONS = frozenset()
    HYBRID_COMPONENTS = {}

    #: No trainer form: it takes no trainer keywords (``learning_rate=...`` is refused, and ``--agent-option
    #: learning_rate=...`` is not handed to it); its trainer runs with `ReinforceConfig`'s defaults, not GO's.
    TRAINER = None
    #: Its own settings with their defaults (`ImitationSettings`); the run's, with the learned agents' coarsening.
    SETTINGS = ImitationSettings()
    RUN = LEARNED_RUN
    #: GO's trainer: PPO.
    ALGORITHM = "ppo"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        on = self.search_components()  # GO's own search-like settings, the distillation
        if on:
            raise self._without_search(on)
        self.whole_graph_cost = self.graph_cost  # built with the policy (`GOPolicy`), never added by a run

    def build_policy(self, spec: PolicySpec) -> GOPolicy:
        """GO's network, or with ``sequential`` `SequentialGOPolicy` (and its ``balance``)."""
        if self.sequential:
            return build_go_policy(SequentialGOPolicy, spec, {**asdict(self.settings.policy), "balance": self.balance})
        return build_go_policy(GOPolicy, spec, asdict(self.settings.policy))

    def _start_run(self, run, env, seed, trained) -> None:
        """GO's start of a run (`agents.go.agent.start_policy_run`), then the shared one."""
        start_policy_run(self.policy, run, trained)
        super()._start_run(run, env, seed, trained)

    def _build_search(self, value: Any) -> None:
        """No search layer: None, ``"off"`` or a `SearchConfig` with no component on (checked once, when built, so
        `pretrain`, ``learn`` and `predict` never run with one and need not check again)."""
        config = SearchConfig.resolve(value)
        if config.active:
            raise self._without_search(config.components())
        return None

    @staticmethod
    def _without_search(components: list[str]) -> ValueError:
        return ValueError(f"the imitation agent runs without search; got search components {components}; accepted: "
                          "search=None, 'off' or SearchConfig() and GO's search settings off (use hybrid:imitation "
                          "for the search layer around it)")

    def pretrain(self, examples: Sequence[tuple[gym.Env, np.ndarray]], epochs: int, seed: int | None = None,
                 max_seconds: float | None = None, on_epoch: Callable[[int, float], None] | None = None,
                 average_from: int = 0) -> dict[str, Any]:
        """Imitation: `epochs` passes over `examples` ((env of one graph, label placement (N,)) pairs; the envs
        must share their feature widths), in a seeded random order, one gradient step on the cross-entropy
        ``-placement_log_prob(obs, label)`` per graph; stops early after `max_seconds`. Builds the policy on the
        first env when there is none. `on_epoch(epoch, mean loss)` after every pass. `average_from` > 0: the
        policy ends with the mean of its weights at the end of every pass from that one on (stochastic weight
        averaging, Izmailov et al. 2018: the zero-shot placements of unseen graphs swing from one pass to the
        next, the mean's less); 0: the last pass's weights. Returns ``{"epochs", "steps", "seconds", "loss",
        "averaged"}`` (loss: the last pass's mean; averaged: how many passes' weights were averaged)."""
        if average_from < 0:
            raise ValueError(f"average_from is a pass number (1 to epochs) or 0 for none, got {average_from}")
        with torch_threads(self.torch_threads):
            return self._pretrain(examples, epochs, seed, max_seconds, on_epoch, average_from)

    def _pretrain(self, examples: Sequence[tuple[gym.Env, np.ndarray]], epochs: int, seed: int | None,
                  max_seconds: float | None, on_epoch: Callable[[int, float], None] | None,
                  average_from: int) -> dict[str, Any]:
        if not examples:
            raise ValueError("pretrain needs at least one (env, label) example")
        seed = self.seed if seed is None else seed
        self._setup(PolicySpec.from_env(examples[0][0], self.feature_families), seed)
        if self.trainer is None:
            self.trainer = self._make_trainer(self.policy)
        observations = [env.reset(seed=0)[0] for env, _ in examples]
        labels = [check_placement(label, env, f"the label of example {i} ({env.unwrapped.graph.name})")
                  for i, (env, label) in enumerate(examples)]
        rng = np.random.default_rng(seed)
        started, steps, loss, epoch = time.perf_counter(), 0, float("nan"), 0
        mean_weights: list[torch.Tensor] = []  # the running mean of the passes' weights, with average_from
        averaged = 0
        self.policy.train()
        for epoch in range(1, epochs + 1):
            losses = []
            for i in rng.permutation(len(examples)):
                step_loss = -self.policy.placement_log_prob(observations[i], labels[i])
                apply_gradients(self.trainer.optimizer, self.policy.parameters(), step_loss,
                                self.trainer_config.max_grad_norm)
                losses.append(float(step_loss.detach()))
                steps += 1
            loss = float(np.mean(losses))
            if average_from and epoch >= average_from:
                averaged += 1
                with torch.no_grad():
                    if not mean_weights:
                        mean_weights = [p.detach().clone() for p in self.policy.parameters()]
                    for mean, p in zip(mean_weights, self.policy.parameters()):
                        mean.add_(p.detach() - mean, alpha=1.0 / averaged)
            if on_epoch is not None:
                on_epoch(epoch, loss)
            if max_seconds is not None and time.perf_counter() - started > max_seconds:
                break
        if mean_weights:
            with torch.no_grad():
                for p, mean in zip(self.policy.parameters(), mean_weights):
                    p.copy_(mean)
        self.policy.eval()
        return {"epochs": epoch, "steps": steps, "seconds": time.perf_counter() - started, "loss": loss,
                "averaged": averaged}
