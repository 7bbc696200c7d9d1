"""Run bookkeeping shared by every agent and baseline::

    run              `RunAgent`, what every agent is: `learn` runs the run loop around the agent's `train`
    loop             the run's books: `RunLoop` (budget, recorder, best placement, curve, fresh re-measure, timing)
    settings         `AgentSettings`: an agent's own settings and its default plain-JSON save / load
    base             the base of agents with a torch policy: policy spec, lazy building, torch checkpoints
    checkpoint       checkpoints as tensors and plain data (never executes code from a file)

The search (`agents.search`) is a layer above: an object a learned agent holds (``RunAgent.SEARCH_LAYER`` builds
it), called at the run loop's named points; nothing here imports it or reads its settings.

Callbacks (progress bar, TensorBoard, your own) are the library's: `placement_gym.callbacks`.
"""
from .base import BaseAgent, PolicySpec
from .loop import RunLoop, set_seed, torch_threads
from .run import RunAgent

__all__ = ["BaseAgent", "PolicySpec", "RunAgent", "RunLoop", "set_seed", "torch_threads"]
