"""`HSDAGAgent`: the paper's method (Duan et al., NeurIPS 2024) as a trainable, reusable agent.

>>> from agents.hsdag import HSDAGAgent
>>> from placement_gym import DevicePlacementEnv
>>> agent = HSDAGAgent(seed=0)
>>> env = DevicePlacementEnv("resnet", backend="simulated", features=agent.feature_families)
>>> agent.learn(env, budget=500)
>>> agent.best_placement, agent.best_latency_s
>>> agent.save("hsdag_resnet.pt")

Steps of the method and where they live:
    1. features     `placement_gym.features` families (op type, output shape, node id / topological position,
                    degree, cost, fractal dimension, centrality); the env builds them from `feature_families`.
    2. encoder      `agents.nn.gnn.DirectedGNN` (separate forward and backward message passing).
    3. pooling      `agents.hsdag.pooling.GraphParsingPool` (learned edge scores, best edge per node,
                    connected components, repeat until nothing merges).
    4. placer       a per-group MLP -> device distribution; a group's device goes to all its ops.
    5. training     `agents.algos.reinforce.ReinforceTrainer` (REINFORCE end to end; moving-average baseline
                    and entropy bonus switchable), best placement kept and re-measured.

Ablation switches (paper Table 3): ``output_shape=False``, ``node_id=False``, ``structure=False`` drop feature
families; ``pooling=False`` places every op on its own; ``stochastic_parsing=True`` samples the parsing choices
while training; ``baseline=False, entropy_coef=0, normalize_advantage=False`` is the authors' REINFORCE.

Where it differs from the paper (the defaults are the paper's method: one device per parsed group, parsing until
nothing merges; no search runs unless ``search`` asks):

* the project's option set (``--agent-option place=op --agent-option max_levels=1``, this agent's defaults until
  2026-11-27): every op decides its device, reading its group's embedding (one parsing level) beside its own. With
  fixed argmax parses a group placer's groups follow an encoder that its own gradient keeps moving, so the parse
  can drift to one or two groups; per-op decisions express placements that change device every few ops.
  docs/agents/hsdag.md gives its measured effect on the sanity suite. The pooling's group count is recorded per
  update (``details["groups_per_update"]``: min / median / max).
* updates that do not collapse (the shared trainer's switches, `agents.algos.reinforce`): the entropy bonus per
  decision (``entropy_per_decision``, coefficient 0.1 on every op's entropy, as the summed log-probability
  weighs every op), a leave-one-out baseline over the update's 10 placements (``leave_one_out``) and the
  policy's own argmax placement measured once per update from the budget (``measure_argmax``). The paper gives
  REINFORCE without saying how it reduces variance; the authors' code has none
  (``baseline=False, entropy_coef=0, normalize_advantage=False, leave_one_out=False``).
* ``samples_per_update=10`` placements per gradient step (the authors' code: 20 steps per episode).
* directed message passing and parsing (``directed=True``): the authors' code symmetrises the graph; the paper
  stresses the DAG's direction. ``directed=False`` is their code's choice.
* extra node features beyond the paper's (``cost``: per-device op costs from the observation; ``centrality``
  with ``structure``); ``cost=False`` drops the cost family.
* the reward is the env's (``speedup`` by default) where the paper used 1 / latency: both are monotone in
  latency.
* the result is reported as the paper does (the best placement measured, re-measured at the end) and, beside
  it, ``predict``: the policy's own deterministic placement.

Its hybrid form (``search="hybrid"``, ``hybrid:hsdag``) adds the search layer `HSDAGAgent.HYBRID` lists (the
heuristic start, two cost-guided proposals per update, coarse to fine over the pooling levels, the zero-shot
override: `agents.search.config`) and turns on the search-like settings of its own code that
`HSDAGAgent.HYBRID_COMPONENTS` lists (uniform and boundary exploration and a per-op refinement stage with boundary
moves in the policy, self-imitation in the trainer, the final distillation). Those were this agent's defaults
before the search became a layer.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from agents.core.base import PolicySpec
from agents.core.bounds import COEFFICIENT, DEPTH, FLAG, LEVELS, WIDTH, check_settings, part, setting
from agents.algos.learned import LEARNED_RUN
from agents.algos.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.algos.reinforce import SWITCHES_OFF, SWITCHES_ON, FullBanditTrainerSettings
from agents.search.attach import SearchLayer
from agents.search.config import DURING_TRAINING, OUTSIDE_TRAINING, SearchConfig
from agents.search.heuristic_start import ZERO_SHOT_OVERRIDE
from placement_gym.schema import Number, Optional, Text

from .policy import HSDAGPolicy

__all__ = ["HSDAGAgent", "HSDAGFeatureSwitches", "HSDAGPolicySettings", "HSDAGSettings", "hsdag_feature_families"]


def hsdag_feature_families(output_shape: bool = True, node_id: bool = True, structure: bool = True,
                           cost: bool = True) -> tuple[str, ...]:
    """The node-feature families HSDAG observes, with the paper's ablation switches."""
    families = ["op_type"]
    if output_shape:
        families.append("output_shape")
    if node_id:
        families.append("node_id")
    families.append("degree")
    if cost:
        families.append("cost")
    if structure:
        families += ["fractal_dim", "centrality"]
    return tuple(families)


@dataclass(frozen=True)
class HSDAGPolicySettings:
    """`HSDAGPolicy`'s settings (its keywords), with the agent's defaults.

    Args:
        hidden_channels: embedding width.
        num_layers: directed message-passing layers.
        pooling: group ops with graph-parsing pooling (False: no groups, per-op placement from the op
            embeddings alone; ablation).
        place: ``"op"`` (every op decides, reading its group's embedding too) or ``"group"`` (the paper's: one
            device per group, all its ops following).
        max_levels: cap on pooling levels (None: parse until nothing merges, the paper's rule; module docstring).
        stochastic_parsing: sample the parsing choices while training so the reward trains the grouping
            (default False: the paper's argmax rule throughout; module docstring).
        stay_bias: initial learned bias of the pooling's no-merge (self-loop) logits.
        directed: keep edge direction (False: symmetrised graph, as the authors' code).
        use_edge_features: use tensor sizes on edges in encoder and scorer.
        explore: about this many group decisions per placement drawn uniformly at random (0: off; a search
            component beyond the paper, `HSDAGPolicy`).
        boundary_explore: decisions per placement sampled around the run's best at its device boundaries (0: off;
            a search component, `HSDAGAgent._on_update`).
        refine: a per-op override stage after the group placer (a search component, `agents.nn.refine`).
        refine_boundary: that stage proposes boundary moves to the neighbours' device (a search component).
    """

    hidden_channels: int = setting(64, WIDTH)
    num_layers: int = setting(3, DEPTH)
    pooling: bool = setting(True, FLAG)
    place: str = setting("group", Text(choices=("op", "group")))
    max_levels: int | None = setting(None, Optional(LEVELS))
    stochastic_parsing: bool = setting(False, FLAG)
    stay_bias: float = setting(0.0, Number(-1e3, 1e3))
    directed: bool = setting(True, FLAG)
    use_edge_features: bool = setting(True, FLAG)
    explore: float = setting(0.0, COEFFICIENT, component=True)
    boundary_explore: float = setting(0.0, COEFFICIENT, component=True)
    refine: bool = setting(False, FLAG, component=True)
    refine_boundary: bool = setting(False, FLAG, component=True)

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class HSDAGFeatureSwitches:
    """The switches of the node-feature families HSDAG observes (the paper's ablations, `hsdag_feature_families`):
    ``output_shape``, ``node_id``, ``structure`` (fractal dimension and centrality) and ``cost``."""

    output_shape: bool = setting(True, FLAG)
    node_id: bool = setting(True, FLAG)
    structure: bool = setting(True, FLAG)
    cost: bool = setting(True, FLAG)

    def __post_init__(self) -> None:
        check_settings(self)

    def families(self) -> tuple[str, ...]:
        """The node-feature families these switches observe (`hsdag_feature_families`)."""
        return hsdag_feature_families(**asdict(self))


@dataclass(frozen=True)
class HSDAGSettings:
    """HSDAG's own settings (`HSDAGAgent`'s keywords besides the trainer's and the run's), with their defaults: its
    policy's (`HSDAGPolicySettings`) and its feature switches (`HSDAGFeatureSwitches`), each keyword by its own
    name (``HSDAGAgent(place="op", cost=False)``)."""

    policy: HSDAGPolicySettings = part(HSDAGPolicySettings)
    features: HSDAGFeatureSwitches = part(HSDAGFeatureSwitches)


class HSDAGAgent(PolicyGradientAgent):
    """HSDAG: directed GNN + graph-parsing pooling + per-group placer, trained with REINFORCE.

    Build its env with ``features=agent.feature_families`` (the CLI does).

    Keywords: its own settings (`HSDAGSettings`: its policy's and its feature switches); the trainer's, every
    bandit-mode setting (``learning_rate``, ``samples_per_update``, ``baseline``, ...:
    `agents.algos.reinforce.FullBanditTrainerSettings`, defaults in `TRAINER`; ``baseline=False, entropy_coef=0``
    is the authors' setting); ``algorithm`` (the paper's: ``"reinforce"``), ``ppo`` and the run's
    (``seed``, ``torch_threads``, ``device``, ``coarsen_above``, ``max_nodes``, ``search``): see
    `agents.algos.policy_gradient.PolicyGradientAgent`. ``help(HSDAGAgent)`` lists them all with their defaults.
    """

    name = "hsdag"
    feature_families = hsdag_feature_families()
    #: The search layer it composes (an object it holds when built with search) and the layer's components it runs.
    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = OUTSIDE_TRAINING | DURING_TRAINING
    #: The hybrid form's search layer and the search-like settings of its own code (policy, trainer,
    #: distillation): this agent's defaults before the search became a layer of its own.
    HYBRID = SearchConfig(heuristic_start="measure", search_proposals=2, split_patience=50, split_refit=True,
                          zero_shot_override=ZERO_SHOT_OVERRIDE, finetune_from_predict=True)
    HYBRID_COMPONENTS = {"explore": 0.5, "boundary_explore": 2.0, "refine": True, "refine_boundary": True,
                         "imitation_coef": 0.5, "distill_steps": 1000, "distill_seconds": DISTILL_SECONDS}

    #: The agent settings of the hybrid form (`agents.search.hybrid.build_agent`): this agent's defaults when the
    #: hybrid was tuned (group placement, four parsing levels, the trainer's moving-average baseline).
    HYBRID_SETTINGS = {"place": "group", "max_levels": 4, "entropy_coef": 0.05, **SWITCHES_OFF}

    #: The trainer's settings (`PolicyGradientAgent`): the one place their defaults are written.
    TRAINER = FullBanditTrainerSettings(samples_per_update=10, entropy_coef=0.1, **SWITCHES_ON)

    #: Its own settings (`HSDAGSettings`) with their defaults; the run's, with the learned agents' coarsening.
    SETTINGS = HSDAGSettings()
    RUN = LEARNED_RUN

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        #: The env's node features for this agent (instance attribute: the ablation switches change it).
        self.feature_families = self.settings.features.families()

    def build_policy(self, spec: PolicySpec) -> HSDAGPolicy:
        if spec.feature_families is not None and tuple(spec.feature_families) != self.feature_families:
            raise ValueError(f"HSDAG with these switches observes {self.feature_families}, the env gives "
                             f"{spec.feature_families}; create the env with features=agent.feature_families")
        return HSDAGPolicy(spec, **asdict(self.settings.policy))

    def _start_run(self, run, env, seed, trained) -> None:
        """A run starts with no placement to sample around (a previous run's best belongs to its graph)."""
        super()._start_run(run, env, seed, trained)
        self.policy.explore_around(None)

    def _on_update(self, run) -> None:
        """After every update: sample around the run's best placement so far (``boundary_explore``), on a run on
        one graph (across graphs a best placement belongs to one of them)."""
        if self.boundary_explore > 0 and not run.many_graphs:
            self.policy.explore_around(run.best_action)

    def _learn_policy(self, run, env, seed) -> None:
        """The trainer's updates, then the pooling's group count per update in the run's record
        (``details["groups_per_update"]``: min / median / max over the updates), so a parse that drifted to
        one or two groups shows."""
        super()._learn_policy(run, env, seed)
        counts = [update["n_groups"] for update in run.history if "n_groups" in update]
        if counts:
            run.details["groups_per_update"] = {"min": float(min(counts)), "median": float(np.median(counts)),
                                                "max": float(max(counts)), "updates": len(counts)}

    def groups(self, obs) -> torch.Tensor:
        """(N,) int64 group of every op for `obs` (all distinct without pooling)."""
        self._require_policy()
        with torch.no_grad():
            _, pooled = self.policy.groups(obs)
        n = int(obs["node_features"].shape[0])
        return torch.arange(n) if pooled is None else pooled.assignment.cpu()
