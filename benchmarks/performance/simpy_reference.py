"""A SimPy reference implementation of our cost model: same latencies as `SimulatedBackend`? how much faster is ours?

    python benchmarks/performance/simpy_reference.py --json benchmarks/results/simpy_reference.json

DOPPLER and GiPH simulate placements with SimPy event loops. `simpy_latency` re-implements the latency of
`placement_gym.backends.simulated.SimulatedBackend` with SimPy resources, processes and events; from our
simulator it takes only what does not depend on the placement's schedule: the per-op times per device and the
per-edge transfer times per device pair (`SimulatedBackend.prepare`), and the submodels of the placement
(`HeteroCutter.cut`, HETERO's cut). The scheduling is SimPy's:

* ``"parallel"``: one ``simpy.Resource`` (capacity 1) per device and one per (source, destination) device pair
  (a channel). Every op is a process that queues for its device, then waits for its input tensors (events),
  then holds the device for its compute time. Every tensor that crosses into another submodel is sent once per
  (producer op, consumer submodel), by a process that queues for its channel, waits for its producer, then holds
  the channel for the transfer time; its completion is the tensor's arrival event. The requests are made in
  topological order (ops; a transfer when its first consumer comes up), and SimPy's resources serve them first
  come, first served: an op starts when its device is free and its inputs have arrived, as in our list scheduler.
  Latency = makespan + submodel boundaries + split overhead.
* ``"sequential"`` (HETERO's synchronous inference on the calling thread): the same processes, but every device
  and every channel is one resource, the calling thread, which first spends the boundary and split overheads.
  Latency = when the thread is done.

The script checks, on ResNet-50, BERT-base and a 10,000-op synthetic graph
(`benchmarks/performance/simulator_speed.py`'s generator), both schedules, ``paper`` profile, that both give the same
latency on random and blocky (runs of 16 ops) placements (max relative difference, required <= 1e-9), and times
placements per second of our ``backend.measure(..., use_cache=False)`` against `simpy_latency`, interleaved, median of
``--repeats`` loops, pinned to one CPU core. Both sides include the HETERO cut. SIMULATED latencies.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import simpy

from placement_gym import files, load_graph
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.graph import ComputationGraph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, pin_to_one_core  # noqa: E402
from benchmarks.performance.simulator_speed import synthetic_graph  # noqa: E402

#: Agreement required between our simulator and the SimPy reference (relative).
TOLERANCE = 1e-9


# ================================================================================================ the model
def simpy_latency(backend: SimulatedBackend, graph: ComputationGraph, placement: np.ndarray) -> float:
    """Latency (s) of `placement` under `backend`'s cost model (its profile and schedule), by a SimPy event loop.

    Args:
        backend: the simulated backend whose profile (devices, links, overheads, schedule) is used.
        graph: the computation graph.
        placement: (N,) ints, the device index of each op.
    """
    profile = backend.profile
    prepared = backend.prepare(graph)  # placement-independent inputs: op and edge time tables, the cutter
    placement = np.asarray(placement)
    n, d = graph.n_ops, len(profile.devices)
    if placement.shape != (n,) or not np.issubdtype(placement.dtype, np.integer) \
            or placement.min() < 0 or placement.max() >= d:
        raise ValueError(f"placement must be ({n},) ints in 0..{d - 1}, got {placement.dtype} {placement.shape}")
    placement = placement.astype(np.int64, copy=False)

    if n == 1 or not np.any(placement != placement[0]):  # one device: one submodel, nothing crosses
        n_submodels, labels = 1, [0] * n
    else:
        n_submodels, label_array = prepared.cutter.cut(placement)
        labels = label_array.tolist()
    overhead_s = (n_submodels - 1) * profile.boundary_overhead_s
    if n_submodels > 1:
        overhead_s += profile.split_overhead_s

    device = placement.tolist()
    op_s = prepared.op_seconds[np.arange(n), placement].tolist()
    # an op fused into its producer's kernel pays its own kernel's price where a device boundary separates the two
    for op, parent, extra in zip(prepared.fused.tolist(), prepared.fused_parent.tolist(), prepared.unfused_s):
        if device[op] != device[parent]:
            op_s[op] += float(extra[device[op]])
    src = prepared.cutter.src.tolist()
    dst = prepared.cutter.dst.tolist()
    edge_seconds = prepared.edge_seconds
    sequential = profile.schedule == "sequential" or n_submodels == 1

    env = simpy.Environment()
    if sequential:
        thread = simpy.Resource(env, capacity=1)  # the calling thread runs everything, one thing at a time
        device_queue = [thread] * d
        channel_of = lambda pair: thread
        # HETERO copies a crossing tensor once per (producer, consumer submodel); the sequential sum charges the
        # lowest-numbered edge of each such pair (np.unique's first occurrence in SimulatedBackend._crossings).
        charged_edge: dict[tuple[int, int], int] = {}
        for e in range(len(src)):
            if labels[src[e]] != labels[dst[e]]:
                charged_edge.setdefault((src[e], labels[dst[e]]), e)
        request = thread.request()
        env.process(_hold(env, thread, request, overhead_s))  # boundaries and split first, on the same thread
    else:
        device_queue = [simpy.Resource(env, capacity=1) for _ in range(d)]
        channels: dict[int, simpy.Resource] = {}

        def channel_of(pair: int) -> simpy.Resource:
            if pair not in channels:
                channels[pair] = simpy.Resource(env, capacity=1)
            return channels[pair]

        charged_edge = None  # the list schedule sends a tensor with its first consumer's edge

    ops: list[simpy.Process] = []  # op i's process; it ends (its event fires) when op i's output exists
    arrival: dict[tuple[int, int], simpy.Process] = {}  # (producer, consumer submodel) -> the transfer
    for i in range(n):
        inputs = []
        for e in prepared.in_edges[i]:
            s = src[e]
            if labels[s] == labels[i]:
                inputs.append(ops[s])
                continue
            key = (s, labels[i])
            if key not in arrival:  # the first consumer in this submodel: the tensor is sent once
                pair = device[s] * d + device[i]
                charged = e if charged_edge is None else charged_edge[key]
                channel = channel_of(pair)
                arrival[key] = env.process(_transfer(env, channel, channel.request(), ops[s],
                                                     float(edge_seconds[pair, charged])))
            inputs.append(arrival[key])
        queue = device_queue[device[i]]
        ops.append(env.process(_op(env, queue, queue.request(), inputs, op_s[i])))

    if sequential:
        env.run()
        return env.now
    done = env.process(_finish(env, ops, overhead_s))
    env.run()
    return float(done.value)


def _hold(env: simpy.Environment, resource: simpy.Resource, request, seconds: float):
    """Hold `resource` for `seconds` (the calling thread's boundary and split overheads)."""
    yield request
    yield env.timeout(seconds)
    resource.release(request)


def _op(env: simpy.Environment, device: simpy.Resource, request, inputs: list, seconds: float):
    """An op: its turn on its device (requests are served in topological order), its inputs, its compute."""
    yield request
    if inputs:
        yield env.all_of(inputs)
    yield env.timeout(seconds)
    device.release(request)


def _transfer(env: simpy.Environment, channel: simpy.Resource, request, producer: simpy.Process, seconds: float):
    """A tensor crossing submodels: its turn on the channel, its producer's output, the copy."""
    yield request
    yield producer
    yield env.timeout(seconds)
    channel.release(request)


def _finish(env: simpy.Environment, ops: list, overhead_s: float):
    """The parallel schedule's latency: the makespan, then the boundary and split overheads."""
    yield env.all_of(ops)
    yield env.timeout(overhead_s)
    return env.now


# ============================================================================================ the benchmark
def backend_for(schedule: str, profile: str = "paper") -> SimulatedBackend:
    return SimulatedBackend(profile, schedule=schedule)


def placements_for(graph: ComputationGraph, n_random: int, n_blocky: int, seed: int, devices: int = 2,
                   block: int = 16) -> list[np.ndarray]:
    """`n_random` uniformly random placements, `n_blocky` of runs of `block` ops, and every op on each device."""
    rng = np.random.default_rng(seed)
    n = graph.n_ops
    placements = [rng.integers(0, devices, n) for _ in range(n_random)]
    placements += [np.repeat(rng.integers(0, devices, n // block + 1), block)[:n] for _ in range(n_blocky)]
    placements += [np.full(n, k, dtype=np.int64) for k in range(devices)]
    return placements


def max_relative_difference(backend: SimulatedBackend, graph: ComputationGraph, placements) -> float:
    """Largest |SimPy - ours| / ours over `placements`."""
    worst = 0.0
    for p in placements:
        ours = backend.measure(graph, p, use_cache=False).latency_s
        worst = max(worst, abs(simpy_latency(backend, graph, p) - ours) / ours)
    return worst


def _rate(evaluate, placements) -> float:
    start = time.perf_counter()
    for p in placements:
        evaluate(p)
    return len(placements) / (time.perf_counter() - start)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "bert"], help="zoo models")
    parser.add_argument("--synthetic", nargs="*", type=int, default=[10_000], help="synthetic graph sizes")
    parser.add_argument("--schedules", nargs="+", default=["sequential", "parallel"], choices=["sequential", "parallel"])
    parser.add_argument("--random", type=int, default=50, help="random placements checked per graph (default 50)")
    parser.add_argument("--blocky", type=int, default=10, help="blocky placements (runs of 16 ops) checked per graph")
    parser.add_argument("--timed", type=int, default=200, help="placements per timed loop (default 200)")
    parser.add_argument("--big", type=int, default=2000, help="graphs with more ops than this get 1/5 of the checked "
                        "placements and 1/20 of the timed ones, as SimPy takes ~0.3 s a placement at 10,000 ops")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved timed loops; the median is reported")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args_with_results_file(parser, argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")

    pinned = pin_to_one_core(not args.no_pin)
    graphs = [load_graph(m) for m in args.models] + [synthetic_graph(n, args.seed) for n in args.synthetic]
    rows = []
    started = time.perf_counter()
    for graph in graphs:
        big = graph.n_ops > args.big
        n_random, n_blocky, n_timed = ((max(1, args.random // 5), max(1, args.blocky // 5), max(2, args.timed // 20))
                                       if big else (args.random, args.blocky, args.timed))
        checked = placements_for(graph, n_random, n_blocky, args.seed)
        timed = [np.random.default_rng(args.seed + 1).integers(0, 2, graph.n_ops) for _ in range(n_timed)]
        for schedule in args.schedules:
            backend = backend_for(schedule)
            backend.prepare(graph)  # the per-graph tables both sides use, built once outside the timing
            diff = max_relative_difference(backend, graph, checked)
            def ours(p, backend=backend, graph=graph):
                return backend.measure(graph, p, use_cache=False)

            def reference(p, backend=backend, graph=graph):
                return simpy_latency(backend, graph, p)

            ours_loops, simpy_loops = [], []
            for _ in range(args.repeats):  # interleaved, so a noisy moment of a shared machine hits both
                ours_loops.append(_rate(ours, timed))
                simpy_loops.append(_rate(reference, timed))
            cut_rate = _rate(backend.prepare(graph).cutter.cut, timed)
            row = {"graph": graph.name, "ops": graph.n_ops, "edges": graph.n_edges, "schedule": schedule,
                   "placements_checked": len(checked), "max_relative_difference": diff,
                   "agrees": bool(diff <= TOLERANCE), "placements_timed": len(timed),
                   "ours_per_s": float(np.median(ours_loops)), "simpy_per_s": float(np.median(simpy_loops)),
                   "ours_loops_per_s": ours_loops, "simpy_loops_per_s": simpy_loops,
                   "hetero_cut_only_per_s": cut_rate}
            row["ratio"] = row["ours_per_s"] / row["simpy_per_s"]
            rows.append(row)
            print(f"{graph.name:>16} {schedule:>10}: max rel diff {diff:.1e}, ours {row['ours_per_s']:.0f}/s, "
                  f"SimPy {row['simpy_per_s']:.1f}/s, {row['ratio']:.1f}x", flush=True)
            if not row["agrees"]:
                print(f"DISAGREEMENT on {graph.name} ({schedule}): {diff:.3e} > {TOLERANCE:g}", file=sys.stderr)

    print()
    print("| graph | ops | schedule | placements checked | max rel diff | ours pl/s | SimPy pl/s | ours / SimPy |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['graph']} | {r['ops']} | {r['schedule']} | {r['placements_checked']} | "
              f"{r['max_relative_difference']:.1e} | {r['ours_per_s']:,.0f} | {r['simpy_per_s']:,.1f} | "
              f"{r['ratio']:,.0f}x |")
    if args.json:
        files.write_json(args.json, {
            "rows": rows,
            "settings": {"profile": "paper", "devices": 2, "schedules": args.schedules, "random": args.random,
                         "blocky": args.blocky, "block": 16, "timed": args.timed, "big": args.big,
                         "repeats": args.repeats, "seed": args.seed, "pinned_to_one_core": pinned,
                         "tolerance": TOLERANCE, "ours": "SimulatedBackend.measure(graph, p, use_cache=False)",
                         "simpy": "simpy_latency(backend, graph, p)"},
            "command": "python " + " ".join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))),
            "note": ("SIMULATED latencies. Both sides include the HETERO cut (hetero_cut_only_per_s: the cut alone); "
                     "placements/s are medians of interleaved loops over the same random placements"),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "wall_s": time.perf_counter() - started,
            "versions": {**files.versions(), "python": platform.python_version(), "numpy": np.__version__,
                         "simpy": simpy.__version__},
            "machine": files.machine(),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0 if all(r["agrees"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
