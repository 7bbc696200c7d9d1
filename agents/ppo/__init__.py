"""Stable-Baselines3 PPO with the graph policy, as a placement agent (``placement-gym train --agent ppo``)."""
from .agent import PPOAgent, PPONodeAgent

__all__ = ["PPOAgent", "PPONodeAgent"]
