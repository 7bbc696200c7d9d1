"""Latency backends behind one protocol (`base.Backend`): the real OpenVINO one and the simulated one."""
from __future__ import annotations

from typing import Sequence

from .base import Backend, Measurement

BACKENDS = ("openvino", "simulated", "auto")


def make_backend(backend: "str | Backend", devices: "str | Sequence[str]" = "auto", **options) -> Backend:
    """Build a backend by name.

    Args:
        backend: ``"openvino"`` (real compile-and-benchmark), ``"simulated"`` (cost model) or ``"auto"``
            (real where two or more real devices exist), or a ready `Backend` instance (returned as is).
        devices: device specs for the backend, or ``"auto"``.
        options: backend settings (OpenVINO: ``warmup``, ``repeats``, ``cache``).
    """
    if not isinstance(backend, str):
        if isinstance(backend, Backend):
            return backend
        raise TypeError(f"backend must be one of {BACKENDS} or a Backend instance, got {type(backend).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if backend == "auto":
        from ..devices import available_devices

        present = available_devices()
        if devices != "auto" or len(present) >= 2:
            backend = "openvino"
        else:
            raise ValueError(
                f"backend='auto' found one real OpenVINO device ({present}) and the simulated backend is not "
                "available yet; measure on two real devices with backend='openvino', "
                "devices=['CPU', 'CPU[INFERENCE_NUM_THREADS=1]'] (the second is a virtual copy of the CPU)"
            )
    if backend == "openvino":
        from .openvino import OpenVINOBackend

        return OpenVINOBackend(devices, **options)
    raise ValueError("the simulated backend is not available yet")


__all__ = ["Backend", "Measurement", "make_backend", "BACKENDS"]
