"""Pieces every learned placement agent shares (one implementation of each idea):

    graph_batch   observation (single numpy or SB3-batched torch) -> one disjoint torch graph batch
    gnn           directed message-passing blocks (forward + backward over the DAG) and the node encoder
    reinforce     THE REINFORCE trainer (baseline, entropy bonus, clipping, bandit/episodic modes) + agent glue
    callbacks     progress bar, TensorBoard, custom callbacks
    base          the agent base class: learn / predict / save / load, seeds, policy spec
"""
from .base import BaseAgent, PolicySpec, set_seed
from .callbacks import Callback, CallbackList, ProgressBarCallback, TensorBoardCallback, make_callback
from .gnn import MLP, DirectedConv, DirectedGNN, EdgeMessage
from .graph_batch import GraphBatch, obs_to_batch
from .reinforce import (
    PolicySample, ReinforceAgent, ReinforceConfig, ReinforceTrainer, TrainResult, remeasure, sample_categorical,
)

__all__ = [
    "BaseAgent", "PolicySpec", "set_seed",
    "Callback", "CallbackList", "ProgressBarCallback", "TensorBoardCallback", "make_callback",
    "MLP", "DirectedConv", "DirectedGNN", "EdgeMessage",
    "GraphBatch", "obs_to_batch",
    "PolicySample", "ReinforceAgent", "ReinforceConfig", "ReinforceTrainer", "TrainResult", "remeasure",
    "sample_categorical",
]
