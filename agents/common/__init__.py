"""Pieces every placement agent shares (one implementation of each idea):

    run           THE run loop: budget, best placement, curve, fresh re-measure, timing (`RunAgent.learn`)
    base          the base of agents with a torch policy: policy spec, lazy building, torch checkpoints
    graph_batch   observation (single numpy or SB3-batched torch) -> one disjoint torch graph batch
    gnn           directed message-passing blocks (forward + backward over the DAG) and the node encoder
    reinforce     THE REINFORCE trainer (baseline, entropy bonus, clipping, bandit/episodic modes) + agent glue
    sb3           the Stable-Baselines3 graph policy and the vectorised multi-categorical

Callbacks (progress bar, TensorBoard, your own) are the library's: `placement_gym.callbacks`.
"""
from placement_gym.callbacks import Callback, CallbackList, ProgressBarCallback, TensorBoardCallback, make_callback

from .base import BaseAgent, PolicySpec
from .gnn import MLP, DirectedConv, DirectedGNN, EdgeMessage
from .graph_batch import GraphBatch, obs_to_batch
from .reinforce import PolicySample, ReinforceAgent, ReinforceConfig, ReinforceTrainer, sample_categorical
from .run import RunAgent, RunLoop, set_seed, torch_threads

__all__ = [
    "BaseAgent", "PolicySpec", "RunAgent", "RunLoop", "set_seed", "torch_threads",
    "Callback", "CallbackList", "ProgressBarCallback", "TensorBoardCallback", "make_callback",
    "MLP", "DirectedConv", "DirectedGNN", "EdgeMessage",
    "GraphBatch", "obs_to_batch",
    "PolicySample", "ReinforceAgent", "ReinforceConfig", "ReinforceTrainer", "sample_categorical",
]
