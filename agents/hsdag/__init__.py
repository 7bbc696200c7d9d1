"""HSDAG (Duan et al., NeurIPS 2024): structure-aware device placement with a directed GNN, learned
graph-parsing pooling into a data-dependent number of groups, and a per-group placer trained with REINFORCE."""
from .agent import HSDAGAgent, hsdag_feature_families
from .policy import HSDAGPolicy
from .pooling import GraphParsingPool, PoolResult, keep_best_candidates

__all__ = ["HSDAGAgent", "HSDAGPolicy", "GraphParsingPool", "PoolResult", "hsdag_feature_families", "keep_best_candidates"]
