"""placement-gym: device placement of neural-network operators as a Gymnasium environment.

>>> import gymnasium as gym, placement_gym
>>> env = gym.make("DevicePlacement-v0", model="resnet")
>>> envs = gym.make_vec("DevicePlacement-v0", num_envs=64, model="resnet")  # one batched measurement per step
"""
import envs_registry  # noqa: F401  (registers the env ids)

from .devices import DeviceSpec, available_devices, open_devices, two_cpu_devices
from ._version import __version__
from .env import DevicePlacementEnv
from .graph import ComputationGraph
from .models import load_graph
from .vector_env import DevicePlacementVectorEnv

__all__ = ["ComputationGraph", "DevicePlacementEnv", "DevicePlacementVectorEnv", "DeviceSpec", "available_devices",
           "load_graph", "open_devices", "two_cpu_devices", "__version__"]
