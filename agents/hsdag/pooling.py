"""Graph-parsing pooling (HSDAG step 3, after Graph Parsing Networks, Song et al. ICLR 2024).

One *level* of parsing on a graph with node embeddings h (n, H):

1. every edge u -> v gets a learned score ``s_uv = sigmoid(MLP([h_u * h_v, e_uv]))`` and every node a self-loop
   score ``s_uu = sigmoid(MLP([h_u * h_u, 0]))`` (the option of staying on its own);
2. each node keeps its single best candidate among its incident edges (in or out) and its self-loop;
3. the connected components of the kept edges become the groups of this level.

Levels repeat on the coarsened graph (group embeddings, edges between groups) until a level merges nothing
(every node preferred its self-loop) or `max_levels` is reached: the number of groups is decided by the scores,
i.e. by the data, not fixed in advance.

The grouping itself is discrete (argmax, connected components: computed without gradients). Gradients reach the
scorer, and through it the encoder, because a group's embedding is the *score-weighted* sum of its members'
embeddings: ``g_c = post(sum_{u in c} s_u * pre(h_u))``, where s_u is the score of the candidate u kept.

Stochastic parsing (``sample=True``, used while training; our addition): step 2 draws each node's candidate
from the softmax of the candidates' score logits (Gumbel-max: the *best* candidate under Gumbel-perturbed
logits) instead of taking the argmax, and returns the log-probability of the choices. The REINFORCE trainer
adds it to the placement's log-probability, so the scorer learns from the reward *which* merges lead to fast
placements. Without it the grouping gets no reward signal at all (only the score weighting), and a parse that
merged a graph into one group can never be undone: every sample is then the same single-device placement.
``sample=False`` is exactly the paper's argmax rule (used by `predict`). A learned ``stay_bias`` is added to
every self-loop logit (the prior of not merging).

Differences from the HSDAG authors' code (reference.md): edge direction is kept (edges are scored as
producer -> consumer with their data volume, and the coarse graph is refined by a *directed* layer), instead of
symmetrising the adjacency.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from torch import Tensor, nn
from torch_geometric.utils import scatter

from agents.nn.gnn import MLP, DirectedConv

__all__ = ["GraphParsingPool", "PoolResult", "keep_best_candidates"]


@dataclass
class PoolResult:
    """The outcome of parsing a batch of graphs into groups.

    Attributes (N nodes in, G groups out):
        assignment: (N,) int64 group of every input node, groups numbered 0..G-1.
        x: (G, H) group embeddings (differentiable w.r.t. the node embeddings and the scorer).
        batch: (G,) int64 graph index of every group.
        num_levels: parsing levels that merged something.
        group_counts: number of groups after each merging level (the last one is G).
        log_prob: (B,) log-probability of each graph's sampled parsing choices (None when not sampled).
        entropy: (B,) mean entropy of a node's candidate choice over all levels, per graph (None when not sampled).
        choices: the candidate each node kept, per level (`keep_best_candidates`' ``chosen``): passing them back
            to ``forward(..., choices=...)`` replays this parse under the current weights (PPO re-scores with it).
    """

    assignment: Tensor
    x: Tensor
    batch: Tensor
    num_levels: int
    group_counts: list[int]
    log_prob: Tensor | None = None
    entropy: Tensor | None = None
    choices: list[Tensor] | None = None

    @property
    def num_groups(self) -> int:
        return int(self.x.shape[0])


def _candidates(edge_index: Tensor, n: int) -> Tensor:
    """(2E + n,) owner node of every candidate: each edge once from each endpoint, then the n self-loops."""
    return torch.cat([edge_index[0], edge_index[1], torch.arange(n, device=edge_index.device)])


def keep_best_candidates(edge_index: Tensor, edge_score: Tensor, self_score: Tensor) -> tuple[Tensor, Tensor]:
    """Each node keeps its best-scoring candidate: an incident edge (either direction) or its self-loop.

    Args:
        edge_index: (2, E) edges of a graph with n nodes.
        edge_score: (E,) edge scores (any monotone scale: probabilities, logits, perturbed logits).
        self_score: (n,) self-loop scores.

    Returns:
        kept_edges (E,) bool: edges kept by at least one endpoint; chosen (n,) int64: the candidate each node
        kept, indexing ``cat([edge_score, edge_score, self_score])`` (ties go to the self-loop, then to the
        lowest edge index).
    """
    n, e = self_score.shape[0], edge_score.shape[0]
    device = self_score.device
    owner = _candidates(edge_index, n)
    with torch.no_grad():
        score = torch.cat([edge_score, edge_score, self_score])
        best = scatter(score, owner, 0, dim_size=n, reduce="max")
        is_best = score >= best[owner]
        # Prefer the self-loop on ties (no merge without a strict reason), then the earliest edge.
        rank = torch.cat([torch.arange(2 * e, device=device) + n, torch.arange(n, device=device)])
        rank = torch.where(is_best, rank, torch.full_like(rank, n + 2 * e))
        chosen = scatter(rank, owner, 0, dim_size=n, reduce="min")  # (n,) winning rank per node
        chosen = torch.where(chosen < n, 2 * e + chosen, chosen - n)  # back to candidate positions
        kept = torch.zeros(e, dtype=torch.bool, device=device)
        kept[chosen[chosen < 2 * e] % max(e, 1)] = True
    return kept, chosen


def _candidate_log_softmax(logits: Tensor, owner: Tensor, n: int) -> Tensor:
    """Log-softmax of candidate `logits` among the candidates of the same owner node."""
    peak = scatter(logits.detach(), owner, 0, dim_size=n, reduce="max")
    shifted = logits - peak[owner]
    log_norm = torch.log(scatter(shifted.exp(), owner, 0, dim_size=n, reduce="sum"))
    return shifted - log_norm[owner]


def _components(n: int, edge_index: Tensor) -> tuple[int, Tensor]:
    """Connected components (edges taken as undirected) of n nodes: (count, (n,) int64 component ids)."""
    src, dst = edge_index.cpu().numpy()
    graph = coo_matrix((np.ones(src.shape[0], dtype=np.float32), (src, dst)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    # Renumber components by their smallest node so group ids follow topological order.
    first = np.full(count, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n))
    order = np.argsort(first, kind="stable")
    relabel = np.empty(count, dtype=np.int64)
    relabel[order] = np.arange(count)
    return int(count), torch.as_tensor(relabel[labels], device=edge_index.device)


class GraphParsingPool(nn.Module):
    """Learned graph-parsing pooling (module docstring): nodes -> a data-dependent number of groups.

    Args:
        channels: embedding width H.
        edge_dim: edge feature width Fe used by the scorer and the coarse-graph layer (0 = none).
        max_levels: stop after this many merging levels (None = until a level merges nothing, the paper's rule;
            0 = no merging, every node its own group). Kept as a buffer (``level_cap``, -1 for None), so a policy
            that lowers it while training (HSDAG's coarse to fine, `agents.hsdag.HSDAGPolicy.split`) saves it.
        score_layers: layers of the edge-scoring MLP.
        directed: refine group embeddings with a directed layer over the coarse graph (False: symmetrised).
        stay_bias: initial value of the learned bias on self-loop logits (higher: fewer merges at the start).

    Shapes: forward(x (N, H), edge_index (2, E), edge_attr (E, Fe) or None, batch (N,), sample=False)
    -> `PoolResult`.
    """

    def __init__(self, channels: int, edge_dim: int = 0, max_levels: int | None = None, score_layers: int = 2,
                 directed: bool = True, stay_bias: float = 0.0) -> None:
        super().__init__()
        self.channels, self.edge_dim = channels, edge_dim
        self.register_buffer("level_cap", torch.tensor(-1))
        self.max_levels = max_levels  # checked by the setter
        self.scorer = MLP(channels + edge_dim, channels, 1, num_layers=score_layers, layer_norm=True)
        self.pre = MLP(channels, channels, channels, num_layers=2)
        self.post = nn.Sequential(nn.Linear(channels, channels), nn.LayerNorm(channels))
        self.refine = DirectedConv(channels, channels, edge_dim, directed=directed)
        self.refine_norm = nn.LayerNorm(channels)
        #: Added to every self-loop logit: the learned prior of a node staying on its own.
        self.stay_bias = nn.Parameter(torch.tensor(float(stay_bias)))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before the buffer: the cap the policy was built with.
        state_dict.setdefault(prefix + "level_cap", self.level_cap.clone())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def max_levels(self) -> int | None:
        """The merging levels cap (None: until a level merges nothing)."""
        cap = int(self.level_cap)
        return None if cap < 0 else cap

    @max_levels.setter
    def max_levels(self, levels: int | None) -> None:
        if levels is not None and levels < 0:
            raise ValueError(f"max_levels must be >= 0 or None (parse until nothing merges), got {levels}")
        self.level_cap.fill_(-1 if levels is None else int(levels))

    def score_logits(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None) -> tuple[Tensor, Tensor]:
        """(E,) edge logits and (n,) self-loop logits; the scores are their sigmoids."""
        pair = x[edge_index[0]] * x[edge_index[1]]
        own = x * x
        if self.edge_dim:
            pair = torch.cat([pair, edge_attr], dim=-1)
            own = torch.cat([own, own.new_zeros(own.shape[0], self.edge_dim)], dim=-1)
        logits = self.scorer(torch.cat([pair, own], dim=0)).squeeze(-1)
        return logits[: edge_index.shape[1]], logits[edge_index.shape[1]:] + self.stay_bias

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None, batch: Tensor,
                sample: bool = False, generator: torch.Generator | None = None,
                choices: list[Tensor] | None = None) -> PoolResult:
        """Parse the graph(s) into groups; `sample` draws the candidate choices (module docstring).

        `choices` (a `PoolResult.choices` of the same graphs) replays an earlier parse instead of choosing anew:
        the groups are the same, their embeddings and (with `sample`) the choices' log-probability are computed
        with the current weights."""
        n = x.shape[0]
        num_graphs = int(batch.max()) + 1 if n else 0
        assignment = torch.arange(n, device=x.device)
        attr = edge_attr if self.edge_dim else None
        counts: list[int] = []
        # Per graph: summed log-probabilities and entropies of the sampled choices, and how many choices.
        log_prob = x.new_zeros(num_graphs) if sample else None
        entropy_sum, decisions = x.new_zeros(num_graphs), x.new_zeros(num_graphs)
        made: list[Tensor] = []  # the candidates kept at each level (PoolResult.choices)
        level, max_levels = 0, self.max_levels
        while max_levels is None or level < max_levels:
            if edge_index.shape[1] == 0:
                break
            n_now, e = x.shape[0], edge_index.shape[1]
            edge_logit, self_logit = self.score_logits(x, edge_index, attr)
            logits = torch.cat([edge_logit, edge_logit, self_logit])  # one per candidate
            if choices is not None:  # replay: the same candidates as the parse being re-scored
                chosen = choices[level]
                kept = torch.zeros(e, dtype=torch.bool, device=x.device)
                kept[chosen[chosen < 2 * e] % e] = True
            elif sample:  # Gumbel-max: the best candidate under perturbed logits is a softmax sample
                uniform = torch.rand(logits.shape, generator=generator, device=logits.device).clamp_(1e-10, 1.0)
                noisy = logits.detach() - torch.log(-torch.log(uniform))
                kept, chosen = keep_best_candidates(edge_index, noisy[:e], noisy[2 * e:])
            else:
                kept, chosen = keep_best_candidates(edge_index, edge_logit, self_logit)
            made.append(chosen)
            if sample:
                owner = _candidates(edge_index, n_now)
                log_p = _candidate_log_softmax(logits, owner, n_now)
                node_entropy = -scatter(log_p.exp() * log_p, owner, 0, dim_size=n_now, reduce="sum")
                log_prob = log_prob + scatter(log_p[chosen], batch, 0, dim_size=num_graphs, reduce="sum")
                entropy_sum = entropy_sum + scatter(node_entropy, batch, 0, dim_size=num_graphs, reduce="sum")
                decisions = decisions + torch.bincount(batch, minlength=num_graphs).to(decisions.dtype)
            weight = torch.sigmoid(logits[chosen])  # the score of what each node kept
            num_groups, cluster = _components(n_now, edge_index[:, kept])
            if num_groups == n_now:  # nobody merged: parsing is finished
                break
            # Score-weighted sum of members: the path by which gradients reach the scorer and the encoder.
            pooled = scatter(weight.unsqueeze(-1) * self.pre(x), cluster, 0, dim_size=num_groups, reduce="sum")
            x = self.post(pooled)
            batch = scatter(batch, cluster, 0, dim_size=num_groups, reduce="min")
            edge_index, attr = self._coarsen(edge_index, attr, cluster, num_groups)
            if edge_index.shape[1]:
                x = self.refine_norm(x + torch.relu(self.refine(x, edge_index, attr)))
            assignment = cluster[assignment]
            counts.append(num_groups)
            level += 1
        entropy = entropy_sum / decisions.clamp(min=1) if sample else None
        return PoolResult(assignment, x, batch, level, counts, log_prob, entropy, made)

    @staticmethod
    def _coarsen(edge_index: Tensor, edge_attr: Tensor | None, cluster: Tensor, num_groups: int):
        """Edges between different groups, deduplicated; a merged edge keeps the largest edge features."""
        coarse = cluster[edge_index]
        between = coarse[0] != coarse[1]
        coarse = coarse[:, between]
        key = coarse[0] * num_groups + coarse[1]
        unique_key, inverse = torch.unique(key, return_inverse=True)
        new_edges = torch.stack([unique_key // num_groups, unique_key % num_groups])
        new_attr = None
        if edge_attr is not None:
            new_attr = scatter(edge_attr[between], inverse, 0, dim_size=unique_key.shape[0], reduce="max")
        return new_edges, new_attr
