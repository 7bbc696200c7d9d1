"""Compile a placement on OpenVINO's HETERO plugin: the one implementation both the env's real backend
(`placement_gym.backends.openvino`) and deployment (`placement_gym.deploy`) run, so what is deployed is compiled
exactly as it was measured.

* `op_followers` and `set_affinities`: an ``affinity`` rt_info entry on *every* op of the model (compute ops from
  the placement; each Constant / Parameter / Result from the compute op it is attached to: HETERO refuses a
  partial map), on the constant-folded model (BERT's shape subgraph breaks HETERO otherwise);
* `compile_target` and `compile_with_affinities`: a one-device placement compiled on that device directly, a
  split one on ``HETERO:<devices used>`` with each device's properties under ``DEVICE_PROPERTIES``;
* `support_mask`: which device runs which op, by OpenVINO's own ``query_model``.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import numpy as np
import openvino as ov

from ..devices import Device, compile_properties, openvino_error_text
from ..graph import ComputationGraph

logger = logging.getLogger(__name__)

__all__ = ["compile_target", "compile_with_affinities", "op_followers", "set_affinities", "support_mask",
           "target_of", "used_devices"]


def op_followers(graph: ComputationGraph) -> tuple[list, np.ndarray]:
    """``(ops, follows)``: every op of ``graph.model`` in topological order, and for each the index of the compute
    op whose device it takes (itself for a compute op; `ComputationGraph.attached` for the others)."""
    model = graph.require_model("applying a placement")
    index = {name: i for i, name in enumerate(graph.op_names)}
    ops = list(model.get_ordered_ops())
    follows = np.array([index[op.get_friendly_name()] if op.get_friendly_name() in index
                        else graph.attached[op.get_friendly_name()] for op in ops], dtype=np.int64)
    return ops, follows


def set_affinities(ops: Sequence, follows: np.ndarray, placement: np.ndarray, ov_names: Sequence[str]) -> None:
    """Write rt_info ``affinity`` = the OpenVINO name of its device on every op of `ops` (`op_followers`):
    compute op ``i`` gets ``ov_names[placement[i]]``, every other op its compute op's."""
    names = np.array(list(ov_names), dtype=object)
    for op, device in zip(ops, names[np.asarray(placement)[follows]]):
        op.get_rt_info()["affinity"] = device


def used_devices(placement: np.ndarray, devices: Sequence[Device]) -> list[Device]:
    """The devices `placement` uses, in device order (the order of HETERO's device list)."""
    return [devices[d] for d in sorted(set(np.asarray(placement).tolist()))]


def compile_target(used: Sequence[Device]) -> tuple[str, dict]:
    """``(device name, config)`` to compile a placement using `used` on: the one device itself with its
    properties (what a user would run), or ``HETERO:A,B`` with each device's properties under
    ``DEVICE_PROPERTIES`` (nested dicts at the top level of a HETERO config are silently ignored)."""
    return target_of(compile_properties(used))


def target_of(properties: Mapping[str, Mapping[str, Any]]) -> tuple[str, dict]:
    """`compile_target` of the devices used, given as OpenVINO name -> compile properties, in HETERO's order (what
    `save_placed` writes into placement.json, from device entries that need not be opened here)."""
    names = list(properties)
    if len(names) == 1:
        return names[0], dict(properties[names[0]])
    return "HETERO:" + ",".join(names), {"DEVICE_PROPERTIES": {name: dict(p) for name, p in properties.items()}}


def compile_with_affinities(core: ov.Core, model: ov.Model, used: Sequence[Device]) -> tuple[ov.CompiledModel, int]:
    """Compile `model` (affinities set by `set_affinities`) on `compile_target(used)`; returns the compiled model
    and its number of submodels (1 for a one-device placement)."""
    name, config = compile_target(used)
    compiled = core.compile_model(model, name, config)
    return compiled, 1 if len(used) == 1 else int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))


def support_mask(core: ov.Core, graph: ComputationGraph, devices: Sequence[Device]) -> np.ndarray:
    """(N, D) bool: ``True`` where device ``d`` can run compute op ``i``, from ``Core.query_model`` of the whole
    model on each device with its properties (the ops it names are the ones it supports).

    An op that no device's answer names at all is marked supported everywhere: a plugin may report a transformed
    op under another friendly name, and since no device claims it, the names say nothing about it (if it really
    cannot run, compiling fails with OpenVINO's error)."""
    model = graph.require_model("checking operator support")
    supported = []
    for device in devices:
        try:
            supported.append(set(core.query_model(model, device.ov_name, device.properties)))
        except Exception as exc:  # a plugin that cannot even check the model supports none of it
            logger.warning("query_model of %s on %s failed (%s); treating every op as unsupported there",
                           graph.name, device.name, openvino_error_text(exc))
            supported.append(set())
    mask = np.array([[name in names for names in supported] for name in graph.op_names], dtype=bool)
    mask = mask.reshape(graph.n_ops, len(devices))
    mask[~mask.any(axis=1)] = True  # named by no device: unknown, not unsupported (see docstring)
    return mask
