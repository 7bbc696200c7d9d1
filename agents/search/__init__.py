"""The search layer: everything that chooses or changes a measured placement without being learned. ::

    config           `SearchConfig`, the layer's settings and their one owner (which components run, and how)
    heuristic_start  start placements (each device alone, every op on its cheapest device), the memory fit of a
                     start, the zero-shot override
    local_search     cost-guided block moves around the run's best (`BlockSearch`, `AroundBest`)
    coarse_to_fine   the stall detector and group splitting of coarse-to-fine placers
    node_by_node     a node-by-node placer's groups refined to the run's best, and the teacher-forced steps that
                     distil that best into its policy (Placeto, ppo-node)
    attach           `SearchLayer`: the search at the named points of the run loop and the trainers, an object a
                     learned agent holds (`SearchDuringTraining`: the trainers' points)
    hybrid           `SearchAround` (the layer around any agent), the ``local-search`` baseline, `build_agent`

It is offered two ways: as search baselines that learn nothing (``cheapest`` in `agents.baselines`,
``local-search`` here) and as the hybrid form of any learned agent (``search="hybrid"``, or ``hybrid:NAME`` on the
command line; `SearchAround` for an agent that has no search of its own). A learned agent runs none of it by
default. It is a layer above the run loop (`agents.core`), the networks (`agents.nn`) and the trainers
(`agents.algos`): it imports them, they never import it (``tests/test_imports.py``); where its behaviour acts inside
a run, they call a named point and `attach` fills it in.
"""
from .config import SearchConfig, hybrid_options, split_search_options

__all__ = ["SearchConfig", "hybrid_options", "split_search_options"]
