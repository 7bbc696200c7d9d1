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
and every problem (missing, empty, truncated, not a checkpoint, holding other objects, another format, corrupt
tensors, another agent) is one `CheckpointError` naming the file and what is wrong.
"""
from __future__ import annotations

import contextlib
import hashlib
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import torch

from placement_gym.results import versions, write_atomically

__all__ = ["CHECKPOINT_FORMAT", "CheckpointError", "agent_class_path", "read_checkpoint", "rebuilding",
           "resolve_agent_class", "restore_run_state", "tensor_checksum", "write_checkpoint"]

#: Written into every checkpoint; bumped when the layout changes.
CHECKPOINT_FORMAT = "placement-gym-agent/2"
_KEYS = ("format", "agent", "agent_class", "hyperparameters", "state_dict", "checksum", "trained_for", "extra")


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint (the message names the file and the problem)."""


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
    except (TypeError, KeyError, ValueError, RuntimeError) as exc:
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
        agent.zero_shot_override > 0


def read_checkpoint(path: "str | Path", *, agent_class: str | None = None) -> dict[str, Any]:
    """The checked contents of the checkpoint at `path`.

    Args:
        agent_class: if given (``"module:Class"``), the class the file must have been written by.

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
    missing = [k for k in _KEYS if k not in data]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}; it is damaged or was not written by agent.save")
    state = data["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: its state_dict is not a mapping of tensors; the file is damaged")
    if tensor_checksum(state) != data["checksum"]:
        raise CheckpointError(f"{path}: the tensors do not match the checksum written with them; the file is corrupt")
    if agent_class is not None and data["agent_class"] != agent_class:
        raise CheckpointError(f"{path} holds a {data['agent_class']} agent, not a {agent_class}")
    return data


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
