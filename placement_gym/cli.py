"""The `placement-gym` command.

Subcommands: ``info`` (devices, models, graph statistics), ``train``, ``evaluate``, ``compare``, ``calibrate``
(a measured profile for the simulated backend). Agents are
found by name through `AGENTS`, a registry of import paths, so importing `placement_gym` never imports the agents.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

#: Agent name -> "module:Class"; imported only when a command needs the agent.
AGENTS: dict[str, str] = {
    # learned agents
    "hsdag": "agents.hsdag:HSDAGAgent",  # the paper's method
    "placeto": "agents.placeto:PlacetoAgent",
    "rnn": "agents.rnn:RNNAgent",
    "ppo": "agents.ppo:PPOAgent",  # SB3 PPO with the graph policy
    "ppo-node": "agents.ppo:PPONodeAgent",  # the same on the node-by-node env
    # classical baselines
    "random": "agents.baselines:RandomSearch",
    "single-device": "agents.baselines:SingleDevice",
    "openvino": "agents.baselines:OpenVINOChoice",
    "greedy": "agents.baselines:GreedyETF",
    "topo": "agents.baselines:TopoBalance",
    "metis": "agents.baselines:MetisPartition",
    "optimal": "agents.baselines:ExactOptimum",
}

def _cmd_info(args: argparse.Namespace) -> int:
    from .devices import available_devices
    from .env import load_graph
    from .models import zoo_names

    report: dict = {"devices": available_devices(), "models": zoo_names()}
    if args.model:
        graph = load_graph(args.model)
        report["graph"] = graph.stats()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"OpenVINO devices: {', '.join(report['devices'])}")
    print(f"zoo models: {', '.join(report['models'])}")
    if args.model:
        from .graph import format_stats_table

        s = report["graph"]
        print("\n" + format_stats_table([s]))
        top = list(s["compute"]["op_types"].items())[:8]
        print("  most common compute ops: " + ", ".join(f"{t} {c}" for t, c in top))
    return 0


# ------------------------------------------------------------------------------ evaluate / compare
def load_agent_class(name: str):
    """The agent class registered as `name` in `AGENTS`, or given as an import path ``"package.module:Class"``
    (a user's own agent)."""
    import importlib

    target = AGENTS.get(name, name if ":" in name else None)
    if target is None:
        raise ValueError(f"unknown agent {name!r}; registered agents: {', '.join(AGENTS)} "
                         "(or give your own class as 'package.module:Class')")
    module_name, _, class_name = target.partition(":")
    if name not in AGENTS and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a user's module in the current directory, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # a ValueError so the command reports it cleanly
        raise ValueError(f"agent {name!r} ({target}) could not be imported: {exc}") from exc
    if not hasattr(module, class_name):
        raise ValueError(f"agent {name!r}: module {module_name} has no {class_name}")
    return getattr(module, class_name)


def _option_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _env_factory(args: argparse.Namespace):
    """``make_env(model, feature_families)`` for the command's backend and devices; one backend for all envs,
    so the real backend's measurement cache and the reference placement are shared."""
    from .backends import make_backend
    from .env import DevicePlacementEnv, load_graph

    options = {}
    for item in args.backend_option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--backend-option takes KEY=VALUE, got {item!r}")
        options[key] = _option_value(value)
    if args.backend in ("openvino", "auto"):
        options.setdefault("warmup", args.warmup)
        options.setdefault("repeats", args.repeats)
    devices = args.devices if args.devices else "auto"
    backend = make_backend(args.backend, devices, **options)
    graphs: dict = {}  # one graph object per model: envs of a model share the backend's per-graph cache

    def make_env(model: str, families=None):
        extra = {} if families is None else {"features": families}
        if model not in graphs:
            graphs[model] = load_graph(model)
        return DevicePlacementEnv(graphs[model], devices=devices, backend=backend, **extra)

    return make_env, backend


def _output_paths(args: argparse.Namespace) -> dict:
    """Where the results go; checked before any work so a long run never ends on an existing file."""
    from pathlib import Path

    paths = {}
    if args.json:
        json_path = Path(args.json)
        paths["json"] = json_path
        paths["csv"] = Path(args.csv) if args.csv else json_path.with_suffix(".csv")
        paths["plot"] = Path(args.plot) if args.plot else json_path.with_suffix(".png")
    else:
        if args.csv:
            paths["csv"] = Path(args.csv)
        if args.plot:
            paths["plot"] = Path(args.plot)
    if not args.overwrite:
        for path in paths.values():
            if path.exists():
                raise FileExistsError(f"{path} exists; choose another path or pass --overwrite")
    return paths


def _report(args, records, skipped, paths, command: str) -> int:
    from . import evaluation

    if not records:
        print(f"placement-gym {command}: no agent produced a result", file=sys.stderr)
        return 1
    rows = evaluation.summarize(records)
    reference = f"{records[0]['devices'][0]}-only"
    settings = records[0]["backend_settings"]
    kind = (f"SIMULATED latencies, profile {settings.get('profile')}, {settings.get('schedule')} schedule"
            if records[0]["simulated"] else f"measured latencies, median of {settings.get('repeats')} runs")
    print(f"\nbackend {records[0]['backend']} ({kind}); devices {', '.join(records[0]['devices'])}; "
          f"budget {args.budget} placements; {len(set(r['seed'] for r in records))} seed(s); mean±std over seeds; "
          f"* = fastest")
    print(evaluation.format_table(rows, reference_label=reference))
    for r in records:  # the exact optimum: proven, or the interval the time limit left
        plan = r.get("extra", {}).get("plan", {})
        if r["agent"] == evaluation.OPTIMAL_AGENT and "lower_bound_s" in plan and r["seed"] == records[0]["seed"]:
            proof = "proven optimal" if plan["status"] == "optimal" else f"time limit, gap {100 * plan['gap']:.2f}%"
            print(f"optimal on {r['model']}: {plan['latency_s'] * 1e3:.3f} ms, lower bound "
                  f"{plan['lower_bound_s'] * 1e3:.3f} ms ({proof}, {plan['solve_s']:.1f} s, {plan['schedule']} schedule)")
    for skip in skipped:
        print(f"skipped {skip['agent']} on {skip['model']}: {skip['reason']}")
    arguments = {k: v for k, v in vars(args).items() if k != "func"}
    metadata = {"command": command, "arguments": arguments, "budget": args.budget, "summary": rows,
                "skipped": skipped, "backend_settings": records[0]["backend_settings"]}
    if sys.argv and sys.argv[0].endswith("placement-gym"):  # run from the shell: keep the exact command line
        metadata["command_line"] = "placement-gym " + " ".join(sys.argv[1:])
    if "json" in paths:
        evaluation.write_records(paths["json"], records, overwrite=args.overwrite, **metadata)
        print(f"wrote {paths['json']}")
    if "csv" in paths:
        evaluation.write_csv(paths["csv"], records, overwrite=args.overwrite)
        print(f"wrote {paths['csv']}")
    if "plot" in paths:
        evaluation.plot_summary(paths["plot"], rows, reference_label=reference, overwrite=args.overwrite)
        print(f"wrote {paths['plot']}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from . import evaluation

    paths = _output_paths(args)
    agent_cls = load_agent_class(args.agent)
    agent = agent_cls.load(args.load) if args.load else agent_cls
    make_env, _ = _env_factory(args)
    env = make_env(args.model, getattr(agent_cls, "feature_families", None))
    label = args.agent if args.agent in AGENTS else evaluation.agent_name(agent_cls)
    runs = evaluation.expand_variants(label, agent, env) if not args.load else [(label, agent)]
    seeds = evaluation.seed_list(args.seeds)
    records = []
    with tqdm(total=len(runs) * len(seeds), desc=f"evaluate {args.agent} on {args.model}", unit="run") as bar:
        for label, variant in runs:
            records += evaluation.evaluate(variant, env, args.budget, seeds, name=label, model=args.model,
                                           train=not args.load, on_record=lambda r: bar.update(1))
    return _report(args, records, [], paths, "evaluate")


def _default_compare_order() -> list[str]:
    """Every registered agent, in the paper's table order: single devices and OpenVINO's choice first, then the
    other baselines, the learned agents, and the exact optimum last."""
    first = ["single-device", "openvino", "random", "greedy", "topo", "metis"]
    last = ["optimal"]
    middle = [a for a in AGENTS if a not in first and a not in last]
    return [a for a in first if a in AGENTS] + middle + [a for a in last if a in AGENTS]


def _cmd_compare(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from . import evaluation

    paths = _output_paths(args)
    agents, missing = {}, []
    for name in args.agents or _default_compare_order():
        try:
            agent_cls = load_agent_class(name)
            agents[name if name in AGENTS else evaluation.agent_name(agent_cls)] = agent_cls
        except ValueError as exc:
            missing.append({"model": "*", "agent": name, "seeds": [], "reason": str(exc)})
            print(f"note: skipping agent {name!r}: {exc}", file=sys.stderr)
    if not agents:
        raise ValueError("none of the requested agents is available")
    make_env, _ = _env_factory(args)
    with tqdm(total=0, desc="compare", unit="run") as bar:
        def planned(n: int) -> None:
            bar.total += n
            bar.refresh()

        def done(record: dict) -> None:
            bar.set_postfix_str(f"{record['model']}/{record['agent']}")
            bar.update(1)

        def skipped_run(skip: dict) -> None:
            bar.update(len(skip["seeds"]))
            tqdm.write(f"note: {skip['agent']} on {skip['model']} skipped: {skip['reason']}")

        records, skipped = evaluation.compare(args.models, agents, make_env, args.budget, args.seeds,
                                              on_record=done, on_plan=planned, on_skip=skipped_run)
    return _report(args, records, missing + skipped, paths, "compare")


# ------------------------------------------------------------------------------------------- train
def _agent_factory(agent_cls, options: dict, args: argparse.Namespace):
    """``make(seed) -> agent``: the class built with the user's options, plus the progress bar and TensorBoard
    settings where its constructor takes them (``progress_bar``, ``tensorboard_log``, ``seed``)."""
    import inspect

    try:
        accepted = inspect.signature(agent_cls).parameters
    except (TypeError, ValueError):
        accepted = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())

    def make(seed: int):
        kwargs = dict(options)
        for key, value in (("seed", seed), ("progress_bar", not args.no_progress),
                           ("tensorboard_log", f"{args.tensorboard}/seed{seed}" if args.tensorboard else None)):
            if key in accepted or takes_any:
                kwargs.setdefault(key, value)
        try:
            return agent_cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"agent {args.agent!r} rejected the options {options}: {exc}") from exc

    return make


def _train_outputs(args: argparse.Namespace, seeds: list[int]) -> dict:
    """Checkpoint and best-placement paths per seed (next to --json unless --save is given), checked up front."""
    from pathlib import Path

    stem = Path(args.save) if args.save else (Path(args.json).with_suffix("") if args.json else None)
    if stem is None:
        return {}
    stem = stem.with_suffix("") if stem.suffix == ".pt" else stem
    outputs = {}
    for seed in seeds:
        tag = "" if len(seeds) == 1 else f".seed{seed}"
        outputs[seed] = (stem.with_name(f"{stem.name}{tag}.pt"), stem.with_name(f"{stem.name}{tag}.placement.json"))
    if not args.overwrite:
        for path in (p for pair in outputs.values() for p in pair):
            if path.exists():
                raise FileExistsError(f"{path} exists; choose another path or pass --overwrite")
    return outputs


def _cmd_train(args: argparse.Namespace) -> int:
    """Train an agent on a model for a budget and seeds; write the records, checkpoints and best placements.

    The env is built with the agent's ``feature_families`` (an agent attribute; None = the env's default), and
    the records come from `evaluation.evaluate`, the one record builder.
    """
    from . import evaluation
    from .results import write_json

    seeds = list(args.seed) if args.seed is not None else list(range(args.seeds))
    paths = _output_paths(args)
    outputs = _train_outputs(args, seeds)
    agent_cls = load_agent_class(args.agent)
    options = {}
    for item in args.agent_option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--agent-option takes KEY=VALUE (JSON values: 0.01, false, null), got {item!r}")
        options[key.replace("-", "_")] = _option_value(value)
    make_agent = _agent_factory(agent_cls, options, args)
    families = getattr(make_agent(seeds[0]), "feature_families", None)  # instance: ablation switches change it
    make_env, _ = _env_factory(args)
    env = make_env(args.model, families)

    trained: dict[int, object] = {}
    records = []
    for seed in seeds:
        def factory(seed=seed):
            trained[seed] = make_agent(seed)
            return trained[seed]

        record = evaluation.evaluate(factory, env, args.budget, [seed], name=args.agent, model=args.model,
                                     extra={"agent_options": options})[0]
        agent = trained[seed]
        record["extra"].update(_train_extra(agent))
        records.append(record)
        if seed in outputs:
            checkpoint, placement_path = outputs[seed]
            if callable(getattr(agent, "save", None)):
                try:
                    agent.save(checkpoint, overwrite=args.overwrite)
                except TypeError:  # an agent whose save takes no overwrite flag
                    agent.save(checkpoint)
                record["extra"]["checkpoint"] = str(checkpoint)
            base = env.unwrapped
            write_json(placement_path, {
                "model": args.model, "agent": args.agent, "seed": seed, "devices": base.device_names,
                "latency_s": record["latency_s"], "speedup_vs_reference": record["speedup_vs_reference"],
                "simulated": record["simulated"], "placement": record["placement"],
                "by_op": {name: base.device_names[d] for name, d in zip(base.graph.op_names, record["placement"])},
            }, overwrite=args.overwrite)
            record["extra"]["placement_file"] = str(placement_path)
    return _report(args, records, [], paths, "train")


def _train_extra(agent) -> dict:
    """What a trained agent reports about its own training (hyper-parameters, compute per placement)."""
    if agent is None:
        return {}
    extra = {}
    if callable(getattr(agent, "hyperparameters", None)):
        extra["hyperparameters"] = agent.hyperparameters()
    summary = getattr(agent, "train_summary", None)
    if isinstance(summary, dict) and summary:
        extra["train_summary"] = summary
    return extra


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by `evaluate` and `compare`."""
    parser.add_argument("--backend", default="auto", help="openvino, simulated or auto (default)")
    parser.add_argument("--devices", nargs="+", help="device specs, e.g. CPU 'CPU[INFERENCE_NUM_THREADS=1]' "
                        "(default: the backend's own choice)")
    parser.add_argument("--backend-option", action="append", metavar="KEY=VALUE",
                        help="extra backend setting (repeatable), e.g. profile=paper")
    parser.add_argument("--budget", type=int, default=500, help="placements each agent may measure per seed")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0..n-1)")
    parser.add_argument("--warmup", type=int, default=3, help="real backend: untimed inferences per placement")
    parser.add_argument("--repeats", type=int, default=20, help="real backend: timed inferences per placement")
    parser.add_argument("--json", help="write the records as JSON here (CSV and PNG next to it)")
    parser.add_argument("--csv", help="write one CSV row per record here")
    parser.add_argument("--plot", help="write a bar chart (PNG) here")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files")


# ----------------------------------------------------------------------------------------- calibrate
def _cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure a device profile for the simulated backend on this machine's real devices."""
    from pathlib import Path

    from .backends.profiles import calibrate
    from .devices import two_cpu_devices

    out = Path(args.out)
    if out.exists() and not args.overwrite:  # checked before the minutes of measuring
        raise FileExistsError(f"{out} exists; choose another path or pass --overwrite")
    profile = calibrate(args.devices or two_cpu_devices(), args.model, runs=args.runs, warmup=args.warmup,
                        placements=args.placements, seed=args.seed, statistic=args.statistic, clock=args.clock,
                        name=args.name or out.stem, progress=print)
    profile.save(out, overwrite=args.overwrite)
    print(f"wrote {out}; use it with DevicePlacementEnv(model, backend='simulated', profile='{out}')")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="placement-gym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="devices, zoo models and graph statistics")
    info.add_argument("--model", help="zoo name or model file to print graph statistics for")
    info.add_argument("--json", action="store_true", help="print machine-readable JSON")
    info.set_defaults(func=_cmd_info)

    evaluate = sub.add_parser("evaluate", help="run one agent on one model for a budget and seeds")
    evaluate.add_argument("--agent", required=True,
                          help="registered agent name or your own class as 'package.module:Class'")
    evaluate.add_argument("--model", default="resnet", help="zoo name or model file (default resnet)")
    evaluate.add_argument("--load", help="evaluate this saved agent as it is (no training)")
    _add_run_arguments(evaluate)
    evaluate.set_defaults(func=_cmd_evaluate)

    compare = sub.add_parser("compare", help="run several agents on several models; print the paper's table")
    compare.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"], help="zoo names or files")
    compare.add_argument("--agents", nargs="+", help="agent names (default: every registered agent)")
    _add_run_arguments(compare)
    compare.set_defaults(func=_cmd_compare)

    train = sub.add_parser("train", help="train an agent on a model; save its records, checkpoint and best placement")
    train.add_argument("--agent", required=True, help="registered agent name (e.g. hsdag) or 'package.module:Class'")
    train.add_argument("--model", default="resnet", help="zoo name or model file (default resnet)")
    _add_run_arguments(train)
    train.add_argument("--seed", type=int, nargs="+",
                       help="seed(s) to train with (overrides --seeds, which gives a count 0..n-1)")
    train.add_argument("--agent-option", action="append", metavar="KEY=VALUE",
                       help="agent constructor argument (repeatable, JSON values), e.g. pooling=false")
    train.add_argument("--save", help="checkpoint path (default: next to --json, as <stem>.pt and "
                       "<stem>.placement.json; <stem>.seedN.* with several seeds)")
    train.add_argument("--tensorboard", metavar="DIR", help="TensorBoard log directory (one run per seed)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(func=_cmd_train)

    calibrate = sub.add_parser("calibrate", help="measure a device profile for the simulated backend "
                               "(per-op OpenVINO profiling + real split placements)")
    calibrate.add_argument("--devices", nargs="+",
                           help="real OpenVINO device specs (default: placement_gym.two_cpu_devices(), i.e. CPU and "
                           "a bf16 virtual CPU where the CPU runs bf16, else a one-thread virtual CPU)")
    calibrate.add_argument("--model", nargs="+", default=["resnet"], help="zoo names or model files to profile")
    calibrate.add_argument("--out", default="profile.json", help="profile JSON to write (default profile.json)")
    calibrate.add_argument("--runs", type=int, default=20, help="timed inferences per measurement (see --statistic)")
    calibrate.add_argument("--warmup", type=int, default=3, help="untimed inferences after each compile")
    calibrate.add_argument("--placements", type=int, default=8,
                           help="real split placements per model to fit link and boundary costs (default 8)")
    calibrate.add_argument("--seed", type=int, default=0, help="seed of the split placements")
    calibrate.add_argument("--statistic", choices=["median", "min"], default="median",
                           help="latency of timed runs: median (as the real backend) or min (robust on a busy machine)")
    calibrate.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                           help="time runs by wall clock (as the real backend) or process CPU time (load-robust, "
                           "for one-thread devices only)")
    calibrate.add_argument("--name", help="profile name (default: the file name)")
    calibrate.add_argument("--overwrite", action="store_true", help="replace an existing profile file")
    calibrate.set_defaults(func=_cmd_calibrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, FileExistsError, TypeError) as exc:
        print(f"placement-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
