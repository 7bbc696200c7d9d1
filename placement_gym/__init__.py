"""placement-gym: device placement of neural-network operators as a Gymnasium environment.

>>> import gymnasium as gym, placement_gym
>>> env = gym.make("DevicePlacement-v0", model="resnet")
"""
import envs_registry  # noqa: F401  (registers the env ids)

from .devices import DeviceSpec, available_devices, open_devices, two_cpu_devices
from ._version import __version__
from .env import DevicePlacementEnv
from .graph import ComputationGraph
from .models import load_graph

__all__ = ["ComputationGraph", "DevicePlacementEnv", "DeviceSpec", "available_devices", "load_graph", "open_devices",
           "two_cpu_devices", "__version__"]
