"""Run bookkeeping shared by every agent and baseline:

    run         THE run loop: budget, best placement, curve, fresh re-measure, timing (`RunAgent.learn`)
    base        the base of agents with a torch policy: policy spec, lazy building, torch checkpoints
    checkpoint  checkpoints as tensors and plain data (never executes code from a file)

Callbacks (progress bar, TensorBoard, your own) are the library's: `placement_gym.callbacks`.
"""
from .base import BaseAgent, PolicySpec
from .run import RunAgent, RunLoop, set_seed, torch_threads

__all__ = ["BaseAgent", "PolicySpec", "RunAgent", "RunLoop", "set_seed", "torch_threads"]
