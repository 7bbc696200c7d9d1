"""Device and link profiles: where the simulated backend's per-op times and boundary costs come from.

A `Profile` bundles what the cost model (`placement_gym.backends.simulated`) needs:

* one `DeviceProfile` per device: a **roofline** (peak FLOP/s, memory bandwidth, an efficiency per op type and
  a per-op launch overhead) that estimates any op of any graph, plus, optionally, **measured** per-op times
  keyed by (model name, op name) that replace the estimate for the ops of a model that was profiled;
* a `LinkProfile` (latency + bytes / bandwidth) paid by every tensor that crosses from one submodel to another;
* ``boundary_overhead_s``, paid once per extra HETERO submodel (dispatching a sub-request, syncing, converting
  layouts at its edges), and ``split_overhead_s``, paid once by any placement cut into several submodels (the
  HETERO request wrapping them; `calibrate` fits both overheads to real split placements);
* ``schedule``: ``"sequential"`` (HETERO's synchronous inference runs its submodels one after another, so
  latency = compute + transfers + boundaries) or ``"parallel"`` (every device has its own queue and ops on
  different devices overlap: the classic list-scheduling simulator of Placeto / Baechi).

Profiles come from three places:

* ``Profile.preset("paper")``: the paper's hardware class (desktop CPU + discrete Intel data-centre GPU on
  PCIe 4.0), **estimated** from public spec figures (see `paper_profile` for the figures and their sources);
* `placement_gym.backends.calibration.calibrate` (``placement-gym calibrate``): per-op OpenVINO profiling
  (``PERF_COUNT``) on real devices, runtime entries mapped back to the original ops through
  ``originalLayersNames``, the link and boundary costs fitted to a few real split placements, and a roofline
  fitted to the measurements for graphs that were not profiled;
* ``Profile.load(path)`` of a file written by `Profile.save`.

Measured per-op times apply to the model they were measured on (``graph.name``); any other graph falls back
to the device's roofline (`Profile.coverage` and the simulated backend's ``describe()`` say which).
"""
from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..graph import ComputationGraph
from .fusion import fusion_parent
from ..schema import (
    MAX_DEVICES, MAX_OPS, Boolean, Integer, ListOf, MapOf, Number, Optional, Plain, Record, Text, read_json,
)

#: Bytes per element of each precision a device may infer in (`DeviceProfile.precision`).
PRECISION_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "int8": 1}
#: ``Profile.schedule`` values.
SCHEDULES = ("sequential", "parallel")
#: Version of the profile file format written by `Profile.save`.
FORMAT_VERSION = 1


# ================================================================================================ links
@dataclass(frozen=True)
class LinkProfile:
    """The cost of moving one tensor between two submodels: ``latency_s + bytes / bandwidth_Bps``.

    Attributes:
        latency_s: fixed cost per tensor (seconds).
        bandwidth_Bps: bytes per second; ``None`` = unlimited (only the latency counts).
    """

    latency_s: float = 0.0
    bandwidth_Bps: float | None = None

    def __post_init__(self) -> None:
        if not self.latency_s >= 0:
            raise ValueError(f"link latency_s must be >= 0, got {self.latency_s}")
        if self.bandwidth_Bps is not None and not self.bandwidth_Bps > 0:
            raise ValueError(f"link bandwidth_Bps must be > 0 or None (unlimited), got {self.bandwidth_Bps}")

    def transfer_s(self, nbytes: "np.ndarray | float") -> "np.ndarray | float":
        """Seconds to move `nbytes` (scalar or array)."""
        per_byte = 0.0 if self.bandwidth_Bps is None else 1.0 / self.bandwidth_Bps
        if np.ndim(nbytes):
            return self.latency_s + np.asarray(nbytes, dtype=np.float64) * per_byte
        return self.latency_s + float(nbytes) * per_byte


# ============================================================================================== devices
_OP_BYTES: "weakref.WeakKeyDictionary[ComputationGraph, np.ndarray]" = weakref.WeakKeyDictionary()


_WEIGHT_BYTES: "weakref.WeakKeyDictionary[ComputationGraph, np.ndarray]" = weakref.WeakKeyDictionary()
_OP_MEMORY: "weakref.WeakKeyDictionary[ComputationGraph, np.ndarray]" = weakref.WeakKeyDictionary()


def weight_bytes(graph: ComputationGraph) -> np.ndarray:
    """(N,) float64 bytes of the constant inputs (weights) of each op; zeros when the graph has no ov.Model."""
    cached = _WEIGHT_BYTES.get(graph)
    if cached is not None:
        return cached
    weights = np.zeros(graph.n_ops)
    if graph.model is not None:
        index = {name: i for i, name in enumerate(graph.op_names)}
        for op in graph.model.get_ordered_ops():
            if op.get_type_name() != "Constant":
                continue
            nbytes = float(np.prod([max(int(d), 1) for d in op.get_output_shape(0)])) * op.get_output_element_type(0).size
            for target in op.output(0).get_target_inputs():
                consumer = index.get(target.get_node().get_friendly_name())
                if consumer is not None:
                    weights[consumer] += nbytes
    weights.setflags(write=False)
    _WEIGHT_BYTES[graph] = weights
    return weights


def op_bytes(graph: ComputationGraph) -> np.ndarray:
    """(N,) float64 roofline traffic of each op: bytes read from other compute ops, bytes written, and, when the
    graph has its ov.Model, bytes of its constant inputs (`weight_bytes`: what makes a batch-1 dense layer slow)."""
    cached = _OP_BYTES.get(graph)
    if cached is not None:
        return cached
    traffic = np.bincount(graph.edge_index[1], weights=graph.edge_bytes.astype(np.float64), minlength=graph.n_ops)
    traffic += graph.bytes_out.astype(np.float64) + weight_bytes(graph)
    traffic.setflags(write=False)
    _OP_BYTES[graph] = traffic
    return traffic


def op_memory_bytes(graph: ComputationGraph) -> np.ndarray:
    """(N, 2) float64 the memory each op needs on its device: column 0 its weights (kept resident, `weight_bytes`),
    column 1 its working set (the tensors it reads from other ops and writes). What ``obs["node_memory_bytes"]``
    holds, and what `memory_need` adds up."""
    cached = _OP_MEMORY.get(graph)
    if cached is not None:
        return cached
    weights = weight_bytes(graph)
    memory = np.stack([weights, op_bytes(graph) - weights], axis=1)
    memory.setflags(write=False)
    _OP_MEMORY[graph] = memory
    return memory


def memory_need(memory: np.ndarray, placement: np.ndarray, n_devices: int) -> np.ndarray:
    """(D,) float64 estimated memory each device needs for `placement` ((N,) ints), or (B, D) for a batch of
    placements ((B, N)), from each op's `memory` ((N, 2): weights, working set; `op_memory_bytes`): the weights of
    its ops plus the largest working set of one of its ops, the activations that must be resident at once when ops
    run one at a time. An estimate: real plugins also keep workspace and may reuse buffers."""
    memory = np.asarray(memory, dtype=np.float64)
    weights, working = memory[:, 0], memory[:, 1]
    placement = np.asarray(placement)
    rows = placement.reshape(-1, memory.shape[0])
    b = rows.shape[0]
    # One bincount over the batch, each row's devices offset by row * D: every bin sums its ops in op order.
    flat = (rows + (np.arange(b) * n_devices)[:, None]).ravel()
    need = np.bincount(flat, weights=np.tile(weights, b), minlength=b * n_devices).reshape(b, n_devices)
    peak = np.stack([np.where(rows == j, working, 0.0).max(axis=1, initial=0.0) for j in range(n_devices)], axis=1)
    return (need + peak).reshape(placement.shape[:-1] + (n_devices,))


def device_memory_bytes(graph: ComputationGraph, placement: np.ndarray, n_devices: int) -> np.ndarray:
    """(D,) or (B, D) float64 memory each device needs for `placement` of `graph` (`memory_need` of
    `op_memory_bytes`): the simulated backend's memory check."""
    return memory_need(op_memory_bytes(graph), placement, n_devices)


def format_bytes(nbytes: float) -> str:
    """``9.2e9`` -> ``"9.2 GB"`` (decimal units, as device specs give them)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"


@dataclass
class DeviceProfile:
    """How fast one device runs each op.

    Estimated time of op ``i`` (the roofline)::

        launch_overhead_s + max(flops_i / peak_flops, bytes_i / memory_bandwidth_Bps) / efficiency[op_type_i]

    where ``bytes_i`` is what the op reads from other ops plus what it writes (`op_bytes`). Ops of a model listed
    in `measured` take the measured time instead.

    Attributes:
        name: device spec as the env names it (``"CPU"``, ``"GPU"``, ``"CPU[INFERENCE_NUM_THREADS=1]"``).
        peak_flops: peak floating-point operations per second.
        memory_bandwidth_Bps: memory bandwidth in bytes per second.
        launch_overhead_s: fixed cost of every op (kernel launch, node dispatch).
        efficiency: op type -> fraction of the roofline the device reaches for that type (0 < e <= ~1).
        default_efficiency: efficiency of op types not in `efficiency`.
        measured: model name -> {op name: seconds}: measured per-op times (`calibrate`).
        measured_wall_s: model name -> measured latency of the whole model on this device alone.
        virtual: the device was a virtual copy of another (e.g. a second CPU plugin with one thread).
        description: where the figures come from.
        memory_bytes: memory the device can give to one model (weights + activations); None = unbounded.
        unsupported_ops: op types the device cannot run (a placement putting one there fails).
        precision: the precision it infers in (``"f32"``, ``"bf16"``, ``"f16"``, ``"int8"``): the roofline's bytes
            are the graph's f32 bytes scaled to it.
        hetero: OpenVINO's HETERO plugin can place ops on it; a device that cannot (the NPU) runs a whole model or
            nothing, so a placement mixing it with another device fails.
    """

    name: str
    peak_flops: float
    memory_bandwidth_Bps: float
    launch_overhead_s: float = 0.0
    efficiency: dict[str, float] = field(default_factory=dict)
    default_efficiency: float = 0.5
    measured: dict[str, dict[str, float]] = field(default_factory=dict)
    measured_wall_s: dict[str, float] = field(default_factory=dict)
    virtual: bool = False
    description: str = ""
    memory_bytes: float | None = None
    unsupported_ops: list[str] = field(default_factory=list)
    precision: str = "f32"
    hetero: bool = True

    def __post_init__(self) -> None:
        if self.precision not in PRECISION_BYTES:
            raise ValueError(f"device {self.name!r}: unknown precision {self.precision!r}; expected one of "
                             f"{sorted(PRECISION_BYTES)}")
        if not (self.peak_flops > 0 and self.memory_bandwidth_Bps > 0):
            raise ValueError(f"device {self.name!r}: peak_flops and memory_bandwidth_Bps must be > 0")
        if not self.launch_overhead_s >= 0:
            raise ValueError(f"device {self.name!r}: launch_overhead_s must be >= 0, got {self.launch_overhead_s}")
        bad = {k: v for k, v in {**self.efficiency, "<default>": self.default_efficiency}.items() if not v > 0}
        if bad:
            raise ValueError(f"device {self.name!r}: efficiencies must be > 0, got {bad}")
        if self.memory_bytes is not None and not self.memory_bytes > 0:
            raise ValueError(f"device {self.name!r}: memory_bytes must be > 0 or None (unbounded), got {self.memory_bytes}")

    def supports(self, graph: ComputationGraph) -> np.ndarray:
        """(N,) bool: this device can run op ``i`` (its type is not in `unsupported_ops`)."""
        unsupported = set(self.unsupported_ops)
        return np.array([t not in unsupported for t in graph.op_types], dtype=bool)

    def roofline_terms(self, graph: ComputationGraph, fused: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The roofline of every op of `graph` before the launch overhead and the efficiencies.

        Kernels, not IR ops (`placement_gym.backends.fusion`): with `fused`, an op that OpenVINO fuses into its
        producer's kernel (``fusion_parent >= 0``) pays no launch and no memory round trip of its own, only its
        FLOPs; without, every op is a kernel of its own (what a fused op costs when a device boundary separates it
        from its producer).

        Returns:
            launches: (N,) float64 kernel launches each op pays (1.0, or 0.0 where fused).
            ideal_s: (N,) float64 seconds at full efficiency: ``max(flops / peak, bytes / bandwidth)``, the bytes
                scaled from f32 to the device's precision (``flops / peak`` alone where fused).
        """
        flops_s = graph.flops / self.peak_flops
        memory_s = op_bytes(graph) * (PRECISION_BYTES[self.precision] / 4) / self.memory_bandwidth_Bps
        if not fused:
            return np.ones(graph.n_ops), np.maximum(flops_s, memory_s)
        absorbed = fusion_parent(graph) >= 0
        return (~absorbed).astype(np.float64), np.where(absorbed, flops_s, np.maximum(flops_s, memory_s))

    def roofline_times(self, graph: ComputationGraph, fused: bool = True) -> np.ndarray:
        """(N,) float64 estimated seconds of every op of `graph` on this device: ``launch_overhead_s`` per launch
        plus the ideal seconds over the op type's efficiency (`roofline_terms`)."""
        launches, ideal_s = self.roofline_terms(graph, fused)
        efficiency = np.array([self.efficiency.get(t, self.default_efficiency) for t in graph.op_types])
        return self.launch_overhead_s * launches + ideal_s / efficiency

    def op_times(self, graph: ComputationGraph, fused: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Per-op seconds on this device: measured where this model's ops were profiled (the real kernels' times,
        fusion included), roofline elsewhere (`roofline_times`, fused or not).

        Returns:
            times: (N,) float64 seconds.
            measured: (N,) bool, True where the time was measured.
        """
        times = self.roofline_times(graph, fused)
        table = self.measured.get(graph.name)
        is_measured = np.zeros(graph.n_ops, dtype=bool)
        if table:
            for i, name in enumerate(graph.op_names):
                seconds = table.get(name)
                if seconds is not None:
                    times[i] = seconds
                    is_measured[i] = True
        return times, is_measured


# ============================================================================================== profile
# Bounds far beyond any hardware, tight enough that a price (FLOPs / peak, bytes / bandwidth, summed over the
# largest graph) stays finite: a crafted 1e-300 FLOP/s would make every latency infinite.
_SECONDS = Number(low=0, high=1e6)  # a measured or overhead time, per op or per transfer (11 days)
_RATE = Number(low=1, high=1e24)  # FLOP/s or bytes/s
_LINK = Record({}, {"latency_s": _SECONDS, "bandwidth_Bps": Optional(_RATE)}, others=None)
_EFFICIENCY = Number(positive=True, high=100)  # a share of the peak (above 1 only for a profile's own fit)
_DEVICE = Record({"name": Text(min_len=1, max_len=500), "peak_flops": _RATE, "memory_bandwidth_Bps": _RATE}, {
    "launch_overhead_s": _SECONDS, "efficiency": MapOf(_EFFICIENCY, max_len=10_000),
    "default_efficiency": _EFFICIENCY, "measured": MapOf(MapOf(_SECONDS, max_len=MAX_OPS), max_len=1000),
    "measured_wall_s": MapOf(_SECONDS, max_len=1000), "virtual": Boolean(), "description": Text(max_len=10_000),
    "memory_bytes": Optional(Number(positive=True, high=1e24)),
    "unsupported_ops": ListOf(Text(max_len=200), max_len=10_000),
    "precision": Text(choices=tuple(PRECISION_BYTES)), "hetero": Boolean(),
}, others=None)
#: What a profile file (`Profile.save`) holds, as `Profile.load` checks it.
PROFILE_FILE = Record({"devices": ListOf(_DEVICE, min_len=1, max_len=MAX_DEVICES)}, {
    "link": _LINK, "boundary_overhead_s": _SECONDS, "split_overhead_s": _SECONDS,
    "links": MapOf(_LINK, max_len=MAX_DEVICES * MAX_DEVICES), "schedule": Text(choices=SCHEDULES),
    "name": Text(max_len=200), "description": Text(max_len=10_000), "sources": ListOf(Text(max_len=2000), max_len=1000),
    "calibration": Plain(max_depth=8, max_len=100_000), "format_version": Integer(),
}, others=None)
#: A profile with measured per-op times of a few big models is a few MB; far bigger is not one.
MAX_PROFILE_BYTES = 64 << 20


@dataclass
class Profile:
    """Everything the simulated backend needs to price a placement (see the module docstring).

    Attributes:
        devices: one `DeviceProfile` per device; a placement value ``d`` means ``devices[d]``.
        link: default cost of a tensor crossing submodels.
        boundary_overhead_s: cost of every submodel beyond the first.
        split_overhead_s: cost paid once by a placement that is cut into two or more submodels.
        links: optional per-pair overrides keyed ``"SRC->DST"`` (device names).
        schedule: ``"sequential"`` or ``"parallel"`` (`SCHEDULES`).
        name: short name (``"paper"``, ``"calibrated"``, ...).
        description: what the profile describes and how good its figures are.
        sources: where the figures come from (URLs, measurements).
        calibration: how a measured profile was made (devices, models, settings, fit quality, versions).
    """

    devices: list[DeviceProfile]
    link: LinkProfile = field(default_factory=LinkProfile)
    boundary_overhead_s: float = 0.0
    split_overhead_s: float = 0.0
    links: dict[str, LinkProfile] = field(default_factory=dict)
    schedule: str = "sequential"
    name: str = "custom"
    description: str = ""
    sources: list[str] = field(default_factory=list)
    calibration: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.devices:
            raise ValueError("a profile needs at least one device")
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names):
            raise ValueError(f"profile {self.name!r} lists a device twice: {names}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {SCHEDULES}")
        if not (self.boundary_overhead_s >= 0 and self.split_overhead_s >= 0):
            raise ValueError(f"boundary_overhead_s and split_overhead_s must be >= 0, got "
                             f"{self.boundary_overhead_s}, {self.split_overhead_s}")
        for key in self.links:
            src, _, dst = key.partition("->")
            if src not in names or dst not in names:
                raise ValueError(f"link {key!r} must be written 'SRC->DST' with devices of the profile {names}")

    # ------------------------------------------------------------------ lookups
    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    def device(self, name: str) -> DeviceProfile:
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(f"profile {self.name!r} has no device {name!r}; it has {self.device_names}")

    def link_between(self, src: str, dst: str) -> LinkProfile:
        """The link a tensor takes from a submodel on `src` to one on `dst` (`links` override, else `link`)."""
        return self.links.get(f"{src}->{dst}", self.link)

    def select(self, names: Sequence[str]) -> "Profile":
        """A copy with only the devices `names`, in that order (names are canonical device specs)."""
        from ..devices import DeviceSpec

        wanted = [DeviceSpec.parse(n).name for n in names]
        missing = [n for n in wanted if n not in self.device_names]
        if missing:
            raise ValueError(
                f"profile {self.name!r} has no device {missing[0]!r}; it describes {self.device_names}. Pick "
                "devices from the profile, or calibrate one for your devices with `placement-gym calibrate`."
            )
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"device list {list(names)} names a device twice")
        links = {k: v for k, v in self.links.items() if all(p in wanted for p in k.split("->"))}
        return replace(self, devices=[self.device(n) for n in wanted], links=links)

    def coverage(self, graph: ComputationGraph) -> dict[str, float]:
        """Per device, the fraction of `graph`'s ops whose time was measured (the rest use the roofline)."""
        return {d.name: float(d.op_times(graph)[1].mean()) for d in self.devices}

    def describe(self) -> dict:
        """A short record for results files."""
        return {
            "profile": self.name,
            "description": self.description,
            "schedule": self.schedule,
            "devices": self.device_names,
            "measured_models": sorted({m for d in self.devices for m in d.measured}),
            "boundary_overhead_s": self.boundary_overhead_s,
            "split_overhead_s": self.split_overhead_s,
            "link": asdict(self.link),
        }

    # -------------------------------------------------------------- save / load
    def to_dict(self) -> dict:
        data = asdict(self)
        data["format_version"] = FORMAT_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Profile":
        data = dict(data)
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"profile format version {version} is not supported (this version reads {FORMAT_VERSION})")
        try:
            devices = [DeviceProfile(**d) for d in data.pop("devices")]
            link = LinkProfile(**data.pop("link", {}))
            links = {k: LinkProfile(**v) for k, v in data.pop("links", {}).items()}
            return cls(devices=devices, link=link, links=links, **data)
        except (TypeError, KeyError) as exc:
            raise ValueError(f"not a placement-gym profile ({exc}); write one with Profile.save or `placement-gym calibrate`") from exc

    def save(self, path: "str | Path", *, overwrite: bool = False) -> Path:
        """Write the profile as JSON; refuses to replace an existing file unless `overwrite`."""
        from ..files import write_json

        return write_json(path, self.to_dict(), overwrite=overwrite)

    @classmethod
    def load(cls, path: "str | Path") -> "Profile":
        """A profile written by `save` (or `placement-gym calibrate`), checked against `PROFILE_FILE` before
        anything is built from it; errors name the file and the field."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"profile file {path} does not exist; presets: {sorted(PRESETS)}")
        data = read_json(path, PROFILE_FILE, max_bytes=MAX_PROFILE_BYTES, what="placement-gym profile")
        try:
            return cls.from_dict(data)
        except ValueError as exc:  # what the fields say together (a link between devices the profile lacks, ...)
            raise ValueError(f"{path}: {str(exc).splitlines()[0][:300]}") from None

    @classmethod
    def preset(cls, name: str) -> "Profile":
        """A named preset profile (`PRESETS`)."""
        if name not in PRESETS:
            raise ValueError(f"unknown profile preset {name!r}; presets: {sorted(PRESETS)}")
        return PRESETS[name]()

    def preset_name(self) -> str | None:
        """The name of the preset (`PRESETS`) this profile is, field for field (devices, links, overheads, schedule,
        descriptions), or None: a profile of its own, a calibrated one, or a preset with devices left out or its
        schedule changed."""
        return next((name for name, build in PRESETS.items() if build() == self), None)

    @classmethod
    def resolve(cls, profile: "str | Path | Profile") -> "Profile":
        """A `Profile` from a preset name, a JSON file path or a ready `Profile`."""
        if isinstance(profile, Profile):
            return profile
        if isinstance(profile, str) and profile in PRESETS:
            return cls.preset(profile)
        if isinstance(profile, (str, Path)):
            if str(profile).endswith(".json") or Path(profile).exists():
                return cls.load(profile)
            raise ValueError(f"profile {profile!r} is neither a preset ({sorted(PRESETS)}) nor a profile .json file")
        raise TypeError(f"profile must be a preset name, a path or a Profile, got {type(profile).__name__}")


# =============================================================================================== presets
# A preset is real parts that OpenVINO runs, each reproducing OpenVINO's published batch-1 latencies for it
# (`placement_gym.backends.published_figures`). Its spec figures (peak FLOP/s at the precision it runs, memory
# bandwidth, memory) come from the vendors' spec sheets, named beside each part; three figures per device are fitted
# to the published latencies of ResNet-50, BERT-base and MobileNet-V2 by `benchmarks/published/fit_presets.py` (the
# launch overhead per kernel, the efficiency of matrix ops and of the others) and ship in `PRESETS_FILE`, which names
# the fit's command, residuals and sources; docs/results/presets.md is its generated comparison table.

#: Op types that dominate the FLOPs (dense/convolutional math): what matrix engines (XMX, AMX, NPUs) accelerate. A
#: preset device has one efficiency for these and one for every other op type.
MATRIX_OPS = ("Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData")
#: Where the fitted figures of the presets ship (written by benchmarks/published/fit_presets.py).
PRESETS_FILE = Path(__file__).resolve().parent.parent / "data" / "presets.json"
#: Seconds each extra HETERO submodel costs, MEASURED on this project's real backend: ResNet-50 cut into k contiguous
#: segments alternating between two identical f32 CPU devices, minimum of 3 interleaved rounds, a quiet 2-core AMD
#: EPYC machine, 2026-11-27: 1 submodel 43.0 ms, 2: 43.2, 4: 44.0, 8: 46.4, 16: 51.6, 31: 53.1 (about 0.5 ms per
#: extra submodel up to 16). `benchmarks/fidelity/hetero_boundary.py` repeats the measurement. No published figure
#: exists for GPUs or NPUs, so every preset charges this one.
MEASURED_BOUNDARY_S = 0.5e-3
_BOUNDARY_SOURCE = ("HETERO boundary: 0.5 ms per extra submodel, measured on this project's real backend "
                    "(benchmarks/fidelity/hetero_boundary.py; ResNet-50 in 1-31 segments on two f32 CPU devices)")
_PUBLISHED_SOURCE = ("Device speeds: OpenVINO's published benchmark data, OV-2024.1 (openvinotoolkit/openvino, "
                     "docs/sphinx_setup/_static/benchmarks_files/OV-benchmark-data.csv), mapped to batch-1 latency "
                     "at the device's precision (placement_gym.backends.published_figures) and fitted by "
                     "benchmarks/published/fit_presets.py")


@dataclass(frozen=True)
class PartSpec:
    """One device of a preset: a real part, its spec-sheet figures and the published row it reproduces.

    Attributes:
        name: the device as OpenVINO names it (``"CPU"``, ``"GPU.1"``, ``"NPU"``).
        part: the part, in words.
        platform, published_device: its rows in the published figures (``"Core Ultra 7-165H"``, ``"NPU"``).
        precision: the precision OpenVINO runs it in by default (``"f32"``, ``"bf16"``, ``"f16"``).
        peak_flops: peak FLOP/s at that precision; memory_bandwidth_Bps: bytes/s; memory_bytes: what one model may
            use (None: unbounded).
        hetero: whether OpenVINO's HETERO plugin can place ops on it (`DeviceProfile.hetero`).
        spec: where the spec figures come from.
    """

    name: str
    part: str
    platform: str
    published_device: str
    precision: str
    peak_flops: float
    memory_bandwidth_Bps: float
    memory_bytes: float | None
    spec: str
    hetero: bool = True


@dataclass(frozen=True)
class PresetSpec:
    """A preset before its fit: its parts, links and what it stands for."""

    name: str
    role: str
    parts: tuple[PartSpec, ...]
    link: LinkProfile
    links: dict[str, LinkProfile]
    link_source: str


# Spec figures. FLOP/s: cores x FLOP per cycle x clock at the precision the device runs (FMA = 2 FLOP).
_I9_13900K = PartSpec(
    "CPU", "Intel Core i9-13900K", "Core i9-13900K", "CPU", "f32", 8 * 32 * 5.4e9, 89.6e9, None,
    "Core i9-13900K: 8 P-cores (2 x 256-bit FMA, 32 FP32 FLOP/cycle) at 5.4 GHz all-core turbo, DDR5-5600 dual "
    "channel 89.6 GB/s (ark.intel.com); no AMX: OpenVINO runs f32")
_FLEX_170 = PartSpec(
    "GPU", "Intel Data Center GPU Flex 170", "Data Center GPU Flex 170", "dGPU", "f16", 128e12, 576e9, 16e9,
    "Data Center GPU Flex 170: 32 Xe-cores, 256 TOPS INT8 / 128 TFLOP/s FP16 on XMX, 16 GB GDDR6 at 576 GB/s, "
    "PCIe 4.0 x16 (Intel product brief); OpenVINO's GPU plugin runs f16")
_FLEX_140 = PartSpec(
    "GPU", "Intel Data Center GPU Flex 140", "Data Center GPU Flex 140", "dGPU", "f16", 52.5e12, 186e9, 6e9,
    "Data Center GPU Flex 140: 2 x 8 Xe-cores, 105 TOPS INT8 / 52.5 TFLOP/s FP16 on XMX, 2 x 6 GB GDDR6, PCIe 4.0 x8, "
    "75 W low profile (Intel product brief); OpenVINO's GPU plugin runs f16")
_PCIE4_X16 = LinkProfile(latency_s=15e-6, bandwidth_Bps=24e9)
_PCIE_SOURCE = ("PCIe 4.0: 16 GT/s per lane, 128b/130b -> 1.97 GB/s per lane per direction (PCI-SIG); host-device "
                "copies reach ~75% of it, ~15 us per copy (an estimate)")


def _named(part: PartSpec, name: str) -> PartSpec:
    return replace(part, name=name)


PRESET_SPECS: dict[str, PresetSpec] = {
    "paper": PresetSpec(
        "paper", "a desktop with a discrete GPU, the paper's hardware class (HSDAG measured on a Core i9-12900K with a "
        "Data Center GPU Flex 170; OpenVINO publishes the i9-13900K, the next generation of that desktop CPU)",
        (_I9_13900K, _FLEX_170), _PCIE4_X16, {}, _PCIE_SOURCE),
    "ai_pc": PresetSpec(
        "ai_pc", "an AI PC: CPU, integrated GPU and NPU on one chip sharing LPDDR5x (Core Ultra 7 165H)",
        (PartSpec("CPU", "Intel Core Ultra 7 165H CPU", "Core Ultra 7-165H", "CPU", "f32", 6 * 32 * 5.0e9, 119.5e9,
                  16e9, "Core Ultra 7 165H: 6 P-cores (32 FP32 FLOP/cycle) at up to 5.0 GHz, LPDDR5x-7467 128-bit "
                  "119.5 GB/s shared by the chip (ark.intel.com); no AMX: OpenVINO runs f32"),
         PartSpec("GPU", "Intel Arc integrated GPU (Core Ultra 7 165H)", "Core Ultra 7-165H", "iGPU", "f16",
                  8 * 128 * 2 * 2 * 2.3e9, 119.5e9, 8e9, "Intel Arc graphics (Meteor Lake): 8 Xe-cores (128 FP32 "
                  "lanes each) at up to 2.3 GHz -> 4.7 TFLOP/s FP32, 9.4 FP16, memory shared (Intel product brief)"),
         PartSpec("NPU", "Intel AI Boost NPU (Core Ultra 7 165H)", "Core Ultra 7-165H", "NPU", "f16", 5.5e12,
                  119.5e9, 4e9, "Intel AI Boost NPU: up to 11 TOPS INT8 (5.5 TFLOP/s FP16), memory shared (Intel Core "
                  "Ultra product brief); not a HETERO device: OpenVINO's supported-devices table lists heterogeneous "
                  "execution for CPU and GPU, not NPU (docs.openvino.ai 2024, 2025)", hetero=False)),
        LinkProfile(latency_s=5e-6, bandwidth_Bps=50e9), {},
        "Shared memory: a tensor crossing devices is a copy through LPDDR5x (~50 GB/s of its 119.5 GB/s, ~5 us; an "
        "estimate)"),
    "server": PresetSpec(
        "server", "a multi-GPU server: a two-socket Xeon with AMX and three discrete Intel data-centre GPUs",
        (PartSpec("CPU", "2 x Intel Xeon Platinum 8490H", "Xeon Platinum 8490H", "CPU", "bf16",
                  60 * 1024 * 1.9e9, 307e9, 512e9, "Xeon Platinum 8490H: 60 cores with AMX (1,024 BF16 FLOP/cycle "
                  "per core) at 1.9 GHz, 8 x DDR5-4800 307 GB/s per socket (ark.intel.com); OpenVINO runs bf16 on "
                  "AMX; the published system has two sockets"),
         _named(_FLEX_170, "GPU.0"), _named(_FLEX_170, "GPU.1"), _named(_FLEX_140, "GPU.2")),
        _PCIE4_X16, {f"{a}->{b}": LinkProfile(latency_s=15e-6, bandwidth_Bps=12e9)
                     for a in ("CPU", "GPU.0", "GPU.1", "GPU.2") for b in ("CPU", "GPU.0", "GPU.1", "GPU.2")
                     if a != b and "GPU.2" in (a, b)},
        _PCIE_SOURCE + "; the Flex 140 is PCIe 4.0 x8 (~12 GB/s reached); device-to-device copies go through the host"),
    "edge": PresetSpec(
        "edge", "an edge box: a small x86 CPU, its integrated GPU and a low-profile inference card",
        (PartSpec("CPU", "Intel Atom x7425E", "Atom x7425E", "CPU", "f32", 4 * 16 * 3.4e9, 38.4e9, 8e9,
                  "Atom x7425E: 4 E-cores (2 x 128-bit FMA, 16 FP32 FLOP/cycle) at up to 3.4 GHz, LPDDR5-4800 single "
                  "channel 38.4 GB/s (ark.intel.com); OpenVINO runs f32"),
         PartSpec("GPU.0", "Intel UHD Graphics (Atom x7425E)", "Atom x7425E", "iGPU", "f16", 24 * 8 * 2 * 2 * 1.0e9,
                  38.4e9, 2e9, "Atom x7425E graphics: 24 EUs (8 FP32 lanes each) at up to 1.0 GHz -> 0.77 TFLOP/s "
                  "FP16, memory shared (ark.intel.com)"),
         _named(_FLEX_140, "GPU.1")),
        LinkProfile(latency_s=15e-6, bandwidth_Bps=6e9),
        {"CPU->GPU.0": LinkProfile(latency_s=5e-6, bandwidth_Bps=20e9),
         "GPU.0->CPU": LinkProfile(latency_s=5e-6, bandwidth_Bps=20e9)},
        "PCIe 3.0 x8 to the card (the Atom x7425E has PCIe 3.0 lanes; 0.98 GB/s per lane per direction, PCI-SIG; "
        "~6 GB/s reached, ~15 us per copy, an estimate); CPU <-> integrated GPU a copy through shared memory"),
}


def spec_device(part: PartSpec, launch_overhead_s: float = 0.0, matrix_efficiency: float = 1.0,
                default_efficiency: float = 1.0) -> DeviceProfile:
    """The `DeviceProfile` of `part` with the three figures the fit chooses (`benchmarks/published/fit_presets.py`)."""
    return DeviceProfile(
        name=part.name, peak_flops=part.peak_flops, memory_bandwidth_Bps=part.memory_bandwidth_Bps,
        launch_overhead_s=launch_overhead_s, efficiency={t: matrix_efficiency for t in MATRIX_OPS},
        default_efficiency=default_efficiency, memory_bytes=part.memory_bytes, precision=part.precision,
        hetero=part.hetero,
        description=f"{part.part}, {part.precision} (spec sheet + fit to OpenVINO's published latencies)")


_FIT = Record({"launch_overhead_s": _SECONDS, "matrix_efficiency": _EFFICIENCY, "default_efficiency": _EFFICIENCY},
              {"residuals": Plain(max_depth=4, max_len=1000)}, others=None)
#: What `PRESETS_FILE` holds: per preset and device the fitted figures, and how they were fitted.
PRESETS_DATA = Record({"presets": MapOf(MapOf(_FIT, max_len=MAX_DEVICES), max_len=64)},
                      {"command": Text(max_len=2000), "cost_model_version": Integer(0), "precision_exponent": Number(),
                       "sources": ListOf(Text(max_len=2000), max_len=100)}, others=None)


def fitted_presets() -> dict:
    """The fitted figures of every preset (`PRESETS_FILE`, checked before use)."""
    return read_json(PRESETS_FILE, PRESETS_DATA, max_bytes=1 << 20, what="fitted presets file")


def build_preset(name: str, fitted: "Mapping[str, Mapping[str, float]] | None" = None) -> Profile:
    """Preset `name` (`PRESET_SPECS`) with the fitted figures of `fitted` (device name -> its fit; default: the
    shipped fit, `fitted_presets`)."""
    spec = PRESET_SPECS[name]
    if fitted is None:
        fitted = fitted_presets()["presets"].get(name)
        if fitted is None:
            raise ValueError(f"{PRESETS_FILE} has no fit of preset {name!r}: run benchmarks/published/fit_presets.py")
    devices = []
    for part in spec.parts:
        fit = fitted[part.name]
        devices.append(spec_device(part, fit["launch_overhead_s"], fit["matrix_efficiency"], fit["default_efficiency"]))
    return Profile(
        devices=devices, link=spec.link, links=dict(spec.links), boundary_overhead_s=MEASURED_BOUNDARY_S,
        schedule="sequential", name=name,
        description=(f"{spec.role}: {', '.join(p.part for p in spec.parts)}. Device speeds fitted to OpenVINO's "
                     "published benchmark figures for these parts; SIMULATED."),
        sources=[_PUBLISHED_SOURCE, *(p.spec for p in spec.parts), spec.link_source, _BOUNDARY_SOURCE],
    )


def paper_profile() -> Profile:
    """The paper's hardware class: a desktop CPU and a discrete Intel data-centre GPU (`PRESET_SPECS`)."""
    return build_preset("paper")


def ai_pc_profile() -> Profile:
    """An AI PC: CPU, integrated GPU and NPU (not a HETERO device) on one chip (`PRESET_SPECS`)."""
    return build_preset("ai_pc")


def server_profile() -> Profile:
    """A server: a two-socket Xeon with AMX and three discrete data-centre GPUs (`PRESET_SPECS`)."""
    return build_preset("server")


def edge_profile() -> Profile:
    """An edge box: a small CPU, its integrated GPU and a low-profile inference card (`PRESET_SPECS`)."""
    return build_preset("edge")


#: Preset name -> function building the profile.
PRESETS: dict[str, Callable[[], Profile]] = {"paper": paper_profile, "ai_pc": ai_pc_profile,
                                             "server": server_profile, "edge": edge_profile}


__all__ = ["DeviceProfile", "LinkProfile", "MATRIX_OPS", "MEASURED_BOUNDARY_S", "PRESETS", "PRESET_SPECS",
           "PRESETS_FILE", "PartSpec", "PresetSpec", "Profile", "SCHEDULES", "build_preset", "fitted_presets",
           "spec_device", "device_memory_bytes", "format_bytes",
           "memory_need", "op_bytes", "op_memory_bytes", "paper_profile", "ai_pc_profile", "server_profile",
           "edge_profile", "weight_bytes"]
