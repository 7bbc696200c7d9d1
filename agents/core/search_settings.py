"""`SearchConfig`: the one settings object of the search layer, as plain data every role reads.

It lives here, beside the run loop, and not in `agents.search`: the run loop (`agents.core.run.RunAgent` keeps an
agent's ``search`` and refuses components it does not run), the trainers (`agents.algos`, which copy a few fields
into their settings) and the search layer all read it, and the layers below `agents.search` never import it
(``tests/test_imports.py``). What the fields switch on is the search layer's behaviour, which it attaches from
above at the named hook points of the run loop and the trainers (`agents.search.attach`). The public spelling
``from agents.search import SearchConfig`` (`agents.search.config`) re-exports it.

Everything that chooses or changes a measured placement without being learned lives in `agents.search` and is
switched by one field here. A learned agent built with ``search=None`` (its default) runs its paper's method
and nothing else: every field below is off. ``search="hybrid"`` puts the agent's own hybrid preset around it
(``AgentClass.HYBRID``: the search an agent of this release ran by default until the search became a layer of
its own, so those results are reproduced exactly); a `SearchConfig` or a dict of its fields picks components
one by one. On the command line the hybrid is spelled with a prefix, ``--agents hybrid:hsdag`` (one spelling
everywhere: `placement_gym.registry`), and a field is set with ``--agent-option FIELD=VALUE``.

Fields (off = the value a pure agent runs with):

=========================  ==========  =============================================================================
field                      off         what it does when on
=========================  ==========  =============================================================================
heuristic_start            ``"off"``   before the policy samples, measure each device alone and every op on its
                                       cheapest device (``"measure"``); ``"refit"`` also fits the policy to the best
                                       of them (`agents.search.heuristic_start`)
search_proposals           0           after every update, measure this many cost-guided block moves around the
                                       run's best (`agents.search.local_search.AroundBest`)
split_patience             None        coarse to fine: after this many placements without a new best, split the
                                       policy's groups (`agents.search.coarse_to_fine`)
split_refit                False       after such a split, fit the run's best placement into the policy
explore                    0.0         about this many group decisions per placement drawn uniformly at random
                                       (HSDAG; GO's per-group search)
boundary_explore           0.0         sample around the run's best at its device boundaries (HSDAG: decisions per
                                       placement; Post: share of the uniform distribution given back at a split)
refine                     False       a per-op override stage after the group placer (HSDAG, the RNN; GO's
                                       per-group search)
refine_boundary            False       the override stage proposes boundary moves to the neighbours' device
imitation_coef             0.0         self-imitation of the run's ``elites`` fastest placements in the loss
elites                     4           how many placements the self-imitation keeps (only with imitation_coef)
distill_steps              0           after the budget, fit the policy to the best placement (at most this many
                                       steps), so ``predict`` returns what the search found
distill_seconds            None        wall-time cap of that distillation on a coarsened big graph
fit_memory                 False       a sample that overfills a device's memory is measured with ops at its region's
                                       edge given back (`agents.search.local_search.BlockSearch.fit_memory`)
zero_shot_override         0.0         after training over many graphs, ``predict`` on a new graph moves every op
                                       whose cheapest device saves more than the move adds on links plus this many
                                       per-submodel overheads (`agents.search.heuristic_start.override_zero_shot`)
finetune_from_predict      False       a fine-tuning run measures the policy's own placement first
finetune_search            0.0         share of a fine-tuning run's budget spent on the local search around its
                                       best before the policy trains (GO)
finetune_search_options    {}          `BlockSearch` settings of that search (GO)
search_groups              None        an untrained GO policy's run on one graph searches per group of this many
                                       contiguous groups instead of per op
greedy_final               False       spend the budget's last placement on the policy's deterministic placement
                                       (the SB3 agents)
local_search               0.0         share of the budget spent after the agent's own training on cost-guided
                                       block moves around the best (the generic layer, `agents.search.hybrid`;
                                       1.0 with no agent is the ``local-search`` baseline)
=========================  ==========  =============================================================================
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from agents.core.bounds import COEFFICIENT, FLAG, GROUPS, SHARE, check_settings, setting
from placement_gym.schema import Integer, Number, Optional

__all__ = ["HEURISTIC_STARTS", "LAYER_COMPONENTS", "SEARCH_OPTION_NAMES", "SEARCH_SPELLINGS", "SearchConfig",
           "check_components", "check_heuristic_start", "check_split_patience", "gather_search_options",
           "option_names", "split_search_options"]

#: The accepted ``heuristic_start`` settings (`agents.search.heuristic_start`).
HEURISTIC_STARTS = ("off", "measure", "refit")


def check_heuristic_start(mode: str) -> str:
    """`mode` if it is one of `HEURISTIC_STARTS`, else a ValueError saying which are accepted."""
    if mode not in HEURISTIC_STARTS:
        raise ValueError(f"heuristic_start must be one of {HEURISTIC_STARTS}, got {mode!r}")
    return mode


def check_split_patience(patience: int | None) -> int | None:
    """`patience` unchanged if it is None (never split) or >= 1; else a ValueError saying so."""
    if patience is not None and patience < 1:
        raise ValueError(f"split_patience must be >= 1 or None (never split), got {patience}")
    return patience


#: The strings `SearchConfig.resolve` accepts: no search at all, or the agent's hybrid preset.
SEARCH_SPELLINGS = ("off", "hybrid")
#: Option names of earlier releases that name a field under another name (GO's per-group search).
_ALIASES = {"search_explore": "explore", "search_refine": "refine"}


@dataclass(frozen=True)
class SearchConfig:
    """Which search components run around a learned agent, and their settings (module docstring, one row per
    field). ``SearchConfig()`` is no search at all: the agent's paper's method alone."""

    heuristic_start: str = "off"  # checked by `check_heuristic_start`, as the heuristic start checks it
    search_proposals: int = setting(0, Integer(0, 10_000))
    split_patience: int | None = setting(None, Optional(Integer(1, 1 << 30)))
    split_refit: bool = setting(False, FLAG)
    explore: float = setting(0.0, COEFFICIENT)
    boundary_explore: float = setting(0.0, COEFFICIENT)
    refine: bool = setting(False, FLAG)
    refine_boundary: bool = setting(False, FLAG)
    imitation_coef: float = setting(0.0, COEFFICIENT)
    elites: int = setting(4, Integer(1, 10_000))
    distill_steps: int = setting(0, Integer(0, 1_000_000))
    distill_seconds: float | None = setting(None, Optional(Number(positive=True, high=86_400.0)))
    fit_memory: bool = setting(False, FLAG)
    zero_shot_override: float = setting(0.0, Number(0.0, 1e6))
    finetune_from_predict: bool = setting(False, FLAG)
    finetune_search: float = setting(0.0, SHARE)
    finetune_search_options: Mapping[str, Any] = field(default_factory=dict)
    search_groups: int | None = setting(None, Optional(GROUPS))
    greedy_final: bool = setting(False, FLAG)
    local_search: float = setting(0.0, SHARE)

    def __post_init__(self) -> None:
        if self.zero_shot_override is None:  # earlier releases spelled "off" None too
            object.__setattr__(self, "zero_shot_override", 0.0)
        check_heuristic_start(self.heuristic_start)
        check_settings(self)  # every other field's declared values (`agents.core.bounds`)
        object.__setattr__(self, "finetune_search_options", dict(self.finetune_search_options))

    # ------------------------------------------------------------------------------------ reading
    def components(self) -> list[str]:
        """The names of the fields that are on (differ from `SearchConfig()`): what a record's ``search`` lists;
        empty for a pure agent. ``elites`` and ``distill_seconds`` only tune another component and are not listed."""
        return [name for name in self.to_dict() if name not in ("elites", "distill_seconds")]

    @property
    def active(self) -> bool:
        """Whether any component is on."""
        return bool(self.components())

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from `SearchConfig()`, as plain data (what ``hyperparameters()["search"]`` holds;
        ``SearchConfig(**d)`` rebuilds it)."""
        off = SearchConfig()
        return {f.name: (dict(v) if isinstance(v, Mapping) else v) for f in dataclasses.fields(self)
                if (v := getattr(self, f.name)) != getattr(off, f.name)}

    def replace(self, **fields: Any) -> "SearchConfig":
        """A copy with `fields` changed (earlier releases' names accepted): ``HSDAGAgent.HYBRID.replace(
        search_proposals=0)`` is the hybrid without its proposals."""
        return SearchConfig.of(fields, self)

    # ------------------------------------------------------------------------------------ building
    @classmethod
    def resolve(cls, value: "SearchConfig | Mapping[str, Any] | str | None",
                hybrid: "SearchConfig | None" = None) -> "SearchConfig":
        """The `SearchConfig` an agent's ``search`` argument names: None or ``"off"`` -> no search; ``"hybrid"``
        -> `hybrid` (the agent's ``HYBRID`` preset); a dict -> those fields on top of no search."""
        if value is None or value == "off":
            return cls()
        if isinstance(value, SearchConfig):
            return value
        if isinstance(value, str):
            if value == "hybrid":
                return hybrid if hybrid is not None else cls()
            raise ValueError(f"search must be one of {SEARCH_SPELLINGS}, a dict of SearchConfig fields or a "
                             f"SearchConfig, got {value!r}")
        if isinstance(value, Mapping):
            return cls.of(value)
        raise ValueError(f"search must be one of {SEARCH_SPELLINGS}, a dict of SearchConfig fields or a "
                         f"SearchConfig, got {type(value).__name__}")

    @classmethod
    def of(cls, options: Mapping[str, Any], base: "SearchConfig | None" = None) -> "SearchConfig":
        """`base` (default: no search) with the fields in `options` replaced (earlier releases' names accepted:
        ``search_explore``, ``search_refine``); unknown names raise a ValueError listing the fields."""
        options = {_ALIASES.get(k, k): v for k, v in options.items()}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(f"unknown search settings {unknown}; accepted: {sorted(names)}")
        return dataclasses.replace(base or cls(), **options)


#: Every option name that is a search setting: the `SearchConfig` fields and their earlier releases' aliases.
SEARCH_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(SearchConfig)) | frozenset(_ALIASES)


def option_names(*names: str) -> frozenset[str]:
    """The option names of the `SearchConfig` fields `names`, with their earlier releases' aliases: what an agent
    class declares as the components it runs (``AgentClass.SEARCH_OPTIONS``)."""
    unknown = sorted(set(names) - {f.name for f in dataclasses.fields(SearchConfig)})
    if unknown:
        raise ValueError(f"unknown search settings {unknown}")
    return frozenset(names) | frozenset(alias for alias, name in _ALIASES.items() if name in names)


#: The components whose behaviour is the search layer's own code (`agents.search`): a class runs them only where
#: the layer is attached at its hook points (``RunAgent.SEARCH_LAYER``: `agents.search.attach.SearchLayer`); the
#: other fields tune what the agent's own training does (distillation, self-imitation, exploration, ...).
LAYER_COMPONENTS = option_names("heuristic_start", "zero_shot_override", "search_proposals", "fit_memory",
                                "split_patience", "split_refit")


def check_components(search: SearchConfig, runs: frozenset[str], agent: str, layer: bool = True) -> None:
    """Refuse, in one line, a `search` with a component on that `agent` does not run (`runs`: its
    ``SEARCH_OPTIONS``; without the search layer attached, `layer` False, less `LAYER_COMPONENTS`), so that no
    record lists a component that did not run."""
    runs = runs if layer else runs - LAYER_COMPONENTS
    idle = [name for name in search.components() if name not in runs]
    if idle:
        runs_on = sorted(n for n in runs if n not in _ALIASES)
        unattached = "" if layer else (" (the search layer's components run only on a class that composes "
                                       "agents.search.attach.SearchLayer)")
        raise ValueError(f"{agent} does not run the search component(s) {idle}; it runs "
                         f"{runs_on if runs_on else 'none'}{unattached}")


def split_search_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(agent options, search options)`` of a flat dict of constructor options, e.g. ``--agent-option`` values
    or an earlier release's checkpoint: the names of `SearchConfig` fields (and their earlier aliases) go to the
    search. A ``search`` entry stays with the agent options."""
    agent = {k: v for k, v in options.items() if k not in SEARCH_OPTION_NAMES}
    search = {k: v for k, v in options.items() if k in SEARCH_OPTION_NAMES}
    return agent, search


def gather_search_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with the search settings among them gathered into one ``search`` entry (a dict of `SearchConfig`
    fields, on top of a ``search`` dict already there): how a checkpoint written before the search became a layer
    of its own (its settings flat among the agent's) is rebuilt with the components it ran."""
    agent, search = split_search_options(options)
    if not search:
        return agent
    given = agent.get("search")
    if given is None:  # an earlier release's settings: every agent measured its own placement first when fine-tuned
        given = {"finetune_from_predict": True}
    if not isinstance(given, Mapping):
        raise ValueError(f"search must be a dict of SearchConfig fields here, got {given!r}")
    agent["search"] = SearchConfig.of(search, SearchConfig.of(given)).to_dict()
    return agent
