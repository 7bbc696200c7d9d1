"""Shared fixtures: tiny zoo graphs and the two-device (one virtual) real OpenVINO setup; benchmark scripts as
modules."""
from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from placement_gym.callbacks import Callback

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# The two-device setup every real-backend test uses: the CPU plus a virtual one-thread copy of it.
TWO_DEVICES = ["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]


def small_accelerator_profile():
    """The `edge` preset with its card made a small, fast accelerator: 64 MB of memory (ResNet-50's f32 weights do
    not fit), matrix ops five times faster, 100 us per extra submodel. No shipped preset has a device this small
    since they are the hardware they name; the memory mechanisms (planning within memory, the search's capacity)
    are tested on this one."""
    from dataclasses import replace

    from placement_gym.backends.profiles import Profile

    edge = Profile.preset("edge")
    devices = [d if d.name != "GPU.1" else replace(d, memory_bytes=64e6, efficiency={t: e * 5 for t, e in
                                                                                     d.efficiency.items()})
               for d in edge.devices]
    return replace(edge, name="small_accelerator", devices=devices, boundary_overhead_s=100e-6)
#: Env arguments for real measurements in tests: few runs keep a tiny-model step at ~0.1-0.2 s.
REAL = dict(backend="openvino", devices=TWO_DEVICES, warmup=1, repeats=3)


@pytest.fixture(scope="session")
def tiny_branch_graph():
    from placement_gym import load_graph

    return load_graph("tiny_branch")


@pytest.fixture(scope="session")
def tiny_chain_graph():
    from placement_gym import load_graph

    return load_graph("tiny_chain")


@pytest.fixture(scope="module")
def env(tiny_branch_graph):
    """DevicePlacementEnv on tiny_branch, measured for real on TWO_DEVICES (one per test module)."""
    from placement_gym import DevicePlacementEnv

    env = DevicePlacementEnv(tiny_branch_graph, **REAL)
    yield env
    env.close()


class LocalRay(NamedTuple):
    """What the `local_ray` fixture gives: the bench units of the local Ray instance and its temporary folder."""

    slots: int
    temp_dir: Path


@pytest.fixture(scope="module")
def local_ray():
    """A local 2-worker Ray instance (`placement_gym.distributed.connect("local:2")`) for one test module, with
    its session folder in a temporary folder that is removed at the end (asserted).

    Why: Ray keeps every session's folder (logs, sockets) under /tmp/ray for good, so each test run would leave
    one behind. ``RAY_TMPDIR`` moves it, and stays set until Ray has shut down so that nothing in this process
    looks for the session under /tmp/ray meanwhile; the folder's name is short because Ray's socket paths inside
    it must fit a Unix socket path (107 bytes). PYTHONPATH gives the workers the repository root, so that they
    import test helpers by module path (``tests.ray_agents:WorkerKiller``) from wherever pytest runs."""
    import ray

    from placement_gym.distributed import connect

    root = Path(tempfile.mkdtemp(prefix="pgray-"))
    saved = {name: os.environ.get(name) for name in ("RAY_TMPDIR", "PYTHONPATH")}
    os.environ["RAY_TMPDIR"] = str(root)
    repository = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repository, saved["PYTHONPATH"]) if p)
    try:
        yield LocalRay(connect("local:2"), root)
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)
    assert not root.exists(), f"the Ray session folder {root} was left behind"


def load_benchmark(name: str):
    """The benchmark script ``benchmarks/KIND/NAME.py`` as a module, by its module path under benchmarks/
    (``"leaderboard.leaderboard_table"``): benchmarks/ is a package whose scripts import each other that way."""
    return importlib.import_module(f"benchmarks.{name}")


def load_example(name: str):
    """``examples/NAME.py`` as a module, so that a test calls its ``main(argv)`` in the test's own process (no second
    interpreter importing torch and the agents again)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def break_device(backend, index: int = 1) -> None:
    """Make OpenVINO refuse to compile anything placed on device `index` of a real backend: give it a property
    value OpenVINO rejects (set after the checks made when the backend was created), so that placement failures
    can be tested as measured outcomes."""
    import dataclasses

    from placement_gym.devices import DeviceSpec

    device = backend.devices[index]
    backend.devices[index] = dataclasses.replace(
        device, spec=DeviceSpec(device.spec.base, (("PERFORMANCE_HINT", "NOT_A_HINT"),)))


def pytest_collection_modifyitems(config, items):
    """Leave the opt-in tests out of every run whose -m expression does not name their marker: `whole_dataset`
    (it builds all 39 dataset graphs, minutes with a cold cache) and `sanity` (every pure learned agent through the
    sanity suite: tens of minutes on 2 cores, and today's RNN placer and Placeto fail it), so neither `pytest -q`
    nor `-m "not slow"` pays for them."""
    expression = config.getoption("-m") or ""
    opt_in = [marker for marker in ("whole_dataset", "sanity") if marker not in expression]
    kept = [item for item in items if not any(item.get_closest_marker(marker) for marker in opt_in)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


class PlacementsSeen(Callback):
    """A run callback that keeps every placement the run measured, in order (``.placements``: lists of device
    indices)."""

    def __init__(self) -> None:
        self.placements: list[list[int]] = []

    def on_step(self, step, reward, info):
        self.placements.append(np.asarray(info["placement"]).tolist())
        return True
