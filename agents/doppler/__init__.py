"""DOPPLER (Yao et al., ICLR 2026): a selection policy and a placement policy over a message-passing encoder,
trained by imitation of the critical-path heuristic, then REINFORCE (`DopplerAgent`)."""
from .agent import DopplerAgent, DopplerSettings
from .policy import DopplerPolicy

__all__ = ["DopplerAgent", "DopplerPolicy", "DopplerSettings"]
