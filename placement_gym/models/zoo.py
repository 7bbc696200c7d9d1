"""The model zoo: names -> ``ov.Model``, plus loading user models from IR / ONNX files.

The three benchmark models of the paper (ResNet-50, Inception-V3, BERT-base), and MobileNet-V2, are
written in plain PyTorch, given random weights, converted with ``ov.convert_model`` once and cached as
OpenVINO IR in :func:`model_cache_dir`; later loads read the IR (well under a second). The two
tiny test models are built directly with ``openvino.opset13`` on every call (milliseconds).
torch is imported only when a torch model has to be built.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import openvino as ov

from ..devices import openvino_reason
from ..graph import ComputationGraph
from ..files import write_json
from ..schema import HEX64, MAX_OPS, Integer, Record, Text, read_json
from . import tiny
from .dataset import DATASET, DATASET_VERSION, dataset_entry
from .synthetic import SYNTAX as SYNTHETIC_SYNTAX, is_synthetic, parse_synthetic, synthetic_graph

# Bump when a model definition or the randomisation changes, so stale cached IRs are not reused.
ZOO_VERSION = "v1"

CACHE_ENV_VAR = "PLACEMENT_GYM_CACHE"
MODEL_SUFFIXES = (".xml", ".onnx")
BERT_VOCAB_SIZE = 30522  # range of random ``*input_ids*`` in example_inputs()


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model. ``builder()`` returns a fresh ``ov.Model`` (for torch models: slow, cached)."""

    builder: Callable[[], ov.Model]
    description: str
    inputs: str
    kind: Literal["torch", "opset"]


# --------------------------------------------------------------------------- torch models


def _randomise_(module: Any) -> None:
    """Give every parameter and BatchNorm statistic a random, non-trivial value, in place.

    Default init makes norms identities (scale 1, shift 0, running stats 0/1), and OpenVINO then
    deletes those ops, which would change the graph we want to place. Scales and variances are
    drawn from U(0.5, 1.5) (positive, near 1 so activations stay finite through 50+ layers), shifts
    and means from N(0, 0.1); weight matrices and embeddings are re-drawn with PyTorch's own
    initialisers (fan-in scaled), which keeps activation magnitudes sane.
    """
    import torch
    from torch import nn

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                    m.running_mean.normal_(0.0, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
            elif isinstance(m, (nn.Conv2d, nn.Linear)):
                m.reset_parameters()  # random weights (kaiming-uniform)
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, 1.0)


def _convert_torch(build: Callable[[], tuple[Any, dict[str, Any], tuple[str, ...]]]) -> ov.Model:
    """Build a torch module with seed 0, randomise it and convert it with static input shapes.

    ``build()`` returns ``(module, example_inputs: {name: tensor}, output_names)``; the example's
    order is the ``forward`` argument order. Inputs and outputs get those tensor names.
    """
    import torch

    torch.manual_seed(0)
    module, example, output_names = build()
    _randomise_(module)
    module.eval()
    # Static shapes (from the example) so shape sub-graphs fold away and HETERO can split the model.
    shapes = [(list(t.shape), ov.Type.i64 if t.dtype == torch.int64 else ov.Type.f32) for t in example.values()]
    with torch.no_grad(), warnings.catch_warnings():
        # convert_model traces with torch.jit.trace, which torch 2.13 flags as deprecated; the
        # warning is about OpenVINO's internals, nothing a user of this package can act on.
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.trace", category=DeprecationWarning)
        model = ov.convert_model(module, example_input=example, input=shapes)
    for port, name in zip(model.inputs, example):
        port.get_tensor().set_names({name})
        port.get_node().set_friendly_name(name)
    for port, name in zip(model.outputs, output_names):
        port.get_tensor().set_names({name})
    _stable_names_(model)
    return model


def _stable_names_(model: ov.Model) -> None:
    """Rename ops whose friendly names OpenVINO took from a process-global counter.

    E.g. a Convolution that absorbed its BatchNorm's scale is called ``Multiply_21366``, a
    number that changes from process to process. Such ops get per-type indices in topological
    order instead (``Convolution_0``, ``Constant_17``, ...), so every build of a model has the same
    names (placements are applied by name). Names from torch modules contain ``/`` and never
    match, so the new names cannot collide with them.
    """
    counters: collections.Counter[str] = collections.Counter()
    for op in model.get_ordered_ops():
        if re.fullmatch(r"[A-Za-z]+_\d+", op.get_friendly_name()):
            kind = op.get_type_name()
            op.set_friendly_name(f"{kind}_{counters[kind]}")
            counters[kind] += 1


def _build_resnet50() -> ov.Model:
    from . import resnet

    return _convert_torch(resnet.build)


def _build_inception_v3() -> ov.Model:
    from . import inception

    return _convert_torch(inception.build)


def _build_bert_base() -> ov.Model:
    from . import bert

    return _convert_torch(bert.build)


def _build_mobilenet_v2() -> ov.Model:
    from . import mobilenet

    return _convert_torch(mobilenet.build)


ZOO: dict[str, ZooEntry] = {
    "resnet50": ZooEntry(
        _build_resnet50, "ResNet-50 (torchvision architecture), random weights", "x: (1, 3, 224, 224) f32", "torch"
    ),
    "inception_v3": ZooEntry(
        _build_inception_v3,
        "Inception-V3 (torchvision architecture, eval mode), random weights",
        "x: (1, 3, 299, 299) f32",
        "torch",
    ),
    "bert_base": ZooEntry(
        _build_bert_base,
        "BERT-base encoder + pooler (HF BertModel structure, SDPA attention), random weights",
        "input_ids: (1, 128) i64, attention_mask: (1, 128) i64",
        "torch",
    ),
    "mobilenet_v2": ZooEntry(
        _build_mobilenet_v2,
        "MobileNet-V2 (torchvision architecture, width 1.0), random weights",
        "x: (1, 3, 224, 224) f32",
        "torch",
    ),
    "tiny_chain": ZooEntry(tiny.build_tiny_chain, "straight chain of 9 ops (MLP)", "x: (1, 64) f32", "opset"),
    "tiny_branch": ZooEntry(
        tiny.build_tiny_branch, "small conv net with 3 parallel branches, 24 ops", "x: (1, 3, 32, 32) f32", "opset"
    ),
}

ALIASES: dict[str, str] = {
    "resnet": "resnet50",
    "inception": "inception_v3",
    "bert": "bert_base",
    "mobilenet": "mobilenet_v2",
}


def zoo_names() -> list[str]:
    """Canonical zoo names followed by the aliases."""
    return list(ZOO) + list(ALIASES)


def _canonical(name: str) -> str | None:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in ZOO else None


# --------------------------------------------------------------------------- cache


def model_cache_dir() -> Path:
    """``$PLACEMENT_GYM_CACHE`` if set, else ``$XDG_CACHE_HOME/placement_gym`` (default ``~/.cache``).

    Created on demand.
    """
    if os.environ.get(CACHE_ENV_VAR):
        path = Path(os.environ[CACHE_ENV_VAR]).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base).expanduser() / "placement_gym"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """Exclusive lock on ``path`` so concurrent processes build a model once, not each."""
    try:
        import fcntl
    except ImportError:  # Windows: no locking; the atomic rename below still keeps readers safe
        yield
        return
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _required_bin_bytes(xml_path: Path) -> int:
    """Bytes the ``.bin`` of an IR must hold at least: the end of the last weight its ``.xml`` refers to."""
    text = xml_path.read_text(encoding="utf-8", errors="replace")
    return max((int(o) + int(n) for o, n in re.findall(r'offset="(\d+)"\s+size="(\d+)"', text)), default=0)


def _ir_problem(xml_path: Path) -> str | None:
    """Why the IR at `xml_path` cannot be used as it is (a missing or truncated ``.bin``), or None."""
    bin_path = xml_path.with_suffix(".bin")
    if not bin_path.is_file():
        return f"its weights file {bin_path} is missing"
    required, size = _required_bin_bytes(xml_path), bin_path.stat().st_size
    if size < required:
        return f"its weights file {bin_path} is truncated ({size} bytes; the IR refers to {required})"
    return None


def _fingerprint(path: Path) -> dict:
    """Size and a SHA-256 of 32 slices of 64 KiB spread over the file (cheap even for BERT's 400 MB; any
    truncation and most damage change it)."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        for k in range(32):
            f.seek(size * k // 32)
            digest.update(f.read(1 << 16))
    return {"size": size, "sampled_sha256": digest.hexdigest()}


#: What a cache manifest (``<name>-<version>.manifest.json``, written by `_save_ir_atomically`) holds: the
#: `_fingerprint` of the IR's ``.xml`` and ``.bin`` as they were built, and who wrote it.
_FINGERPRINT = Record({"size": Integer(0), "sampled_sha256": Text(pattern=HEX64, what="a SHA-256 digest in hex")})
MANIFEST = Record({".xml": _FINGERPRINT, ".bin": _FINGERPRINT}, {"written_by": Text()})
#: A manifest is a few hundred bytes; anything much bigger is not one.
MAX_MANIFEST_BYTES = 1 << 16


def _manifest_path(xml_path: Path) -> Path:
    return xml_path.with_suffix(".manifest.json")


def _cached_ir_problem(xml_path: Path) -> str | None:
    """Why a cached zoo IR is unusable (truncated, or different from what was built), or None."""
    problem = _ir_problem(xml_path)
    if problem is not None:
        return problem
    manifest = _manifest_path(xml_path)
    if not manifest.is_file():
        return None  # a cache written before manifests existed: the size check above is all there is
    try:
        expected = read_json(manifest, MANIFEST, max_bytes=MAX_MANIFEST_BYTES, what="cache manifest")
    except (ValueError, OSError) as exc:  # any damage, valid JSON of another shape included: rebuild
        return f"its manifest is damaged ({exc})"
    for path in (xml_path, xml_path.with_suffix(".bin")):
        if expected[path.suffix] != _fingerprint(path):
            return f"{path} differs from what was built (size or content)"
    return None


def _save_ir_atomically(model: ov.Model, xml_path: Path) -> None:
    """Write ``xml_path`` and its ``.bin`` so that no reader ever sees a half-written pair.

    Both files are written under temporary names in the same directory and renamed into place,
    ``.bin`` first: once the ``.xml`` exists, its complete ``.bin`` does too. (A reader that has
    the old ``.bin`` memory-mapped keeps the old inode, so replacing it is safe.)
    """
    tmp_xml = xml_path.with_name(f".{xml_path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp.xml")
    tmp_bin = tmp_xml.with_suffix(".bin")
    try:
        ov.save_model(model, tmp_xml, compress_to_fp16=False)
        fingerprints = {".xml": _fingerprint(tmp_xml), ".bin": _fingerprint(tmp_bin)}
        os.replace(tmp_bin, xml_path.with_suffix(".bin"))
        os.replace(tmp_xml, xml_path)
    finally:
        tmp_xml.unlink(missing_ok=True)
        tmp_bin.unlink(missing_ok=True)

    write_json(_manifest_path(xml_path), {**fingerprints, "written_by": "placement_gym.models.zoo"}, overwrite=True)


def _load_zoo(name: str, rebuild: bool) -> ov.Model:
    entry = ZOO[name]
    if entry.kind == "opset":
        return entry.builder()
    return _load_cached(name, ZOO_VERSION, entry.builder, rebuild)


def _load_cached(name: str, version: str, builder: Callable[[], ov.Model], rebuild: bool) -> ov.Model:
    """The model `name` from the cache (``<name>-<version>.xml`` in `model_cache_dir`), or built by `builder`
    (once across processes: under a lock) and cached. The one cache of the zoo's and the dataset's torch models."""
    cache = model_cache_dir()
    xml_path = cache / f"{name}-{version}.xml"
    if not rebuild and xml_path.exists():
        cached = _read_cached(xml_path)
        if cached is not None:
            return cached
    with _build_lock(cache / f".{name}-{version}.lock"):
        # Another process may have built it while we waited for the lock.
        if not rebuild and xml_path.exists():
            cached = _read_cached(xml_path, warn=False)
            if cached is not None:
                return cached
        # Holding the lock, any temporary file of this model is left over from a build that was killed.
        for stale in cache.glob(f".{xml_path.stem}.*.tmp.*"):
            stale.unlink(missing_ok=True)
        model = builder()
        model.set_friendly_name(name)
        _save_ir_atomically(model, xml_path)
    # Return what was saved, read back: saving folds shape sub-graphs (e.g. a chunk's ShapeOf), so the model in
    # memory can have more ops than the IR every later load reads; the first load must give the same graph.
    return ov.Core().read_model(xml_path)


def dataset_is_cached(name: str) -> bool:
    """Whether dataset entry `name`'s IR is in the cache (loading it then takes well under a second)."""
    return name in DATASET and (model_cache_dir() / f"{name}-{DATASET_VERSION}.xml").is_file()


def _read_cached(xml_path: Path, warn: bool = True) -> ov.Model | None:
    """The cached zoo IR at `xml_path`, or None (with a warning) if it is damaged and must be rebuilt."""
    problem = _cached_ir_problem(xml_path)
    if problem is None:
        try:
            return ov.Core().read_model(xml_path)
        except Exception as exc:  # OpenVINO raises plain Exceptions
            problem = f"OpenVINO cannot read it ({openvino_reason(exc)})"
    if warn:
        warnings.warn(f"the cached zoo model {xml_path} is damaged: {problem}; rebuilding it", stacklevel=4)
    return None


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Silence what native code prints on file descriptor 2 in the block (OpenVINO's frontends log parser
    errors of files they cannot read; the exception says what went wrong)."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


# --------------------------------------------------------------------------- loading


def _read_model_file(path: Path) -> ov.Model:
    suffix = path.suffix.lower()
    if suffix not in MODEL_SUFFIXES:
        raise ValueError(
            f"unsupported model file {str(path)!r}: expected an OpenVINO IR (.xml with its .bin) or an ONNX file (.onnx)"
        )
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is a directory, not a model file (expected an .xml with its .bin, or an .onnx)")
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    if suffix == ".xml" and not path.with_suffix(".bin").is_file():
        raise FileNotFoundError(
            f"weights file not found: {path.with_suffix('.bin')} (an OpenVINO IR .xml needs its .bin beside it)"
        )
    if suffix == ".xml":
        problem = _ir_problem(path)
        if problem is not None:
            raise ValueError(f"could not read model {path}: {problem}")
    try:
        with _quiet_native_stderr():
            model = ov.Core().read_model(path)
    except Exception as exc:  # OpenVINO raises RuntimeError with a long multi-line trace
        raise ValueError(f"could not read model {path}: {openvino_reason(exc)}") from None
    if not model.outputs:  # e.g. an IR whose layers OpenVINO did not recognise reads as empty
        raise ValueError(f"could not read model {path}: it has no outputs")
    return model


def _looks_like_path(text: str) -> bool:
    return bool(Path(text).suffix) or "/" in text or os.sep in text or Path(text).exists()


def load_model(model: str | os.PathLike | ov.Model, *, rebuild: bool = False) -> ov.Model:
    """Return an ``ov.Model`` for a zoo name, a model file, or an existing ``ov.Model``.

    Args:
        model: a zoo name (case-insensitive, aliases allowed, see :func:`zoo_names`); a dataset entry's name
            (`placement_gym.models.dataset`: cached like the zoo's torch models); a path to an
            OpenVINO IR ``.xml`` (with its ``.bin``) or an ``.onnx`` file; or an ``ov.Model``, which
            is cloned so that later rt_info changes never touch the caller's object.
        rebuild: for torch zoo models and dataset entries, ignore the cached IR and build (and re-cache) it again.

    Raises:
        FileNotFoundError: the file (or an IR's ``.bin``) does not exist.
        ValueError: unknown zoo name, unsupported suffix, or a file OpenVINO cannot read.
        TypeError: ``model`` is none of the accepted kinds.
    """
    if isinstance(model, ov.Model):
        return model.clone()
    if isinstance(model, str):
        name = _canonical(model)
        if name is not None:
            loaded = _load_zoo(name, rebuild)
            loaded.set_friendly_name(name)
            return loaded
        entry = dataset_entry(model)
        if entry is not None:
            loaded = _load_cached(entry.name, DATASET_VERSION, functools.partial(_convert_torch, entry.build), rebuild)
            loaded.set_friendly_name(entry.name)
            return loaded
        if is_synthetic(model):
            raise ValueError(
                f"{model!r} is a synthetic graph: it has no OpenVINO model to load; "
                "use load_graph (the simulated backend measures it)"
            )
        if not _looks_like_path(model):
            raise ValueError(
                f"unknown model {model!r}: zoo names are {', '.join(zoo_names())}; a dataset name "
                "(`placement-gym info --dataset`), "
                f"{SYNTHETIC_SYNTAX}, a path to an OpenVINO IR (.xml) or ONNX (.onnx) file, or an ov.Model, "
                "is also accepted"
            )
    if isinstance(model, (str, os.PathLike)):
        return _read_model_file(Path(model))
    raise TypeError(
        "model must be a zoo name (str), a path (str or os.PathLike) to an .xml/.onnx file, "
        f"or an openvino.Model; got {type(model).__name__}"
    )


# --------------------------------------------------------------------------- inputs


def load_graph(model: "str | os.PathLike | ov.Model", name: str | None = None) -> ComputationGraph:
    """The `ComputationGraph` of a zoo name, a model file path or an ``ov.Model`` (`load_model`), named `name`
    or by the model's friendly name; or of a published benchmark (``"tarnawski:..."``, a Tarnawski et al. ``.json``
    input or a DOPPLER ``.txt`` graph: `placement_gym.models.published`, a graph that carries its file's costs); or of
    ``"synthetic:N[:SEED]"`` (`placement_gym.models.synthetic`: N compute
    ops, no ``ov.Model``, so only the simulated backend can measure it), named `name` or ``synthetic:N:SEED``.

    A synthetic N above `placement_gym.schema.MAX_OPS` is refused (``ValueError``) before anything is built:
    model names also come from files (results, placements), and building takes time in proportion to N."""
    from .published import is_published, load_published

    if is_published(model):  # a Tarnawski et al. input or a DOPPLER graph, with the costs of its file
        return load_published(model, name=name)
    if isinstance(model, str) and is_synthetic(model):
        n_ops, seed = parse_synthetic(model)
        if n_ops > MAX_OPS:
            raise ValueError(f"{model!r} asks for {n_ops} ops; a synthetic graph has at most {MAX_OPS} "
                             f"(placement_gym.schema.MAX_OPS); expected {SYNTHETIC_SYNTAX}")
        graph = synthetic_graph(n_ops, seed)
        return graph if name is None else dataclasses.replace(graph, name=name)
    ov_model = load_model(model)
    return ComputationGraph.from_model(ov_model, name=name or ov_model.get_friendly_name())


def example_inputs(model: ov.Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Random input arrays for every input of a static-shape model, keyed by input tensor name.

    Float inputs are standard normal; integer inputs named like ``*input_ids*`` are drawn from
    ``[0, 30522)`` (BERT's vocabulary), ``*mask*`` inputs are all ones, other integer inputs
    (e.g. token type ids) from ``[0, 2)``; boolean inputs are random. Inputs without a tensor name
    are keyed by their Parameter's friendly name.

    Raises:
        ValueError: an input has a dynamic shape (name it; reshape the model first).
    """
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for port in model.inputs:
        names = port.get_names()
        name = port.get_any_name() if names else port.get_node().get_friendly_name()
        pshape = port.get_partial_shape()
        if pshape.is_dynamic:
            raise ValueError(
                f"input {name!r} has a dynamic shape {pshape}; reshape the model to static shapes "
                "first (model.reshape({...}))"
            )
        shape = tuple(port.get_shape())
        dtype = port.get_element_type().to_dtype()
        if dtype == np.bool_:
            arr = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            lowered = name.lower()
            if "input_ids" in lowered:
                arr = rng.integers(0, BERT_VOCAB_SIZE, size=shape)
            elif "mask" in lowered:
                arr = np.ones(shape)
            else:
                arr = rng.integers(0, 2, size=shape)
            arr = arr.astype(dtype)
        else:
            arr = rng.standard_normal(shape).astype(dtype)
        arrays[name] = arr
    return arrays
