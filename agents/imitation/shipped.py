"""The imitation placer's shipped checkpoints: one per hardware preset x objective (training seed 0), package data
in ``agents/imitation/pretrained/``, so ``--agent imitation`` places a new graph on a fresh install with no
training.

Each case has three files there, named by `checkpoint_name`::

    imitation-PRESET-OBJECTIVE-s0.pt     the checkpoint (`agents.core.checkpoint`), read by `ImitationAgent.load`
    imitation-PRESET-OBJECTIVE-s0.json   what `benchmarks/learned_placer/train_learned_placer.py` wrote beside it: the
                                         case, the training graphs, the label settings and digest, the wall times
    imitation-PRESET-OBJECTIVE-s0.md     its model card: training graphs, labels digest, recipe, val and test
                                         figures with the commands that made them, the command that rebuilds it

A checkpoint belongs to one case (`agents.imitation.agent`): it is offered only for the preset's exact device set
(the simulated backend with that preset's profile, every device of it) under that objective. The placement-gym
command finds it through the registry (`placement_gym.registry.AgentEntry.pretrained` names `checkpoint_for`);
in Python::

    from agents.imitation.shipped import load_shipped
    agent = load_shipped("ai_pc", "throughput")      # an ImitationAgent, read by the checked checkpoint loader
"""
from __future__ import annotations

import contextlib
import importlib.resources
from pathlib import Path
from typing import Iterator, Sequence

from .agent import ImitationAgent

__all__ = ["PRETRAINED", "REBUILD", "SHIPPED_SEED", "checkpoint_for", "checkpoint_name", "load_shipped", "model_card",
           "shipped_cases"]

#: The package folder (of `agents.imitation`) that holds the shipped checkpoints.
PRETRAINED = "pretrained"
#: The training seed of the shipped checkpoints.
SHIPPED_SEED = 0
#: The command that rebuilds one case's checkpoint into the package folder (``{preset}``, ``{objective}``).
REBUILD = ("python benchmarks/learned_placer/train_learned_placer.py --cases {preset}:{objective} --seeds 0 "
           "--out agents/imitation/pretrained --overwrite")


def checkpoint_name(preset: str, objective: str, seed: int = SHIPPED_SEED) -> str:
    """The file name of (`preset`, `objective`, `seed`)'s checkpoint, as the training script names it."""
    return f"imitation-{preset}-{objective}-s{seed}.pt"


def _folder():
    """The shipped folder as an `importlib.resources` traversable (a plain folder in a normal install)."""
    return importlib.resources.files("agents.imitation").joinpath(PRETRAINED)


def shipped_cases() -> list[tuple[str, str]]:
    """Every (preset, objective) with a shipped checkpoint, sorted."""
    folder = _folder()
    if not folder.is_dir():
        return []
    cases = []
    for entry in folder.iterdir():
        name = entry.name
        suffix = f"-s{SHIPPED_SEED}.pt"
        if name.startswith("imitation-") and name.endswith(suffix):
            preset, _, objective = name[len("imitation-"):-len(suffix)].rpartition("-")
            if preset and objective in ("latency", "throughput"):
                cases.append((preset, objective))
    return sorted(cases)


def _describe(cases: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{preset} {objective}" for preset, objective in cases) or "none"


@contextlib.contextmanager
def _as_path(preset: str, objective: str, suffix: str = ".pt") -> Iterator[Path]:
    """A file path of the case's shipped file (`importlib.resources.as_file`: the file itself in a normal install,
    a temporary copy from a zipped one)."""
    resource = _folder().joinpath(checkpoint_name(preset, objective)[:-len(".pt")] + suffix)
    with importlib.resources.as_file(resource) as path:
        yield path


def checkpoint_for(preset: "str | None", objective: str, devices: str = "") -> Path:
    """The path of the shipped checkpoint of (`preset`, `objective`); `preset` None: the env's device set is no
    preset's (`devices` says what it is, for the message). Raises ValueError, one line naming the shipped cases,
    when none ships for it. The path is the package file itself (a normal install; `load_shipped` also reads one
    from a zipped install)."""
    cases = shipped_cases()
    if (preset, objective) not in cases:
        what = f"the {preset!r} preset" if preset is not None else (devices or "this device set")
        raise ValueError(f"no shipped imitation checkpoint for {what} under {objective}; shipped (the simulated "
                         f"presets' full device sets): {_describe(cases)}; give --load CHECKPOINT "
                         "(benchmarks/learned_placer/train_learned_placer.py trains one), or --agent "
                         "agents.imitation:ImitationAgent for an untrained network")
    with _as_path(preset, objective) as path:
        return Path(path)


def load_shipped(preset: str, objective: str) -> ImitationAgent:
    """The shipped `ImitationAgent` of (`preset`, `objective`), read by `ImitationAgent.load` (the checked
    checkpoint loader: tensors and plain data only, validated before the policy is built). ValueError naming the
    shipped cases when none ships for it."""
    if (preset, objective) not in shipped_cases():
        checkpoint_for(preset, objective)  # raises, naming the shipped ones
    with _as_path(preset, objective) as path:
        return ImitationAgent.load(path)


def model_card(preset: str, objective: str) -> str:
    """The text of the shipped checkpoint's model card (Markdown). ValueError when none ships for the case."""
    if (preset, objective) not in shipped_cases():
        checkpoint_for(preset, objective)
    return _folder().joinpath(checkpoint_name(preset, objective)[:-len(".pt")] + ".md").read_text()
