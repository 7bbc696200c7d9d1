"""Placeto-like agent: node-by-node placement with message-passing graph embeddings (Addanki et al. 2019)."""
from .agent import PlacetoAgent
from .policy import PlacetoPolicy

__all__ = ["PlacetoAgent", "PlacetoPolicy"]
