"""Networks and the device head every learned policy shares:

    graph_batch   observation (single numpy or SB3-batched torch) -> one disjoint torch graph batch
    gnn           directed message-passing blocks (forward + backward over the DAG) and the node encoder
    policy        the policy contract (act / evaluate -> PolicySample) and the vectorised categorical
    device_head   THE device head: scores an op, group or node against each device from their features
    refine        the per-op refinement stage after a group placer (a learned network; on in some hybrids)
    groups        contiguous op groups of group placers: halving them, splitting until a placement is expressible
"""
from .gnn import MLP, DirectedConv, DirectedGNN, EdgeMessage
from .graph_batch import GraphBatch, obs_to_batch
from .policy import PolicySample, categorical_log_prob, sample_categorical

__all__ = ["MLP", "DirectedConv", "DirectedGNN", "EdgeMessage", "GraphBatch", "obs_to_batch", "PolicySample",
           "categorical_log_prob", "sample_categorical"]
