"""What DOPPLER's message-passing encoder costs with its edges grouped by matrix, against one batched product of
every edge's own matrix (the encoder before 2026-11-28, and its path where most edge features differ).

`agents.doppler.policy.MPNNEncoder` turns each distinct edge feature into its H x H matrix once and multiplies the
edges that share a matrix together. For each model this times, interleaved round by round on the same weights and
inputs (DOPPLER's defaults: H = 64, 6 steps; ``--hidden-channels`` another width): one forward and backward pass of the encoder each way, and the largest
difference of their embeddings and gradients; then whole DOPPLER runs (``--imitation-episodes`` imitation episodes
and ``--budget`` REINFORCE placements on the simulated ``--profile``), each way. Figures are medians over
``--rounds`` and the ratio of the two, measured side by side on a shared machine.

    python benchmarks/performance/doppler_encoder.py --json benchmarks/results/doppler_encoder.json
"""
from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from agents.core.base import PolicySpec
from agents.doppler import DopplerAgent
from agents.doppler.policy import MPNNEncoder
from placement_gym import DevicePlacementEnv

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import parse_args_with_results_file, pin_to_one_core, run_metadata, write_results  # noqa: E402

WAYS = ("grouped", "per_edge")


@contextmanager
def per_edge_products(on: bool) -> Iterator[None]:
    """While `on`, every `MPNNEncoder` takes each edge's own matrix (its grouping threshold set to 0)."""
    saved = MPNNEncoder.GROUPED_BELOW
    MPNNEncoder.GROUPED_BELOW = 0.0 if on else saved
    try:
        yield
    finally:
        MPNNEncoder.GROUPED_BELOW = saved


def _encoder_pass(encoder: MPNNEncoder, graph) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(seconds, embeddings, gradients) of one forward and backward pass of `encoder` on `graph`."""
    encoder.zero_grad()
    start = time.perf_counter()
    out = encoder(graph.node_features, graph.message_index, graph.message_features)
    (out ** 2).sum().backward()
    seconds = time.perf_counter() - start
    return seconds, out.detach(), torch.cat([p.grad.flatten() for p in encoder.parameters()])


def bench_model(model: str, args: argparse.Namespace) -> dict:
    env = DevicePlacementEnv(model, backend="simulated", profile=args.profile)
    agent = DopplerAgent(seed=args.seed, hidden_channels=args.hidden_channels)
    agent._setup(PolicySpec.from_env(env), args.seed)
    graph = agent.context(env.reset(seed=args.seed)[0])
    encoder = agent.policy.placement.encoder
    times = {way: [] for way in WAYS}
    passes = {}  # way -> (embeddings, gradients) of its last pass
    for k in range(args.rounds):
        for way in (WAYS if k % 2 == 0 else WAYS[::-1]):  # alternate the order to cancel drift
            with per_edge_products(way == "per_edge"):
                seconds, *passes[way] = _encoder_pass(encoder, graph)
            times[way].append(seconds)
    (grouped_out, grouped_grad), (edge_out, edge_grad) = passes["grouped"], passes["per_edge"]
    runs = {way: [] for way in WAYS}
    for k in range(args.run_rounds):
        for way in (WAYS if k % 2 == 0 else WAYS[::-1]):
            with per_edge_products(way == "per_edge"):
                run = DopplerAgent(seed=args.seed, imitation_episodes=args.imitation_episodes,
                                   hidden_channels=args.hidden_channels)
                start = time.perf_counter()
                run.learn(DevicePlacementEnv(model, backend="simulated", profile=args.profile), args.budget,
                          seed=args.seed)
                runs[way].append(time.perf_counter() - start)
    med = {way: float(np.median(times[way])) for way in WAYS}
    run_med = {way: float(np.median(runs[way])) for way in WAYS}
    scale = float(edge_out.abs().max())
    return {
        "model": model, "n_ops": graph.n_ops, "edges_both_ways": int(graph.message_features.shape[0]),
        "distinct_edge_features": int(torch.unique(graph.message_features, dim=0).shape[0]),
        "encoder_ms": {way: 1e3 * v for way, v in med.items()}, "encoder_speedup": med["per_edge"] / med["grouped"],
        "max_rel_embedding_difference": float((grouped_out - edge_out).abs().max()) / scale,
        "max_rel_gradient_difference": float((grouped_grad - edge_grad).abs().max() / edge_grad.abs().max()),
        "run_s": run_med, "run_speedup": run_med["per_edge"] / run_med["grouped"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--profile", default="paper", help="simulated preset of the whole runs")
    parser.add_argument("--rounds", type=int, default=10, help="encoder passes each way")
    parser.add_argument("--run-rounds", type=int, default=1, help="whole DOPPLER runs each way")
    parser.add_argument("--imitation-episodes", type=int, default=20, help="imitation episodes of a whole run")
    parser.add_argument("--budget", type=int, default=20, help="REINFORCE placements of a whole run")
    parser.add_argument("--hidden-channels", type=int, default=64,
                        help="DOPPLER's embedding width (its default 64; its paper's code 128)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    args = parse_args_with_results_file(parser, argv, help="write the results here (benchmarks/results/...)")
    pinned = pin_to_one_core(not args.no_pin)
    torch.set_num_threads(1)
    rows = [bench_model(model, args) for model in args.models]
    print(f"{'model':<10} {'ops':>4} {'edges':>5} {'distinct':>8} {'grouped ms':>10} {'per-edge ms':>11} "
          f"{'ratio':>5} {'run grouped s':>13} {'run per-edge s':>14} {'ratio':>5} {'max rel diff':>12}")
    for r in rows:
        print(f"{r['model']:<10} {r['n_ops']:>4} {r['edges_both_ways']:>5} {r['distinct_edge_features']:>8} "
              f"{r['encoder_ms']['grouped']:>10.1f} {r['encoder_ms']['per_edge']:>11.1f} {r['encoder_speedup']:>5.2f} "
              f"{r['run_s']['grouped']:>13.1f} {r['run_s']['per_edge']:>14.1f} {r['run_speedup']:>5.2f} "
              f"{max(r['max_rel_embedding_difference'], r['max_rel_gradient_difference']):>12.1e}")
    write_results(args.json, {**run_metadata(argv, "timings: medians of interleaved passes on a shared machine "
                                                   "(one torch thread" + (", one core" if pinned else "") + "); "
                                                   "compare the ratios, not the absolute times"),
                              "settings": vars(args), "rows": rows}, args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
