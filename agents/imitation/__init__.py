"""A learned placer trained by imitation of the solvers' best placements over many graphs (`ImitationAgent`,
``imitation``), and its labels (`agents.imitation.labels`)."""
from .agent import ImitationAgent

__all__ = ["ImitationAgent"]
