"""Agents and baselines on the field's published benchmarks, beside the peers' own numbers.

    python benchmarks/published/published_benchmarks.py --budget 20 --seeds 1 \\
        --json benchmarks/results/published_benchmarks.json [--doppler-dir PATH/TO/Doppler/compute_graph]
    python benchmarks/results_pages.py       # then: the tables of docs/published-benchmarks.md from the JSON

Tarnawski et al.'s shipped throughput inputs (``tarnawski:throughput-inputs/...``) are priced by their max-load
(`placement_gym.backends.published.TarnawskiBackend`, objective throughput); every agent's best placement is set
beside their programs' numbers for the same input: their DP optimum and their PipeDream baseline (`THEIRS`, from
their ``dp.cpp``) and the human-expert split (priced here, which equals their ``-expert`` price: see
tests/test_published_benchmarks.py). DOPPLER's graphs (read from ``--doppler-dir``; none ship with this package)
are priced by their simulator's semantics (`DopplerBackend`) on 4 devices (8 for their ``8gpu_*`` graphs), beside the
best single device. All numbers are SIMULATED by the peers' cost models.

Each model is one `placement_gym.evaluation.compare` of the agents, as ``placement-gym compare`` runs it: one graph
and one backend (their cost model) for all the agents' envs, so what is kept per graph (the optimum's solve, the
backend's tables) is shared. benchmarks/results_pages.py writes the tables (``published``) from the JSON.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from placement_gym import files, registry
from placement_gym.backends.published import published_backend
from placement_gym.env import DevicePlacementEnv
from placement_gym.evaluation import compare, seed_list
from placement_gym.models import load_graph
from placement_gym.models.published import expert_split_path, read_split, tarnawski_names

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import refuse_existing_outputs, run_metadata  # noqa: E402

#: Their programs' numbers (max-load, ms) on the shipped throughput inputs, from dnn-partitioning at b207b6ad built
#: with ``g++ -O2 throughput-dp/dp.cpp -o dp.exe``: ``./dp.exe < INPUT`` ("maxLoad" of its JSON: their DP optimum)
#: and ``./dp.exe -pipeDream < INPUT`` (their PipeDream baseline). None: their DP did not finish within 600 s on
#: the machine named in docs/published-benchmarks.md.
THEIRS = {
    "LayerGraphs/bert24_inference": {"dp": 17.78990625, "pipedream": 17.78990625},
    "LayerGraphs/bert24_training": {"dp": 41.7458125, "pipedream": 187.9138125},
    "LayerGraphs/gnmt_inference": {"dp": 32.910658203124996, "pipedream": 33.031146484375},
    "LayerGraphs/gnmt_training": {"dp": 107.0044140625, "pipedream": 294.90462109374994},
    "LayerGraphs/inceptionv3_inference": {"dp": None, "pipedream": 60.41703155517578},
    "LayerGraphs/resnet50_inference": {"dp": 33.774666015625, "pipedream": 39.398109375},
    "LayerGraphs/resnet50_training": {"dp": 78.63181250000001, "pipedream": 83.67440624999999},
    "OperatorGraphs/bert_l-3_inference": {"dp": 27.9185676799125, "pipedream": 37.45572978205479},
}
DEFAULT_AGENTS = ["single-device", "random", "greedy", "local-search", "dp", "optimal", "hsdag", "placeto",
                  "hybrid:hsdag"]
#: The table row made of the fastest ``X-only`` row of each model and seed (`with_best_single_device`).
BEST_SINGLE = "best single device"


def with_best_single_device(records: list[dict]) -> list[dict]:
    """`records` plus, per model and seed, a ``"best single device"`` record: the fastest ``X-only`` row."""
    best: dict[tuple, dict] = {}
    for r in records:
        if r["agent"].endswith("-only") and r.get("latency_s") is not None and math.isfinite(r["latency_s"]):
            key = (r["model"], r["seed"])
            if key not in best or r["latency_s"] < best[key]["latency_s"]:
                best[key] = {**r, "agent": BEST_SINGLE, "device": r["agent"]}
    return records + list(best.values())


def run_model(model: str, names: list[str], budget: int, seeds: list[int], backend_options: dict,
              agent_options: dict[str, dict]) -> tuple[list[dict], float | None]:
    """``(records, expert_ms)`` of `names` on `model`: one record per (table row, seed), an agent that cannot run
    on the model recorded with its reason (``"skipped"``); the human expert's split priced (ms; None without
    one). One `compare` of the model: every env shares its graph and its authors' cost model."""
    graph = load_graph(model)
    backend = published_backend(graph, **backend_options)

    def make_env(_, families):
        return DevicePlacementEnv(graph, backend=backend, **({} if families is None else {"features": families}))

    factories: dict = {}
    for name in names:
        factories.update(registry.agent_factories([name], backend.device_names, agent_options.get(name)))

    def done(record: dict) -> None:
        latency = record["latency_s"]
        print(f"{model} {record['agent']} seed {record['seed']}: "
              + (f"{latency * 1e3:.4f} ms" if latency is not None and math.isfinite(latency)
                 else "every placement failed"), file=sys.stderr)

    got, skipped = compare([model], factories, make_env, budget, seeds, on_record=done)
    records = [{"model": model, "agent": r["agent"], "seed": r["seed"], "latency_s": r["latency_s"],
                "ok": r.get("ok", True), "placements_measured": r.get("placements_measured"),
                "plan": (r.get("extra") or {}).get("plan", {}), "wall_s": round(r["wall_s"], 2)} for r in got]
    records += [{"model": model, "agent": skip["agent"], "skipped": skip["reason"].splitlines()[0]}
                for skip in skipped]
    order = {label: i for i, label in enumerate(factories)}
    records.sort(key=lambda r: order.get(r["agent"], len(order)))  # the rows in the order asked for
    split = expert_split_path(graph) if graph.family == "tarnawski" else None
    expert = None
    if split is not None:
        expert = make_env(model, None).measure(read_split(split, graph)).latency_s * 1e3
    return records, expert


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=DEFAULT_AGENTS)
    parser.add_argument("--budget", type=int, default=20, help="placements per agent run (default 20)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--inputs", nargs="+", default=None,
                        help="Tarnawski inputs (default: every shipped throughput input)")
    parser.add_argument("--doppler-dir", type=Path, default=None, help="a folder of DOPPLER .txt graphs")
    parser.add_argument("--optimal-time-limit", type=float, default=20.0)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    refuse_existing_outputs(parser, [args.json], args.overwrite)
    if args.doppler_dir is not None and not args.doppler_dir.is_dir():
        parser.error(f"--doppler-dir {args.doppler_dir} is not a folder; expected a folder of DOPPLER .txt graphs")
    seeds = seed_list(args.seeds)
    agent_options = {"optimal": {"time_limit_s": args.optimal_time_limit}}
    records: list[dict] = []
    experts: dict[str, float] = {}
    for model in args.inputs or tarnawski_names("throughput"):
        got, expert = run_model(model, args.agents, args.budget, seeds, {"objective": "throughput"}, agent_options)
        records += got
        if expert is not None:
            experts[model] = expert
    records = with_best_single_device(records)
    if args.doppler_dir is not None:
        doppler_records: list[dict] = []
        doppler_agents = [a for a in args.agents if a not in ("dp", "optimal")]
        for path in sorted(args.doppler_dir.glob("*.txt")):
            if not path.name.startswith("gdp_"):
                devices = 8 if path.name.startswith("8gpu") else 4
                doppler_records += run_model(str(path), doppler_agents, args.budget, seeds, {"devices": devices},
                                             agent_options)[0]
        records += with_best_single_device(doppler_records)
    meta = run_metadata(argv, "SIMULATED by the peers' cost models (placement_gym.backends.published); latency_s = "
                              "seconds per sample (Tarnawski: max-load ms / 1000) or per execution (DOPPLER)")
    files.write_json(args.json, {**meta, "budget": args.budget, "seeds": seeds, "theirs": THEIRS,
                                   "experts_ms": experts, "records": records}, overwrite=args.overwrite)
    print(f"wrote {args.json}; python benchmarks/results_pages.py writes docs/published-benchmarks.md from it",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
