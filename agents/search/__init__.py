"""The search layer: everything that chooses or changes a measured placement without being learned. ::

    config           `SearchConfig`, the one settings object (which components run, and how)
    heuristic_start  start placements (each device alone, every op on its cheapest device), the memory fit of a
                     start, the zero-shot override
    local_search     cost-guided block moves around the run's best (`BlockSearch`, `AroundBest`)
    coarse_to_fine   the stall detector and group splitting of coarse-to-fine placers
    node_by_node     a node-by-node placer's groups refined to the run's best, and the teacher-forced steps that
                     distil that best into its policy (Placeto, ppo-node)
    hybrid           `SearchAround` (the layer around any agent), the ``local-search`` baseline, `build_agent`

It is offered two ways: as search baselines that learn nothing (``cheapest`` in `agents.baselines`,
``local-search`` here) and as the hybrid form of any learned agent (``search="hybrid"``, or ``hybrid:NAME`` on the
command line; `SearchAround` for an agent that has no search of its own). A learned agent runs none of it by
default. Its components read `placement_gym` only; `hybrid` drives an agent through `agents.core.run` and
`node_by_node` fits a policy through `agents.nn.policy`.
"""
from .config import SearchConfig, split_search_options

__all__ = ["SearchConfig", "split_search_options"]
