"""How far does the env scale? Synthetic graphs of 10k and 80k ops, every feature family, a simulated step,
and every agent on 80k ops.

    nice -n 10 python benchmarks/performance/big_graphs.py --json benchmarks/results/big_graphs.json
    nice -n 10 python benchmarks/performance/big_graphs.py --only-agents --agent-budget 20 \
        --json benchmarks/results/big_graphs_agents.json

Measures, on ``synthetic:N`` graphs (`placement_gym.models.synthetic`):

* building the graph (10k, 80k ops; best and median of ``--repeats``);
* building each node-feature family alone on a fresh graph (so the structure families do not share the cached
  `structure_estimate`), and all families together, at 10k and 80k ops; above
  `placement_gym.features.EXACT_STRUCTURE_MAX_OPS` the structure families are estimated;
* ``DevicePlacementEnv(model="synthetic:80000", backend="simulated", features=<every family>)``: creation, reset
  and the median of ``--steps`` steps with uniformly random placements and with runs of 16 ops on one device
  (the ``paper`` profile, two devices);
* peak resident memory (``resource.getrusage``) after each phase;
* agreement of the estimated structure features with the exact ones: per feature column Spearman and Pearson
  correlation and mean absolute error, on the zoo's ResNet-50, Inception-V3 and BERT-base (the estimate forced
  onto them, with the default budgets and with small ones that make it sample) and, unless
  ``--no-exact-10k``, on a 10k-op synthetic graph (the exact path there takes tens of seconds).

Agents at scale (``--agents``; ``--only-agents`` skips everything above): each agent learns on
``synthetic:<--agent-size>`` (simulated, ``paper`` profile, the agent's own feature families) for
``--agent-budget`` placements in a fresh subprocess (so its peak resident memory is its own: graph, env,
features, agent), with its defaults: the learned agents coarsen the graph (`placement_gym.coarsen`, at most
``max_nodes`` clusters). Per agent: the run summary's agent compute per placement (everything but the env's
steps and the final re-measurements; the distillation included), wall, env and agent seconds, the coarse graph's
size, distillation steps, peak RSS, and for ``optimal`` its time limit, solve time and label (proven, or best
found with its bound).

The machine is shared, so timings are noisy; the process is pinned to one core unless ``--no-pin``.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.stats import pearsonr, spearmanr

from placement_gym import DevicePlacementEnv, files, load_graph
from placement_gym.features import (
    BALL_BUDGET, EXACT_STRUCTURE_MAX_OPS, FEATURE_FAMILIES, N_PIVOTS, centrality, fractal_dimension, node_features,
    structure_estimate,
)
from placement_gym.graph import ComputationGraph
from placement_gym.models import synthetic_graph

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import pin_to_one_core, refuse_existing_outputs, run_metadata  # noqa: E402

ZOO = ("resnet", "inception", "bert")
#: Budgets small enough that the estimate samples even on the zoo's few hundred ops.
SMALL_BUDGETS = {"ball_budget": 32, "n_pivots": 32}
COLUMNS = ("fractal_dimension", "closeness", "ancestors", "descendants")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def graph_build(sizes: list[int], repeats: int, seed: int) -> list[dict]:
    rows = []
    for n in sizes:
        seconds = [timed(lambda: synthetic_graph(n, seed))[0] for _ in range(repeats)]
        graph = synthetic_graph(n, seed)
        rows.append({"ops": n, "edges": graph.n_edges, "best_s": min(seconds), "median_s": float(np.median(seconds)),
                     "seconds": seconds, "peak_rss_mb": peak_rss_mb()})
        print(f"graph synthetic:{n}: {min(seconds):.2f} s best of {repeats} ({graph.n_edges} edges)")
    return rows


def feature_build(sizes: list[int], seed: int) -> list[dict]:
    """Each family on a fresh graph (no cached estimate shared), then all families together on another."""
    rows = []
    for n in sizes:
        per_family = {}
        for family in FEATURE_FAMILIES:
            graph = synthetic_graph(n, seed)
            seconds, block = timed(lambda: node_features(graph, [family]))
            per_family[family] = {"seconds": seconds, "columns": int(block.shape[1])}
        graph = synthetic_graph(n, seed)
        total, block = timed(lambda: node_features(graph, list(FEATURE_FAMILIES)))
        rows.append({"ops": n, "structure": "exact" if n <= EXACT_STRUCTURE_MAX_OPS else "estimated",
                     "families": per_family, "all_families_s": total, "columns": int(block.shape[1]),
                     "peak_rss_mb": peak_rss_mb()})
        print(f"features synthetic:{n}: all {total:.2f} s; " +
              ", ".join(f"{f} {v['seconds']:.2f}" for f, v in per_family.items()))
    return rows


def env_at(n: int, steps: int, seed: int) -> dict:
    graph_s, graph = timed(lambda: synthetic_graph(n, seed))
    create_s, env = timed(lambda: DevicePlacementEnv(graph, backend="simulated", profile="paper",
                                                     features=tuple(FEATURE_FAMILIES)))
    reset_s, _ = timed(lambda: env.reset(seed=seed))
    rng = np.random.default_rng(seed)
    kinds = {  # uniformly random: the most submodels and transfers; runs of 16 ops: closer to a trained agent's
        "random": [rng.integers(0, env.n_devices, n) for _ in range(steps)],
        "blocky16": [np.repeat(rng.integers(0, env.n_devices, n // 16 + 1), 16)[:n] for _ in range(steps)],
    }
    steps_by_kind = {}
    for kind, placements in kinds.items():
        step_s, infos = [], []
        for placement in placements:
            seconds, (_, _, _, _, info) = timed(lambda: env.step(placement))
            step_s.append(seconds)
            infos.append(info)
        steps_by_kind[kind] = {"step_median_s": float(np.median(step_s)), "step_s": step_s,
                               "all_ok": all(i["ok"] for i in infos),
                               "mean_submodels": float(np.mean([i["n_submodels"] for i in infos]))}
    row = {"ops": n, "edges": graph.n_edges, "graph_s": graph_s, "env_create_s": create_s, "reset_s": reset_s,
           "steps": steps_by_kind, "observation_node_features": list(env.observation_space["node_features"].shape),
           "peak_rss_mb": peak_rss_mb()}
    env.close()
    print(f"env synthetic:{n} (every family): created in {create_s:.2f} s, reset {reset_s:.3f} s; step " +
          ", ".join(f"{kind} {v['step_median_s'] * 1e3:.1f} ms (~{v['mean_submodels']:.0f} submodels)"
                    for kind, v in steps_by_kind.items()) + f", medians of {steps}")
    return row


def agreement(graph: ComputationGraph, params: dict) -> dict:
    """Per column: Spearman, Pearson, mean absolute error of the estimate against the exact values."""
    exact_s, (fractal, central) = timed(lambda: (fractal_dimension(graph, exact_max_ops=graph.n_ops)[:, 0],
                                                 centrality(graph, exact_max_ops=graph.n_ops)))
    exact = dict(zip(COLUMNS, (fractal, central[:, 0], central[:, 1], central[:, 2])))
    estimate_s, estimate = timed(lambda: structure_estimate(graph, **params))
    columns = {}
    for name in COLUMNS:
        a, b = exact[name], getattr(estimate, name)
        columns[name] = {"spearman": float(spearmanr(a, b)[0]), "pearson": float(pearsonr(a, b)[0]),
                         "mean_abs_error": float(np.abs(a - b).mean()), "exact_mean": float(a.mean()),
                         "exact_std": float(a.std())}
    print(f"agreement {graph.name} ({graph.n_ops} ops) {params or 'default budgets'}: exact {exact_s:.2f} s, "
          f"estimate {estimate_s:.2f} s; " + ", ".join(
              f"{k} rho={v['spearman']:.3f} r={v['pearson']:.3f} mae={v['mean_abs_error']:.4f}"
              for k, v in columns.items()))
    return {"graph": graph.name, "ops": graph.n_ops, "params": params or {"ball_budget": BALL_BUDGET,
            "n_pivots": N_PIVOTS}, "exact_s": exact_s, "estimate_s": estimate_s, "columns": columns}


#: Every agent of the registry but the two that need no run (single device) or real devices (openvino).
AGENTS = ("hsdag", "placeto", "rnn", "post", "ppo", "ppo-node", "go", "random", "topo", "greedy", "metis", "dp",
          "optimal")
#: Agent options of the scale runs (the defaults otherwise).
AGENT_OPTIONS = {"optimal": {"time_limit_s": 60.0}}


def agent_at_scale(name: str, n: int, budget: int, seed: int) -> dict:
    """One agent's `learn` on ``synthetic:n`` (run in a fresh process by `agents_at_scale`)."""
    from placement_gym.registry import load_agent_class, make_agent

    rss_start = peak_rss_mb()
    agent = make_agent(load_agent_class(name), AGENT_OPTIONS.get(name, {}))
    families = agent.feature_families
    env_s, env = timed(lambda: DevicePlacementEnv(synthetic_graph(n, seed), backend="simulated", profile="paper",
                                                  **({} if families is None else {"features": tuple(families)})))
    reference_s = env.reference.latency_s
    rss_env = peak_rss_mb()
    learn_s, _ = timed(lambda: agent.learn(env, budget=budget, seed=seed))
    summary = agent.run_summary
    row = {"agent": name, "ops": n, "budget": budget, "seed": seed, "options": AGENT_OPTIONS.get(name, {}),
           "env_build_s": env_s, "learn_s": learn_s, "steps": summary.steps,
           "agent_ms_per_placement": summary.agent_ms_per_placement, "wall_s": summary.wall_s,
           "env_s": summary.env_s, "agent_s": summary.agent_s, "finish_s": summary.finish_s,
           "reference_latency_s": reference_s, "latency_s": summary.latency_s,
           "predict_latency_s": summary.predict_latency_s, "details": summary.details,
           "distilled_steps": getattr(agent, "distilled_steps", None),
           "peak_rss_start_mb": rss_start, "peak_rss_env_mb": rss_env, "peak_rss_mb": peak_rss_mb()}
    return row


def agents_at_scale(names: list[str], n: int, budget: int, seed: int, pin: bool, timeout_s: float) -> list[dict]:
    """`agent_at_scale` for each agent in its own subprocess (its peak RSS is its own)."""
    rows = []
    for name in names:
        command = [sys.executable, __file__, "--agent-worker", name, "--agent-size", str(n),
                   "--agent-budget", str(budget), "--seed", str(seed)] + ([] if pin else ["--no-pin"])
        started = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rows.append({"agent": name, "ops": n, "budget": budget, "error": f"timed out after {timeout_s:.0f} s"})
            print(f"agent {name}: timed out after {timeout_s:.0f} s")
            continue
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            rows.append({"agent": name, "ops": n, "budget": budget, "error": done.stderr.strip()[-2000:]})
            print(f"agent {name}: FAILED\n{done.stderr.strip()[-2000:]}")
            continue
        row = json.loads(lines[-1])
        row["process_s"] = time.perf_counter() - started
        rows.append(row)
        coarse = row["details"].get("coarsened")
        extra = f", optimal: {row['details'].get('label')} ({row['details'].get('solve_s', float('nan')):.1f} s)" \
            if name == "optimal" else ""
        print(f"agent {name} on synthetic:{n}, {row['steps']} placements: {row['agent_ms_per_placement']:.1f} ms "
              f"agent compute per placement, learn {row['learn_s']:.1f} s (env {row['env_s']:.1f} s), peak RSS "
              f"{row['peak_rss_mb']:.0f} MB" + (f", {coarse['clusters']} clusters" if coarse else "") + extra)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 80_000], help="synthetic graph sizes")
    parser.add_argument("--env-size", type=int, default=80_000, help="ops of the env timed (default 80000)")
    parser.add_argument("--steps", type=int, default=20, help="env steps timed (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="graph builds timed per size (default 3)")
    parser.add_argument("--models", nargs="*", default=list(ZOO),
                        help=f"zoo models for the agreement (default {list(ZOO)})")
    parser.add_argument("--no-exact-10k", action="store_true", help="skip the agreement on synthetic:10000")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agents", nargs="*", default=list(AGENTS), help=f"agents run at scale (default {list(AGENTS)})")
    parser.add_argument("--agent-size", type=int, default=80_000, help="ops of the agents' graph (default 80000)")
    parser.add_argument("--agent-budget", type=int, default=20, help="placements per agent (default 20)")
    parser.add_argument("--agent-timeout", type=float, default=900.0, help="seconds per agent process (default 900)")
    parser.add_argument("--only-agents", action="store_true", help="only the agents at scale")
    parser.add_argument("--agent-worker", help=argparse.SUPPRESS)  # internal: one agent, JSON on stdout
    parser.add_argument("--json", help="results JSON path")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    pinned = pin_to_one_core(not args.no_pin)
    if args.agent_worker:
        print(json.dumps(agent_at_scale(args.agent_worker, args.agent_size, args.agent_budget, args.seed), default=str))
        return 0
    refuse_existing_outputs(parser, [args.json], args.overwrite)

    report = {}
    if not args.only_agents:
        report = {"graph_build": graph_build(args.sizes, args.repeats, args.seed),
                  "feature_build": feature_build(args.sizes, args.seed),
                  "env": env_at(args.env_size, args.steps, args.seed)}
        rows = []
        for model in args.models:
            graph = load_graph(model)
            rows += [agreement(graph, {}), agreement(graph, SMALL_BUDGETS)]
        if not args.no_exact_10k:
            rows.append(agreement(synthetic_graph(10_000, args.seed), {}))
        report["agreement"] = rows
    if args.agents:
        report["agents"] = agents_at_scale(args.agents, args.agent_size, args.agent_budget, args.seed,
                                           pinned, args.agent_timeout)
    report["peak_rss_mb"] = peak_rss_mb()
    print(f"peak resident memory: {report['peak_rss_mb']:.0f} MB")
    if args.json:
        files.write_json(args.json, {
            **report,
            "settings": {"seed": args.seed, "steps": args.steps, "repeats": args.repeats, "pinned_to_one_core": pinned,
                         "agent_size": args.agent_size, "agent_budget": args.agent_budget,
                         "agent_options": AGENT_OPTIONS,
                         "exact_structure_max_ops": EXACT_STRUCTURE_MAX_OPS, "ball_budget": BALL_BUDGET,
                         "n_pivots": N_PIVOTS, "small_budgets": SMALL_BUDGETS, "profile": "paper"},
            **run_metadata(argv, "shared 2-core machine, run under nice -n 10: timings are noisy single runs unless stated"),
        }, overwrite=args.overwrite)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
