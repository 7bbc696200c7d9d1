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
from ..schema import (
    MAX_DEVICES, MAX_OPS, Boolean, Integer, ListOf, MapOf, Number, Optional, Plain, Record, Text, read_json,
)

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

    def __post_init__(self) -> None:
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

    def roofline_times(self, graph: ComputationGraph) -> np.ndarray:
        """(N,) float64 estimated seconds of every op of `graph` on this device."""
        flops_s = graph.flops / self.peak_flops
        memory_s = op_bytes(graph) / self.memory_bandwidth_Bps
        efficiency = np.array([self.efficiency.get(t, self.default_efficiency) for t in graph.op_types])
        return self.launch_overhead_s + np.maximum(flops_s, memory_s) / efficiency

    def op_times(self, graph: ComputationGraph) -> tuple[np.ndarray, np.ndarray]:
        """Per-op seconds on this device: measured where this model's ops were profiled, roofline elsewhere.

        Returns:
            times: (N,) float64 seconds.
            measured: (N,) bool, True where the time was measured.
        """
        times = self.roofline_times(graph)
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
        from ..results import write_json

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
def paper_profile() -> Profile:
    """The paper's hardware class: a desktop CPU plus a discrete Intel data-centre GPU on PCIe 4.0.

    HSDAG (Duan et al. 2024) measured on an Intel Core i9-12900K with an Intel Data Center GPU Flex 170. This
    preset is an **estimate** built from public spec figures, not a measurement; use it to exercise agents, and
    `calibrate` a profile (or use the real backend) for numbers about real hardware.

    CPU (Core i9-12900K, Intel ark / launch material): 8 performance cores (Golden Cove, 2 x 256-bit FMA =
    32 FP32 FLOP per cycle) at ~4.9 GHz all-core turbo -> ~1.25 TFLOP/s FP32 (OpenVINO's latency mode keeps to
    the P-cores); dual-channel DDR5-4800 -> 76.8 GB/s. OpenVINO runs f32 on it (no AVX-512 / AMX on Alder Lake).

    GPU (Data Center GPU Flex 170, Intel product brief): 32 Xe-cores, up to 2.05 GHz, 16 GB GDDR6 at 576 GB/s,
    ~16 TFLOP/s FP32 vector and ~128 TFLOP/s FP16 on the XMX matrix engines (256 TOPS INT8); OpenVINO's GPU
    plugin infers in f16 by default, so matrix ops use the XMX figure. Batch-1 inference reaches a small fraction
    of it (the efficiencies below, chosen so that ResNet-50 runs ~2-3x faster than on the CPU, the range public
    OpenVINO benchmarks show for this class); each kernel pays ~10 us of launch/dispatch.

    Link (PCIe 4.0 x16): 31.5 GB/s per direction theoretical, ~24 GB/s reached by host-device copies; ~15 us
    per copy. Each extra HETERO submodel: ~60 us (sub-request dispatch, queue flush and sync).
    """
    conv_like = ("Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData")
    cpu = DeviceProfile(
        name="CPU",
        peak_flops=1.25e12,
        memory_bandwidth_Bps=76.8e9,
        launch_overhead_s=3e-6,
        efficiency={"Convolution": 0.6, "GroupConvolution": 0.25, "MatMul": 0.6, "ConvolutionBackpropData": 0.4},
        default_efficiency=0.5,
        description="Intel Core i9-12900K class (estimate from public specs: 8 P-cores AVX2 ~4.9 GHz, DDR5-4800)",
    )
    gpu = DeviceProfile(
        name="GPU",
        peak_flops=128e12,
        memory_bandwidth_Bps=576e9,
        launch_overhead_s=10e-6,
        efficiency={t: (0.04 if t != "GroupConvolution" else 0.01) for t in conv_like},
        default_efficiency=0.3,
        description="Intel Data Center GPU Flex 170 class (estimate from public specs: 32 Xe-cores, XMX f16, 576 GB/s)",
    )
    return Profile(
        devices=[cpu, gpu],
        link=LinkProfile(latency_s=15e-6, bandwidth_Bps=24e9),
        boundary_overhead_s=60e-6,
        schedule="sequential",
        name="paper",
        description=(
            "ESTIMATE of the paper's hardware class (desktop CPU + discrete Intel data-centre GPU on PCIe 4.0) from "
            "public spec figures; not measured. Figures are simulated."
        ),
        sources=[
            "Intel Core i9-12900K: 8P+8E cores, P-core 3.2/5.2 GHz, DDR5-4800 dual channel 76.8 GB/s (ark.intel.com)",
            "Intel Data Center GPU Flex 170: 32 Xe-cores, 2.05 GHz, 16 GB GDDR6 576 GB/s, 16 TFLOPS FP32, 256 TOPS INT8 XMX, PCIe 4.0 x16, 150 W (Intel product brief)",
            "PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b -> 31.5 GB/s per direction (PCI-SIG)",
            "HSDAG (Duan et al., NeurIPS 2024): i9-12900K + Flex 170, HETERO:GPU.1,CPU",
        ],
    )


#: Op types that dominate the FLOPs (dense/convolutional math): what matrix engines (XMX, NPUs) accelerate.
MATRIX_OPS = ("Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData")
#: Op types an inference accelerator compiler commonly lacks (attention fused ops, embedding lookups, detection
#: post-processing, data-dependent shapes). An assumption modelled on the "Not Supported" cells of OpenVINO's
#: per-device support table for its fixed-function accelerator (GNA column, docs.openvino.ai 2023.3
#: "Supported Operations - by Inference Devices"), not read from the NPU plugin's conformance report.
ACCELERATOR_UNSUPPORTED = ["ScaledDotProductAttention", "Gather", "NonMaxSuppression", "TopK", "NonZero",
                           "Loop", "If", "ScatterUpdate", "ScatterNDUpdate"]


def ai_pc_profile() -> Profile:
    """An AI PC: CPU + integrated GPU + NPU on one chip sharing LPDDR5x (Intel Core Ultra 7 155H class).

    Where placement pays: the NPU is fast on convolutions and matrix products and slow on everything else (its
    vector DSPs), cannot run some op types at all (`ACCELERATOR_UNSUPPORTED`), and every device shares one
    memory, so a tensor crossing devices is a cheap copy. An **estimate** from public spec figures:

    CPU: 6 P-cores (Redwood Cove, AVX2 2 x 256-bit FMA = 32 FP32 FLOP/cycle) at up to 4.8 GHz -> ~0.9 TFLOP/s;
    LPDDR5x-7467, 128-bit -> 119.5 GB/s shared by all three devices.
    GPU: Intel Arc integrated, 8 Xe-cores (128 FP32 lanes each) at 2.25 GHz -> 4.6 TFLOP/s FP32, 9.2 FP16 (no
    XMX on this generation); OpenVINO's GPU plugin infers in f16; without matrix engines batch-1 convolutions
    reach ~15% of it.
    NPU: Intel AI Boost, 11 TOPS INT8 (-> 5.5 TFLOP/s FP16 on its MAC arrays, ~60% reached on convolutions and
    matrix products); other ops run on its SHAVE DSPs at ~12% of the memory roofline; ~10 us per op.
    Link: shared memory, a copy through DRAM (~50 GB/s, ~5 us); each extra submodel ~20 us (sub-request
    dispatch and sync on one chip).
    """
    shared = 119.5e9
    cpu = DeviceProfile(
        name="CPU", peak_flops=0.92e12, memory_bandwidth_Bps=shared, launch_overhead_s=3e-6,
        efficiency={"Convolution": 0.6, "GroupConvolution": 0.25, "MatMul": 0.6, "ConvolutionBackpropData": 0.4},
        default_efficiency=0.5, memory_bytes=16e9,
        description="Intel Core Ultra 7 155H CPU class: 6 P-cores AVX2 ~4.8 GHz, LPDDR5x-7467 (estimate)")
    gpu = DeviceProfile(
        name="GPU", peak_flops=9.2e12, memory_bandwidth_Bps=shared, launch_overhead_s=8e-6,
        efficiency={t: 0.15 for t in MATRIX_OPS} | {"GroupConvolution": 0.08}, default_efficiency=0.3,
        memory_bytes=8e9,
        description="Intel Arc integrated GPU class: 8 Xe-cores 2.25 GHz, f16 9.2 TFLOP/s, shared memory (estimate)")
    npu = DeviceProfile(
        name="NPU", peak_flops=5.5e12, memory_bandwidth_Bps=shared, launch_overhead_s=10e-6,
        efficiency={t: 0.6 for t in MATRIX_OPS} | {"GroupConvolution": 0.2}, default_efficiency=0.12,
        memory_bytes=4e9, unsupported_ops=list(ACCELERATOR_UNSUPPORTED),
        description="Intel AI Boost NPU class: 11 TOPS INT8 MAC arrays, slow SHAVE DSPs for other ops (estimate)")
    return Profile(
        devices=[cpu, gpu, npu], link=LinkProfile(latency_s=5e-6, bandwidth_Bps=50e9), boundary_overhead_s=20e-6,
        schedule="sequential", name="ai_pc",
        description=("ESTIMATE of an AI PC (CPU + integrated GPU + NPU sharing LPDDR5x, Core Ultra 7 155H class) from "
                     "public spec figures; not measured. Figures are simulated."),
        sources=[
            "Intel Core Ultra 7 155H: 6P+8E+2LP-E cores, P-core up to 4.8 GHz, LPDDR5x-7467 (ark.intel.com)",
            "Intel Arc graphics (Meteor Lake): 8 Xe-cores, up to 2.25 GHz (Intel product brief)",
            "Intel AI Boost NPU: up to 11 TOPS INT8 (Intel Core Ultra product brief)",
            "Op support gaps: OpenVINO 'Supported Operations - by Inference Devices' (docs.openvino.ai 2023.3), "
            "accelerator column; an assumption, see ACCELERATOR_UNSUPPORTED",
        ],
    )


def server_profile() -> Profile:
    """A server: a Xeon CPU and three discrete Intel data-centre GPUs of different size and memory.

    Where placement pays: several fast devices at once. Under the throughput objective the model is cut into a
    pipeline whose stages run on different GPUs at the same time; under latency one inference runs on one device
    at a time, so the best single GPU is close to the optimum (the honest control case). An **estimate**:

    CPU: Xeon Platinum 8480+ class, one socket in latency mode: 56 cores with AMX; OpenVINO runs f32 by default
    here (``inference_precision="f32"``): 56 x 2 x 512-bit FMA = 64 FP32 FLOP/cycle at ~2.0 GHz all-core ->
    ~7 TFLOP/s; 8 channels DDR5-4800 -> 307 GB/s.
    GPU.0: Data Center GPU Max 1100 class: 56 Xe-cores, 48 GB HBM2e at 1.23 TB/s, ~22 TFLOP/s FP32,
    ~350 TFLOP/s FP16 on XMX, PCIe 5.0 x16 (~50 GB/s reached).
    GPU.1: Data Center GPU Flex 170 class (as in ``paper``): 16 GB, 576 GB/s, 128 TFLOP/s FP16 XMX, PCIe 4.0.
    GPU.2: Data Center GPU Flex 140 class, one of its two GPUs: 8 Xe-cores, 6 GB GDDR6 at 186 GB/s, ~32
    TFLOP/s FP16 XMX, PCIe 4.0 x8 (~12 GB/s reached).
    Each extra submodel ~60 us; device to device copies go through the host.
    """
    conv = {t: 0.04 for t in MATRIX_OPS} | {"GroupConvolution": 0.01}
    cpu = DeviceProfile(
        name="CPU", peak_flops=7.0e12, memory_bandwidth_Bps=307e9, launch_overhead_s=4e-6,
        efficiency={"Convolution": 0.3, "GroupConvolution": 0.1, "MatMul": 0.3, "ConvolutionBackpropData": 0.2},
        default_efficiency=0.3, memory_bytes=256e9,
        description="Intel Xeon Platinum 8480+ class, one socket: 56 cores ~2.0 GHz, 8 x DDR5-4800 (estimate)")
    big = DeviceProfile(
        name="GPU.0", peak_flops=350e12, memory_bandwidth_Bps=1230e9, launch_overhead_s=10e-6, efficiency=conv,
        default_efficiency=0.3, memory_bytes=48e9,
        description="Intel Data Center GPU Max 1100 class: 56 Xe-cores, 48 GB HBM2e 1.23 TB/s (estimate)")
    mid = DeviceProfile(
        name="GPU.1", peak_flops=128e12, memory_bandwidth_Bps=576e9, launch_overhead_s=10e-6, efficiency=conv,
        default_efficiency=0.3, memory_bytes=16e9,
        description="Intel Data Center GPU Flex 170 class: 32 Xe-cores, 16 GB GDDR6 576 GB/s (estimate)")
    small = DeviceProfile(
        name="GPU.2", peak_flops=32e12, memory_bandwidth_Bps=186e9, launch_overhead_s=10e-6, efficiency=conv,
        default_efficiency=0.3, memory_bytes=6e9,
        description="Intel Data Center GPU Flex 140 class, one GPU: 8 Xe-cores, 6 GB GDDR6 186 GB/s (estimate)")
    pcie4 = LinkProfile(latency_s=15e-6, bandwidth_Bps=24e9)
    slow = LinkProfile(latency_s=15e-6, bandwidth_Bps=12e9)
    links = {f"{a}->{b}": slow for a in ("CPU", "GPU.0", "GPU.1", "GPU.2") for b in ("CPU", "GPU.0", "GPU.1", "GPU.2")
             if a != b and "GPU.2" in (a, b)}
    links |= {"CPU->GPU.0": LinkProfile(latency_s=10e-6, bandwidth_Bps=50e9),
              "GPU.0->CPU": LinkProfile(latency_s=10e-6, bandwidth_Bps=50e9)}
    return Profile(
        devices=[cpu, big, mid, small], link=pcie4, links=links, boundary_overhead_s=60e-6, schedule="sequential",
        name="server",
        description=("ESTIMATE of a server (Xeon CPU + three discrete Intel data-centre GPUs of different size and "
                     "memory) from public spec figures; not measured. Figures are simulated."),
        sources=[
            "Intel Xeon Platinum 8480+: 56 cores, 2.0 GHz base, AVX-512 + AMX, 8 x DDR5-4800 (ark.intel.com)",
            "Intel Data Center GPU Max 1100: 56 Xe-cores, 48 GB HBM2e, 1.23 TB/s, PCIe 5.0 x16 (Intel product brief)",
            "Intel Data Center GPU Flex 170: 32 Xe-cores, 16 GB GDDR6 576 GB/s, PCIe 4.0 x16 (Intel product brief)",
            "Intel Data Center GPU Flex 140: 2 x 8 Xe-cores, 2 x 6 GB GDDR6, PCIe 4.0 x8 (Intel product brief)",
        ],
    )


def edge_profile() -> Profile:
    """An edge box: a small x86 CPU with its integrated GPU and an M.2 inference accelerator with little memory.

    Where placement pays: the accelerator is by far the fastest on matrix ops but holds only 64 MB (the weights
    of ResNet-50 in f32 are 102 MB), cannot run some op types (`ACCELERATOR_UNSUPPORTED`), and sits behind a
    narrow PCIe link; the CPU and its small GPU are slow. An **estimate**:

    CPU: Intel Atom x7425E class, 4 Gracemont E-cores (2 x 128-bit FMA = 16 FP32 FLOP/cycle) at 3.4 GHz ->
    0.22 TFLOP/s; single-channel LPDDR5-4800 -> 38.4 GB/s.
    GPU: its Intel UHD graphics, 24 EUs at ~1 GHz -> ~0.8 TFLOP/s FP16, sharing the CPU's memory.
    ACCEL: an M.2 accelerator of the Hailo-8 class: 26 TOPS INT8 (modelled as 13 TFLOP/s at its f16-equivalent
    rate), weights kept on the device (64 MB assumed: the vendor does not publish its memory), PCIe 3.0 x2
    (~1.6 GB/s reached, ~30 us per copy); each extra submodel ~100 us.
    """
    cpu = DeviceProfile(
        name="CPU", peak_flops=0.22e12, memory_bandwidth_Bps=38.4e9, launch_overhead_s=4e-6,
        efficiency={"Convolution": 0.6, "GroupConvolution": 0.25, "MatMul": 0.6, "ConvolutionBackpropData": 0.4},
        default_efficiency=0.5, memory_bytes=8e9,
        description="Intel Atom x7425E class: 4 E-cores 3.4 GHz, LPDDR5-4800 single channel (estimate)")
    gpu = DeviceProfile(
        name="GPU", peak_flops=0.8e12, memory_bandwidth_Bps=38.4e9, launch_overhead_s=12e-6,
        efficiency={t: 0.3 for t in MATRIX_OPS}, default_efficiency=0.3, memory_bytes=2e9,
        description="Intel UHD graphics (24 EU) class, f16 ~0.8 TFLOP/s, shared memory (estimate)")
    accel = DeviceProfile(
        name="ACCEL", peak_flops=13e12, memory_bandwidth_Bps=100e9, launch_overhead_s=15e-6,
        efficiency={t: 0.5 for t in MATRIX_OPS}, default_efficiency=0.1, memory_bytes=64e6,
        unsupported_ops=list(ACCELERATOR_UNSUPPORTED),
        description="M.2 inference accelerator, Hailo-8 class: 26 TOPS INT8, 64 MB assumed, PCIe 3.0 x2 (estimate)")
    shared = LinkProfile(latency_s=5e-6, bandwidth_Bps=20e9)
    m2 = LinkProfile(latency_s=30e-6, bandwidth_Bps=1.6e9)
    return Profile(
        devices=[cpu, gpu, accel], link=m2, links={"CPU->GPU": shared, "GPU->CPU": shared},
        boundary_overhead_s=100e-6, schedule="sequential", name="edge",
        description=("ESTIMATE of an edge box (small CPU + its integrated GPU + an M.2 accelerator with 64 MB) from "
                     "public spec figures; not measured. Figures are simulated."),
        sources=[
            "Intel Atom x7425E: 4 E-cores up to 3.4 GHz, LPDDR5-4800, Intel UHD graphics 24 EU (ark.intel.com)",
            "Hailo-8 M.2: 26 TOPS INT8, PCIe Gen3 x2/x4 M.2 modules (hailo.ai product brief); memory size assumed",
            "PCIe 3.0: 8 GT/s per lane, 128b/130b -> ~0.98 GB/s per lane per direction (PCI-SIG)",
        ],
    )


#: Preset name -> function building the profile.
PRESETS: dict[str, Callable[[], Profile]] = {"paper": paper_profile, "ai_pc": ai_pc_profile,
                                             "server": server_profile, "edge": edge_profile}


__all__ = ["DeviceProfile", "LinkProfile", "Profile", "PRESETS", "SCHEDULES", "device_memory_bytes", "format_bytes",
           "memory_need", "op_bytes", "op_memory_bytes", "paper_profile", "ai_pc_profile", "server_profile",
           "edge_profile", "weight_bytes"]
