"""Latency backends behind one protocol (`base.Backend`): the real OpenVINO one and the simulated one."""
from __future__ import annotations

import logging
from typing import Sequence

from .base import Backend, Measurement

logger = logging.getLogger(__name__)

BACKENDS = ("openvino", "simulated", "auto")
#: Options that say how the real backend measures; meaningless for the simulated one.
_MEASUREMENT_OPTIONS = ("warmup", "repeats", "target_rel_halfwidth", "max_repeats", "max_timing_s", "cache",
                        "input_seed", "inference_precision", "clock", "core")
_auto_choice_logged = False
#: What an object must have to be a `Backend` (listed in the error for one that is not).
_PROTOCOL_MEMBERS = ("name", "simulated", "device_names", "virtual_devices", "measure", "measure_many", "describe",
                     "close")


def _log_auto_simulated(present: Sequence[str]) -> None:
    """Say once per process why backend='auto' simulates and how to choose otherwise."""
    global _auto_choice_logged
    if _auto_choice_logged:
        return
    _auto_choice_logged = True
    from ..devices import cpu_runs_bf16

    if cpu_runs_bf16():
        real = ("For real measurements pass backend='openvino', devices=placement_gym.two_cpu_devices() (the CPU "
                "in f32 and a virtual copy of it in bf16, which HETERO keeps apart); for a simulation calibrated "
                "on this machine run `placement-gym calibrate` and pass profile=PATH")
    else:
        real = ("This processor has no native bf16, so a virtual second CPU could differ from the first only in "
                "thread count, which HETERO does not keep apart: real measurements that tell placements apart "
                "need two real devices (backend='openvino', devices=[...])")
    logger.warning(
        "backend='auto': this machine has %d real OpenVINO device(s) (%s), so latencies are SIMULATED with the "
        "'paper' profile (devices CPU and GPU: a desktop CPU + discrete Intel GPU, estimated from public specs). "
        "%s; backend='simulated' selects the simulator without this message.",
        len(present), ", ".join(present) or "none", real,
    )


def make_backend(backend: "str | Backend", devices: "str | Sequence[str]" = "auto", **options) -> Backend:
    """Build a backend by name.

    Args:
        backend: ``"openvino"`` (real compile-and-benchmark), ``"simulated"`` (cost model) or ``"auto"``
            (real where two or more real devices exist or `devices` are given; otherwise simulated with the
            ``"paper"`` profile, or with ``profile`` when one is given, saying why once), or a ready `Backend`
            instance (returned as is).
        devices: device specs for the backend, or ``"auto"``.
        options: backend settings (both: ``objective``, ``"latency"`` or ``"throughput"``; OpenVINO: ``warmup``,
            ``repeats``, ``cache``; simulated: ``profile``, ``schedule``). With ``"auto"``, the real backend's measurement settings are dropped (and which ones
            logged at INFO) when it picks the simulator, so a script written for real devices also runs on a
            one-device machine.
    """
    if not isinstance(backend, str):
        if isinstance(backend, Backend):
            return backend
        raise TypeError(f"backend must be one of {BACKENDS} or a Backend instance, got {type(backend).__name__}, "
                        f"which does not have all of {list(_PROTOCOL_MEMBERS)} (subclass placement_gym.backends.Backend "
                        "to inherit measure_many, a loop over measure)")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if backend == "auto":
        from ..devices import available_devices

        present = available_devices()
        if options.get("profile") is not None:
            backend = "simulated"  # a profile only means something to the simulator
        elif devices != "auto" or len(present) >= 2:
            backend = "openvino"
        else:
            backend = "simulated"
            _log_auto_simulated(present)
        if backend == "simulated":
            dropped = sorted(k for k in options if k in _MEASUREMENT_OPTIONS)
            if dropped:
                logger.info("backend='auto' simulates here; dropped the real backend's settings %s", dropped)
            options = {k: v for k, v in options.items() if k not in _MEASUREMENT_OPTIONS}
    if backend == "openvino":
        if options.get("profile") is not None or "schedule" in options:
            raise ValueError("profile= and schedule= configure the simulated backend; use backend='simulated'")
        options.pop("profile", None)
        from .openvino import OpenVINOBackend

        return OpenVINOBackend(devices, **options)
    wrong = sorted(k for k in options if k in _MEASUREMENT_OPTIONS)
    if wrong:
        raise ValueError(
            f"the simulated backend takes no {wrong} (they set how the real backend measures); its options are "
            "profile= (a preset name, a profile JSON path or a Profile), schedule= ('sequential' or 'parallel') and "
            "objective= ('latency' or 'throughput')"
        )
    from .simulated import SimulatedBackend

    if options.get("profile") is None:
        options.pop("profile", None)
    return SimulatedBackend(devices=devices, **options)


__all__ = ["Backend", "Measurement", "make_backend", "BACKENDS"]
