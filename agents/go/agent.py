"""`GOAgent`: a placer meant to transfer, after GO (Zhou et al., NeurIPS 2020, "Transferable Graph Optimizers
for ML Compilers").

>>> from agents.go import GOAgent
>>> agent = GOAgent(seed=0)
>>> agent.learn(gym.make("DevicePlacement-v0", model="dataset:train", backend="simulated"), budget=200)
>>> agent.save("go.pt")
>>> GOAgent.load("go.pt").predict(obs_of_a_new_graph)        # zero-shot
>>> GOAgent.load("go.pt").learn(env_of_a_new_graph, budget=50)  # fine-tuned on it

The method and where it lives:
    1. features      the env's default node features (op type, output shape, topological position, degree,
                     cost), device features and per-op costs per device (`placement_gym.features`).
    2. encoder       GraphSAGE-style mean aggregation over producers and consumers with separate weights
                     (`agents.nn.gnn.DirectedGNN`).
    3. attention     segment-level recurrent attention over the ops in topological order
                     (`agents.go.policy.SegmentRecurrentAttention`, Transformer-XL's cached previous segment).
    4. placer        `agents.nn.device_head.DeviceScorer`: every op's device in one pass, no graph size or
                     device count in the weights.
    5. training      PPO (`agents.algos.ppo`, the shared trainer), jointly over many graphs when the env draws
                     one per reset (``model=[...]`` or ``"dataset:train"``); K placements per update all of one
                     graph, advantages against that graph's own baseline (`agents.algos.rollout`).
    6. transfer      zero-shot: ``predict`` on the new graph; fine-tuning: ``learn`` again on it, the same trainer
                     continuing on every weight.

What differs from the paper: plain fine-tuning instead of parameter superposition. GO's superposition multiplies
each layer's input by a function of a per-graph conditioning vector, to ease interference between graphs while
training on many at once; when fine-tuning on one new graph every weight is free to move anyway, so it adds a
mechanism without adding anything the fine-tuning run can use, and the cost input of the device head already
tells the policy what each graph's ops cost on each device. Also: mean (not max-pool) GraphSAGE aggregation
with edge features, attention bidirectional inside a segment (all ops are decided at once, none waits for an
earlier decision), no relative position encoding (the topological position is a node feature), and a
moving-average baseline per graph instead of a critic by default (``ppo={"value": "critic"}`` selects one).

The best placement measured is the run's result; ``predict`` (every op's most likely device) is reported beside it.

Its hybrid form (``search="hybrid"``, ``hybrid:go``) adds what `GOAgent.HYBRID` (the search layer,
`agents.search.config`) and `GOAgent.HYBRID_COMPONENTS` (GO's own search-like settings, `GOSettings`) list: the
heuristic start; on an untrained policy's run on one graph, a per-group search (``search_groups``: the policy's
own placement measured first, the whole-graph cost term off, one device per contiguous group, halved after
``split_patience`` placements without a new best, with uniform exploration and a per-op refinement stage); in a
fine-tuning run, the policy's own placement first and then a cost-guided local search around the best for all of
the budget (``finetune_search``); the final distillation; and the zero-shot override after training over many graphs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agents.core.base import PolicySpec
from agents.core.bounds import COEFFICIENT, DEPTH, FLAG, GROUPS, HEADS, SHARE, WIDTH, check_settings, part, setting
from agents.algos.learned import LEARNED_RUN
from agents.algos.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.algos.reinforce import SWITCHES_OFF, SWITCHES_ON, FullBanditTrainerSettings
from agents.core.loop import RunLoop
from agents.search.attach import SearchLayer
from agents.search.coarse_to_fine import SPLIT_PATIENCE
from agents.search.config import DURING_TRAINING, OUTSIDE_TRAINING, SearchConfig
from agents.search.heuristic_start import ZERO_SHOT_OVERRIDE
from agents.search.local_search import BlockSearch, search_around_best
from placement_gym.features import DEFAULT_FAMILIES
from placement_gym.schema import MAX_OPS, Integer, MapOf, Optional, Plain

from .policy import GOPolicy

__all__ = ["GOAgent", "GOPolicySettings", "GOSettings", "SEARCH_EXPLORE", "SEARCH_GROUPS", "build_go_policy",
           "start_policy_run"]

#: GO's hybrid per-group search on one graph (``search_groups``, ``explore`` of `GOAgent.HYBRID`); its
#: ``split_patience`` is the shared `agents.search.coarse_to_fine.SPLIT_PATIENCE`.
SEARCH_GROUPS = 8
SEARCH_EXPLORE = 1.0

#: Keys of ``finetune_search_options`` for GO: `BlockSearch`'s settings and the batch of `search_around_best`.
FINETUNE_SEARCH_KEYS = ("boundary", "fine", "moves", "beta", "batch", "cheapest_first")


@dataclass(frozen=True)
class GOPolicySettings:
    """`GOPolicy`'s settings (its keywords), with GO's defaults.

    Args:
        hidden_channels: embedding width H.
        num_layers: message-passing layers of the encoder.
        attention_layers: segment-recurrent attention layers.
        heads: attention heads.
        segment_length: ops per attention segment (L).
        use_edge_features: give the encoder the tensor sizes on the edges.
        graph_cost: a learned term of each device's whole-graph cost in every op's logits
            (`agents.nn.device_head.DeviceScorer`), built with the policy (the other agents' heads get it on
            their first run over many graphs); a prior for transfer, off (scale 0) while a new policy learns one
            graph (`start_policy_run`).
    """

    hidden_channels: int = setting(64, WIDTH)
    num_layers: int = setting(3, DEPTH)
    attention_layers: int = setting(2, DEPTH)
    heads: int = setting(4, HEADS)
    segment_length: int = setting(128, Integer(1, MAX_OPS))
    use_edge_features: bool = setting(True, FLAG)
    graph_cost: bool = setting(True, FLAG)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.hidden_channels % self.heads:  # each attention head takes an equal share of the width
            raise ValueError(f"{type(self).__name__}: hidden_channels {self.hidden_channels} must be divisible by "
                             f"heads ({self.heads}); expected a width that is a multiple of the heads")


@dataclass(frozen=True)
class GOSettings:
    """GO's own settings (`GOAgent`'s keywords besides the trainer's and the run's), with their defaults: its
    policy's (`GOPolicySettings`, each keyword by its own name) and GO's own search beyond the paper.

    Args:
        policy: `GOPolicySettings`.
        search_groups: an untrained policy's run on one graph measures its own placement, then searches per group of
            this many contiguous groups instead of per op (None: off; a search component beyond the paper), halved
            coarse to fine by the search layer's ``split_patience``.
        explore: uniform exploration of that per-group search (a search component).
        refine: a per-op refinement stage in that per-group search (a search component).
        finetune_search: share of a fine-tuning run's budget spent on the local search around its best before the
            policy trains (0: off; a search component, `GOAgent._start_fine_tuning`).
        finetune_search_options: `BlockSearch` settings of that search (keys `FINETUNE_SEARCH_KEYS`).
    """

    policy: GOPolicySettings = part(GOPolicySettings)
    search_groups: int | None = setting(None, Optional(GROUPS), component=True)
    explore: float = setting(0.0, COEFFICIENT, component=True)
    refine: bool = setting(False, FLAG, component=True)
    finetune_search: float = setting(0.0, SHARE, component=True)
    finetune_search_options: dict = setting({}, MapOf(Plain(max_depth=2, max_len=100), max_len=20, max_key=100),
                                            component=True)

    def __post_init__(self) -> None:
        check_settings(self)


def build_go_policy(policy_class: type[GOPolicy], spec: PolicySpec, options: dict[str, Any]) -> GOPolicy:
    """GO's network (`policy_class`: `GOPolicy` or a subclass) for `spec`, built from `options` (its keywords):
    what GO and the imitation agent (`agents.imitation`) build."""
    if spec.device_features == 0:
        raise ValueError("GO reads obs['device_features'] to score devices; this env's observation has none")
    return policy_class(spec, **options)


def start_policy_run(policy: GOPolicy, run: RunLoop, trained: bool) -> None:
    """GO's network at the start of a run: a new policy's run on one graph has the whole-graph cost term off.

    The whole-graph cost term is a prior for transfer across graphs (not in the GO paper): on one graph it starts
    every op on the device with the lowest total cost, a single-device placer from its first sample."""
    if not trained and not run.many_graphs and policy.head.graph_cost is not None:
        policy.head.graph_cost_scale.fill_(0.0)


class GOAgent(PolicyGradientAgent):
    """GO: GraphSAGE encoder + segment-recurrent attention + device head, trained with PPO (module docstring).

    Keywords: its own settings (`GOSettings`: its policy's and its own search); the trainer's, every bandit-mode
    setting (``learning_rate``, ``samples_per_update``, ...: `agents.algos.reinforce.FullBanditTrainerSettings`,
    defaults in `TRAINER`; samples_per_update placements of one graph per update); ``algorithm`` (GO's: ``"ppo"``, the paper's), ``ppo`` and the run's (``seed``,
    ``torch_threads``, ``device``, ``coarsen_above``, ``max_nodes``, ``search``): see
    `agents.algos.policy_gradient.PolicyGradientAgent`. GO's own search is in `GOSettings` (``finetune_search``,
    ``search_groups``, ``explore``, ``refine``: off by default).
    """

    name = "go"
    #: The search layer it composes (an object it holds when built with search) and the layer's components it runs.
    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = OUTSIDE_TRAINING | DURING_TRAINING
    #: The hybrid form's search layer and GO's own search-like settings (its per-group search on one graph, the
    #: fine-tuning run's local search, the distillation): this agent's defaults before the search became a layer.
    HYBRID = SearchConfig(heuristic_start="measure", zero_shot_override=ZERO_SHOT_OVERRIDE, finetune_from_predict=True,
                          split_patience=SPLIT_PATIENCE, split_refit=True)
    HYBRID_COMPONENTS = {"distill_steps": 1000, "distill_seconds": DISTILL_SECONDS, "finetune_search": 1.0,
                         "search_groups": SEARCH_GROUPS, "explore": SEARCH_EXPLORE, "refine": True}
    feature_families = DEFAULT_FAMILIES

    #: The agent settings of the hybrid form (`agents.search.hybrid.build_agent`): the trainer's switches as when
    #: the hybrid was tuned.
    HYBRID_SETTINGS = {"entropy_coef": 0.01, **SWITCHES_OFF}

    #: The trainer's settings (`PolicyGradientAgent`): the one place their defaults are written.
    TRAINER = FullBanditTrainerSettings(samples_per_update=16, entropy_coef=0.1, **SWITCHES_ON)

    #: Its own settings (`GOSettings`) with their defaults; the run's, with the learned agents' coarsening.
    SETTINGS = GOSettings()
    RUN = LEARNED_RUN
    ALGORITHM = "ppo"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        unknown = sorted(set(self.finetune_search_options) - set(FINETUNE_SEARCH_KEYS))
        if unknown:
            raise ValueError(f"unknown finetune_search_options {unknown}; accepted: {list(FINETUNE_SEARCH_KEYS)}")
        self.whole_graph_cost = self.graph_cost  # built with the policy (`GOPolicy`), never added by a run

    def _start_fine_tuning(self, run: RunLoop, env, seed: int | None, obs) -> None:
        """After the search layer's start (the zero-shot placement with ``finetune_from_predict``, then the
        heuristic start's): ``finetune_search`` of the rest of the budget on the local search around the best
        placement (`agents.search.local_search`)."""
        placements = int(round(self.finetune_search * run.remaining))
        if placements == 0:
            return
        # `obs`: the graph as the policy sees it (coarsened on a coarsened run), costs included.
        given = self.finetune_search_options
        options = {k: v for k, v in given.items() if k not in ("batch", "cheapest_first")}
        search = BlockSearch.of_observation(obs, seed, **options)
        search_around_best(run, search, placements, start=self.predict(obs), batch=given.get("batch", 4),
                           cheapest_first=given.get("cheapest_first", False))

    def _start_run(self, run, env, seed, trained) -> None:
        """A new policy's run on one graph has the whole-graph cost term off (`start_policy_run`); with
        `search_groups` it measures its own placement, then searches per group (class docstring); otherwise the
        shared start."""
        start_policy_run(self.policy, run, trained)
        if self.search_groups is None or trained or env is not run.env or run.many_graphs or run.done:
            return super()._start_run(run, env, seed, trained)
        self._measure_predict(run, seed, self.imitation_obs)
        self.policy.set_groups(self.search_groups)
        self.policy.explore.fill_(self.explore)
        if self.refine:
            self.policy.enable_refiner()

    def build_policy(self, spec: PolicySpec) -> GOPolicy:
        return build_go_policy(GOPolicy, spec, asdict(self.settings.policy))
