"""Our simulator side by side with a SimPy event-loop implementation of the same cost model.

    python benchmarks/simpy_simulator.py --json benchmarks/results/simpy_simulator.json

DOPPLER and GiPH simulate placements with SimPy event loops (Placeto and Park with a Python event loop). This
script re-implements the latency of `placement_gym.backends.simulated.SimulatedBackend` as SimPy processes:

* ``sequential`` schedule (HETERO's synchronous inference): one process walks the ops in topological order on
  the calling thread; every tensor that crosses into another submodel is a transfer timeout (once per
  (producer, consumer submodel)), every op a compute timeout, the submodel boundaries one timeout up front;
* ``parallel`` schedule: one process per op and per transfer; an op waits for its inputs' arrival events and for
  the previous op on its device (ops run on a device in topological order, as our list scheduler queues them),
  a transfer for its producer and the previous transfer on its (source, destination) channel.

What both share, computed once per graph: the per-op and per-edge time tables (`SimulatedBackend.prepare`) and
the HETERO cut of each placement (`HeteroCutter`, the submodels). What differs is how a placement's latency is
evaluated: our vectorised sums / list scheduler against SimPy's event loop. The script checks that both give the
same latency (max relative difference over random and blocky placements, required <= 1e-9) and times placements
per second of each, interleaved, median over ``--repeats`` loops, pinned to one core, on ResNet-50, BERT-base and
a 10,000-op synthetic graph (`benchmarks/simulator_speed.py`'s generator). SIMULATED latencies (``paper``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

import numpy as np
import simpy

from _outputs import refuse_existing_outputs
from placement_gym import load_graph, results
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.graph import ComputationGraph
from simulator_speed import synthetic_graph


def simpy_latency(backend: SimulatedBackend, graph: ComputationGraph, placement: np.ndarray) -> float:
    """The latency (s) of `placement` under `backend`'s cost model, evaluated by a SimPy event loop."""
    prepared, profile = backend.prepare(graph), backend.profile
    placement = np.asarray(placement, dtype=np.int64)
    n, d = graph.n_ops, len(profile.devices)
    op_s = prepared.op_seconds[np.arange(n), placement].tolist()
    if n == 1 or not np.any(placement != placement[0]):  # one device: one submodel, nothing crosses
        n_submodels, labels = 1, None
    else:
        n_submodels, labels = prepared.cutter.cut(placement)
        labels = labels.tolist()
    boundary_s = (n_submodels - 1) * profile.boundary_overhead_s + (profile.split_overhead_s if n_submodels > 1 else 0.0)
    device, src, edge_s = placement.tolist(), prepared.cutter.src.tolist(), prepared.edge_seconds
    env = simpy.Environment()
    if profile.schedule == "sequential" or labels is None:
        env.process(_sequential(env, prepared.in_edges, src, labels, device, d, op_s, edge_s, boundary_s))
        env.run()
        return env.now
    finish = _parallel(env, prepared.in_edges, src, labels, device, d, op_s, edge_s)
    env.run()
    return max(finish) + boundary_s


def _sequential(env, in_edges, src, labels, device, d, op_s, edge_s, boundary_s):
    """HETERO's synchronous inference: boundaries, then every op (and the tensors it receives) in turn."""
    yield env.timeout(boundary_s)
    sent: set[tuple[int, int]] = set()
    for i, edges in enumerate(in_edges):
        if labels is not None:
            for e in edges:
                s = src[e]
                if labels[s] != labels[i] and (s, labels[i]) not in sent:
                    sent.add((s, labels[i]))
                    yield env.timeout(float(edge_s[device[s] * d + device[i], e]))
        yield env.timeout(op_s[i])


def _parallel(env, in_edges, src, labels, device, d, op_s, edge_s) -> list[float]:
    """One process per op and per transfer; returns the finish times, filled as the loop runs."""
    done = [env.event() for _ in in_edges]
    finish = [0.0] * len(in_edges)
    last_on_device: dict[int, simpy.Event] = {}
    last_on_channel: dict[int, simpy.Event] = {}
    arrival: dict[tuple[int, int], simpy.Event] = {}

    def transfer(after: list, seconds: float, arrived: simpy.Event):
        yield env.all_of(after)
        yield env.timeout(seconds)
        arrived.succeed()

    def run_op(i: int, after: list):
        yield env.all_of(after)
        yield env.timeout(op_s[i])
        finish[i] = env.now
        done[i].succeed()

    for i, edges in enumerate(in_edges):
        inputs = []
        for e in edges:
            s = src[e]
            if labels[s] == labels[i]:
                inputs.append(done[s])
                continue
            key = (s, labels[i])
            if key not in arrival:  # first consumer in this submodel: the tensor is sent once
                pair = device[s] * d + device[i]
                arrival[key] = env.event()
                after = [done[s]] + ([last_on_channel[pair]] if pair in last_on_channel else [])
                last_on_channel[pair] = arrival[key]
                env.process(transfer(after, float(edge_s[pair, e]), arrival[key]))
            inputs.append(arrival[key])
        if device[i] in last_on_device:
            inputs.append(last_on_device[device[i]])
        last_on_device[device[i]] = done[i]
        env.process(run_op(i, inputs))
    return finish


def placements_for(graph: ComputationGraph, n_random: int, n_blocky: int, seed: int) -> list[np.ndarray]:
    """Uniformly random placements and blocky ones (runs of 16 ops on one device), two devices."""
    rng = np.random.default_rng(seed)
    random_ = [rng.integers(0, 2, graph.n_ops) for _ in range(n_random)]
    blocky = [np.repeat(rng.integers(0, 2, graph.n_ops // 16 + 1), 16)[: graph.n_ops] for _ in range(n_blocky)]
    return random_ + blocky + [np.zeros(graph.n_ops, dtype=np.int64)]


def max_relative_difference(backend: SimulatedBackend, graph: ComputationGraph, placements) -> float:
    worst = 0.0
    for p in placements:
        ours = backend.measure(graph, p).latency_s
        worst = max(worst, abs(simpy_latency(backend, graph, p) - ours) / ours)
    return worst


def placements_per_second(evaluate, placements, repeats: int) -> tuple[float, list[float]]:
    """Median placements/s over `repeats` timed loops of `evaluate(p)` for every placement."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for p in placements:
            evaluate(p)
        rates.append(len(placements) / (time.perf_counter() - start))
    return float(np.median(rates)), rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "bert"])
    parser.add_argument("--synthetic", type=int, nargs="*", default=[10_000], help="synthetic graph sizes")
    parser.add_argument("--schedules", nargs="+", default=["sequential", "parallel"], choices=["sequential", "parallel"])
    parser.add_argument("--placements", type=int, default=50, help="random placements per graph (+ blocky ones)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per simulator; the median is reported")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="results JSON path")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    refuse_existing_outputs(parser, [args.json], args.overwrite)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    graphs = [load_graph(m) for m in args.models] + [synthetic_graph(n, args.seed) for n in args.synthetic]
    rows = []
    print(f"{'graph':>16} {'ops':>6} {'schedule':>10} {'max rel diff':>12} {'ours pl/s':>10} {'SimPy pl/s':>10} {'ratio':>7}")
    for graph in graphs:
        for schedule in args.schedules:
            backend = SimulatedBackend("paper")
            backend.profile = replace(backend.profile, schedule=schedule)
            # Big graphs: fewer placements, so a SimPy loop stays around a second.
            k = max(5, min(args.placements, args.placements * 400 // graph.n_ops))
            placements = placements_for(graph, k, max(2, k // 5), args.seed)
            backend.prepare(graph)  # per-graph tables once, outside the timing (both simulators use them)
            diff = max_relative_difference(backend, graph, placements)
            simpy_rates, our_rates = [], []
            for _ in range(args.repeats):  # interleaved: a noisy moment hits both
                rate, _ = placements_per_second(lambda p: backend.measure(graph, p), placements, 1)
                our_rates.append(rate)
                rate, _ = placements_per_second(lambda p: simpy_latency(backend, graph, p), placements, 1)
                simpy_rates.append(rate)
            row = {"graph": graph.name, "ops": graph.n_ops, "schedule": schedule, "placements": len(placements),
                   "max_relative_difference": diff, "ours_per_s": float(np.median(our_rates)),
                   "simpy_per_s": float(np.median(simpy_rates)), "ours_loops": our_rates, "simpy_loops": simpy_rates}
            row["ratio"] = row["ours_per_s"] / row["simpy_per_s"]
            rows.append(row)
            print(f"{graph.name:>16} {graph.n_ops:>6} {schedule:>10} {diff:>12.1e} {row['ours_per_s']:>10.0f} "
                  f"{row['simpy_per_s']:>10.0f} {row['ratio']:>6.1f}x", flush=True)
            if diff > 1e-9:
                print(f"DISAGREEMENT on {graph.name} ({schedule}): {diff:.3e}", file=sys.stderr)
    if args.json:
        results.write_json(args.json, {
            "rows": rows,
            "settings": {"placements": args.placements, "repeats": args.repeats, "seed": args.seed, "profile": "paper",
                         "pinned_to_one_core": True, "simpy": simpy.__version__},
            "command": "python " + " ".join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))),
            "note": "SIMULATED latencies; placements/s are medians of interleaved loops on a shared machine",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "versions": results.versions(), "machine": results.machine(),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0 if all(r["max_relative_difference"] <= 1e-9 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
