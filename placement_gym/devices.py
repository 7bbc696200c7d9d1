"""Devices: which OpenVINO devices exist, and *virtual* devices.

A device spec is a real OpenVINO device name (``"CPU"``, ``"GPU"``, ``"GPU.1"``, ``"NPU"``), optionally with
properties in brackets: ``"CPU[INFERENCE_NUM_THREADS=1]"``. When a list names the same plugin twice, the second
and later entries become **virtual devices**: the plugin library is registered again in the `ov.Core` under a
generated name (``VCPU1``, ``VCPU2``, ...; OpenVINO refuses names with '.'), each with its own properties. So
``["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]`` gives two real, separately configured devices on a CPU-only machine,
and HETERO compiles and runs true two-device placements across them.

Not every property stays separate once HETERO runs both copies in one process: the precision (f32 vs bf16
kernels) does, thread counts do not (the copies share the plugin's thread pool; docs/backends.md). `two_cpu_devices` picks the pair whose latencies really differ on this machine.
"""
from __future__ import annotations

import glob
import logging
import os
import re
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import openvino as ov

PropertyValue = str | int | float | bool

_SPEC_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[0-9]+)?)\s*(?:\[(.*)\])?\s*$")

#: Plugin library stem of each base device, for registering virtual copies.
_PLUGIN_LIBRARIES = {"CPU": "openvino_intel_cpu_plugin", "GPU": "openvino_intel_gpu_plugin", "NPU": "openvino_intel_npu_plugin"}

_CORE: ov.Core | None = None
_VIRTUAL_NAMES: set[str] = set()  # names this process registered as virtual copies


logger = logging.getLogger(__name__)

def shared_core() -> ov.Core:
    """The process-wide `ov.Core` that knows the virtual devices registered so far."""
    global _CORE
    if _CORE is None:
        _CORE = ov.Core()
    return _CORE


def available_devices(core: ov.Core | None = None) -> list[str]:
    """Real OpenVINO devices present (virtual ones excluded), e.g. ``['CPU']`` or ``['CPU', 'GPU.0', 'GPU.1']``."""
    core = core or shared_core()
    return [d for d in core.available_devices if d not in _VIRTUAL_NAMES]


def two_cpu_devices(core: ov.Core | None = None) -> list[str]:
    """Two CPU device specs for real two-device placement on a machine with one CPU.

    ``["CPU", "CPU[INFERENCE_PRECISION_HINT=bf16]"]`` where the CPU runs bf16 natively (OpenVINO lists ``BF16``
    in its ``OPTIMIZATION_CAPABILITIES``): f32 and bf16 kernels stay separate inside HETERO, so the two copies
    really run at different speeds (the simulator ranks this pair's placements much as they measure:
    docs/results/simulator.md). Elsewhere the hint would silently stay f32, so the fallback is
    ``["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]``: it compiles and runs true two-device placements, but HETERO does
    not keep the thread counts apart, so its latencies say little about which copy is faster.
    """
    if cpu_runs_bf16(core):
        return ["CPU", "CPU[INFERENCE_PRECISION_HINT=bf16]"]
    logger.warning(
        "this processor has no native bf16, so two_cpu_devices() returns the one-thread pair, which compiles and "
        "runs split placements but cannot tell them apart (HETERO does not keep thread counts separate; see "
        "docs/backends.md): use backend='simulated' or two real "
        "devices to compare placements")
    return ["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]


def cpu_runs_bf16(core: ov.Core | None = None) -> bool:
    """Whether OpenVINO's CPU plugin computes in bf16 natively here (``BF16`` in its OPTIMIZATION_CAPABILITIES:
    processors with AVX-512 BF16 or AMX); elsewhere a bf16 precision hint silently stays f32."""
    core = core or shared_core()
    return "CPU" in core.available_devices and "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


@dataclass(frozen=True)
class DeviceSpec:
    """What the user asked for: a base OpenVINO device plus properties.

    Attributes:
        base: the OpenVINO device name the plugin drives (``"CPU"``, ``"GPU.1"``).
        properties: sorted ``(key, value)`` pairs passed to that device at compile time.
    """

    base: str
    properties: tuple[tuple[str, PropertyValue], ...] = ()

    @property
    def name(self) -> str:
        """Canonical spec string, e.g. ``"CPU[INFERENCE_NUM_THREADS=1]"``."""
        if not self.properties:
            return self.base
        return f"{self.base}[{','.join(f'{k}={v}' for k, v in self.properties)}]"

    @property
    def plugin(self) -> str:
        """The device family without index: ``"GPU.1"`` -> ``"GPU"``."""
        return self.base.split(".")[0]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, spec: "str | DeviceSpec") -> "DeviceSpec":
        """Parse ``"BASE"`` or ``"BASE[KEY=VALUE,KEY=VALUE]"``; values that look like ints, floats or
        booleans become those types."""
        if isinstance(spec, DeviceSpec):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"a device spec is a string like 'CPU' or 'CPU[INFERENCE_NUM_THREADS=1]', got {spec!r}")
        match = _SPEC_RE.match(spec)
        if not match:
            raise ValueError(
                f"cannot parse device spec {spec!r}; write a device name ('CPU', 'GPU.1') optionally followed by "
                "properties in brackets, e.g. 'CPU[INFERENCE_NUM_THREADS=1]'"
            )
        base, props = match.group(1).upper(), match.group(2)
        properties: dict[str, PropertyValue] = {}
        for item in filter(None, (p.strip() for p in (props or "").split(","))):
            if "=" not in item:
                raise ValueError(f"device property {item!r} in {spec!r} must be KEY=VALUE")
            key, value = (s.strip() for s in item.split("=", 1))
            properties[key.upper()] = _parse_value(value)
        return cls(base, tuple(sorted(properties.items())))


@dataclass(frozen=True)
class Device:
    """A device ready to compile on: the spec and the name this process's `ov.Core` knows it by.

    ``defaults`` are properties applied unless the spec sets them (e.g. the backend's inference precision).
    """

    spec: DeviceSpec
    ov_name: str
    virtual: bool
    defaults: tuple[tuple[str, PropertyValue], ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def properties(self) -> dict[str, PropertyValue]:
        """Properties passed at compile time: the defaults, overridden by the spec's own."""
        return {**dict(self.defaults), **dict(self.spec.properties)}

    def __str__(self) -> str:
        return f"{self.name} (virtual {self.ov_name})" if self.virtual else self.name


def open_devices(
    specs: "str | Sequence[str | DeviceSpec]" = "auto",
    core: ov.Core | None = None,
    defaults: dict[str, PropertyValue] | None = None,
) -> list[Device]:
    """Resolve device specs against the devices present, registering virtual devices as needed.

    ``"auto"`` means every real device present. The first spec of each base device uses the real plugin;
    later specs of the same base become virtual copies. `defaults` are properties every device gets unless its
    spec sets them. Raises ``ValueError`` for an unknown device (listing what exists), an unknown property, or
    the same spec twice.
    """
    default_items = tuple(sorted((defaults or {}).items()))
    core = core or shared_core()
    present = available_devices(core)
    if isinstance(specs, str):
        if specs == "auto":
            specs = present
        else:
            specs = [specs]
    if isinstance(specs, DeviceSpec):
        specs = [specs]
    if not isinstance(specs, (list, tuple)):
        raise ValueError(f"devices must be 'auto', a device spec or a list of them (e.g. ['CPU', "
                         f"'CPU[INFERENCE_NUM_THREADS=1]']), got {specs!r}")
    parsed = [DeviceSpec.parse(s) for s in specs]
    if not parsed:
        raise ValueError("at least one device is needed")
    duplicates = {s.name for s in parsed if parsed.count(s) > 1}
    if duplicates:
        raise ValueError(f"device {sorted(duplicates)[0]!r} is listed twice; give copies different properties")

    devices: list[Device] = []
    copies_of: dict[str, int] = {}
    for spec in parsed:
        _check_exists(spec, present)
        _check_properties(spec, core)
        if spec.plugin == "CPU" and dict(spec.properties).get("INFERENCE_PRECISION_HINT") == "bf16" \
                and not cpu_runs_bf16(core):
            warnings.warn(f"{spec.name}: this processor has no native bf16, so OpenVINO computes in f32 on it and "
                          "this device runs exactly like a plain CPU (see placement_gym.two_cpu_devices)",
                          stacklevel=3)
        n_before = copies_of.get(spec.base, 0)
        copies_of[spec.base] = n_before + 1
        if n_before == 0:
            devices.append(Device(spec, spec.base, virtual=False, defaults=default_items))
        else:
            devices.append(Device(spec, _register_virtual(core, spec, n_before), virtual=True, defaults=default_items))
    return devices


def compile_properties(devices: Iterable[Device]) -> dict[str, dict[str, PropertyValue]]:
    """Per-device properties keyed by their OpenVINO names, for HETERO's ``DEVICE_PROPERTIES``
    (nested dicts at the top level of a HETERO config are silently ignored by OpenVINO)."""
    return {d.ov_name: d.properties for d in devices}


# ---------------------------------------------------------------------------------------------- helpers
def _parse_value(value: str) -> PropertyValue:
    lowered = value.lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _check_exists(spec: DeviceSpec, present: Sequence[str]) -> None:
    families = {d.split(".")[0] for d in present}
    if spec.base in present or (spec.base in families and "." not in spec.base):
        return
    raise ValueError(
        f"device {spec.base!r} does not exist on this machine; OpenVINO devices present: {list(present)}. "
        f"A virtual copy of a present device is written with properties, e.g. '{present[0] if present else 'CPU'}"
        "[INFERENCE_NUM_THREADS=1]'."
    )


def _check_properties(spec: DeviceSpec, core: ov.Core) -> None:
    """ValueError unless `spec`'s device has every property it names and accepts every value, with OpenVINO's
    reason (e.g. "Expected only non negative integer numbers"). Values are tried on a throwaway `ov.Core`, so
    the shared one keeps its settings."""
    if not spec.properties:
        return
    supported = set(core.get_property(spec.base, "SUPPORTED_PROPERTIES"))
    unknown = [k for k, _ in spec.properties if k not in supported]
    if unknown:
        raise ValueError(
            f"device {spec.base!r} has no property {unknown[0]!r}; it supports e.g. "
            f"{sorted(p for p in supported if p.isupper())[:12]}"
        )
    probe = ov.Core()
    try:
        probe.set_property(spec.base, dict(spec.properties))
        probe.get_property(spec.base, "SUPPORTED_PROPERTIES")  # the plugin applies the values when it loads
    except Exception as exc:  # OpenVINO raises plain Exceptions
        raise ValueError(f"device spec {spec.name!r}: OpenVINO refuses its properties: {openvino_reason(exc)}") \
            from None


def openvino_reason(exc: BaseException, limit: int = 300) -> str:
    """OpenVINO's reason for an exception: the last line of its message (the lines before say where in its
    sources it failed, e.g. "Failed to create plugin ... Please, check your environment")."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:limit] if lines else type(exc).__name__


def openvino_error_text(exc: BaseException, limit: int = 500) -> str:
    """The informative part of an OpenVINO exception: its message without the "Exception from <file>:<line>"
    location lines OpenVINO stacks in front of it."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = [line for line in lines if not line.startswith("Exception from ")] or lines
    return " ".join(message)[:limit]


def virtual_name(spec: DeviceSpec, copy_number: int) -> str:
    """The name the `copy_number`-th copy (1 = the second time a list names the device) of `spec`'s device is
    registered under: ``V<BASE><n>`` (``VCPU1``; OpenVINO refuses names with '.', so ``GPU.1``'s is ``VGPU11``)."""
    return f"V{spec.plugin}{copy_number}" + (spec.base.split(".")[1] if "." in spec.base else "")


def _register_virtual(core: ov.Core, spec: DeviceSpec, copy_number: int) -> str:
    """Register the plugin of `spec` again as `virtual_name` (idempotent per core) and return the name."""
    name = virtual_name(spec, copy_number)
    if name in core.available_devices:
        return name
    stem = _PLUGIN_LIBRARIES.get(spec.plugin)
    if stem is None:
        raise ValueError(f"virtual copies of {spec.plugin!r} are not supported; supported: {sorted(_PLUGIN_LIBRARIES)}")
    libs = os.path.join(os.path.dirname(ov.__file__), "libs")
    candidates = glob.glob(os.path.join(libs, f"*{stem}*"))
    if not candidates:
        raise RuntimeError(f"cannot find the {spec.plugin} plugin library ({stem}) under {libs}")
    core.register_plugin(candidates[0], name)
    _VIRTUAL_NAMES.add(name)
    return name
