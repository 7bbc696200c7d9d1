"""Pieces every placement agent shares (one implementation of each idea):

    run           THE run loop: budget, best placement, curve, fresh re-measure, timing (`RunAgent.learn`)
    base          the base of agents with a torch policy: policy spec, lazy building, torch checkpoints
    graph_batch   observation (single numpy or SB3-batched torch) -> one disjoint torch graph batch
    gnn           directed message-passing blocks (forward + backward over the DAG) and the node encoder
    policy        the policy contract (act / evaluate -> PolicySample) and the vectorised categorical
    rollout       experience collection (bandit / episodic) and advantages, shared by both trainers
    reinforce     THE REINFORCE trainer (baseline, entropy bonus, clipping, bandit/episodic modes)
    ppo           THE PPO trainer (clipped surrogate, epochs, KL stop, baseline or critic) for the same policies
    policy_gradient  the agent glue: a BaseAgent trained by either, ``algorithm="reinforce" | "ppo"``
    sb3           the Stable-Baselines3 graph policy and the vectorised multi-categorical

Callbacks (progress bar, TensorBoard, your own) are the library's: `placement_gym.callbacks`.
"""
from placement_gym.callbacks import Callback, CallbackList, ProgressBarCallback, TensorBoardCallback, make_callback

from .base import BaseAgent, PolicySpec
from .gnn import MLP, DirectedConv, DirectedGNN, EdgeMessage
from .graph_batch import GraphBatch, obs_to_batch
from .policy import PolicySample, categorical_log_prob, sample_categorical
from .policy_gradient import ALGORITHMS, PolicyGradientAgent
from .ppo import PPOConfig, PPOTrainer, clipped_surrogate
from .reinforce import ReinforceConfig, ReinforceTrainer
from .run import RunAgent, RunLoop, set_seed, torch_threads

__all__ = [
    "BaseAgent", "PolicySpec", "RunAgent", "RunLoop", "set_seed", "torch_threads",
    "Callback", "CallbackList", "ProgressBarCallback", "TensorBoardCallback", "make_callback",
    "MLP", "DirectedConv", "DirectedGNN", "EdgeMessage",
    "GraphBatch", "obs_to_batch",
    "PolicySample", "categorical_log_prob", "sample_categorical",
    "ALGORITHMS", "PolicyGradientAgent", "PPOConfig", "PPOTrainer", "clipped_surrogate", "ReinforceConfig",
    "ReinforceTrainer",
]
