"""Update rules, and the learned-agent script that runs them:

    learned          THE learned-agent script (`run_learned`): every policy-gradient and SB3 agent's run
    rollout          experience collection (bandit / episodic) and advantages, shared by both trainers
    hooks            `TrainingHooks`: the named points inside a trainer's run where the search layer acts (no-ops)
    reinforce        THE REINFORCE trainer (baseline, entropy bonus, clipping, bandit/episodic modes)
    ppo              THE PPO trainer (clipped surrogate, epochs, KL stop, baseline or critic) for the same policies
    policy_gradient  a `BaseAgent` trained by either, ``algorithm="reinforce" | "ppo"``
    sb3              the Stable-Baselines3 graph policy and the vectorised multi-categorical
"""
from .learned import DistillSettings, run_learned
from .policy_gradient import ALGORITHMS, PolicyGradientAgent
from .ppo import PPOConfig, PPOTrainer, clipped_surrogate
from .reinforce import ReinforceConfig, ReinforceTrainer

__all__ = ["ALGORITHMS", "DistillSettings", "PolicyGradientAgent", "PPOConfig", "PPOTrainer", "ReinforceConfig",
           "ReinforceTrainer", "clipped_surrogate", "run_learned"]
