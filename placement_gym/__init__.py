"""placement-gym: device placement of neural-network operators as a Gymnasium environment.

>>> import gymnasium as gym, placement_gym
>>> env = gym.make("DevicePlacement-v0", model="resnet")
"""
import envs_registry  # noqa: F401  (registers the env ids)

from .devices import DeviceSpec, available_devices, open_devices, two_cpu_devices
from .env import DevicePlacementEnv, load_graph
from .graph import ComputationGraph

__version__ = "0.1.0"

__all__ = ["ComputationGraph", "DevicePlacementEnv", "DeviceSpec", "available_devices", "load_graph", "open_devices",
           "two_cpu_devices", "__version__"]
