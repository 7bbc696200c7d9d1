"""Post (Gao et al., NeurIPS 2018): per-group softmax placement distributions trained by PPO interleaved with
cross-entropy minimisation on the elite placements."""
from .agent import PostAgent, PostTrainer
from .policy import PostPolicy

__all__ = ["PostAgent", "PostPolicy", "PostTrainer"]
