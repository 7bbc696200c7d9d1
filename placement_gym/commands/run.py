"""``train`` and ``evaluate``, and what they share with ``place``: running one agent's table rows on one model
for every seed (`run_one_agent`), picking that agent (`one_agent`: built here, loaded, or shipped) and the
placement files a trained agent leaves (`PLACEMENT_KEYS`, `draw_placement`, also read by ``show``).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import evaluation, files, registry
from .report import check_outputs, interrupted, output_paths, report_results, write_results
from .settings import env_factory, key_values, seeds_of


def _callback(args: argparse.Namespace, run_label: str):
    """The progress bar and TensorBoard log the command asks for, as an agent callback."""
    from ..callbacks import make_callback

    return make_callback(progress_bar=not args.no_progress and args.command == "train",
                         tensorboard_log=f"{args.tensorboard}/{run_label}" if args.tensorboard else None)


def _run_rows(args: argparse.Namespace, factories: dict, make_env, records: list, written: list,
              outputs: dict | None = None) -> None:
    """Each table row's agent on ``args.model`` for every seed, a fresh agent per seed (its feature families
    decide the env it observes), appending each record to `records` as it is made (so an interrupted command
    keeps them); with `outputs`, each seed's agent and best placement are saved and listed in `written`."""
    from tqdm.auto import tqdm

    seeds = seeds_of(args)
    label_, model_path = (evaluation.model_label(args.model) if isinstance(args.model, str)
                          else ("+".join(map(str, args.model)), None))
    options = key_values(args.agent_option, "--agent-option")
    args.planned_runs = len(factories) * len(seeds)
    with tqdm(total=len(factories) * len(seeds), desc=f"{args.command} {args.agent} on {args.model}", unit="run",
              disable=args.no_progress or args.command == "train") as bar:
        for label, factory in factories.items():
            for seed in seeds:
                agent = factory()
                env = make_env(args.model, agent.feature_families)
                callback = _callback(args, f"{label}/seed{seed}")
                try:
                    record = evaluation.evaluate(
                        agent, env, args.budget, [seed], name=label, model=label_, model_path=model_path,
                        callback=callback, relative=False, extra={"agent_options": options})[0]
                except BaseException:
                    # A run cut short (Ctrl-C, SIGTERM, an error) never reaches the callback's end: close its
                    # progress bar here, which ends the bar's line, so the message that follows starts a line
                    # of its own (and the TensorBoard log is flushed).
                    callback.on_training_end({})
                    raise
                if getattr(args, "load", None):  # a saved agent on this model: compare with every single device
                    record["extra"]["single_device_latency_s"] = evaluation.single_device_latencies(env)
                records.append(record)
                bar.update(1)
                if outputs and seed in outputs:
                    written += _save_run(args, agent, env, record, *outputs[seed])


def _save_run(args: argparse.Namespace, agent, env, record: dict, checkpoint: Path, placement_path: Path) -> list:
    """Write a trained agent's checkpoint, its best placement (by op name) and a picture of that placement,
    and note them in `record`."""
    saved = agent.save(checkpoint, overwrite=args.overwrite)
    base = env.unwrapped
    if base.multi_graph:  # trained over several graphs: no one placement to save (details['graphs'] has each)
        record["extra"].update(checkpoint=str(saved))
        return [saved]
    placement = {key: record[key] for key in PLACEMENT_KEYS}
    placement["by_op"] = {name: base.device_names[d] for name, d in zip(base.graph.op_names, record["placement"])}
    files.write_json(placement_path, placement, overwrite=args.overwrite)
    picture = draw_placement(placement, base.graph, placement_path.with_suffix(".png"), args.overwrite)
    record["extra"].update(checkpoint=str(saved), placement_file=str(placement_path), placement_png=str(picture))
    return [saved, placement_path, picture]


#: What a placement file (``train``'s ``<stem>.placement.json``) holds besides ``by_op``; also what `show` reads.
PLACEMENT_KEYS = ("model", "model_path", "agent", "seed", "devices", "latency_s", "reference_latency_s",
                  "speedup_vs_reference", "n_submodels", "simulated", "placement")


def draw_placement(placement: dict, graph, out: Path, overwrite: bool) -> Path:
    """Write the picture of a placement record (`PLACEMENT_KEYS`) of `graph` to `out`."""
    from ..render import save_placement

    return save_placement(out, graph, placement["placement"], placement["devices"], overwrite=overwrite,
                          latency_s=placement.get("latency_s"),
                          reference_latency_s=placement.get("reference_latency_s"),
                          n_submodels=placement.get("n_submodels"), simulated=placement.get("simulated"),
                          title=f"{placement['model']}, {placement['agent']}, seed {placement['seed']}")


def one_agent(args: argparse.Namespace, backend) -> tuple[dict[str, Any], bool]:
    """The agent factories of `evaluate` and `place` (table row -> factory), and whether the agent is a saved one:
    the saved agent of ``--load``; else, for an agent that ships trained checkpoints (``imitation``), the one for
    the backend's device set and objective (`registry.pretrained_checkpoint`: a simulated preset's full device set;
    any other gets one line naming the shipped ones); else the agent built here from ``--agent-option``."""
    load, shipped = args.load, None
    if not load:
        from ..backends.simulated import SimulatedBackend

        simulated = isinstance(backend, SimulatedBackend)
        preset = backend.profile.preset_name() if simulated else None
        devices = (f"the simulated profile {backend.profile.name!r} with devices {backend.device_names}" if simulated
                   else f"the {args.backend} backend's devices {backend.device_names}")
        objective = getattr(backend, "objective", "latency")  # as the env reads it (`DevicePlacementEnv.objective`)
        load = shipped = registry.pretrained_checkpoint(args.agent, preset, objective, devices)
    if load:
        if shipped and args.agent_option:
            raise ValueError(f"--agent {args.agent} loads the checkpoint shipped for this preset and objective "
                             f"({shipped.name}), which runs with the settings it was trained with; --agent-option "
                             f"applies only to an agent built here (--agent {registry.AGENTS[args.agent].target} "
                             "builds an untrained one)")
        if args.agent_option or registry.is_hybrid(args.agent):
            given = "--agent-option" if args.agent_option else f"the {registry.HYBRID_PREFIX!r} prefix"
            raise ValueError(f"{args.command} --load runs the saved agent with the settings it was saved with; "
                             f"{given} applies only to an agent built here (train it with them, or leave --load out)")
        cls = registry.load_agent_class(args.agent)
        label = args.agent if args.agent in registry.AGENTS else evaluation.agent_name(cls)
        if shipped:
            print(f"{args.agent}: the checkpoint shipped for this preset and objective, {shipped} (its model card: "
                  f"{shipped.with_suffix('.md')}; --load CHECKPOINT for another)")
        return {label: lambda: cls.load(load)}, True  # loaded afresh for every seed: seeds share nothing
    return registry.agent_factories([args.agent], backend.device_names,
                                    key_values(args.agent_option, "--agent-option")), False


def check_agent_options(args: argparse.Namespace) -> None:
    """``--agent-option`` of train, evaluate and place, checked against what the agent declares before anything is
    built (`registry.check_options`: an `registry.OptionError`, exit 2). A saved agent takes none (`one_agent`
    refuses them)."""
    if args.agent_option and not getattr(args, "load", None):
        registry.check_options(args.agent, key_values(args.agent_option, "--agent-option"))


def run_one_agent(args: argparse.Namespace, factories, make_env, paths) -> tuple[list, int | None]:
    """Run every row of `evaluate`'s or `place`'s one agent: ``(records, None)``, or, where Ctrl-C stopped the
    runs, the records so far and the exit status once `interrupted` has kept and reported them."""
    records: list = []
    try:
        _run_rows(args, factories, make_env, records, [])
    except KeyboardInterrupt:
        return records, interrupted(args, records, paths)
    evaluation.add_placements_to_within(records)
    return records, None


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run one agent (every table row it stands for) on one model; `--load` evaluates a saved agent."""
    paths = output_paths(args)
    check_outputs(args, paths)
    check_agent_options(args)
    make_env, backend = env_factory(args)
    factories, _ = one_agent(args, backend)
    records, stopped = run_one_agent(args, factories, make_env, paths)
    if stopped is not None:
        return stopped
    return report_results(args, records, [], paths)


def cmd_train(args: argparse.Namespace) -> int:
    """Train an agent on a model for a budget and seeds; write the records, checkpoints and best placements."""
    paths = output_paths(args)
    outputs = _train_outputs(args, seeds_of(args))
    check_outputs(args, paths, _train_output_names(args, outputs))
    cls = registry.load_agent_class(args.agent)
    options = key_values(args.agent_option, "--agent-option")
    check_agent_options(args)
    bare = args.agent.removeprefix(registry.HYBRID_PREFIX)
    label = args.agent if bare in registry.AGENTS else evaluation.agent_name(cls)
    if args.models:  # train over several graphs: the env draws one per reset
        args.model = args.models[0] if len(args.models) == 1 else list(args.models)
    make_env, _ = env_factory(args)
    records: list = []
    written: list = []
    try:
        _run_rows(args, {label: lambda: registry.make_agent(cls, options, hybrid=registry.is_hybrid(args.agent))},
                  make_env, records, written, outputs)
    except KeyboardInterrupt:
        return interrupted(args, records, paths, written)
    except OSError as exc:  # a checkpoint or placement could not be written: the finished runs' records are kept
        evaluation.add_placements_to_within(records)
        write_results(args, records, paths, written, failed=[("a checkpoint or best-placement file", exc)],
                      incomplete=True)  # raises files.OutputError, saying where the records are
    evaluation.add_placements_to_within(records)
    return report_results(args, records, [], paths, extra_files=written)


def _train_outputs(args: argparse.Namespace, seeds: list[int]) -> dict[int, tuple[Path, Path]]:
    """Checkpoint and best-placement paths per seed (next to --json unless --save is given; the placement's
    picture goes beside its file)."""
    stem = Path(args.save) if args.save else (Path(args.json).with_suffix("") if args.json else None)
    if stem is None:
        return {}
    stem = stem.with_suffix("") if stem.suffix == ".pt" else stem
    outputs = {}
    for seed in seeds:
        tag = "" if len(seeds) == 1 else f".seed{seed}"
        outputs[seed] = (stem.with_name(f"{stem.name}{tag}.pt"), stem.with_name(f"{stem.name}{tag}.placement.json"))
    return outputs


def _train_output_names(args: argparse.Namespace, outputs: dict[int, tuple[Path, Path]]) -> dict[str, Path]:
    """`_train_outputs`' files (with each placement's picture) by how the command line names them, for
    `check_outputs`' messages."""
    where = "named by --save" if args.save else "beside --json (--save moves it)"
    named = {}
    for seed, (checkpoint, placement) in outputs.items():
        whose = "" if len(outputs) == 1 else f"seed {seed} "
        named[f"the {whose}checkpoint {where}"] = checkpoint
        named[f"the {whose}best-placement file {where}"] = placement
        named[f"the {whose}best-placement picture {where}"] = placement.with_suffix(".png")
    return named
