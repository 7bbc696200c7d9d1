"""Classical placement baselines: single device, OpenVINO's own choice, random search, each op on its fastest device, Baechi's greedy
heuristics (m-ETF, m-TOPO), DOPPLER's critical-path list scheduling, METIS partitioning, Tarnawski et al.'s contiguous dynamic program and the exact optimum on the simulated backend's cost model.

All follow the agent interface (`learn(env, budget, seed, callback)`, `predict(obs)`, `save`/`load`) through
`PlanningAgent`, so `placement_gym.evaluation.evaluate` and `placement-gym compare` run them like any agent.
"""
from .base import PlanningAgent
from .costs import CostModel, CostPlanner, cost_model
from .critical_path import CriticalPath, critical_path_schedule
from .dp import ContiguousDP, contiguous_dp
from .greedy import CheapestDevice, GreedyETF, TopoBalance, etf_schedule, topo_balance
from .metis import MetisPartition, metis_partition
from .optimal import Constraints, ExactOptimum, OptimumResult, solve_optimum
from .simple import OpenVINOChoice, RandomSearch, SingleDevice

__all__ = [
    "CheapestDevice", "Constraints", "CriticalPath", "critical_path_schedule", "ContiguousDP", "CostModel", "CostPlanner", "ExactOptimum", "contiguous_dp", "GreedyETF", "MetisPartition", "OpenVINOChoice", "PlanningAgent", "RandomSearch",
    "SingleDevice", "TopoBalance", "cost_model", "etf_schedule", "metis_partition", "solve_optimum", "OptimumResult", "topo_balance",
]
