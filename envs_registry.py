"""Registers every placement-gym environment id with Gymnasium (imported by `placement_gym`)."""
import gymnasium as gym

#: env id -> `gym.register` arguments. ``DevicePlacement-v0`` has a native vector env: ``gym.make_vec(id,
#: num_envs=K)`` builds `placement_gym.vector_env.DevicePlacementVectorEnv` (one batched measurement per step).
ENV_IDS = {
    "DevicePlacement-v0": {"entry_point": "placement_gym.env:DevicePlacementEnv",
                           "vector_entry_point": "placement_gym.vector_env:DevicePlacementVectorEnv"},
    "DevicePlacementNode-v0": {"entry_point": "placement_gym.wrappers:make_node_env"},
}

for env_id, entry_points in ENV_IDS.items():
    if env_id not in gym.registry:
        gym.register(id=env_id, **entry_points)
