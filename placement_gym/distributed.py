"""A measurement farm on Ray (optional extra: ``pip install -e ".[distributed]"``).

Real measurement costs seconds per placement, so a study of real hardware soon wants several machines. Two ways
to spread the work, both on a Ray cluster whose measurement nodes each offer one unit of the custom resource
`BENCH_RESOURCE` (so that at most one measurement runs per node at a time and timings do not disturb each
other; Ray's resources are logical, so keep other work off a bench node):

* `FarmBackend`: a `Backend` whose placements are measured by `MeasurementWorker` actors, one per bench unit,
  each holding its own backend (its OpenVINO core, compiled-model settings, measurement cache) and the graphs
  it has been sent. ``measure_many`` spreads a batch of placements (an update's worth, e.g. from the vector
  env) over the workers, one placement per worker at a time, and returns the results in the order given.
* `compare`: the (agent, model, seed) runs of ``placement-gym compare --ray ADDRESS`` as Ray tasks, gathered
  into one list of records in the order the serial `placement_gym.evaluation.compare` produces. A run whose
  task fails for good (its worker died on every retry Ray gave it) is reported as skipped; the others go on.

and, for work that times nothing (the imitation placer's labels, computed on the simulator:
`agents.imitation.labels.labels_for`), `map_unordered`: one task of one CPU per item, on any node.

``address`` is ``"local:N"`` (start Ray on this machine with N bench units and N CPUs: N measurements at once;
`FarmBackend` then pins each worker to its own share of the machine's cores, `local_core_shares`) or a cluster
address as ``ray.init`` takes it (``"auto"``, ``"HOST:6379"``, ``"ray://HOST:10001"``). A cluster:

    ray start --head --port=6379 --resources='{"placement_bench": 1}'          # first measurement node
    ray start --address=HEAD:6379 --resources='{"placement_bench": 1}'         # every other one
    placement-gym compare --ray HEAD:6379 --models resnet --backend openvino ...

Every node needs placement-gym installed (same version) and, for model files, the same paths.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
import weakref
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .backends.base import Backend, Measurement, describe_devices, submodel_overhead
from .graph import ComputationGraph

#: The Ray custom resource a measurement node offers one unit of (`ray start --resources=...`).
BENCH_RESOURCE = "placement_bench"


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("the measurement farm needs Ray: pip install -e '.[distributed]' (or pip install ray)") \
            from None
    return ray


def connect(address: str, bench: bool = True) -> int:
    """Start (``"local:N"``) or join (a cluster address) Ray, once per process; return the number of measurement
    slots (`BENCH_RESOURCE` units) the cluster offers. `bench`: raise when it offers none (False: CPU work only,
    such as `map_unordered`'s, needs none)."""
    ray = _ray()
    if address.startswith("local:"):
        count = address.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--ray {address!r}: expected local:N with N >= 1 workers, or a Ray cluster address")
        if not ray.is_initialized():
            ray.init(num_cpus=int(count), resources={BENCH_RESOURCE: int(count)}, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
    elif not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    slots = int(ray.cluster_resources().get(BENCH_RESOURCE, 0))
    if bench and slots < 1:
        raise RuntimeError(f"the Ray cluster at {address!r} offers no {BENCH_RESOURCE!r} resource: start each "
                           f"measurement node with ray start ... --resources='{{\"{BENCH_RESOURCE}\": 1}}'")
    return slots


# ----------------------------------------------------------------------------------- graphs on the wire
@dataclass(frozen=True)
class GraphPayload:
    """A `ComputationGraph` in a form that crosses processes: its OpenVINO IR as bytes (an ``ov.Model`` does not
    pickle), or the graph itself when it has no model (synthetic graphs are plain arrays)."""

    name: str
    xml: bytes | None = None
    weights: bytes | None = None
    graph: ComputationGraph | None = None

    @classmethod
    def of(cls, graph: ComputationGraph) -> "GraphPayload":
        if graph.model is None:
            return cls(name=graph.name, graph=graph)
        import openvino as ov

        with tempfile.TemporaryDirectory() as folder:
            xml = Path(folder) / "model.xml"
            ov.save_model(graph.model, xml, compress_to_fp16=False)  # as it is: the graph's exact ops
            return cls(name=graph.name, xml=xml.read_bytes(), weights=xml.with_suffix(".bin").read_bytes())

    def load(self) -> ComputationGraph:
        if self.graph is not None:
            return self.graph
        import openvino as ov

        from .devices import shared_core

        weights = ov.Tensor(np.frombuffer(self.weights, dtype=np.uint8).copy())
        model = shared_core().read_model(self.xml.decode(), weights)
        return ComputationGraph.from_model(model, name=self.name)


def _graph_key(graph: ComputationGraph) -> str:
    """Identifies a graph's structure across processes (name, ops, edges)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(graph.name.encode())
    digest.update("\0".join(graph.op_names).encode())
    digest.update(np.ascontiguousarray(graph.edge_index).tobytes())
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------- the farm
def local_core_shares(workers: int) -> "list[list[int] | None]":
    """The CPU cores each of `workers` measurement workers on this machine is pinned to: the cores this process
    may run on, split into `workers` disjoint runs of (nearly) equal size; None for every worker where there are
    fewer cores than workers or the OS cannot pin (``os.sched_setaffinity``, Linux).

    Why: OpenVINO compiles on more than one thread (an uncached measurement keeps more than one core busy, and
    the CPU plugin refuses ``COMPILATION_NUM_THREADS``), so two unpinned workers on 2 cores contend for both and
    slow each other down; pinned, each has its core. `benchmarks/performance/ray_farm.py` compares the two (results in
    docs/results/ray.md)."""
    if not hasattr(os, "sched_getaffinity"):
        return [None] * workers
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < workers:
        return [None] * workers
    return [cores[i * len(cores) // workers:(i + 1) * len(cores) // workers] for i in range(workers)]


class MeasurementWorker:
    """One measurement node's worker (a Ray actor holding one bench unit): its own backend, built from the
    `placement_gym.backends.make_backend` arguments it is given, and the graphs it has been sent; pinned to
    `cores` (a list of CPU indices) before the backend is built, where given (`local_core_shares`)."""

    def __init__(self, backend: str, devices: "str | Sequence[str]", options: Mapping[str, Any],
                 cores: "Sequence[int] | None" = None) -> None:
        from .backends import make_backend

        if cores:  # before OpenVINO starts its threads, so they inherit it
            os.sched_setaffinity(0, cores)
        self.backend = make_backend(backend, devices, **dict(options))
        self.graphs: dict[str, ComputationGraph] = {}

    def info(self) -> dict:
        b = self.backend
        return {"name": b.name, "simulated": b.simulated, "device_names": list(b.device_names),
                "virtual_devices": list(b.virtual_devices), "objective": getattr(b, "objective", "latency"),
                "describe": b.describe(), "submodel_overhead_s": submodel_overhead(b),
                "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}

    def add_graph(self, key: str, payload: GraphPayload) -> None:
        if key not in self.graphs:
            self.graphs[key] = payload.load()

    def measure(self, key: str, placement: np.ndarray, use_cache: bool) -> Measurement:
        return self.backend.measure(self.graphs[key], placement, use_cache=use_cache)

    def describe_devices(self, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return describe_devices(self.backend, self.graphs[key])


class FarmBackend(Backend):
    """A `Backend` that measures on `MeasurementWorker` actors of a Ray cluster (module docstring).

    Args:
        backend, devices, **options: what every worker builds (`placement_gym.backends.make_backend`), e.g.
            ``FarmBackend("openvino", ["CPU", "GPU"], address="HEAD:6379", warmup=3)``.
        address: ``"local:N"`` or a Ray cluster address (`connect`).
        workers: how many workers (default: one per bench unit of the cluster).
        cache: keep measurements by placement here (identical placements are not measured again).
        pin: on a local farm (``"local:N"``), pin each worker to its own share of this machine's cores
            (`local_core_shares`; the workers' cores are in ``describe()["farm"]["cores"]``). A cluster's
            workers have a node each and are not pinned.
        start_timeout_s: how long the replacement of a dead worker may take to start (below); a slot whose
            replacement does not start in time is given up.

    ``measure_many(graph, placements)`` keeps every worker busy with one placement at a time and returns the
    measurements in the order of `placements`; ``measure`` is a batch of one. Device observations
    (``action_mask``, ``device_features``, ``node_device_cost``) come from one live worker, once per graph, and
    ``submodel_overhead_s`` once.

    Dead workers (a crashed process, a lost node, ``ray.kill``) are noticed when a call to them fails, and
    replaced at once: a new actor takes the dead one's slot (and cores) and is sent graphs as it needs them. The
    placement the dead worker had is measured again by a live worker, up to `ATTEMPTS` workers in all (a
    placement that kills every worker it is sent to is a failed measurement, not an endless loop). Only when no
    slot has a live worker left is a placement a failed measurement without being tried. Failed measurements are
    not cached.
    """

    #: How many workers a placement is sent to before its measurement counts as failed, when each one dies.
    ATTEMPTS = 3

    def __init__(self, backend: str = "openvino", devices: "str | Sequence[str]" = "auto", *,
                 address: str = "local:1", workers: int | None = None, cache: bool = True, pin: bool = True,
                 start_timeout_s: float = 120.0, **options) -> None:
        ray = _ray()
        slots = connect(address)
        count = slots if workers is None else int(workers)
        if count < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._actor = ray.remote(resources={BENCH_RESOURCE: 1}, num_cpus=0)(MeasurementWorker)
        self._worker_args = (backend, devices, dict(options))
        self.address, self.cache, self.start_timeout_s = address, cache, start_timeout_s
        # Each slot's cores, kept so that a replacement runs where the worker it replaces ran.
        self._shares = local_core_shares(count) if pin and address.startswith("local:") else [None] * count
        self.workers = [self._start(cores) for cores in self._shares]  # slot -> its current actor
        infos = ray.get([worker.info.remote() for worker in self.workers])
        self.pinned = any(cores is not None for cores in self._shares)
        self.cores: "list[list[int] | None]" = [info["cores"] for info in infos]  # each worker's, as it runs
        info = infos[0]
        self.name = f"{info['name']} (Ray farm, {count} workers)"
        self.simulated: bool = info["simulated"]
        self.device_names: list[str] = info["device_names"]
        self.virtual_devices: list[bool] = info["virtual_devices"]
        self.objective: str = info["objective"]
        self._describe = info["describe"]
        self._submodel_overhead_s: float = info["submodel_overhead_s"]
        self._sent: dict[str, set[int]] = {}  # graph key -> slots whose current actor holds it
        self._payload_refs: dict[str, Any] = {}
        self._cache: dict[str, dict[bytes, Measurement]] = {}
        self._devices: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._lost: set[int] = set()  # slots whose worker died and could not be replaced
        self.replaced = 0  # how many dead workers were replaced
        # Graph -> its key, worked out once per graph object (hashing every op name is not for every step).
        self._keys: "weakref.WeakKeyDictionary[ComputationGraph, str]" = weakref.WeakKeyDictionary()

    def describe(self) -> dict:
        return {**self._describe, "farm": {"address": self.address, "workers": len(self.workers),
                                           "resource": BENCH_RESOURCE, "pinned": self.pinned, "cores": self.cores}}

    @property
    def live_workers(self) -> list[int]:
        """The slots that have a worker (the ones not given up after a failed replacement), in order."""
        return [w for w in range(len(self.workers)) if w not in self._lost]

    # ------------------------------------------------------------------------------------ measuring
    def measure(self, graph: ComputationGraph, placement: np.ndarray, *, use_cache: bool = True) -> Measurement:
        return self.measure_many(graph, [placement], use_cache=use_cache)[0]

    def measure_many(self, graph: ComputationGraph, placements: Sequence[np.ndarray], *,
                     use_cache: bool = True) -> list[Measurement]:
        """One `Measurement` per placement ((N,) ints each), in order; each distinct uncached placement is
        measured once, by whichever worker is free (a dead worker's placement by another: class docstring)."""
        ray = _ray()
        key = self._key(graph)
        cache = self._cache.setdefault(key, {})
        arrays = [np.asarray(p, dtype=np.int64) for p in placements]
        keys = [a.tobytes() for a in arrays]
        todo = list(dict.fromkeys(k for k in keys if not (use_cache and self.cache and k in cache)))
        by_key = {k: a for k, a in zip(keys, arrays)}
        fresh: dict[bytes, Measurement] = {}
        failed: set[bytes] = set()  # placements without a result: reported as failed, but not cached
        deaths: Counter[bytes] = Counter()  # placement -> workers that died while it was theirs
        idle, running = self.live_workers, {}

        def settle_error(worker: int, placement_key: bytes, exc: Exception) -> None:
            """A call for `placement_key` on slot `worker` raised `exc`: retry it elsewhere if the worker died."""
            if not isinstance(exc, ray.exceptions.RayActorError):  # the worker lives; its answer was an error
                fresh[placement_key] = Measurement.failure(f"measurement worker {worker} failed: {exc}")
                failed.add(placement_key)
                idle.append(worker)
                return
            deaths[placement_key] += 1
            if deaths[placement_key] < self.ATTEMPTS:
                todo.insert(0, placement_key)  # next free worker takes it
            else:
                fresh[placement_key] = Measurement.failure(
                    f"{deaths[placement_key]} measurement workers died measuring this placement; last: {exc}")
                failed.add(placement_key)
            if self._replace(worker):  # waits for the new actor; the other workers go on measuring meanwhile
                idle.append(worker)

        while todo or running:
            while todo and idle:  # one placement per worker at a time: a node never times two at once
                worker, placement_key = idle.pop(0), todo.pop(0)
                try:
                    self._ensure_sent(key, graph, worker)
                except ray.exceptions.RayError as exc:
                    settle_error(worker, placement_key, exc)
                    continue
                ref = self.workers[worker].measure.remote(key, by_key[placement_key], use_cache)
                running[ref] = (worker, placement_key)
            if not running:
                break
            done, _ = ray.wait(list(running), num_returns=1)
            worker, placement_key = running.pop(done[0])
            try:
                fresh[placement_key] = ray.get(done[0])
            except ray.exceptions.RayError as exc:  # a lost worker is retried elsewhere, never a crash of the loop
                settle_error(worker, placement_key, exc)
            else:
                idle.append(worker)
        for placement_key in todo:  # every slot given up
            fresh[placement_key] = Measurement.failure("no measurement worker left in the Ray farm")
            failed.add(placement_key)
        if self.cache:
            cache.update({k: m for k, m in fresh.items() if k not in failed})
        results, given = [], set()  # a placement's first fresh result as measured, every later one as a cache hit
        for k in keys:
            results.append(fresh[k] if k in fresh and k not in given else _cached(fresh.get(k) or cache[k]))
            given.add(k)
        return results

    def _key(self, graph: ComputationGraph) -> str:
        if graph not in self._keys:
            self._keys[graph] = _graph_key(graph)
        return self._keys[graph]

    def _ensure_sent(self, key: str, graph: ComputationGraph, worker: int) -> None:
        """Send `graph` to slot `worker`'s actor unless it holds it (RayActorError if that actor is dead)."""
        ray = _ray()
        holders = self._sent.setdefault(key, set())
        if worker not in holders:
            if key not in self._payload_refs:
                self._payload_refs[key] = ray.put(GraphPayload.of(graph))
            ray.get(self.workers[worker].add_graph.remote(key, self._payload_refs[key]))
            holders.add(worker)

    # ------------------------------------------------------------------------------ dead workers
    def _start(self, cores: "list[int] | None") -> Any:
        """A new `MeasurementWorker` actor (it starts in the background; its first call waits for it)."""
        backend, devices, options = self._worker_args
        return self._actor.remote(backend, devices, options, cores)

    def _replace(self, worker: int) -> bool:
        """Put a new actor in slot `worker`, whose actor died; True once it answers. Where it does not start
        within ``start_timeout_s`` (e.g. its node is gone and no other offers a bench unit), the slot is given up
        (`live_workers`) and False is returned."""
        ray = _ray()
        ray.kill(self.workers[worker])  # a dead one: nothing; one only unreachable: frees its bench unit
        for holders in self._sent.values():  # the new actor holds no graph yet: sent when it needs one
            holders.discard(worker)
        fresh = self._start(self._shares[worker])
        try:
            info = ray.get(fresh.info.remote(), timeout=self.start_timeout_s)
        except ray.exceptions.RayError:  # GetTimeoutError included
            ray.kill(fresh)  # not left pending: it would take a bench unit whenever one came free
            self._lost.add(worker)
            return False
        self.workers[worker] = fresh
        self.cores[worker] = info["cores"]
        self.replaced += 1
        return True

    # -------------------------------------------------------------------------- device observations
    def _device_observations(self, graph: ComputationGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``describe_devices`` of `graph`, asked of the first live worker once per graph (a dead one is
        replaced and the next live one asked, `ATTEMPTS` times at most)."""
        ray = _ray()
        key = self._key(graph)
        for _ in range(self.ATTEMPTS):
            if key in self._devices or not self.live_workers:
                break
            worker = self.live_workers[0]
            try:
                self._ensure_sent(key, graph, worker)
                self._devices[key] = ray.get(self.workers[worker].describe_devices.remote(key))
            except ray.exceptions.RayActorError:
                self._replace(worker)
        if key not in self._devices:
            raise RuntimeError(f"no measurement worker of the Ray farm could describe the devices for graph "
                               f"{graph.name!r}: every worker asked died")
        return self._devices[key]

    def action_mask(self, graph: ComputationGraph) -> np.ndarray:
        return self._device_observations(graph)[0].copy()

    def node_device_cost(self, graph: ComputationGraph) -> np.ndarray:
        return self._device_observations(graph)[2].copy()

    def submodel_overhead_s(self) -> float:
        return self._submodel_overhead_s

    def device_features(self) -> np.ndarray:
        if not self._devices:
            raise RuntimeError("FarmBackend.device_features() is known once a graph has been sent; call "
                               "action_mask(graph) first (the env does)")
        return next(iter(self._devices.values()))[1].copy()

    def close(self) -> None:
        ray = _ray()
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []


def _cached(m: Measurement) -> Measurement:
    return replace(m, cached=True)


# --------------------------------------------------------------------------------- CPU work on Ray
def map_unordered(function: Callable[[Any], Any], items: Sequence[Any], address: str) -> Iterator[Any]:
    """``function(item)`` for every item, as Ray tasks of one CPU each on the cluster at `address` (`connect`;
    no bench unit needed: simulated work that times nothing), yielded as they finish, in any order. A task that
    raises (or whose worker died on every retry Ray gave it) does not stop the others: the first such error is
    raised once every other result has been yielded, so the caller keeps all the work that succeeded.
    `function` and the items must pickle (a module-level function: the workers import it)."""
    ray = _ray()
    connect(address, bench=False)
    task = ray.remote(function).options(**_placement(real=False))
    pending = [task.remote(item) for item in items]
    failure: Exception | None = None
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            result = ray.get(done[0])
        except Exception as exc:  # Ray's error, an instance of the task's own exception type too
            failure = failure or exc
            continue
        yield result
    if failure is not None:
        raise failure


# --------------------------------------------------------------------------------- compare on Ray
def _placement(real: bool) -> dict:
    """Ray task options of a job (a compare run, a `map_unordered` item): a simulated one takes a CPU, a real one
    a bench unit (so that no two time at once)."""
    return {"num_cpus": 0, "resources": {BENCH_RESOURCE: 1}} if real else {"num_cpus": 1}


def _capacity(real: bool) -> int:
    """How many compare jobs of that kind the cluster runs at once."""
    return max(1, int(_ray().cluster_resources().get(BENCH_RESOURCE if real else "CPU", 1)))


def warm_up(address: str, prepare: Callable[..., Any], *args: Any, real: bool = False) -> Any:
    """Run ``prepare(*args)`` on every worker slot at once and return the first result.

    A fresh Ray worker imports the agents (torch, PyG, SB3: seconds) on its first task; `prepare` does that,
    and builds whatever else the jobs will reuse, in every slot in parallel and before the jobs are planned, so
    the driver needs none of it (`compare --ray` learns its table's rows this way). The other slots' results are
    not waited for: jobs submitted next queue behind them."""
    ray = _ray()
    connect(address)
    task = ray.remote(prepare).options(**_placement(real))
    refs = [task.remote(*args) for _ in range(_capacity(real))]
    done, _ = ray.wait(refs, num_returns=1)
    return ray.get(done[0])


def _run_group(run_job: Callable[[dict, list], dict], group: list[dict], warm: list) -> tuple[list[dict], float]:
    """A Ray task: run a group of jobs in order; ``(outcomes, seconds)``, the time for the scheduler's estimates."""
    started = time.perf_counter()
    outcomes = [run_job(job, warm) for job in group]
    return outcomes, time.perf_counter() - started


def compare(jobs: Sequence[dict], run_job: Callable[[dict, list], dict], address: str, *,
            warm_started: Callable[[dict], bool], failed: Callable[[dict, Exception], dict],
            on_record: Callable[[dict], None] | None = None,
            done: Mapping[int, dict] | None = None) -> tuple[list[dict], list[dict]]:
    """Run compare's (agent, model, seed) jobs as Ray tasks: ``(records, skipped)``, records in job order.

    Args:
        jobs: plain-data job descriptions in the serial order (model, then table row, then seed); each has
            ``"index"`` (its position), ``"model"``, ``"label"`` (the table row), ``"real"`` (measures on a
            real backend) and optionally ``"weight"`` (its expected cost, e.g. the graph's size).
        run_job: ``run_job(job, warm_starts) -> {"records": [...], "skipped": dict | None}`` (picklable; runs in
            a Ray worker process). `warm_starts` are ``(row label, placement)`` pairs
            (`placement_gym.evaluation.TakesWarmStarts`).
        warm_started: True for jobs whose agent takes warm starts (the exact optimum): they run once every
            other job of their model is done, given those jobs' best placements, all seeds of one (model, row)
            in one task in seed order (as the serial loop runs them), so the table's optimum is never worse than
            its other rows.
        failed: ``failed(job, exc)`` -> the job's outcome (as `run_job` returns it) when its task failed for
            good: its worker died on every try Ray gave it, or it raised. Called on the driver; the other jobs go
            on (compare reports such a job as skipped, `placement_gym.evaluation.skip_entry`).
        on_record: called on the driver with each record as its task finishes.
        done: the outcomes (``{"records", "skipped"}``) of jobs finished before, by job index (a resumed
            ``compare``): not run again, in their place among the records, their best placements among the
            warm starts of their model.

    Longest first, so that the workers finish together: the driver keeps one job more than the cluster runs at
    once in flight and picks each next one by its expected time: first a job of each (model, row) not yet timed
    (heaviest ``"weight"`` first, then serial order), then the others by the time their row's first job took on
    that model (seeds of one row cost alike; the cheap baselines end up last, not a learned agent's run).
    A model's warm-started groups go as soon as that model's other jobs are done, not after every model's.
    Simulated jobs take one CPU each; jobs on a real backend take one bench unit, so that no two time at once.
    """
    outcomes: dict[int, dict] = dict(done or {})
    todo = [job for job in jobs if job["index"] not in outcomes]

    def in_order() -> tuple[list[dict], list[dict]]:
        ordered = [outcomes[index] for index in sorted(outcomes)]
        return [r for o in ordered for r in o["records"]], [o["skipped"] for o in ordered if o["skipped"]]

    if not todo:
        return in_order()
    ray = _ray()
    connect(address)
    task = ray.remote(_run_group)
    capacity = _capacity(todo[0]["real"])
    took: dict[tuple, float] = {}  # (model, row) -> seconds per job, from its first finished task
    ready = [[job] for job in todo if not warm_started(job)]  # groups that may start now
    warm: dict[tuple, list[dict]] = {}
    for job in todo:
        if warm_started(job):
            warm.setdefault((job["model"], job["label"]), []).append(job)
    left = Counter(group[0]["model"] for group in ready)  # model -> its jobs not yet done (warm groups wait)
    waiting = {model for model, _ in warm}
    starts: dict[int, list] = {}  # id(warm group) -> its warm starts
    running: dict[Any, list[dict]] = {}

    def expected(group: list[dict]) -> tuple:
        """Sort key, largest first: untimed rows, then by time; heavier graphs, then serial order."""
        first = group[0]
        seconds = took.get((first["model"], first["label"]))
        return (seconds is None, len(group) * (seconds or 0.0), first.get("weight", 0), -first["index"])

    def release_warm_groups() -> None:
        for model in [m for m in waiting if not left[m]]:
            waiting.discard(model)
            found = [(r["agent"], np.asarray(r["placement"], dtype=np.int64))
                     for job in jobs if job["model"] == model and job["index"] in outcomes
                     for r in outcomes[job["index"]]["records"] if r.get("ok", True)]
            for (group_model, _), group in warm.items():
                if group_model == model:
                    ready.append(group)
                    starts[id(group)] = found

    release_warm_groups()  # a model with only warm-started rows
    while ready or running:
        while ready and len(running) < capacity + 1:  # one queued beyond the busy slots: no idle gap per job
            group = max(ready, key=expected)
            ready.remove(group)
            running[task.options(**_placement(group[0]["real"])).remote(
                run_job, group, starts.get(id(group), []))] = group
        done, _ = ray.wait(list(running), num_returns=1)
        group = running.pop(done[0])
        try:
            finished, seconds = ray.get(done[0])
        except ray.exceptions.RayError as exc:  # Ray's retries used up: every job of the group failed
            finished = [failed(job, exc) for job in group]
        else:  # a failed task's time says nothing about its row's jobs
            took.setdefault((group[0]["model"], group[0]["label"]), seconds / len(group))
        for job, outcome in zip(group, finished):
            outcomes[job["index"]] = outcome
            for record in outcome["records"]:
                if on_record is not None:
                    on_record(record)
        if id(group) not in starts:
            left[group[0]["model"]] -= 1
        release_warm_groups()
    return in_order()


__all__ = ["BENCH_RESOURCE", "FarmBackend", "GraphPayload", "MeasurementWorker", "compare", "connect", "map_unordered",
           "warm_up"]
