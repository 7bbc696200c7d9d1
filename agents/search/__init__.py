"""The search layer: everything that chooses or changes a measured placement without being learned.

    config           `SearchConfig`, the one settings object (which components run, and how)
    heuristic_start  start placements (each device alone, every op on its cheapest device), the memory fit of a
                     start, the zero-shot override
    local_search     cost-guided block moves around the run's best (`BlockSearch`, `AroundBest`)
    coarse_to_fine   the stall detector and group splitting of coarse-to-fine placers

It is offered two ways: as search baselines that learn nothing (`agents.baselines`: ``cheapest``,
``local-search``) and as the hybrid form of any learned agent (``search="hybrid"``, or ``hybrid:NAME`` on the
command line; `agents.search.hybrid.SearchAround` for an agent that has no search of its own). A learned agent
runs none of it by default. This package depends on `placement_gym` only.
"""
from .config import HYBRID_PREFIX, SearchConfig, split_search_options

__all__ = ["HYBRID_PREFIX", "SearchConfig", "split_search_options"]
