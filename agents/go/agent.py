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
                     (`agents.common.gnn.DirectedGNN`).
    3. attention     segment-level recurrent attention over the ops in topological order
                     (`agents.go.policy.SegmentRecurrentAttention`, Transformer-XL's cached previous segment).
    4. placer        `agents.common.device_head.DeviceScorer`: every op's device in one pass, no graph size or
                     device count in the weights.
    5. training      PPO (`agents.common.ppo`, the shared trainer), jointly over many graphs when the env draws
                     one per reset (``model=[...]`` or ``"dataset:train"``); K placements per update all of one
                     graph, advantages against that graph's own baseline (`agents.common.rollout`).
    6. transfer      zero-shot: ``predict`` on the new graph; fine-tuning: ``learn`` again on it: the zero-shot
                     placement measured first, then (``finetune_search``, default all of the budget) a cost-guided
                     local search around the best placement (`agents.common.local_search`), the rest (if any) plain
                     fine-tuning of every weight with the same trainer, then distillation of the best placement
                     found so ``predict`` returns it, as the other agents do.
    7. override      zero-shot only (ours, ``zero_shot_override``, every learned agent's; `agents.common.run`,
                     "Zero-shot"): after training over many graphs, ``predict`` moves each op whose own time on its
                     cheapest device is lower than where the policy put it by more than the move adds on links plus
                     2 per-submodel overheads (``obs["submodel_overhead"]``;
                     `agents.common.heuristic_start.override_zero_shot`).

What differs from the paper: plain fine-tuning instead of parameter superposition. GO's superposition multiplies
each layer's input by a function of a per-graph conditioning vector, to ease interference between graphs while
training on many at once; when fine-tuning on one new graph every weight is free to move anyway, so it adds a
mechanism without adding anything the fine-tuning run can use, and the cost input of the device head already
tells the policy what each graph's ops cost on each device. Also: mean (not max-pool) GraphSAGE aggregation
with edge features, attention bidirectional inside a segment (all ops are decided at once, none waits for an
earlier decision), no relative position encoding (the topological position is a node feature), and a
moving-average baseline per graph instead of a critic by default (``ppo={"value": "critic"}`` selects one).

Why the override: trained over the train split of every preset, GO's policy places every op of a new graph on one
device (the cost term's best single device; on ``ai_pc``, the CPU for all nine test graphs), so where an unseen
graph gains from a few ops elsewhere (the U-Nets on ``ai_pc``: 7% and 21% faster mixed) no zero-shot placement
found it. A cut pays for itself when an op saves more than what the transfers and the extra submodels cost; the
threshold was chosen on the TRAIN split (``benchmarks/transfer_saving_rule.py``,
`agents.common.heuristic_start.ZERO_SHOT_OVERRIDE`). It is the same function whatever the graph: a new graph's
placement, never fitted to it, and it stays off for a policy's own graph (a run on one graph turns it off, so
``predict`` there is the best placement distilled). An observation whose ``submodel_overhead`` is 0 (unknown: the
real backend unless told) leaves the policy's placement as it is.
"""
from __future__ import annotations

from typing import Any

import torch

from agents.common.base import PolicySpec
from agents.common.coarse_to_fine import SPLIT_PATIENCE
from agents.common.heuristic_start import HEURISTIC_START, ZERO_SHOT_OVERRIDE
from agents.common.local_search import BlockSearch, search_around_best
from agents.common.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.common.reinforce import ReinforceConfig
from agents.common.run import RunLoop
from placement_gym.coarsen import COARSEN_ABOVE, MAX_NODES
from placement_gym.features import DEFAULT_FAMILIES

from .policy import GOPolicy

__all__ = ["GOAgent", "SEARCH_EXPLORE", "SEARCH_GROUPS"]

#: Defaults of GO's single-graph search (`GOAgent`'s ``search_groups``, ``search_explore``; README, convergence);
#: its ``split_patience`` is the shared `agents.common.coarse_to_fine.SPLIT_PATIENCE`.
SEARCH_GROUPS = 8
SEARCH_EXPLORE = 1.0

#: Keys of GOAgent's ``finetune_search_options``: `BlockSearch`'s settings and the batch of `search_around_best`.
SEARCH_OPTIONS = ("boundary", "fine", "moves", "beta", "batch", "cheapest_first")


class GOAgent(PolicyGradientAgent):
    """GO: GraphSAGE encoder + segment-recurrent attention + device head, trained with PPO (module docstring).

    Args:
        hidden_channels: embedding width H.
        num_layers: message-passing layers of the encoder.
        attention_layers: segment-recurrent attention layers.
        heads: attention heads.
        segment_length: ops per attention segment (L).
        use_edge_features: give the encoder the tensor sizes on the edges.
        graph_cost: a learned term of each device's whole-graph cost in every op's logits
            (`agents.common.device_head.DeviceScorer`), built with the policy (the other agents' heads get it on
            their first run over many graphs).
        learning_rate, samples_per_update, baseline, baseline_decay, entropy_coef, normalize_advantage,
        max_grad_norm: trainer settings (`ReinforceConfig`); samples_per_update placements of one graph per update.
        imitation_coef, elites, distill_steps, distill_seconds: self-imitation of the run's fastest placements and the final
            distillation of the best one into the policy (`ReinforceConfig`); distillation applies to runs on one
            graph (a fine-tuning run), not to training over many.
        algorithm, ppo: ``"ppo"`` (default, the paper's) or ``"reinforce"``, and PPO's settings.
        heuristic_start: ``"off"``, ``"measure"`` or ``"refit"``: the placements the costs suggest, measured before the
            policy samples (`agents.common.heuristic_start`; not in the paper).
        seed, torch_threads, device: see `agents.common.base.BaseAgent`.
        coarsen_above, max_nodes: graphs of more than `coarsen_above` ops are learned and placed as at most
            `max_nodes` clusters of ops (`agents.common.run`, `placement_gym.coarsen`; None: never).
        finetune_from_predict: a run that continues trained weights on one graph (fine-tuning) measures the
            policy's own (zero-shot) placement first, so fine-tuning never ends worse than zero-shot (without
            it, sampled placements mix devices op by op and the best of 50 was 120-210% above the optimum on
            the val graphs while the zero-shot placement was the optimum).
        finetune_search: share of a fine-tuning run's remaining placements (after the zero-shot one) spent on a
            cost-guided local search around the best placement so far (`agents.common.local_search`: block
            moves drawn by what the per-op device costs say they save); the trainer gets the rest; the best
            placement is distilled into the policy either way. 0: off (plain PPO fine-tuning). Why: a policy
            trained where the optimum is one device gives every op the same device preference, so its samples
            never propose the few ops a mixed optimum moves (README, Transfer).
        finetune_search_options: `agents.common.local_search.BlockSearch` settings (``fine``, ``moves``, ``beta``) and ``batch``
            (`search_around_best`); None: their defaults.
        search_groups: GO's single-graph search (ours): a run that trains an untrained GO on ONE graph measures
            the policy's own placement first (the whole-graph cost term's best single device), then turns that
            term off (``graph_cost_scale`` 0: it holds every op on that device, -14 logits on ResNet, so sampling
            never left it) and draws one device per contiguous group of ops, `search_groups` groups at first,
            halved after ``split_patience`` placements without a new best (coarse to fine,
            `agents.common.coarse_to_fine`), down to one per op. None: the paper's per-op search, the term on.
            Training over many graphs and fine-tuning a trained GO are never affected (the transfer results).
            The policy keeps the term off and its groups afterwards (saved in the checkpoint).
        split_patience: see `search_groups`.
        search_explore: during that search, about this many group decisions per placement are drawn uniformly
            at random (`agents.go.policy.GOPolicy._grouped`): PPO collapsed the groups' distributions within
            ~100 placements, and after a split no sample moved a boundary. 0: off.
        search_refine: during that search, add the per-op refinement stage with boundary moves after the
            decisions (`agents.common.refine.OpRefiner`, as HSDAG and the RNN have): a learned local search that
            moves the groups' cut op by op.
        split_refit: after a split, fit the run's best placement into the policy
            (`PolicyGradientAgent.refit_best`, no placement measured): a group's logits are the mean of its ops',
            so halves do not keep their parent's distribution, and PPO had left the mode on the best single
            device while the best placement found was a mixed one.
        zero_shot_override: after training over many graphs, ``predict`` moves each op whose own time on its
            cheapest device is lower than on the device the policy chose by more than the move adds on links plus
            this many per-submodel overheads (``obs["submodel_overhead"]``) (module docstring, "Why the override";
            `agents.common.run`, "Zero-shot"). It is on for the placement of a graph the policy was not fitted to
            (zero-shot, and the first placement a fine-tuning run measures) and off once a run on one graph has
            measured its start. None or 0: off.
    """

    name = "go"
    feature_families = DEFAULT_FAMILIES

    def __init__(
        self,
        *,
        hidden_channels: int = 64,
        num_layers: int = 3,
        attention_layers: int = 2,
        heads: int = 4,
        segment_length: int = 128,
        use_edge_features: bool = True,
        graph_cost: bool = True,
        learning_rate: float = 1e-3,
        samples_per_update: int = 16,
        baseline: bool = True,
        baseline_decay: float = 0.9,
        entropy_coef: float = 0.01,
        normalize_advantage: bool = True,
        max_grad_norm: float | None = 1.0,
        imitation_coef: float = 0.0,
        elites: int = 4,
        distill_steps: int = 1000,
        distill_seconds: float | None = DISTILL_SECONDS,
        algorithm: str = "ppo",
        ppo: "dict[str, Any] | None" = None,
        heuristic_start: str = HEURISTIC_START,
        seed: int | None = None,
        torch_threads: int | None = 1,
        device: "str | torch.device" = "cpu",
        coarsen_above: int | None = COARSEN_ABOVE,
        max_nodes: int = MAX_NODES,
        finetune_from_predict: bool = True,
        finetune_search: float = 1.0,
        finetune_search_options: "dict[str, Any] | None" = None,
        search_groups: int | None = SEARCH_GROUPS,
        split_patience: int | None = SPLIT_PATIENCE,
        search_explore: float = SEARCH_EXPLORE,
        search_refine: bool = True,
        split_refit: bool = True,
        zero_shot_override: float | None = ZERO_SHOT_OVERRIDE,
    ) -> None:
        if search_explore < 0:
            raise ValueError(f"search_explore must be >= 0, got {search_explore}")
        if search_groups is not None and search_groups < 1:
            raise ValueError(f"search_groups must be >= 1 or None (the per-op search), got {search_groups}")
        reinforce = ReinforceConfig(
            mode="bandit", learning_rate=learning_rate, samples_per_update=samples_per_update, baseline=baseline,
            baseline_decay=baseline_decay, entropy_coef=entropy_coef, normalize_advantage=normalize_advantage,
            max_grad_norm=max_grad_norm, imitation_coef=imitation_coef, elites=elites, distill_steps=distill_steps,
            distill_seconds=distill_seconds, split_patience=split_patience,
        )
        super().__init__(reinforce, algorithm=algorithm, ppo=ppo, heuristic_start=heuristic_start, seed=seed,
                         torch_threads=torch_threads, device=device, coarsen_above=coarsen_above, max_nodes=max_nodes,
                         zero_shot_override=zero_shot_override)
        self.network = dict(hidden_channels=hidden_channels, num_layers=num_layers, attention_layers=attention_layers,
                            heads=heads, segment_length=segment_length, use_edge_features=use_edge_features,
                            graph_cost=graph_cost)
        self.finetune_from_predict = finetune_from_predict
        self.whole_graph_cost = graph_cost  # built with the policy (`GOPolicy`), never added by a run
        if not 0.0 <= finetune_search <= 1.0:
            raise ValueError(f"finetune_search is a share of the fine-tuning budget in [0, 1], got {finetune_search}")
        self.finetune_search = float(finetune_search)
        self.search_options = dict(finetune_search_options or {})
        unknown = sorted(set(self.search_options) - set(SEARCH_OPTIONS))
        if unknown:
            raise ValueError(f"unknown finetune_search_options {unknown}; accepted: {list(SEARCH_OPTIONS)}")
        self.search_groups, self.split_patience, self.search_explore = search_groups, split_patience, search_explore
        self.search_refine, self.split_refit = search_refine, split_refit

    def hyperparameters(self) -> dict[str, Any]:
        r = self.reinforce
        return {
            **self.network,
            "learning_rate": r.learning_rate, "samples_per_update": r.samples_per_update, "baseline": r.baseline,
            "baseline_decay": r.baseline_decay, "entropy_coef": r.entropy_coef,
            "normalize_advantage": r.normalize_advantage, "max_grad_norm": r.max_grad_norm, "seed": self.seed,
            "torch_threads": self.torch_threads, **self.algorithm_options(), **self.coarsen_options(),
            **self.transfer_options(),
            "finetune_from_predict": self.finetune_from_predict, "finetune_search": self.finetune_search,
            "finetune_search_options": dict(self.search_options),
            "search_groups": self.search_groups,
            "split_patience": self.split_patience, "search_explore": self.search_explore,
            "search_refine": self.search_refine, "split_refit": self.split_refit,
        }

    def start_fine_tuning(self, run: RunLoop, env, seed: int | None, obs) -> None:
        """The shared start (the zero-shot placement with ``finetune_from_predict``, then the heuristic start's),
        then ``finetune_search`` of the rest of the budget on the local search around the best placement
        (`agents.common.local_search`)."""
        super().start_fine_tuning(run, env, seed, obs)
        placements = int(round(self.finetune_search * run.remaining))
        if placements == 0:
            return
        # `obs`: the graph as the policy sees it (coarsened on a coarsened run), costs included.
        options = {k: v for k, v in self.search_options.items() if k not in ("batch", "cheapest_first")}
        search = BlockSearch.of_observation(obs, seed, **options)
        search_around_best(run, search, placements, start=self.predict(obs), batch=self.search_options.get("batch", 4),
                           cheapest_first=self.search_options.get("cheapest_first", False))

    def start_run(self, run, env, seed, trained) -> None:
        """`search_groups`: on an untrained policy's run on one graph, measure its own placement, then search per
        group with the whole-graph cost term off (class docstring); otherwise the shared start."""
        if self.search_groups is None or trained or env is not run.env or run.many_graphs or run.done:
            return super().start_run(run, env, seed, trained)
        self.measure_predict(run, seed, self.imitation_obs)
        if self.policy.head.graph_cost is not None:
            self.policy.head.graph_cost_scale.fill_(0.0)
        self.policy.set_groups(self.search_groups)
        self.policy.explore.fill_(self.search_explore)
        if self.search_refine:
            self.policy.enable_refiner()

    def build_policy(self, spec: PolicySpec) -> GOPolicy:
        if spec.device_features == 0:
            raise ValueError("GO reads obs['device_features'] to score devices; this env's observation has none")
        return GOPolicy(spec, **self.network)
