"""Run bookkeeping shared by every agent and baseline::

    run              THE run loop: budget, best placement, curve, fresh re-measure, timing (`RunAgent.learn`)
    base             the base of agents with a torch policy: policy spec, lazy building, torch checkpoints
    checkpoint       checkpoints as tensors and plain data (never executes code from a file)
    search_settings  `SearchConfig`, the search layer's settings as plain data, which every role reads (the
                     search itself, `agents.search`, is a layer above: it attaches at the run loop's named points)

Callbacks (progress bar, TensorBoard, your own) are the library's: `placement_gym.callbacks`.
"""
from .base import BaseAgent, PolicySpec
from .run import RunAgent, RunLoop, set_seed, torch_threads

__all__ = ["BaseAgent", "PolicySpec", "RunAgent", "RunLoop", "set_seed", "torch_threads"]
