"""`PostAgent`: Post (Gao et al., NeurIPS 2018: "Post: Device Placement with Cross-Entropy Minimization and
Proximal Policy Optimization").

>>> env = gym.make("DevicePlacement-v0", model="resnet", backend="simulated")
>>> agent = PostAgent(seed=0).learn(env, budget=500)
>>> agent.best_placement, agent.best_latency_s, agent.predict(env.reset()[0])

The placement distribution is a product of independent softmax distributions, one per op group
(`PostPolicy`). Training interleaves the two updates of the paper:

* PPO on every batch of sampled placements: the project's shared trainer (`agents.algos.ppo.PPOTrainer`,
  bandit mode, moving-average baseline: the distribution does not depend on an observation, so there is
  nothing for a critic to read);
* every ``ce_every`` batches, the cross-entropy step: the elite fraction ``elite_fraction`` of the placements
  sampled since the last such step (the fastest ones) and the distributions are moved toward their device
  frequencies (`PostPolicy.fit`, closed form, ``ce_smoothing``).

Unlike the other learned agents, a Post policy serves only the graph and device list it was trained on (its
parameters ARE that graph's per-group distributions): using it on another graph or device count raises a
`ValueError` that says so (`agents.post.policy.POST_IS_PER_GRAPH`). We kept it per-graph rather than make it
size-free because the free per-group distribution is what makes it the most sample-efficient agent here.

Where it differs from the paper (the defaults are Post's method; no search runs unless ``search`` asks):

* one distribution per op, as in the paper (``n_groups=None``); ``n_groups=G`` makes them per group of G
  contiguous ops (topological order), an option whose space cannot express placements that change device often.
* the project's option set (``--agent-option shared_device_logits=true --agent-option ce_smoothing=0.2``, this
  agent's defaults until 2026-11-27): every group's logits are its own plus one logit per device shared by all
  groups (zero at first, so the distributions start uniform; the same family of distributions, parameterised so
  that a gradient step can move every op toward a device at once: with independent per-op logits alone each op's
  gradient sees only its neighbours' current devices, so from uniform the ops settle in runs on different
  devices), and a cross-entropy step moves the distributions a fifth of the way to the elites' frequencies where
  the paper's closed form moves all the way (``ce_smoothing=1``, the default). docs/agents/post.md gives its
  measured effect on the sanity suite.
* the PPO update compares each placement with the others of its update (``leave_one_out``; the distribution reads
  no observation, so a critic would have nothing to read), weighs the entropy of every op (``entropy_coef=0.1``,
  ``entropy_per_decision``), measures the distributions' argmax once per update (``measure_argmax``),
  ``samples_per_update=20`` placements per update and ``learning_rate=0.1``; the paper does not fix these for
  our setting.
* a cross-entropy step every ``ce_every=3`` PPO updates (the paper interleaves them without fixing the ratio).
* the best placement measured is the result; ``predict`` (every group's most likely device) is reported beside it.

Its hybrid form (``search="hybrid"``, ``hybrid:post``) adds the search layer `PostAgent.HYBRID` lists (the heuristic
start, coarse to fine over the groups, the memory fit of samples and a fine-tuning run's first measurement of the
policy's own placement: `agents.search.config`) and what `PostAgent.HYBRID_COMPONENTS` turns on in its own code
(exploration at the best placement's device boundaries after each split, the final distillation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.core.base import PolicySpec
from agents.core.bounds import COEFFICIENT, FLAG, GROUPS, STEPS, check_settings, setting
from agents.nn.policy import group_majority_placement
from agents.algos.learned import LEARNED_RUN
from agents.algos.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.algos.reinforce import SWITCHES_OFF, SWITCHES_ON, BanditTrainerSettings
from agents.algos.ppo import PPOTrainer
from agents.algos.rollout import Decision, Measured
from agents.search.attach import SearchLayer
from agents.search.config import DURING_TRAINING, OUTSIDE_TRAINING, SearchConfig
from placement_gym.schema import Number, Optional

from .policy import POST_IS_PER_GRAPH, PostPolicy

__all__ = ["PostAgent", "PostSettings", "PostTrainer"]


class PostTrainer(PPOTrainer):
    """The shared PPO trainer plus Post's periodic cross-entropy step (`after_update`).

    Args:
        policy: a `PostPolicy`.
        config: `PPOConfig`.
        imitate: the agent's ``imitate`` (only used with ``imitation_coef > 0``).
        ce_every, elite_fraction, ce_smoothing: see `PostSettings` (their defaults; the agent passes them).
        on_split: called with the run after every split of the groups (`PostAgent._explore_boundary`).
        hooks: the search layer's points in the run (`PolicyGradientTrainer`; the agent's ``_training_hooks``:
            coarse to fine is the shared trainer's `PolicyGradientTrainer.coarse_to_fine`, at the layer's
            ``after_update``).
    """

    def __init__(self, policy: PostPolicy, config, imitate=None, *, ce_every: int, elite_fraction: float,
                 ce_smoothing: float, on_split=None, hooks=None) -> None:
        super().__init__(policy, config, imitate, on_split, hooks=hooks)
        self.ce_every, self.elite_fraction, self.ce_smoothing = ce_every, elite_fraction, ce_smoothing
        self.updates = 0
        self.pool: list[tuple[float, np.ndarray]] = []  # (latency, placement) since the last cross-entropy step

    def after_update(self, measured: "list[Decision | Measured]", stats: dict) -> None:
        for decision in measured:
            self.pool += list(zip(decision.latencies, decision.placements))
        stats["n_groups"] = float(self.policy.n_groups)
        self.updates += 1
        if self.updates % self.ce_every:
            return
        self.pool.sort(key=lambda item: item[0])
        elites = self.pool[:max(1, int(round(self.elite_fraction * len(self.pool))))]
        self.policy.fit(np.stack([placement for _, placement in elites]), self.ce_smoothing)
        stats["ce_elites"], stats["ce_elite_latency_s"] = float(len(elites)), float(elites[-1][0])
        self.pool = []


@dataclass(frozen=True)
class PostSettings:
    """Post's own settings (`PostAgent`'s keywords besides the trainer's and the run's), with their defaults.

    Args:
        n_groups: G contiguous op groups with one distribution each (None: one per op).
        ce_every: PPO updates between two cross-entropy steps.
        elite_fraction: share of the placements sampled since the last cross-entropy step that are elites.
        ce_smoothing: how far a cross-entropy step moves the distributions to the elites' frequencies (1: all
            the way, the paper's closed form).
        shared_device_logits: every group's logits are its own plus one logit per device shared by all groups
            (`PostPolicy`; False: the groups' own alone, the paper's parameters).
        boundary_explore: after a split of the groups, the share of the uniform distribution given back to the
            groups at a device boundary of the run's best placement, in [0, 1] (0: off; a search component beyond
            the paper, `PostAgent._explore_boundary`).
    """

    n_groups: int | None = setting(None, Optional(GROUPS))
    ce_every: int = setting(3, STEPS)
    elite_fraction: float = setting(0.1, Number(positive=True, high=1.0))
    ce_smoothing: float = setting(1.0, Number(positive=True, high=1.0))
    shared_device_logits: bool = setting(False, FLAG)
    boundary_explore: float = setting(0.0, COEFFICIENT, component=True)

    def __post_init__(self) -> None:
        check_settings(self)


class PostAgent(PolicyGradientAgent):
    """Post: per-group softmax distributions trained by PPO and cross-entropy minimisation (module docstring).

    Keywords: its own settings (`PostSettings`); the PPO settings shared with REINFORCE, the bandit mode's
    (``learning_rate``, ``samples_per_update``, ``entropy_coef``, ...: `agents.algos.reinforce.BanditTrainerSettings`,
    defaults in `TRAINER`); ``ppo``, further PPO settings (`agents.algos.ppo.PPOConfig`: n_epochs,
    clip_range, target_kl, ...); and the run's (``seed``, ``torch_threads``, ``device``, ``coarsen_above``,
    ``max_nodes``, ``search``): see `agents.algos.policy_gradient.PolicyGradientAgent`. No ``algorithm``: Post
    always trains with PPO.
    """

    name = "post"
    #: The search layer it composes (an object it holds when built with search) and the layer's components it runs.
    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = OUTSIDE_TRAINING | DURING_TRAINING
    #: The hybrid form's search layer and the search-like settings of its own code (boundary exploration, the
    #: distillation): this agent's defaults before the search became a layer of its own.
    HYBRID = SearchConfig(heuristic_start="measure", split_patience=30, fit_memory=True, finetune_from_predict=True)
    HYBRID_COMPONENTS = {"boundary_explore": 0.5, "distill_steps": 1000, "distill_seconds": DISTILL_SECONDS}
    # Post's distribution is per op group of its training graph (`agents.post.policy`): no transfer, by design.
    size_free = False
    size_bound_reason = POST_IS_PER_GRAPH

    #: The agent settings of the hybrid form (`agents.search.hybrid.build_agent`): 4 groups, split coarse to fine,
    #: no entropy bonus and the trainer's switches as when the hybrid was tuned.
    #: The step size and the per-op logits alone (no shared device logits) as when it was tuned.
    HYBRID_SETTINGS = {"n_groups": 4, "samples_per_update": 10, "entropy_coef": 0.0, "ce_smoothing": 0.5,
                       "learning_rate": 0.05, "shared_device_logits": False, **SWITCHES_OFF}

    #: The trainer's settings (`PolicyGradientAgent`): the one place their defaults are written.
    TRAINER = BanditTrainerSettings(learning_rate=0.1, samples_per_update=20, entropy_coef=0.1, **SWITCHES_ON)

    #: Its own settings (`PostSettings`) with their defaults; the run's, with the learned agents' coarsening.
    SETTINGS = PostSettings()
    RUN = LEARNED_RUN
    ALGORITHM = "ppo"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not 0 <= self.boundary_explore <= 1:
            raise ValueError(f"Post's boundary_explore is a share of the uniform distribution in [0, 1] (0: off), got "
                             f"{self.boundary_explore}")

    @classmethod
    def _base_option_defaults(cls) -> dict[str, Any]:
        """The policy-gradient agents' keywords but ``algorithm``: Post always trains with PPO."""
        options = super()._base_option_defaults()
        del options["algorithm"]
        return options

    def _algorithm_options(self) -> dict[str, Any]:
        """The PPO settings and the search (no ``algorithm``: Post always trains with PPO)."""
        options = super()._algorithm_options()
        del options["algorithm"]
        return options

    def train(self, run, seed: int | None) -> None:
        if run.many_graphs:  # one distribution per op group of ONE graph: over many graphs it means nothing
            raise ValueError(f"Post cannot train over several graphs (this env draws from {run.base.models}): it "
                             "learns one free device distribution per op group of one graph. Train one PostAgent "
                             "per graph, or use hsdag, placeto, rnn, ppo, ppo-node or go to train across graphs")
        super().train(run, seed)

    def _expressible(self, placement: np.ndarray) -> np.ndarray:
        """`placement` with every current group of ops on the device most of its ops have (what Post's
        distributions, one per group, can return)."""
        return group_majority_placement(self.policy.groups.cpu().numpy(), placement, self.policy.n_devices,
                                        self.imitation_obs.get("action_mask"))

    def build_policy(self, spec: PolicySpec) -> PostPolicy:
        return PostPolicy(spec, self.n_groups, self.shared_device_logits)

    def _make_trainer(self, policy: PostPolicy) -> PostTrainer:
        return PostTrainer(policy, self.trainer_config, self._imitate, ce_every=self.ce_every,
                           elite_fraction=self.elite_fraction, ce_smoothing=self.ce_smoothing,
                           on_split=self._explore_boundary if self.boundary_explore > 0 else None,
                           hooks=self._training_hooks())

    def _explore_boundary(self, run) -> None:
        """After a split of the groups: the groups at a device boundary of the run's best placement get back
        ``boundary_explore`` of the uniform distribution (`PostPolicy.explore_boundary`)."""
        if run.best_action is not None:
            self.policy.explore_boundary(run.best_action, self.imitation_obs["edge_index"], self.boundary_explore)
