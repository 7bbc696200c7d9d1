"""Deploy a placement: apply it to an OpenVINO model, write a folder a user can compile and ship, compile it back.

A placement is compiled exactly as the env's real backend measures it: both run `placement_gym.backends.hetero`
(an affinity on every op, HETERO over the devices used, OpenVINO's own support check). On top of it, for users::

    placed = apply_placement(model, placement, devices)       # an openvino.Model with an affinity on every op
    save_placed("placed/", model, placement, devices)          # model.xml + model.bin, placement.json, README.md
    compiled = compile_placed("placed/")                       # an openvino.CompiledModel, as placement.json says

A placement is a device index per compute op (`placement_gym.graph.ComputationGraph.op_names` order) or a
mapping op name -> device; `read_placement` takes one from a results file, a placement file (train's
``<stem>.placement.json``), a placed folder, an agent checkpoint's best placement, or an array.

The affinities are not stored in ``model.xml`` (OpenVINO does not serialise a node's string rt_info), so
``placement.json`` is the placement: `compile_placed` reads it first, checks it against its schema and against
the ops of ``model.xml``, refuses a device this machine lacks or an op placed on a device that cannot run it, and
only then registers the virtual devices it names (`placement_gym.devices`), sets the affinities and compiles.
"""
from __future__ import annotations

import ctypes
import datetime as _dt
import errno
import glob
import importlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import openvino as ov

from .devices import (
    Device, DeviceSpec, open_devices, openvino_error_text, shared_core, virtual_name,
)
from .backends.hetero import (
    compile_target, compile_with_affinities, op_followers, set_affinities, support_mask, target_of, used_devices,
)
from .graph import ComputationGraph
from .schema import (
    MAX_DEVICES, MAX_OPS, NAME, Boolean, Integer, ListOf, MapOf, Number, OneOf, Optional, Record, SchemaError, Text,
    is_regular_file, mismatch, open_regular, read_json, repeated,
)

__all__ = ["FORMAT", "PlacementChoice", "apply_placement", "as_placement", "check_out", "compile_placed",
           "measure_against_single_devices", "placed_placement", "read_placed", "read_placed_graph", "read_placement",
           "save_placed"]

#: Written into every placement.json; bumped when its layout changes.
FORMAT = "placement-gym-placed/1"
#: The files of a placed folder.
MODEL_XML, MODEL_BIN, PLACEMENT_JSON, README_MD = "model.xml", "model.bin", "placement.json", "README.md"
FILES = (MODEL_XML, MODEL_BIN, PLACEMENT_JSON, README_MD)
#: What else a placed folder may hold and still be one placement-gym wrote (`check_out`): the picture ``show``
#: draws into it by default, placement.json stored compressed (read as its twin, `placement_gym.schema.stored`).
ALSO_OURS = ("placement.png", PLACEMENT_JSON + ".gz")
#: Where the agents' package reads a checkpoint (imported by name: `placement_gym` never imports `agents` itself).
CHECKPOINT_READER = "agents.core.checkpoint:read_checkpoint"
#: placement.json's ``latency_kind``, by whether the latency is simulated.
LATENCY_KINDS = {True: "simulated (the cost model's estimate)", False: "measured (on the devices named here)"}
#: The largest placement.json read back (a placement of MAX_OPS ops by name is a few MB).
MAX_PLACEMENT_BYTES = 64 << 20

#: A device as `save_placed` and `apply_placement` take it: a spec (``"CPU[INFERENCE_PRECISION_HINT=bf16]"``) or
#: an opened `Device` (which carries its compile properties).
AnyDevice = str | DeviceSpec | Device


# ------------------------------------------------------------------------------------------ placements
def as_placement(placement: "np.ndarray | Sequence[int] | Mapping[str, int | str]", graph: ComputationGraph,
                 device_names: Sequence[str]) -> np.ndarray:
    """(N,) int64 device indices of `graph`'s compute ops from an array (one index per op, in `op_names` order)
    or a mapping op name -> device index or name (every op once, no other name). ``ValueError`` naming what
    does not fit: a placement for another graph, an index or device name not among `device_names`."""
    n, d = graph.n_ops, len(device_names)
    if isinstance(placement, Mapping):
        names = set(graph.op_names)
        unknown = [op for op in placement if op not in names]
        missing = [op for op in graph.op_names if op not in placement]
        if unknown or missing:
            what = (f"names {len(unknown)} op(s) the model lacks (e.g. {unknown[0]!r})" if unknown else
                    f"leaves {len(missing)} of its {n} ops unplaced (e.g. {missing[0]!r})")
            raise ValueError(f"the placement is for another graph: it {what} of {graph.name!r}")
        index = {name: i for i, name in enumerate(device_names)}
        out = np.empty(n, dtype=np.int64)
        for i, op in enumerate(graph.op_names):
            device = placement[op]
            if isinstance(device, str):
                if device not in index:
                    raise ValueError(f"the placement puts op {op!r} on {device!r}, which is not one of the devices "
                                     f"{list(device_names)}")
                device = index[device]
            elif isinstance(device, bool) or not isinstance(device, (int, np.integer)):  # 1.7 is no device
                raise ValueError(f"the placement puts op {op!r} on {device!r}; expected a device name of "
                                 f"{list(device_names)} or an index from 0 to {d - 1}")
            out[i] = device
    else:
        out = np.asarray(placement)
        if out.ndim != 1 or not np.issubdtype(out.dtype, np.integer):
            raise ValueError(f"a placement is a 1-D array of device indices (one per compute op), got "
                             f"{out.dtype} of shape {out.shape}")
        if out.shape[0] != n:
            raise ValueError(f"the placement is for another graph: {out.shape[0]} device indices, but "
                             f"{graph.name!r} has {n} compute ops")
        out = out.astype(np.int64)
    bad = np.flatnonzero((out < 0) | (out >= d))
    if bad.size:
        raise ValueError(f"the placement puts op {graph.op_names[bad[0]]!r} on device index {int(out[bad[0]])}; "
                         f"there are {d} devices ({list(device_names)})")
    return out


@dataclass(frozen=True)
class PlacementChoice:
    """A placement read by `read_placement`, for one graph.

    Attributes:
        placement: (N,) int64 device index per compute op of the graph.
        devices: the device specs the indices refer to.
        record: what the source says about it (model, agent, seed, latency_s, simulated, ...); {} for an array.
        source: where it came from, in words.
    """

    placement: np.ndarray
    devices: list[str]
    record: dict = field(default_factory=dict)
    source: str = "an array"


def read_placement(source: "str | os.PathLike | np.ndarray | Sequence[int] | Mapping[str, Any]",
                   graph: ComputationGraph, *, devices: Sequence[str] | None = None, model: str | None = None,
                   agent: str | None = None, seed: int | None = None) -> PlacementChoice:
    """The placement of `graph` held by `source`: a results file (``--json`` of train, evaluate, compare: its
    records of this graph, filtered by `agent` and `seed`, the fastest working one), a placement file (train's
    ``<stem>.placement.json``), a placed folder or its placement.json, an agent checkpoint (its best placement),
    or an array / mapping by op name (then `devices` names the devices). `model` is the name records give the
    graph (a model file's stem, `placement_gym.evaluation.model_label`; default ``graph.name``).

    Every file is checked against its schema before anything is built from it (`placement_gym.results`,
    `agents.core.checkpoint`); nothing in it is executed. ``ValueError`` (one line) for a placement of another
    graph or one that does not fit its devices; ``FileNotFoundError`` for a path with nothing there."""
    if not isinstance(source, (str, os.PathLike)):
        if devices is None:
            raise ValueError("a placement given as an array or mapping needs the devices it indexes (devices=[...])")
        return PlacementChoice(as_placement(source, graph, devices), list(devices))
    path = Path(source)
    if path.is_dir():  # a placed folder: read as compile_placed reads it
        document = read_placed(path)
        return PlacementChoice(placed_placement(document, graph, path / PLACEMENT_JSON), list(document["devices"]),
                               document, f"{path}")
    if not path.exists() and not Path(f"{path}.gz").exists():
        raise FileNotFoundError(f"no results, placement or checkpoint file at {path}")
    if path.exists() and not is_regular_file(path):  # a FIFO would block the first read forever
        raise ValueError(f"{path} is not a regular file (a FIFO, a device or a socket); expected a results, "
                         "placement or checkpoint file")
    if _is_zip(path):  # torch.save writes a zip file: an agent checkpoint
        return _from_checkpoint(path, graph)
    return _from_placement_file(path, graph, model or graph.name, agent, seed)


def _is_zip(path: Path) -> bool:
    try:
        with open_regular(path) as f:
            return f.read(4) == b"PK\x03\x04"
    except (OSError, ValueError):
        return False


def _from_placement_file(path: Path, graph: ComputationGraph, model: str, agent: str | None,
                         seed: int | None) -> PlacementChoice:
    from .results import read_placements

    placements = read_placements(path)  # checked before anything is built from it
    matches = [i for i, r in enumerate(placements.records) if r["model"] == model or
               (r.get("model_path") and Path(r["model_path"]).stem == model)]
    if not matches and not placements.results_file:
        matches = [0]  # one placement, named after another model: its ops decide below
    if not matches:
        models = sorted({r["model"] for r in placements.records})
        raise ValueError(f"{path} holds placements of {', '.join(map(repr, models))}, none of model "
                         f"{model!r}: a placement for another graph")
    picked = [i for i in matches if (agent is None or placements.records[i]["agent"] == agent)
              and (seed is None or placements.records[i]["seed"] == seed)]
    if not picked:
        raise ValueError(f"no placement of {model!r} in {path} matches agent {agent} and seed {seed}")
    working = [i for i in picked if placements.records[i].get("latency_s") is not None] or picked
    best = min(working, key=lambda i: placements.records[i].get("latency_s") or 0.0)
    record = placements.records[best]
    by_op = record.get("by_op")
    if by_op is not None and not placements.results_file:  # a placement by op name: checked name by name
        if not isinstance(by_op, dict) or len(by_op) > MAX_OPS or \
                not all(isinstance(k, str) and isinstance(v, str) for k, v in by_op.items()):
            raise mismatch(path, "by_op", by_op, "an object mapping op names to device names")
        placement = as_placement(by_op, graph, record["devices"])
    else:
        placements.check_fits(best, graph.n_ops)
        placement = np.asarray(record["placement"], dtype=np.int64)
    where = f"{path}" + (f", record {best} ({record['agent']}, seed {record['seed']})" if placements.results_file else "")
    return PlacementChoice(placement, list(record["devices"]), dict(record), where)


def _from_checkpoint(path: Path, graph: ComputationGraph) -> PlacementChoice:
    module, _, function = CHECKPOINT_READER.partition(":")
    data = getattr(importlib.import_module(module), function)(path)  # checked, tensors and plain data only
    best = data["extra"].get("best_placement")
    trained = data["trained_for"]
    if best is None or isinstance(trained.get("graph"), list):
        raise ValueError(f"{path} holds no best placement (its agent measured none, or was trained over several "
                         "graphs, where a placement belongs to each)")
    devices = list(trained.get("devices") or [])
    if not devices:
        raise ValueError(f"{path} does not say which devices its placement indexes (trained_for.devices)")
    placement = as_placement(np.asarray(best, dtype=np.int64), graph, devices)
    record = {"model": trained.get("graph", graph.name), "agent": data["agent"], "seed": 0,
              "latency_s": data["extra"].get("best_latency_s"), "simulated": trained.get("simulated"),
              "agent_settings": data["hyperparameters"]}
    return PlacementChoice(placement, devices, record, f"{path} (best placement)")


# ------------------------------------------------------------------------------------ applying, saving
def _device_entries(devices: Sequence[AnyDevice]) -> list[dict]:
    """Per device: name (its spec), base, OpenVINO name (a virtual copy's generated one), virtual, properties.
    `Device` objects (opened here) carry their compile properties; specs carry their own only."""
    entries, copies = [], {}
    for device in devices:
        if isinstance(device, Device):
            entries.append({"name": device.name, "base": device.spec.base, "openvino_name": device.ov_name,
                            "virtual": device.virtual, "properties": dict(device.properties)})
            copies[device.spec.base] = copies.get(device.spec.base, 0) + 1
            continue
        spec = DeviceSpec.parse(device)
        n_before = copies.get(spec.base, 0)
        copies[spec.base] = n_before + 1
        entries.append({"name": spec.name, "base": spec.base,
                        "openvino_name": spec.base if n_before == 0 else virtual_name(spec, n_before),
                        "virtual": n_before > 0, "properties": dict(spec.properties)})
    return entries


def _placed_copy(model: ov.Model, placement, devices: Sequence[AnyDevice]) -> tuple[ov.Model, ComputationGraph,
                                                                                    np.ndarray, list[dict]]:
    entries = _device_entries(devices)
    placed = model.clone()
    graph = ComputationGraph.from_model(placed, name=model.get_friendly_name())  # folds `placed` in place
    array = as_placement(placement, graph, [e["name"] for e in entries])
    ops, follows = op_followers(graph)
    set_affinities(ops, follows, array, [e["openvino_name"] for e in entries])
    return placed, graph, array, entries


def apply_placement(model: ov.Model, placement: "np.ndarray | Sequence[int] | Mapping[str, int | str]",
                    devices: Sequence[AnyDevice]) -> ov.Model:
    """A copy of `model`, constant-folded, with rt_info ``affinity`` on every op: compute op ``i`` on
    ``devices[placement[i]]`` (`as_placement`), the rest following their compute op; the caller's model is not
    changed. Compile it as `compile_target` says (the backend does exactly this); a virtual device
    (``CPU[...]`` listed after ``CPU``) must be registered in that core first (`placement_gym.open_devices`)."""
    return _placed_copy(model, placement, devices)[0]


def check_out(out: "str | os.PathLike", overwrite: bool = False) -> Path:
    """`out` as a `Path`, checked before long work: ``ValueError`` when it is empty (which would be the current
    folder), ``FileExistsError`` when it is a symbolic link or a file, or a folder that holds anything, unless
    `overwrite` and it is a placed folder placement-gym wrote (`foreign_to_placed`), which is then replaced whole;
    ``ValueError`` where it cannot be created (`placement_gym.files.check_creatable`). `save_placed` checks again
    as it moves the new folder into place."""
    from .files import check_creatable

    if not os.fspath(out):
        raise ValueError("--out is empty; name the folder to write the placed model into")
    out = Path(out)
    check_creatable(out, "--out")
    if out.is_symlink():
        raise FileExistsError(f"{out} is a symbolic link; --out names a folder to write the placed model into")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file; --out names a folder to write the placed model into")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} exists and is not empty; choose another folder or pass --overwrite "
                                  "(overwrite=True) to replace the placed folder there")
        foreign = foreign_to_placed(out)
        if foreign:
            raise FileExistsError(f"{out} is not a placed folder placement-gym wrote ({foreign}); --overwrite "
                                  "replaces such a folder only, whole: choose another folder")
    return out


def foreign_to_placed(folder: Path) -> str | None:
    """Why the existing folder `folder` is not a placed folder placement-gym wrote (what `--overwrite` may replace
    whole), or None when it is one: it holds no file but a placed folder's (`FILES`, `ALSO_OURS`), and its
    placement.json names this format."""
    others = sorted(p.name for p in folder.iterdir() if p.name not in FILES + ALSO_OURS or not p.is_file())
    if others:
        return f"it holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
    try:
        read_json(folder / PLACEMENT_JSON, Record({"format": Text(choices=(FORMAT,))}),
                  max_bytes=MAX_PLACEMENT_BYTES, what="placement.json of a placed folder")
    except FileNotFoundError:
        return f"it has no {PLACEMENT_JSON}"
    except SchemaError as exc:
        return f"its placement.json is not one: {str(exc)[:200]}"
    return None


def save_placed(out: "str | os.PathLike", model: ov.Model,
                placement: "np.ndarray | Sequence[int] | Mapping[str, int | str]", devices: Sequence[AnyDevice], *,
                info: Mapping[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write the placed folder `out` and return it:

    * ``model.xml`` + ``model.bin``: `model` constant-folded (the IR the placement's op names refer to; weights
      kept in their precision, not compressed);
    * ``placement.json``: the device of every op by name (``by_op``) and by position (``placement``), the devices
      with their properties and OpenVINO names, the compile target (``device``: ``HETERO:A,B`` or the one device,
      and ``config``), and `info` (objective, latency and whether measured or simulated, ``simulated``, said in
      words as ``latency_kind``; the agent and its settings, ...), with package versions and the machine;
    * ``README.md``: how to compile and run it.

    The folder is written whole into a temporary folder beside `out`, then moved into place in one step, so a
    reader, a failure or a signal midway never leaves half of it; readable as the user's other folders (the
    umask's mode). An existing `out` that holds anything is refused unless `overwrite` and it is a placed folder
    placement-gym wrote (`check_out`), which is then swapped for the new one in one step; a folder that appears
    at `out` meanwhile is never replaced without `overwrite`. A device listed twice is refused (compile_placed
    could not tell the two apart).
    """
    from .files import machine, temporary_name, umask, versions, write_json, write_text

    check_out(out, overwrite)
    out = Path(out)
    names = [e["name"] for e in _device_entries(devices)]
    twice = repeated(names)
    if twice is not None:  # placement.json names each op's device: two alike could not be told apart
        raise ValueError(f"device {names[twice[1]]!r} is listed twice (devices {names}); expected each device "
                         "once (a virtual copy is the device with other properties: CPU[INFERENCE_NUM_THREADS=1])")
    placed, graph, array, entries = _placed_copy(model, placement, devices)
    target, config = target_of({entries[d]["openvino_name"]: entries[d]["properties"]
                              for d in sorted(set(array.tolist()))})
    info = dict(info or {})
    if "simulated" in info:  # what the latency is, said in words beside the flag
        info["latency_kind"] = LATENCY_KINDS[bool(info["simulated"])]
    document = {
        "format": FORMAT,
        "model": info.pop("model", graph.name), "model_path": info.pop("model_path", None),
        "agent": info.pop("agent", "given"), "seed": info.pop("seed", 0),
        "devices": names,
        "placement": array.tolist(),
        "by_op": {op: names[d] for op, d in zip(graph.op_names, array.tolist())},
        "openvino_devices": entries,
        "device": target,
        "config": config,
        "compute_ops": graph.n_ops,
        **info,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "machine": machine(),
    }
    where = Path(os.path.abspath(out))  # `out` may be spelled "." or "sub/": its name and parent, as they are
    where.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"{temporary_name(where)}placing-"
    _remove_abandoned(where.parent, prefix)
    tmp = Path(tempfile.mkdtemp(dir=where.parent, prefix=f"{prefix}{os.getpid()}-"))
    try:
        os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it 0700; a folder to ship is readable as any other
        try:
            ov.save_model(placed, str(tmp / MODEL_XML), compress_to_fp16=False)
        except RuntimeError as exc:  # OpenVINO says a failed write (a full disk) as a stream error, not an OSError
            raise OSError(errno.EIO, f"OpenVINO could not write the model ({openvino_error_text(exc, 200)}; a full "
                          "disk?)", str(out)) from None
        write_json(tmp / PLACEMENT_JSON, document)
        write_text(tmp / README_MD, _readme(document, out))
        _move_into_place(tmp, where, overwrite)
    finally:
        if tmp.exists():  # what was not moved into place, or the folder it replaced
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _move_into_place(tmp: Path, out: Path, overwrite: bool) -> None:
    """Move the written folder `tmp` to `out` in one step. A rename onto a path that holds a non-empty folder
    fails (the OS checks, atomically: two writers racing for `out` cannot both win); only with `overwrite`, and
    once `out` is again found to be a placed folder we wrote, are the two folders then swapped in one step, `tmp`
    left holding the old one."""
    try:
        os.rename(tmp, out)  # onto nothing, or onto an empty folder
        return
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
            raise
        if not overwrite:
            check_out(out)  # says what is there now (appeared while this folder was written)
            raise FileExistsError(f"{out} exists; choose another folder or pass --overwrite") from None
    check_out(out, overwrite=True)
    _exchange(tmp, out)


def _exchange(a: Path, b: Path) -> None:
    """Swap folders `a` and `b` in one step (Linux's ``renameat2(RENAME_EXCHANGE)``): a reader of `b` sees the old
    folder or the new, never neither nor a mix. Where the OS cannot, three renames (`b` aside, `a` to `b`, the old
    one to `a`), which leave `b` missing for an instant."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is not None:
        at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
        if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL, errno.EPERM):  # not "unsupported here": a real failure
            raise OSError(code, os.strerror(code), str(b))
    aside = a.with_name(a.name + "-old")
    os.rename(b, aside)
    try:
        os.rename(a, b)
    except BaseException:
        os.rename(aside, b)
        raise
    os.rename(aside, a)


def _libc() -> Any:
    """The C library of this process (None where there is none to load, as on Windows)."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _remove_abandoned(parent: Path, prefix: str) -> None:
    """Remove the temporary folders (``{prefix}{pid}-...``) that a `save_placed` into this destination left in
    `parent` when it was killed (SIGKILL runs no clean-up): those whose process is gone."""
    for path in parent.glob(f"{glob.escape(prefix)}*"):
        found = re.fullmatch(re.escape(prefix) + r"(\d+)-.*", path.name)
        if found and path.is_dir() and not path.is_symlink() and not _alive(int(found.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _readme(document: Mapping[str, Any], out: Path) -> str:
    latency = document.get("latency_s")
    kind = "simulated" if document.get("simulated") else "measured"
    said = "" if latency is None else f" Its latency ({document.get('objective', 'latency')}, {kind}): " \
                                      f"{latency * 1e3:.4g} ms."
    return f"""# {document['model']}, placed by {document['agent']}

`model.xml` / `model.bin`: the model (constant-folded). `placement.json`: the device of each of its
{document['compute_ops']} compute ops, the devices ({', '.join(document['devices'])}) with their properties, and
the compile target `{document['device']}`.{said}

Compile and run it (placement-gym reads `placement.json`, registers any virtual device it names, sets each op's
affinity and compiles on HETERO):

```python
from placement_gym.deploy import compile_placed
compiled = compile_placed("{out}")
outputs = compiled([...])  # one array per model input
```

`placement-gym show {out}` draws the placement.
"""


# ------------------------------------------------------------------------------------ reading, compiling
_PROPERTY = OneOf(Boolean(), Integer(), Number(), Text(max_len=1000))
_DEVICE = Record({"name": Text(min_len=1, max_len=200), "base": Text(min_len=1, max_len=100,
                                                                     pattern=r"[A-Za-z_][A-Za-z0-9_]*(\.[0-9]+)?"),
                  "openvino_name": Text(min_len=1, max_len=100), "virtual": Boolean(),
                  "properties": MapOf(_PROPERTY, max_len=100, max_key=200)})
#: A placed folder's placement.json, as far as `compile_placed` reads it (other fields are not read).
PLACED = Record({
    "format": Text(choices=(FORMAT,)), "model": NAME, "agent": NAME, "seed": Integer(0, 2**64 - 1),
    "devices": ListOf(Text(min_len=1, max_len=200), min_len=1, max_len=MAX_DEVICES),
    "placement": ListOf(Integer(0, MAX_DEVICES - 1), min_len=1, max_len=MAX_OPS),
    "by_op": MapOf(Text(min_len=1, max_len=200), max_len=MAX_OPS, max_key=10_000),
    "openvino_devices": ListOf(_DEVICE, min_len=1, max_len=MAX_DEVICES),
    "device": Text(min_len=1, max_len=10_000),
}, {"latency_s": Optional(Number(positive=True)), "n_submodels": Optional(Integer(0, MAX_OPS)),
    "simulated": Optional(Boolean())}, what="a placed folder's placement.json")


def read_placed(folder: "str | os.PathLike") -> dict:
    """The checked placement.json of placed folder `folder` (`PLACED`, plus: one OpenVINO device entry per
    device, named alike; every op's device among them; model.xml and model.bin present). Nothing is built."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no placed folder at {folder}" if not folder.exists() else
                                f"{folder} is a file; a placed folder holds {', '.join(FILES)}")
    path = folder / PLACEMENT_JSON
    document = read_json(path, PLACED, max_bytes=MAX_PLACEMENT_BYTES, what="placement.json of a placed folder")
    names = document["devices"]
    if [d["name"] for d in document["openvino_devices"]] != names:
        raise mismatch(path, "openvino_devices", document["openvino_devices"],
                       f"one entry per device of devices, in that order ({names})")
    if len(set(names)) != len(names):
        raise mismatch(path, "devices", names, "each device once")
    for op, device in document["by_op"].items():
        if device not in names:
            raise mismatch(path, f"by_op[{op[:60]!r}]", device, f"one of devices ({names})")
    for name in (MODEL_XML, MODEL_BIN):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder} has no {name}; a placed folder holds {', '.join(FILES)}")
    return document


def placed_placement(document: Mapping[str, Any], graph: ComputationGraph, source: "str | os.PathLike") -> np.ndarray:
    """(N,) int64: the placement of `graph` that a placed folder's checked placement.json `document` (`read_placed`,
    from `source`) gives: its ``by_op``, what `compile_placed` applies, which must agree with its ``placement``
    (the same devices in `graph`'s op order; `show` and `export` read this one placement too). One-line
    ``ValueError`` for a placement of another graph or two that disagree."""
    try:
        placement = as_placement(document["by_op"], graph, document["devices"])
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    listed = document["placement"]
    if len(listed) != graph.n_ops:
        raise mismatch(source, "placement", listed, f"one device index per op of {graph.name!r} ({graph.n_ops}), "
                       "as by_op places them")
    differ = np.flatnonzero(np.asarray(listed, dtype=np.int64) != placement)
    if differ.size:
        i = int(differ[0])
        raise mismatch(source, f"placement[{i}]", listed[i], f"{int(placement[i])}, the device by_op gives op "
                       f"{graph.op_names[i]!r} (placement and by_op are one placement)")
    return placement


def read_placed_graph(folder: "str | os.PathLike",
                      core: ov.Core | None = None) -> tuple[dict, ComputationGraph, np.ndarray]:
    """``(document, graph, placement)`` of placed folder `folder`: its checked placement.json (`read_placed`), the
    graph of its own model.xml and the placement by_op gives it (`placed_placement`): what `compile_placed`
    compiles and ``placement-gym show`` draws. No device is opened."""
    folder = Path(folder)
    document = read_placed(folder)
    try:
        model = (core or shared_core()).read_model(str(folder / MODEL_XML), str(folder / MODEL_BIN))
    except Exception as exc:  # OpenVINO raises plain Exceptions
        raise ValueError(f"{folder / MODEL_XML}: OpenVINO cannot read it ({openvino_error_text(exc, 200)})") from None
    graph = ComputationGraph.from_model(model, name=document["model"])  # folds in place, as when it was placed
    return document, graph, placed_placement(document, graph, folder / PLACEMENT_JSON)


def _open_placed(folder: Path, core: ov.Core) -> tuple[dict, list[Device], ComputationGraph, np.ndarray]:
    """Read and check a placed folder (`read_placed_graph`), then open its devices (registering virtual ones; a
    device this machine lacks is refused) and check that each op's device can run it."""
    document, graph, placement = read_placed_graph(folder, core)
    path = folder / PLACEMENT_JSON
    specs = [DeviceSpec(d["base"].upper(), tuple(sorted(d["properties"].items())))
             for d in document["openvino_devices"]]
    try:
        devices = open_devices(specs, core)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    mask = support_mask(core, graph, devices)
    cannot = np.flatnonzero(~mask[np.arange(graph.n_ops), placement])
    if cannot.size:
        i = int(cannot[0])
        raise ValueError(f"{path}: op {graph.op_names[i]!r} ({graph.op_types[i]}) is placed on "
                         f"{document['devices'][placement[i]]}, which cannot run it (OpenVINO's query_model)"
                         + (f"; {cannot.size - 1} more op(s) too" if cannot.size > 1 else ""))
    return document, devices, graph, placement


def compile_placed(folder: "str | os.PathLike", core: ov.Core | None = None) -> ov.CompiledModel:
    """Compile the placed folder `folder` (`save_placed`) as its placement.json says: checked first
    (`read_placed`; a device this machine lacks, a placement that does not fit model.xml's ops, an op on a
    device that cannot run it: one-line ``ValueError``), then its virtual devices registered in `core` (default:
    the process's shared core), every op's affinity set, compiled on ``HETERO:...`` with each device's properties
    (or on the one device it uses)."""
    compiled, _ = _compile_folder(Path(folder), core or shared_core())
    return compiled


def _compile_folder(folder: Path, core: ov.Core) -> tuple[ov.CompiledModel, tuple]:
    document, devices, graph, placement = _open_placed(folder, core)
    used = used_devices(placement, devices)
    if len(used) > 1:
        ops, follows = op_followers(graph)
        set_affinities(ops, follows, placement, [d.ov_name for d in devices])
    try:
        compiled, _ = compile_with_affinities(core, graph.model, used)
    except Exception as exc:  # OpenVINO raises plain Exceptions
        raise ValueError(f"{folder}: OpenVINO cannot compile it on {compile_target(used)[0]} "
                         f"({openvino_error_text(exc, 300)})") from None
    return compiled, (graph, devices, placement, document["devices"])


# ------------------------------------------------------------------------------------------------ measuring
def measure_against_single_devices(folder: "str | os.PathLike", *, objective: str = "latency", warmup: int = 3,
                                   repeats: int = 20, target_rel_halfwidth: float | None = 0.01,
                                   max_repeats: int = 200, max_timing_s: float = 2.0, input_seed: int = 0,
                                   core: ov.Core | None = None) -> dict:
    """Time the placed folder's model (compiled by `compile_placed`) against every op on each of its devices
    alone, with the real backend's timing (`placement_gym.backends.profiling`).

    Latency: every timed run of the placed model is followed by one of the single-device model
    (`timed_pairs`), so load from other processes slows both; the speedup is the median of the ratios
    single / placed, with the distribution-free 95% interval of that median. Throughput: steady-state periods of
    each (`timed_periods`); the interval is the ratio of the two medians' intervals (conservative). Both:
    `placement_gym.backends.base.timing_ratio`.

    Returns ``{"latency_s", "latency_interval_s", "n_submodels", "execution_devices", "singles": [{"device",
    "latency_s", "speedup", "speedup_interval"} (latency also ``relative``: the median of placed / single per
    pair, and ``relative_interval``), or {"device", "error"}]}``."""
    from .backends.base import check_objective, median_interval, timing_ratio
    from .backends.profiling import timed_pairs, timed_periods, timed_runs
    from .models import example_inputs

    check_objective(objective)
    core = core or shared_core()
    compiled, (graph, devices, placement, names) = _compile_folder(Path(folder), core)
    inputs = {i: ov.Tensor(a) for i, a in enumerate(example_inputs(graph.model, seed=input_seed).values())}
    adaptive = dict(target_rel_halfwidth=target_rel_halfwidth, max_s=max_timing_s)
    n_used = len(set(placement.tolist()))

    def request(c: ov.CompiledModel) -> ov.InferRequest:
        r = c.create_infer_request()
        for index, tensor in inputs.items():
            r.set_input_tensor(index, tensor)
        return r

    def periods(c: ov.CompiledModel, jobs: int) -> list[float]:
        return timed_periods(c, inputs, jobs, warmup, max_windows=max_repeats, **adaptive)

    placed_request = request(compiled)
    if objective == "latency":
        own = timed_runs(placed_request, repeats, warmup, max_runs=max_repeats, **adaptive)
    else:
        own = periods(compiled, max(2, n_used + 1))
    report = {"objective": objective, "latency_s": float(np.median(own)), "latency_interval_s": median_interval(own),
              "n_submodels": 1 if n_used == 1 else int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")),
              "execution_devices": list(compiled.get_property("EXECUTION_DEVICES")), "singles": []}
    for name, device in zip(names, devices):
        try:
            single, _ = compile_with_affinities(core, graph.model, [device])
            if objective == "latency":
                runs, theirs = timed_pairs(placed_request, request(single), repeats, warmup, max_runs=max_repeats,
                                           **adaptive)
                # placed / single per pair: what the env's paired timing scales by its reference's baseline
                placed_by_single, placed_interval = timing_ratio(runs, theirs, paired=True)
                relative = {"relative": placed_by_single, "relative_interval": placed_interval}
            else:
                runs, theirs = own, periods(single, 2)
                relative = {}
            latency = float(np.median(theirs))
            speedup, interval = timing_ratio(theirs, runs, paired=objective == "latency")
            report["singles"].append({"device": name, "latency_s": latency, "speedup": speedup,
                                      "speedup_interval": interval, **relative})
            del single
        except Exception as exc:  # a device that cannot run the whole model alone: said, not fatal
            report["singles"].append({"device": name, "error": openvino_error_text(exc, 200)})
    return report
