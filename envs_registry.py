"""Registers every placement-gym environment id with Gymnasium (imported by `placement_gym`)."""
import gymnasium as gym

ENV_IDS = {
    "DevicePlacement-v0": "placement_gym.env:DevicePlacementEnv",
    "DevicePlacementNode-v0": "placement_gym.wrappers:make_node_env",
}

for env_id, entry_point in ENV_IDS.items():
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point)
