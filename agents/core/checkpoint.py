"""The one checkpoint format of every learned agent: tensors and plain data, checked when read.

A checkpoint is a torch file holding only tensors and plain Python data (dicts, lists, strings, numbers, None)::

    format            CHECKPOINT_FORMAT
    agent             the agent's registry name (``"hsdag"``) and class path, as text: never imported from the
                      file (`placement_gym.registry` maps registered names to classes; a user's class is given
                      by the caller of ``load``)
    hyperparameters   constructor keyword arguments
    state_dict        the policy's tensors
    checksum          SHA-256 over the tensors' names, dtypes, shapes and bytes
    trained_for       what the policy was trained on: graph name and size, devices, feature families
    extra             agent-specific plain data (the best placement, a node-by-node placer's refined groups, whether
                      the zero-shot override is on, an SB3 policy's spaces, ...)
    versions          package versions

It is read with ``torch.load(weights_only=True)``, which refuses any other object (a pickled payload cannot run),
after its size (on disk and unpacked, its entries stored uncompressed) is checked against `MAX_CHECKPOINT_BYTES`.
Its content is then checked against `CHECKPOINT` (`placement_gym.schema`: types, bounded ranges of the settings
that size a policy or a run, bounded lengths; every tensor dense and covering no more bytes than the file stores
for it, `StoredTensor`, and all of them together no more than the file holds), before anything reads a tensor's
data; then its tensors against their checksum, before anything is built; an agent's ``load`` then checks that
the policy its settings build has exactly the stored tensors' shapes (`check_tensor_shapes`, its parameters on
torch's meta device: no memory) before building it, so what loading costs is bounded by the file's size.
Every problem (missing, empty, truncated, too big, compressed, not a checkpoint, holding other objects, another
format, a field of the wrong type or out of range, a tensor larger than its stored bytes, corrupt tensors,
settings that do not fit the tensors, another agent) is one `CheckpointError` naming the file, the field and what
is accepted.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import pickle
import threading
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch

from agents.core.bounds import DEPTH, GROUPS, HEADS, LEVELS, SEED, STEPS, SWEEPS, THREADS, WIDTH
from placement_gym.files import versions, write_atomically
from placement_gym.schema import (
    HEX64, MAX_DEVICES, MAX_OPS, Boolean, Found, Integer, ListOf, MapOf, Number, OneOf, Optional, Plain,
    Record, Spec, Text, check, mismatch,
)

__all__ = ["CHECKPOINT", "CHECKPOINT_FORMAT", "MAX_CHECKPOINT_BYTES", "SETTINGS", "CheckpointError", "StoredTensor",
           "agent_class_path", "check_tensor_shapes", "read_checkpoint", "rebuilding", "resolve_agent_class",
           "renamed", "restore_run_state", "saved_options", "tensor_bytes", "tensor_checksum", "write_checkpoint"]

#: Written into every checkpoint; bumped when the layout changes.
CHECKPOINT_FORMAT = "placement-gym-agent/2"
#: The largest checkpoint read, on disk and unpacked (a policy's tensors take a few MB; a per-op policy of the
#: biggest graph tens of MB).
MAX_CHECKPOINT_BYTES = 1 << 30

#: Bounds of the settings (constructor arguments, ``hyperparameters``) that size a policy or a run, by name, for
#: every agent (`agents.core.bounds`, which the settings dataclasses declare too); any other setting is plain
#: data, bounded in size. A constructor refuses settings it does not take, or outside what it declares.
SETTINGS = Record({}, {
    "hidden_channels": WIDTH, "hidden_dim": WIDTH, "num_layers": DEPTH, "n_layers": DEPTH,
    "attention_layers": DEPTH, "heads": HEADS, "segment_length": Integer(1, MAX_OPS),
    "n_groups": Optional(GROUPS), "groups": Optional(GROUPS), "node_groups": Optional(GROUPS),
    "action_groups": Optional(GROUPS), "max_levels": Optional(LEVELS), "sweeps": SWEEPS,
    "samples_per_update": STEPS, "episodes_per_update": STEPS, "n_steps": STEPS,
    "batch_size": STEPS, "n_epochs": Integer(1, 1000), "ce_every": STEPS,
    "coarsen_above": Optional(Integer(1, MAX_OPS)), "max_nodes": GROUPS,
    "seed": Optional(SEED), "torch_threads": Optional(THREADS),
}, others=Plain(max_depth=4, max_len=1000), what="an object of settings (name: value)")
_NAME = Text(max_len=500)

#: The search settings of earlier releases, by name: in files before the search became a layer of its own they
#: stood flat among an agent's settings, later under its ``search``. Those the search layer runs are its
#: `agents.search.config.SearchConfig` fields; the others moved to the code that runs them (a trainer's, a policy's
#: or an agent's settings, constructor keywords of the same name). `saved_options` translates such a file.
EARLIER_SEARCH_SETTINGS = frozenset({
    "heuristic_start", "search_proposals", "split_patience", "split_refit", "explore", "boundary_explore", "refine",
    "refine_boundary", "imitation_coef", "elites", "distill_steps", "distill_seconds", "fit_memory",
    "zero_shot_override", "finetune_from_predict", "finetune_search", "finetune_search_options", "search_groups",
    "greedy_final", "local_search"})
#: Names of earlier releases for two of them (GO's per-group search).
EARLIER_SEARCH_ALIASES = {"search_explore": "explore", "search_refine": "refine"}
#: Names of earlier releases, now spelled as every other agent spells the same idea: a policy's width and depth
#: (the RNN placer's, Placeto's and PPO's, and the SB3 graph policy's ``policy_kwargs``: PyTorch Geometric's names),
#: Placeto's node-by-node groups (``node_groups``, as ppo-node's) and PPO's contiguous decision groups (``n_groups``,
#: as the RNN placer's and Post's).
EARLIER_NAMES = {"hidden_dim": "hidden_channels", "n_layers": "num_layers", "groups": "node_groups",
                 "action_groups": "n_groups"}


def renamed(options: Mapping[str, Any], takes: "tuple[str, ...] | frozenset[str] | None" = None) -> dict[str, Any]:
    """`options` with the names of earlier releases (`EARLIER_NAMES`) spelled as today, where the taker (its
    keywords `takes`; None: any) takes today's name and not the earlier one."""
    def today(name: str) -> str:
        new = EARLIER_NAMES.get(name)
        return new if new is not None and (takes is None or (name not in takes and new in takes)) else name

    return {today(k): v for k, v in options.items()}


def saved_options(hyperparameters: Mapping[str, Any], takes: "tuple[str, ...] | frozenset[str]") -> dict[str, Any]:
    """The constructor options of an agent that takes the keywords `takes`, from `hyperparameters` as a file of
    any release holds them: earlier names of a setting spelled as today (`renamed`); search settings it takes
    as its own keywords (`EARLIER_SEARCH_SETTINGS` that moved to
    their owner) come out of ``search``; the others (the search layer's) go into ``search`` (a file from before
    the layer, its search settings flat, also measured the policy's own placement first when fine-tuned:
    ``finetune_from_predict``); an empty ``search`` is left out (no search)."""
    options = {EARLIER_SEARCH_ALIASES.get(k, k): v for k, v in renamed(hyperparameters, takes).items()}
    search = options.pop("search", None)
    search = {EARLIER_SEARCH_ALIASES.get(k, k): v for k, v in search.items()} if isinstance(search, Mapping) else \
        search
    flat = {k: options.pop(k) for k in list(options) if k in EARLIER_SEARCH_SETTINGS and k not in takes}
    if flat:
        if search is None:
            search = {"finetune_from_predict": True}
        if not isinstance(search, Mapping):
            raise ValueError(f"search must be a dict of search settings here, got {search!r}")
        search = {**search, **flat}
    if isinstance(search, Mapping):
        for name in [k for k in search if k in takes]:
            options[name] = search.pop(name)  # moved to its owner: the agent's own keyword now
    if search or (search is not None and not isinstance(search, Mapping)):
        options["search"] = search
    return options
_GRAPHS = ListOf(_NAME, max_len=10_000)
#: What the policy was trained on (`agents.core.run.RunAgent.learn` writes it; empty before any run).
TRAINED_FOR = Record({}, {
    "graph": OneOf(_NAME, _GRAPHS), "n_ops": OneOf(Integer(1, MAX_OPS), ListOf(Integer(1, MAX_OPS), max_len=10_000)),
    "devices": ListOf(Text(max_len=200), max_len=MAX_DEVICES), "feature_families": ListOf(_NAME, max_len=100),
    "simulated": Boolean(), "clusters": Integer(1, MAX_OPS),
}, others=Plain(max_depth=4, max_len=1000), what="an object (graph, n_ops, devices, feature_families, simulated)")
_INDICES = ListOf(Integer(0, MAX_OPS), max_len=MAX_OPS)
#: The extra fields every agent writes (`write_checkpoint`); an agent's own are checked by its ``load``
#: (`read_checkpoint`'s `extra`).
EXTRA = {
    "best_placement": Optional(ListOf(Integer(0, MAX_DEVICES - 1), max_len=MAX_OPS)),
    "best_latency_s": Optional(Number(positive=True)),
    "refined_groups": Optional(ListOf(ListOf(_INDICES, min_len=2, max_len=2), max_len=10_000)),
    "zero_shot_active": Boolean(),
}


@dataclass(frozen=True)
class StoredTensor(Spec):
    """A dense tensor (torch's strided layout) whose shape covers no more bytes than the file stores for it: its
    elements times its element size at most the size of its storage.

    A tensor read from a file is a view of a storage (the bytes the file holds) through a shape and strides. With
    a stride of 0 (what ``expand`` makes) or overlapping strides, a storage of a few bytes can carry a shape of
    billions of elements, which the first thing that reads the tensor (the checksum's contiguous copy,
    ``load_state_dict``) would materialise. Checked on the shape and the storage's size only: nothing here reads
    the tensor's data. ``agent.save`` writes every tensor with its own storage of exactly its size."""

    expected: str = ("a dense tensor whose elements fit in the bytes stored for it (as agent.save writes it: no "
                     "stride 0 or overlapping view)")

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, torch.Tensor):
            self.refuse(at, value, "a tensor")
        if value.layout != torch.strided or value.is_quantized or value.is_nested or value.device.type != "cpu":
            kind = "quantized" if value.is_quantized else "nested" if value.is_nested else str(value.layout)
            self.refuse(at, Found(f"a {kind} tensor on {value.device.type}"),
                        "a dense tensor (torch's strided layout, on the CPU)")
        declared = tensor_bytes(value)
        stored = value.untyped_storage().nbytes()
        if declared > stored:
            self.refuse(at, Found(f"a tensor of shape {tuple(value.shape)} ({value.dtype}, {declared} bytes) over "
                                  f"{stored} stored bytes"), self.expected)


def tensor_bytes(tensor: torch.Tensor) -> int:
    """The bytes `tensor`'s shape covers (elements x element size), from its shape alone (its data is not read)."""
    return math.prod(tensor.shape) * tensor.element_size()


#: A checkpoint (module docstring), as far as every agent reads it.
CHECKPOINT = Record({
    "format": Text(choices=(CHECKPOINT_FORMAT,)), "agent": _NAME, "agent_class": _NAME, "hyperparameters": SETTINGS,
    "state_dict": MapOf(StoredTensor(), max_len=100_000),
    "checksum": Text(pattern=HEX64, what="a SHA-256 digest in hex"), "trained_for": TRAINED_FOR,
    "extra": Record({}, EXTRA, others=Plain(max_depth=6, max_len=MAX_OPS)),
}, {"versions": MapOf(Text(), max_len=100)})


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint (the message names the file, the field and the problem)."""


def tensor_checksum(state_dict: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def write_checkpoint(path: "str | Path", agent, state_dict: Mapping[str, torch.Tensor],
                     extra: Mapping[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write a checkpoint (module docstring) of `agent` (a `RunAgent`: its name, class, hyperparameters, what it
    was trained for and its run's result) with the policy's `state_dict` and agent-specific `extra` plain data,
    atomically; refuses to replace a file unless `overwrite`."""
    tensors = {k: v.detach().cpu().clone() for k, v in state_dict.items()}
    best = agent.best_placement
    grouping = getattr(agent, "node_grouping", None)  # a node-by-node placer's groups refined on its graph
    refined = None if grouping is None else grouping.to_data()
    payload = {
        "format": CHECKPOINT_FORMAT, "agent": agent.name, "agent_class": agent_class_path(type(agent)),
        "hyperparameters": dict(agent.hyperparameters()), "state_dict": tensors,
        "checksum": tensor_checksum(tensors), "trained_for": dict(agent.trained_for),
        "extra": {**dict(extra or {}), "best_placement": None if best is None else [int(v) for v in best],
                  "best_latency_s": agent.best_latency_s, "refined_groups": refined,
                  "zero_shot_active": bool(agent.zero_shot_active)},
        "versions": versions(),
    }
    return write_atomically(path, lambda tmp: torch.save(payload, tmp), overwrite=overwrite)


@contextlib.contextmanager
def rebuilding(path: "str | Path", agent_cls: type) -> Iterator[None]:
    """Turn what goes wrong while rebuilding `agent_cls` from the checkpoint at `path` into one `CheckpointError`."""
    try:
        yield
    # (MemoryError: settings within the schema's bounds that this machine cannot hold)
    except (TypeError, KeyError, ValueError, RuntimeError, MemoryError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path}: its settings or tensors do not fit {agent_cls.__name__} "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})") from None


def restore_run_state(agent, data: Mapping[str, Any]) -> None:
    """Give a rebuilt `agent` the run's result and what it was trained for, as `write_checkpoint` recorded them."""
    best = data["extra"].get("best_placement")
    agent.best_placement = None if best is None else np.asarray(best, dtype=np.int64)
    agent.best_latency_s = data["extra"].get("best_latency_s")
    if getattr(agent, "node_grouping", None) is not None:
        agent.node_grouping.load_data(data["extra"].get("refined_groups"))
    agent.trained_for = dict(data["trained_for"])
    # Files from before the flag was recorded: on for a policy whose last run was over many graphs.
    over_many_graphs = isinstance(agent.trained_for.get("graph"), list)
    agent.zero_shot_active = bool(data["extra"].get("zero_shot_active", over_many_graphs)) and \
        agent.overrides_zero_shot


def read_checkpoint(path: "str | Path", *, agent_class: str | None = None,
                    extra: Mapping[str, Spec] | None = None) -> dict[str, Any]:
    """The checked contents of the checkpoint at `path` (`CHECKPOINT`, checksum; module docstring).

    Args:
        agent_class: if given (``"module:Class"``), the class the file must have been written by.
        extra: the fields of ``extra`` the reading agent needs, and what each must be.

    Raises:
        FileNotFoundError: nothing at `path`.
        CheckpointError: anything else wrong with the file (see the module docstring).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if not path.is_file():
        raise CheckpointError(f"{path} is not a file; a checkpoint is a file written by agent.save(path)")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty; it is not a placement-gym checkpoint")
    unpacked = _check_size(path)
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols of foreign files are noise here
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError, KeyError,
            IndexError, TypeError, AttributeError) as exc:
        text = str(exc).strip()
        if "Weights only load failed" in text:  # torch refused an object that is not a tensor or plain data
            raise CheckpointError(f"{path} holds objects other than tensors and plain data, so it was not loaded "
                                  "(loading it could run code from the file)") from None
        reason = f"{type(exc).__name__}: {text.splitlines()[0][:160]}" if text else type(exc).__name__
        raise CheckpointError(f"{path} is not a readable placement-gym checkpoint (truncated, damaged or another "
                              f"kind of file; {reason})") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(f"{path} is not a placement-gym agent checkpoint of format {CHECKPOINT_FORMAT} "
                              f"(found {found!r}); save it again with this version")
    check(data, CHECKPOINT, path, error=CheckpointError)
    if extra:
        check(data["extra"], Record(dict(extra)), path, at="extra", error=CheckpointError)
    state = data["state_dict"]
    # Each tensor fits its own storage (`StoredTensor`); tensors sharing one storage could still add up to far
    # more than the file, and the policy loaded from them holds every one apart.
    total = sum(tensor_bytes(tensor) for tensor in state.values())
    if total > unpacked:
        raise mismatch(path, "state_dict", Found(f"tensors of {total} bytes in all"), f"tensors of at most the "
                       f"{unpacked} bytes the file holds (agent.save writes each tensor's own bytes)",
                       error=CheckpointError)
    if tensor_checksum(state) != data["checksum"]:
        raise CheckpointError(f"{path}: the tensors do not match the checksum written with them; the file is corrupt")
    if agent_class is not None and data["agent_class"] != agent_class:
        raise CheckpointError(f"{path} holds a {data['agent_class']} agent, not a {agent_class}")
    return data


def _check_size(path: Path) -> int:
    """The bytes the file at `path` unpacks to (its entries' sizes, read from the zip's directory); a
    `CheckpointError` unless it is a torch zip file (what ``torch.save`` writes) of at most `MAX_CHECKPOINT_BYTES`,
    on disk and unpacked, whose entries are stored uncompressed."""
    size = path.stat().st_size
    if size > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{path}: {size} bytes; expected a checkpoint of at most {MAX_CHECKPOINT_BYTES} bytes")
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        # torch's older formats are raw pickles, whose tensor sizes are only known while unpickling them.
        raise CheckpointError(f"{path} is not a readable placement-gym checkpoint (truncated, damaged or another "
                              "kind of file; expected the zip file agent.save writes)") from None
    unpacked = sum(entry.file_size for entry in entries)
    if unpacked > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{path}: unpacks to {unpacked} bytes; expected a checkpoint of at most "
                              f"{MAX_CHECKPOINT_BYTES} bytes")
    # torch.save stores its entries as they are, and torch.load inflates compressed ones: a small file of
    # compressed zeros would unpack to up to the bound above. Stored entries take their size on disk.
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(f"{path}: entry {entry.filename[:100]!r} is compressed; expected a checkpoint "
                                  "whose entries are stored uncompressed, as agent.save writes them")
    return unpacked


#: `_parameters_on_meta`: one block at a time, and only the thread inside it is affected.
_META_LOCK = threading.Lock()
_META_THREAD = threading.local()


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """In the block, every parameter a module registers (in this thread) is replaced by one of the same shape on
    torch's meta device (a shape without memory), the way ``accelerate.init_empty_weights`` builds a model
    without its weights.

    Only parameters: a module's own code runs as usual (a policy that computes its grouping from data while it is
    built still can, which it could not with every tensor on the meta device), and a layer's ``torch.empty``
    weight is released untouched as it is registered."""
    with _META_LOCK:
        register = torch.nn.Module.register_parameter

        def register_on_meta(module: torch.nn.Module, name: str, param: "torch.nn.Parameter | None") -> None:
            if getattr(_META_THREAD, "active", False) and param is not None and \
                    not isinstance(param, torch.nn.parameter.UninitializedParameter):
                param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
            register(module, name, param)

        torch.nn.Module.register_parameter = register_on_meta
        _META_THREAD.active = True
        try:
            yield
        finally:
            _META_THREAD.active = False
            torch.nn.Module.register_parameter = register


def check_tensor_shapes(path: "str | Path", data: Mapping[str, Any], build: Callable[[], torch.nn.Module],
                        settings: Mapping[str, Any]) -> None:
    """`CheckpointError` unless the stored tensors (``state_dict``) load into the module ``build()`` makes from
    the checkpoint `data`'s settings: the same names and shapes, once the module's own load hooks have run (a
    policy grows a term its training added, and reads the names older files used).

    ``build()`` runs, and the tensors are loaded, with the parameters on torch's meta device
    (`_parameters_on_meta`: shapes, no memory; copying into them is a no-op), so settings that would build a huge
    model (a width the stored tensors do not have) are refused before its weights are allocated. `settings`
    (field -> value: ``{"hyperparameters.hidden_channels": 64, ...}``) are the values the module was built from:
    the error names the one that best explains the differences (its value is in more of the shapes built than of
    the shapes stored; the first such, in the order of `settings`), else the first tensor that differs."""
    with _parameters_on_meta(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*to a meta parameter in the current model, which is a no-op")
        module = build()
        try:
            module.load_state_dict(data["state_dict"])
            return
        except RuntimeError:  # torch's message spans many lines: say below which field does not fit
            pass
    # The module as its load hooks left it, against the tensors as stored.
    built = {name: tuple(t.shape) for name, t in module.state_dict().items()}
    stored = {name: tuple(t.shape) for name, t in data["state_dict"].items()}
    differ = [(name, built[name], stored[name]) for name in sorted(built.keys() & stored.keys())
              if built[name] != stored[name]]
    if differ:
        name, want, have = differ[0]

        def explains(value: int) -> int:
            """How much better `value` explains the differences: tensors whose built shape has it, less stored."""
            return sum(value in w for _, w, _ in differ) - sum(value in h for _, _, h in differ)

        scores = {key: explains(value) for key, value in settings.items()
                  if isinstance(value, int) and not isinstance(value, bool)}
        key = max(scores, key=scores.get, default=None)  # the first of the best, in the order of `settings`
        if key is not None and scores[key] > 0:
            raise mismatch(path, key, settings[key], f"the value its tensors were trained with (state_dict[{name!r}] "
                           f"has shape {have}; {settings[key]} builds {want})", error=CheckpointError)
        raise mismatch(path, f"state_dict[{name!r}]", Found(f"shape {have}"), f"shape {want}, which its settings "
                       "build", error=CheckpointError)
    for name in sorted(stored.keys() - built.keys()):
        raise mismatch(path, f"state_dict[{name!r}]", Found(f"a tensor of shape {stored[name]}"),
                       "only the tensors its settings build", error=CheckpointError)
    for name in sorted(built.keys() - stored.keys()):
        raise mismatch(path, f"state_dict[{name!r}]", None, f"a tensor of shape {built[name]}, which its settings "
                       "build", error=CheckpointError)
    raise CheckpointError(f"{path}: field state_dict: its tensors do not load into the policy its settings build; "
                          "expected the tensors agent.save wrote")


def agent_class_path(cls: type) -> str:
    """``"module:Class"`` of an agent class (recorded in checkpoints as text)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve_agent_class(data: Mapping[str, Any], cls: type, path: "str | Path") -> type:
    """The class to rebuild the checkpoint `data` with, when ``cls.load(path)`` was called.

    `cls` itself if the file was written by it; else the class registered under the file's agent name
    (`placement_gym.registry`) if that is `cls` or a subclass of it. Nothing named in the file is imported
    unless it is a registered agent."""
    from placement_gym import registry

    if data["agent_class"] == agent_class_path(cls):
        return cls
    if data["agent"] in registry.AGENTS:
        registered = registry.load_agent_class(data["agent"])
        if issubclass(registered, cls) and agent_class_path(registered) == data["agent_class"]:
            return registered
    raise CheckpointError(f"{path} holds a {data['agent_class']} agent ({data['agent']!r}), which is not a "
                          f"{cls.__name__}; load it with its own class, e.g. TheClass.load(path)")
