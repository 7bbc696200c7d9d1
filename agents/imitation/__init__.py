"""A learned placer trained by imitation of the solvers' best placements over many graphs (`ImitationAgent`,
``imitation``), its labels (`agents.imitation.labels`) and the checkpoints it ships, one per hardware preset and
objective (`agents.imitation.shipped`)."""
from .agent import ImitationAgent

__all__ = ["ImitationAgent"]
