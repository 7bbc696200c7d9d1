"""Labels for imitation: the best placement the classical planners and the search find for a graph, per case.

A *case* is a hardware preset and an objective (``("ai_pc", "throughput")``). For one graph and one case,
`compute_label` runs every planner of `LabelSettings` on the simulated backend, each through the shared run loop
(a planner's candidates are measured like any agent's placements)::

    single devices   every op on one device (``single-device``), one run per device
    cheapest, dp, topo, metis
                     the planners of `agents.baselines` (one candidate each)
    local-search     the search baseline (`agents.search.hybrid.LocalSearch`) for ``local_search_budget``
                     placements
    optimal          the exact optimum of the cost model (`agents.baselines.optimal`) within
                     ``optimal_time_limit_s`` (0: skipped); within the limit it may only be the best found
    search-from-best after all of those, ``search_from_best`` placements of the local search's block moves
                     around the best of them (`agents.search.hybrid.SearchFrom`; 0, the default: skipped)

and keeps the fastest placement as measured (after the env's ``unsupported="repair"``). Every planner's latency
and wall time is kept beside it, so the same label is the "best known" reference of a transfer table.

Labels are cached on disk, one gzip-compressed JSON file per (graph, preset, objective, cost-model version, label
settings), written atomically (`placement_gym.files.write_json`) and checked against `LABEL_FILE`
(`placement_gym.schema`) when read back; a damaged or foreign file is reported and computed again. A label's
placement is checked against its graph before anything imitates it (`check_placement`: one device per op, each a
device of the preset that can run the op): one that does not fit is refused in one line naming the file.
`labels_for` computes the missing ones in parallel (a process pool, or tasks on a Ray cluster).

The training graphs of a learned placer (`training_graphs`) are the dataset's train split plus synthetic graphs
(`placement_gym.models.synthetic`): `check_training_graphs` refuses any other name (a val or test family of the
dataset, a zoo model), so no graph the placer is tested on is ever labelled for its training. It also refuses
the synthetic graphs held out for validation (`validation_graphs`: seeds from `VAL_SYNTHETIC_SEED` on), which
choose recipes beside the dataset's val split.
"""
from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from agents.search.hybrid import SearchFrom
from placement_gym.backends.simulated import COST_MODEL_VERSION
from placement_gym.env import as_device_indices
from placement_gym.models.dataset import dataset_entry, dataset_names
from placement_gym.models.synthetic import is_synthetic, parse_synthetic
from placement_gym.models.zoo import model_cache_dir
from placement_gym.files import safe_name, write_json
from placement_gym.schema import (
    MAX_DEVICES, MAX_OPS, Integer, ListOf, MapOf, Number, Optional, Record, SchemaError, Text, read_json,
)

__all__ = ["LABEL_FILE", "LABEL_VERSION", "Label", "LabelCache", "LabelSettings", "VAL_SYNTHETIC_SEED", "VARIED_SEED",
           "VARIED_SIZES", "check_placement", "check_training_graphs", "compute_label", "label_env", "labels_for",
           "training_graphs", "validation_graphs", "validation_parts"]

log = logging.getLogger(__name__)

#: Bump when `compute_label` changes what a label is, so cached labels of the old rule are not reused.
LABEL_VERSION = 1
#: The largest label file read back.
MAX_LABEL_BYTES = 8 << 20


@dataclass(frozen=True)
class LabelSettings:
    """What `compute_label` runs: the planners (registry names, one candidate each), the search baseline's budget
    (placements; 0: not run), the exact optimum's time limit (seconds; 0: not run) and the placements of the
    search around the best of them all (0: not run)."""

    planners: tuple[str, ...] = ("cheapest", "dp", "topo", "metis")
    local_search_budget: int = 50
    optimal_time_limit_s: float = 2.0
    search_from_best: int = 0

    def __post_init__(self) -> None:
        if self.search_from_best < 0:
            raise ValueError(f"search_from_best is a number of placements, 0 or more, got {self.search_from_best}")

    def planners_only(self) -> "LabelSettings":
        """The same settings without the search from the best (the label that search starts from)."""
        return replace(self, search_from_best=0)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a label file records them (and its key digests them): ``search_from_best`` only when
        it runs, so the labels written before it existed keep their key."""
        fields = asdict(self)
        if not self.search_from_best:
            del fields["search_from_best"]
        return fields

    def key(self) -> str:
        """A short digest of the settings (part of a cached label's file name)."""
        text = json.dumps({**self.as_dict(), "label_version": LABEL_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Label:
    """The best placement found for `graph` under (`preset`, `objective`).

    Attributes:
        placement: (N,) int64, the fastest placement as measured (device indices of the preset's devices).
        latency_s: its latency (throughput objective: the seconds per inference of the pipeline).
        source: the planner that found it (``"dp"``, ``"single:GPU"``, ``"optimal"``, ...).
        planners: per planner, ``{"latency_s": ... or None (failed), "seconds": wall time}``.
        path: the label file it was read from (`LabelCache.get`); None for a label computed in this process.
    """

    graph: str
    preset: str
    objective: str
    placement: np.ndarray
    latency_s: float
    source: str
    planners: dict[str, dict[str, float | None]] = field(default_factory=dict)
    path: Path | None = field(default=None, compare=False)

    def check_fits(self, env) -> np.ndarray:
        """(N,) int64: the placement, checked against the graph of `env` (its `label_env`) before anything
        imitates it; a one-line ``ValueError`` naming the label's file and field otherwise (`check_placement`)."""
        where = f"{self.path}: field placement" if self.path is not None else f"the computed label of {self.graph}"
        return check_placement(self.placement, env, where)

    def to_json(self, settings: LabelSettings) -> dict[str, Any]:
        return {"graph": self.graph, "preset": self.preset, "objective": self.objective,
                "cost_model_version": COST_MODEL_VERSION, "label_version": LABEL_VERSION,
                "settings": settings.as_dict(), "placement": self.placement.tolist(), "latency_s": self.latency_s,
                "source": self.source, "planners": self.planners}


_PLANNER_RESULT = Record({"latency_s": Optional(Number(positive=True)), "seconds": Number(low=0)})
#: What a cached label file holds (`LabelCache.get` checks it before using anything in it).
LABEL_FILE = Record({
    "graph": Text(max_len=500), "preset": Text(max_len=100), "objective": Text(choices=("latency", "throughput")),
    "cost_model_version": Integer(0), "label_version": Integer(0),
    "settings": Record({"planners": ListOf(Text(max_len=100), max_len=32), "local_search_budget": Integer(0),
                        "optimal_time_limit_s": Number(low=0)}, {"search_from_best": Integer(1)}, others=None),
    "placement": ListOf(Integer(0, MAX_DEVICES - 1), min_len=1, max_len=MAX_OPS),
    "latency_s": Number(positive=True), "source": Text(max_len=100),
    "planners": MapOf(_PLANNER_RESULT, max_len=64),
}, others=None)


# ------------------------------------------------------------------------------------------------ training graphs
#: Synthetic graphs of this seed and above are held out for validation (`validation_graphs`), never trained on.
VAL_SYNTHETIC_SEED = 100_000
#: The sizes of the varied-size training graphs (``n_varied`` of `training_graphs`): 32 to 480 ops in steps of 8.
VARIED_SIZES = tuple(range(32, 481, 8))
#: Their seeds start here, apart from the fixed-size graphs' (0 on).
VARIED_SEED = 2000


def training_graphs(n_synthetic: int = 0, sizes: Sequence[int] = (40, 80, 160, 320), seed: int = 0,
                    n_varied: int = 0) -> list[str]:
    """The dataset's train split, then `n_synthetic` synthetic graphs (``synthetic:N:SEED``, N cycling through
    `sizes`, seeds from `seed` on), then `n_varied` synthetic graphs of varied sizes (N from `VARIED_SIZES`, in an
    order that changes the size from one graph to the next, seeds from `VARIED_SEED` on): the graphs a learned
    placer may be trained on (`check_training_graphs`). A checkpoint trained on four sizes only places graphs of
    other sizes worse on some presets (docs/agents/learned-placer.md); the varied ones fill the range."""
    synthetic = [f"synthetic:{sizes[i % len(sizes)]}:{seed + i}" for i in range(n_synthetic)]
    # 23 and len(VARIED_SIZES) = 57 are coprime: every size comes once in each run of 57 graphs
    varied = [f"synthetic:{VARIED_SIZES[(23 * i) % len(VARIED_SIZES)]}:{VARIED_SEED + i}" for i in range(n_varied)]
    names = dataset_names("train") + synthetic + varied
    check_training_graphs(names)
    return names


def validation_parts(n_synthetic: int = 24, sizes: Sequence[int] = (60, 120, 240, 480)) -> dict[str, list[str]]:
    """The graphs recipes are chosen on, in two parts scored apart: ``"dataset:val"``, the dataset's val split
    (families neither trained nor tested on), and ``"synthetic"``, `n_synthetic` held-out synthetic graphs
    (``synthetic:N:SEED``, N cycling through `sizes`, which lie between and beyond the training sizes, seeds from
    `VAL_SYNTHETIC_SEED` on). The val split has 7 graphs of 3 families; the synthetic graphs add many more, of the
    generator the training graphs mostly come from."""
    return {"dataset:val": dataset_names("val"),
            "synthetic": [f"synthetic:{sizes[i % len(sizes)]}:{VAL_SYNTHETIC_SEED + i}" for i in range(n_synthetic)]}


def validation_graphs() -> list[str]:
    """The graphs of `validation_parts`, the val split first."""
    return [name for names in validation_parts().values() for name in names]


def check_training_graphs(names: Sequence[str]) -> None:
    """ValueError unless every name is a graph of the dataset's train split or a synthetic graph of a seed below
    `VAL_SYNTHETIC_SEED`: a val or test family of the dataset, a held-out synthetic graph, a zoo model or a file is
    never trained on (the transfer table tests on those, `validation_graphs` chooses recipes on them)."""
    refused = []
    for name in names:
        entry = dataset_entry(name)
        if entry is not None and entry.split == "train":
            continue
        if entry is None and is_synthetic(name):
            if parse_synthetic(name)[1] >= VAL_SYNTHETIC_SEED:
                refused.append(f"{name} (held out for validation: seed {VAL_SYNTHETIC_SEED} or above)")
            continue
        refused.append(name if entry is None else f"{name} ({entry.split} split, family {entry.family})")
    if refused:
        raise ValueError(f"not training graphs: {refused}; a learned placer trains on the dataset's train split "
                         f"and synthetic:N:SEED graphs with SEED below {VAL_SYNTHETIC_SEED} only")


def check_placement(placement: Any, env, name: str) -> np.ndarray:
    """(N,) int64: `placement`, a device index per op of the graph of `env`, each op on a device that can run it
    (its ``action_mask``); else a one-line ``ValueError`` "`name` has <what is wrong>; expected <one device index
    per op of GRAPH ...>" naming the graph, its size and the devices. The length and the range are the env's own
    action check (`placement_gym.env.as_device_indices`). A label that does not fit its graph would otherwise be
    imitated silently (too short: only its first ops are read) or fail inside torch (too long, a device beyond the
    preset, or one that cannot run the op: an infinite cross-entropy)."""
    base = env.unwrapped
    n, devices = base.graph.n_ops, base.device_names
    expected = (f"one device index per op of {base.graph.name} ({n} ops), each from 0 to {len(devices) - 1} (its "
                f"devices: {', '.join(devices)}) and on a device that can run the op")
    indices = as_device_indices(placement, [(n,)], len(devices), expected, name=name)
    cannot = np.flatnonzero(~base.action_masks().reshape(n, len(devices))[np.arange(n), indices])
    if cannot.size:
        op = int(cannot[0])
        raise ValueError(f"{name} places op {op} on {devices[indices[op]]}, which cannot run it; expected {expected}")
    return indices


# ------------------------------------------------------------------------------------------------ computing
def label_env(graph: "str | Sequence[str]", preset: str, objective: str, features: "Sequence[str] | None" = None):
    """The simulated env a label is measured on (ops a device cannot run are repaired); a list of graphs gives the
    multi-graph env the RL phase trains on. `features`: None (or empty) for the default families."""
    from placement_gym.env import DevicePlacementEnv

    return DevicePlacementEnv(graph if isinstance(graph, str) else list(graph), backend="simulated", profile=preset,
                              objective=objective, unsupported="repair", features=features or None)


def compute_label(graph: str, preset: str, objective: str, settings: LabelSettings = LabelSettings(),
                  base: "Label | None" = None) -> Label:
    """Run every planner of `settings` on `graph` under (`preset`, `objective`) and keep the fastest placement
    (module docstring). With ``settings.search_from_best``: the planners' label (`base`, the label of the same
    settings without the search; computed here when not given), then the search from its placement."""
    from placement_gym import registry

    if settings.search_from_best:
        base = base or compute_label(graph, preset, objective, settings.planners_only())
        started = time.perf_counter()
        agent = SearchFrom(base.placement).learn(label_env(graph, preset, objective), settings.search_from_best, seed=0)
        planners = {**base.planners, "search-from-best": {"latency_s": agent.best_latency_s,
                                                          "seconds": time.perf_counter() - started}}
        if agent.best_latency_s is not None and agent.best_latency_s < base.latency_s:
            return Label(graph, preset, objective, np.asarray(agent.best_placement, dtype=np.int64),
                         float(agent.best_latency_s), "search-from-best", planners)
        return replace(base, planners=planners)
    env = label_env(graph, preset, objective)
    runs = [(f"single:{device}", "single-device", {"device": d}, 1)
            for d, device in enumerate(env.unwrapped.device_names)]
    runs += [(name, name, {}, 1) for name in settings.planners]
    if settings.local_search_budget > 0:
        runs.append(("local-search", "local-search", {"seed": 0}, settings.local_search_budget))
    if settings.optimal_time_limit_s > 0:
        runs.append(("optimal", "optimal", {"time_limit_s": settings.optimal_time_limit_s}, 1))
    candidates: dict[str, tuple[np.ndarray, float | None, float]] = {}
    for key, name, options, budget in runs:
        started = time.perf_counter()
        agent = registry.make_agent(name, options).learn(env, budget, seed=0)
        # the run's result: its best placement as the env measured it (repaired) and its latency measured at the
        # end of the run (None: it failed)
        candidates[key] = (agent.best_placement, agent.best_latency_s, time.perf_counter() - started)
    feasible = {name: c for name, c in candidates.items() if c[1] is not None}
    if not feasible:
        raise RuntimeError(f"no planner found a feasible placement of {graph!r} under {preset}/{objective}")
    source = min(feasible, key=lambda name: feasible[name][1])
    placement, latency, _ = feasible[source]
    planners = {name: {"latency_s": c[1], "seconds": c[2]} for name, c in candidates.items()}
    return Label(graph, preset, objective, np.asarray(placement, dtype=np.int64), float(latency), source, planners)


def _compute(job: "tuple[str, str, str, LabelSettings, Label | None]") -> Label:
    return compute_label(*job)


# ------------------------------------------------------------------------------------------------ the cache
class LabelCache:
    """Labels on disk under `directory` (default: ``<model cache>/labels``), one gzip-compressed JSON file per key
    (``.json.gz``; a plain ``.json`` of the same key, as caches were written before, is read too)."""

    def __init__(self, directory: "str | Path | None" = None) -> None:
        self.directory = Path(directory) if directory is not None else model_cache_dir() / "labels"

    def path(self, graph: str, preset: str, objective: str, settings: LabelSettings) -> Path:
        """Where the label of this key lives: the graph's name made file-safe, the case, the cost model's and the
        settings' versions."""
        safe = safe_name(graph)
        digest = hashlib.sha256(graph.encode()).hexdigest()[:8]  # two names that map to one safe name stay apart
        return self.directory / (f"{safe}-{digest}-{preset}-{objective}-cm{COST_MODEL_VERSION}-"
                                 f"{settings.key()}.json.gz")

    def get(self, graph: str, preset: str, objective: str, settings: LabelSettings) -> Label | None:
        """The cached label, or None when there is none or the file is damaged or belongs to another key (said
        in the log; the caller computes it again and `put` replaces the file)."""
        path = self.path(graph, preset, objective, settings)
        if not path.exists():  # a cache written before labels were compressed: x.json
            path = path.with_name(path.name.removesuffix(".gz"))
        try:
            data = read_json(path, LABEL_FILE, max_bytes=MAX_LABEL_BYTES, what="placement label")
        except FileNotFoundError:
            return None
        except SchemaError as exc:
            log.warning("refusing a damaged label, computing it again: %s", exc)
            return None
        expected = {"graph": graph, "preset": preset, "objective": objective,
                    "cost_model_version": COST_MODEL_VERSION, "label_version": LABEL_VERSION,
                    "settings": json.loads(json.dumps(settings.as_dict()))}
        wrong = [key for key, value in expected.items() if data[key] != value]
        if wrong:
            log.warning("refusing the label %s: its %s do not match the key; computing it again", path, wrong)
            return None
        return Label(graph, preset, objective, np.asarray(data["placement"], dtype=np.int64), data["latency_s"],
                     data["source"], data["planners"], path)

    def put(self, label: Label, settings: LabelSettings) -> Path:
        """Write `label` atomically (replacing a damaged file of the same key)."""
        return write_json(self.path(label.graph, label.preset, label.objective, settings), label.to_json(settings),
                          overwrite=True)


def labels_for(graphs: Sequence[str], preset: str, objective: str, settings: LabelSettings = LabelSettings(),
               cache: LabelCache | None = None, workers: int = 2, ray: str | None = None) -> list[Label]:
    """The label of every graph of `graphs` (in order): read from `cache`, the missing ones computed by `workers`
    processes (1: in this process), or with `ray` as tasks on the Ray cluster at that address (``"local:N"`` or
    a cluster address: `placement_gym.distributed.map_unordered`; `workers` is then unused), and cached as each
    is done. Call `check_training_graphs` first when they are training data."""
    cache = cache or LabelCache()
    labels: dict[str, Label] = {}
    missing = []
    for graph in graphs:
        label = cache.get(graph, preset, objective, settings)
        if label is None:
            missing.append(graph)
        else:
            labels[graph] = label
    bases: dict[str, Label] = {}
    if settings.search_from_best and missing:  # the planners' labels first (cached, so reused), then the search
        bases = dict(zip(missing, labels_for(missing, preset, objective, settings.planners_only(), cache, workers,
                                             ray)))
    jobs = [(graph, preset, objective, settings, bases.get(graph)) for graph in missing]

    def keep(label: Label) -> None:  # cached as soon as it is computed: an interrupted run keeps what it made
        cache.put(label, settings)
        labels[label.graph] = label

    if ray is not None and jobs:
        from placement_gym.distributed import map_unordered

        for label in map_unordered(_compute, jobs, ray):
            keep(label)
    elif workers > 1 and len(jobs) > 1:
        with multiprocessing.get_context("spawn").Pool(min(workers, len(jobs))) as pool:
            for label in pool.imap_unordered(_compute, jobs):
                keep(label)
    else:
        for job in jobs:
            keep(_compute(job))
    return [labels[graph] for graph in graphs]
