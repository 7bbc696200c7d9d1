"""`SearchConfig` under its public spelling: ``from agents.search import SearchConfig`` (or ``agents.search.config``).

The dataclass and its helpers are plain settings that every role reads (the run loop, the trainers, the search), so
they live beside the run loop, in `agents.core.search_settings` (its module docstring has the table of fields);
this module re-exports them. The behaviour each field switches on is this package's (`agents.search.attach`
attaches it at the run loop's and the trainers' hook points).
"""
from __future__ import annotations

from agents.core.search_settings import (
    LAYER_COMPONENTS, SEARCH_OPTION_NAMES, SEARCH_SPELLINGS, SearchConfig, check_components, gather_search_options,
    option_names, split_search_options,
)

__all__ = ["LAYER_COMPONENTS", "SEARCH_OPTION_NAMES", "SEARCH_SPELLINGS", "SearchConfig", "check_components",
           "gather_search_options", "option_names", "split_search_options"]
