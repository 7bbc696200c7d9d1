"""`SearchConfig`: the settings of the search layer, the one owner of the fields it runs at its hook points.

Everything that chooses or changes a measured placement without being learned lives in `agents.search`. The fields
here are the ones the layer itself runs, at the named points where it is attached to a learned agent
(`agents.search.attach.SearchLayer`, an object the agent holds) or around any agent (`agents.search.hybrid`). A
learned agent built with ``search=None`` (its default) holds no layer: its paper's method and nothing else, and no
search settings in its ``hyperparameters()``. ``search="hybrid"`` is the agent's own hybrid form
(``AgentClass.HYBRID`` for the layer, ``AgentClass.HYBRID_COMPONENTS`` for the search-like settings its own policy,
trainer and distillation run: `hybrid_options`); a `SearchConfig` or a dict of its fields picks the layer's
components one by one. On the command line the hybrid is spelled with a prefix, ``--agents hybrid:hsdag`` (one
spelling everywhere: `placement_gym.registry`), and a field is set with ``--agent-option FIELD=VALUE``.

Fields (off = the value of a pure agent, written once: the field's default):

=========================  ==========  =============================================================================
field                      off         what it does when on (hook point)
=========================  ==========  =============================================================================
heuristic_start            ``"off"``   before training: measure each device alone and every op on its cheapest
                                       device (``"measure"``); ``"refit"`` also fits the policy to the best of them
                                       (`agents.search.heuristic_start`)
finetune_from_predict      False       before training, on a fine-tuning run: measure the policy's own placement
                                       first
zero_shot_override         0.0         on predict, after training over many graphs: move every op whose cheapest
                                       device saves more than the move adds on links plus this many per-submodel
                                       overheads (`agents.search.heuristic_start.override_zero_shot`)
search_proposals           0           after every update: measure this many cost-guided block moves around the
                                       run's best (`agents.search.local_search.AroundBest`)
fit_memory                 False       before the samples are measured: a sample that overfills a device's memory
                                       is measured with ops at its region's edge given back
                                       (`agents.search.local_search.BlockSearch.fit_memory`)
split_patience             None        after every update, coarse to fine: after this many placements without a new
                                       best, split the policy's groups (`agents.search.coarse_to_fine`)
split_refit                False       after such a split, fit the run's best placement into the policy
local_search               0.0         after the agent's training: share of the budget spent on cost-guided block
                                       moves around the best (the generic layer, `agents.search.hybrid`; 1.0 with
                                       no agent is the ``local-search`` baseline)
=========================  ==========  =============================================================================

The other search-like settings of earlier releases run inside an agent's own code and belong to its owner:
``imitation_coef``, ``elites`` to the trainer (`agents.algos.reinforce.ReinforceConfig`); ``distill_steps``,
``distill_seconds`` to the learned script (`agents.algos.learned.DistillSettings`); ``explore``,
``boundary_explore``, ``refine``, ``refine_boundary`` to the policies' settings (HSDAG, the RNN, Post, GO);
``finetune_search``, ``finetune_search_options``, ``search_groups`` to `agents.go.GOSettings`; ``greedy_final`` to
`agents.ppo.PPOSettings`. A checkpoint that holds them under ``search`` is translated when it is loaded
(`agents.core.checkpoint.saved_options`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from agents.core.bounds import FLAG, SHARE, check_settings, setting
from agents.core.checkpoint import EARLIER_SEARCH_ALIASES, EARLIER_SEARCH_SETTINGS
from placement_gym.schema import Integer, Number, Optional

__all__ = ["DURING_TRAINING", "HEURISTIC_STARTS", "SEARCH_OPTION_NAMES", "SEARCH_SPELLINGS", "OUTSIDE_TRAINING", "SearchConfig",
           "check_components", "check_heuristic_start", "check_split_patience", "hybrid_options", "option_names",
           "split_search_options"]

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


@dataclass(frozen=True)
class SearchConfig:
    """Which of the search layer's components run, and their settings (module docstring, one row per field).
    ``SearchConfig()`` is no search at all: the agent's paper's method alone."""

    heuristic_start: str = "off"  # checked by `check_heuristic_start`, as the heuristic start checks it
    finetune_from_predict: bool = setting(False, FLAG)
    zero_shot_override: float = setting(0.0, Number(0.0, 1e6))
    search_proposals: int = setting(0, Integer(0, 10_000))
    fit_memory: bool = setting(False, FLAG)
    split_patience: int | None = setting(None, Optional(Integer(1, 1 << 30)))
    split_refit: bool = setting(False, FLAG)
    local_search: float = setting(0.0, SHARE)

    def __post_init__(self) -> None:
        if self.zero_shot_override is None:  # earlier releases spelled "off" None too
            object.__setattr__(self, "zero_shot_override", 0.0)
        check_heuristic_start(self.heuristic_start)
        check_settings(self)  # every other field's declared values (`agents.core.bounds`)

    # ------------------------------------------------------------------------------------ reading
    def components(self) -> list[str]:
        """The names of the fields that are on (differ from `SearchConfig()`): what a record's ``search`` lists."""
        return list(self.to_dict())

    @property
    def active(self) -> bool:
        """Whether any component is on."""
        return bool(self.components())

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from `SearchConfig()`, as plain data (what ``hyperparameters()["search"]`` holds;
        ``SearchConfig(**d)`` rebuilds it)."""
        return {f.name: v for f in dataclasses.fields(self) if (v := getattr(self, f.name)) != f.default}

    def replace(self, **fields: Any) -> "SearchConfig":
        """A copy with `fields` changed: ``HSDAGAgent.HYBRID.replace(search_proposals=0)`` is the hybrid's layer
        without its proposals."""
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
        """`base` (default: no search) with the fields in `options` replaced; unknown names raise a ValueError
        listing the fields (and, for a setting of an earlier release that moved to its owner, where it went)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            moved = sorted(EARLIER_SEARCH_ALIASES.get(n, n) for n in unknown
                           if EARLIER_SEARCH_ALIASES.get(n, n) in EARLIER_SEARCH_SETTINGS)
            where = (f" ({', '.join(moved)}: the agent's own setting now, a constructor keyword of the agents that "
                     "run it)") if moved else ""
            raise ValueError(f"unknown search settings {unknown}{where}; accepted: {sorted(names)}")
        return dataclasses.replace(base or cls(), **options)


#: Every option name that is a search-layer setting: the `SearchConfig` fields.
SEARCH_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(SearchConfig))


def option_names(*names: str) -> frozenset[str]:
    """The `SearchConfig` fields `names`, checked: what an agent class declares as the components it runs
    (``AgentClass.SEARCH_OPTIONS``)."""
    unknown = sorted(set(names) - SEARCH_OPTION_NAMES)
    if unknown:
        raise ValueError(f"unknown search settings {unknown}")
    return frozenset(names)


#: The layer's components before training and on predict (`agents.search.attach.SearchLayer.measure_starts`,
#: ``on_predict``): every learned agent runs them.
OUTSIDE_TRAINING = option_names("heuristic_start", "finetune_from_predict", "zero_shot_override")
#: The layer's components inside a trainer's run (`agents.search.attach.SearchDuringTraining`).
DURING_TRAINING = option_names("search_proposals", "fit_memory", "split_patience", "split_refit")


def check_components(search: SearchConfig, runs: frozenset[str], agent: str) -> None:
    """Refuse, in one line, a `search` with a component on that `agent` does not run (`runs`: its
    ``SEARCH_OPTIONS``), so that no record lists a component that did not run."""
    idle = [name for name in search.components() if name not in runs]
    if idle:
        raise ValueError(f"{agent} does not run the search component(s) {idle}; it runs "
                         f"{sorted(runs) if runs else 'none'}")


def split_search_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(agent options, search options)`` of a flat dict of constructor options, e.g. ``--agent-option`` values:
    the names of `SearchConfig` fields go to the search. A ``search`` entry stays with the agent options."""
    agent = {k: v for k, v in options.items() if k not in SEARCH_OPTION_NAMES}
    search = {k: v for k, v in options.items() if k in SEARCH_OPTION_NAMES}
    return agent, search


def hybrid_options(cls: type, **changes: Any) -> dict[str, Any]:
    """The constructor options of `cls`'s hybrid form with `changes`: its layer (``cls.HYBRID``, with the changes
    that name `SearchConfig` fields) as ``search`` and its own search-like settings (``cls.HYBRID_COMPONENTS``,
    with the other changes). ``HSDAGAgent(seed=0, **hybrid_options(HSDAGAgent, search_proposals=0))`` is the
    hybrid without its proposals."""
    own, layer = split_search_options(changes)
    return {**getattr(cls, "HYBRID_COMPONENTS", {}), **own,
            "search": SearchConfig.resolve("hybrid", cls.HYBRID).replace(**layer)}
