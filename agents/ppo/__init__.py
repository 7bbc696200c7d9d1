"""Stable-Baselines3 models as placement agents: PPO with the graph policy (``--agent ppo``) and any SB3 model."""
from .agent import PPOAgent, PPONodeAgent, SB3Agent

__all__ = ["PPOAgent", "PPONodeAgent", "SB3Agent"]
