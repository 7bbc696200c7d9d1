"""The commands around placements as files: ``show`` (pictures of placements), ``place`` (plan one and write the
placed model folder) and ``export`` (a placed model folder from a placement already made), on top of
`placement_gym.deploy`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import evaluation, files, results
from .report import check_outputs, interrupted, output_paths, report_results
from .run import check_agent_options, draw_placement, one_agent, run_one_agent
from .settings import BUDGET, env_factory, seeds_of
from .signals import exit_status, interruption, signals_deferred, stopped_by


def cmd_show(args: argparse.Namespace) -> int:
    """Draw placements from a results JSON (every record that matches the filters), a placement file or a placed
    folder (`placement_gym.deploy`: read as `compile_placed` reads it, its placement on its own model.xml)."""
    from .. import deploy
    from ..models import load_graph
    from ..schema import mismatch

    path = Path(args.file)
    if path.is_dir():  # a placed folder: the one placement compile_placed compiles, on its own model.xml
        document, graph, placement = deploy.read_placed_graph(path)
        placements = None
        records = [{**document, "placement": placement.tolist()}]
        inputs = {f"FILE's {name}": path / name for name in deploy.FILES}  # the folder's own files stay as they are
        path = path / deploy.PLACEMENT_JSON
    else:
        placements = results.read_placements(path)  # the file is checked before anything is built from it
        records = placements.records
        inputs = {"FILE": path}
    picked = [i for i, r in enumerate(records)
              if (args.agent is None or r["agent"] == args.agent)
              and (args.model is None or r["model"] == args.model)
              and (args.seed is None or r["seed"] in args.seed)]
    chosen = [records[i] for i in picked]
    if not chosen:
        seeds = None if args.seed is None else " ".join(map(str, args.seed))
        raise ValueError(f"no placement in {path} matches --agent {args.agent} --model {args.model} --seed {seeds}")
    if args.out and len(chosen) > 1:
        raise ValueError(f"--out names one file but {len(chosen)} placements match; narrow them with --agent, "
                         "--model or --seed")
    results_file = placements is not None and placements.results_file
    outs = [Path(args.out)] if args.out else [
        path.with_suffix(".png") if not results_file else
        files.beside(path, f".{r['model']}.{r['agent']}.seed{r['seed']}.placement.png") for r in chosen]
    names = ["--out"] if args.out else [f"the picture of {r.get('model')}, {r.get('agent')}, seed {r.get('seed')}"
                                        f" (#{i + 1} in FILE)" for i, r in enumerate(chosen)]
    files.check_outputs(dict(zip(names, outs)), args.overwrite, inputs=inputs)
    # Every graph is loaded and every placement checked against its graph before the first picture is drawn:
    # a bad record anywhere in the file leaves no pictures behind.
    graphs: dict = {}  # one graph per model named
    drawn = []
    for i, record in zip(picked, chosen):
        if placements is None:
            drawn.append(graph)
            continue
        key = "model_path" if record.get("model_path") else "model"
        if record[key] not in graphs:
            try:
                graphs[record[key]] = load_graph(record[key])
            except (ValueError, FileNotFoundError) as exc:  # a model the file names that cannot be loaded here
                raise mismatch(path, placements.field(i, key), record[key], f"a model that loads here ({exc})") \
                    from None
        placements.check_fits(i, graphs[record[key]].n_ops)
        drawn.append(graphs[record[key]])
    for record, graph_, out in zip(chosen, drawn, outs):
        print(f"wrote {draw_placement(record, graph_, out, args.overwrite)}")
    return 0


def cmd_place(args: argparse.Namespace) -> int:
    """Plan a placement of one model with one agent and write it as a placed folder (`placement_gym.deploy`); on
    the real backend, time the written model against each device alone."""
    import numpy as np

    from .. import deploy

    out = deploy.check_out(args.out, args.overwrite)  # refused before any work
    paths = output_paths(args)
    check_outputs(args, paths, folders={"--out": out})
    check_agent_options(args)
    seeds = seeds_of(args)
    if len(seeds) != 1:
        raise ValueError(f"place writes one placement: give one seed (--seed S), not {len(seeds)}")
    args.seed = seeds
    make_env, backend = env_factory(args)
    base = make_env(args.model).unwrapped
    if base.multi_graph:
        raise ValueError(f"place writes the placement of one model; --model {args.model} names several graphs")
    base.graph.require_model("place (it writes the placed OpenVINO model)")
    factories, saved = one_agent(args, backend)
    if args.budget is None:  # a saved agent places zero-shot; any other plans or learns with the usual budget
        args.budget = 0 if saved else BUDGET
    records, stopped = run_one_agent(args, factories, make_env, paths)
    if stopped is not None:
        return stopped
    working = [r for r in records if r["ok"] and r["latency_s"] is not None]
    if not working:
        print(f"placement-gym place: {args.agent} found no working placement of {args.model} "
              f"({records[0]['error'] if records else 'no run finished'}); nothing written", file=sys.stderr)
        return 1
    best = min(working, key=lambda r: r["latency_s"])  # an agent with several rows (single-device): the fastest
    placement = np.asarray(best["placement"], dtype=np.int64)
    try:
        measured = base.measure(placement)  # afresh, for its interval (free on the simulator)
    except KeyboardInterrupt:  # the run finished: its records are kept
        return interrupted(args, records, paths)
    simulated = bool(backend.simulated)
    info = {"model": best["model"], "model_path": best["model_path"], "agent": best["agent"], "seed": best["seed"],
            "objective": base.objective, "simulated": simulated,
            "planned_on": (best["extra"].get("plan") or {}).get("cost_model"),  # a planner's cost model, if any
            "latency_s": measured.latency_s if measured.ok else None,
            "latency_interval_s": list(measured.interval_s) if measured.ok else None,
            "reference_device": base.reference_device, "reference_latency_s": base.reference.latency_s,
            "speedup_vs_reference": base.reference.latency_s / measured.latency_s if measured.ok else None,
            "n_submodels": int(measured.n_submodels), "budget": args.budget,
            "placements_measured": best["placements_measured"], "agent_settings": best["settings"],
            "search": best["search"], "backend_settings": best["backend_settings"],
            "command_line": "placement-gym " + " ".join(sys.argv[1:]) if sys.argv and
            sys.argv[0].endswith("placement-gym") else None}
    devices = list(backend.device_names) if simulated else backend.devices
    with signals_deferred():  # the folder and the records are written in full; a signal meanwhile waits
        try:
            written, failed = deploy.save_placed(out, base.graph.model, placement, devices, info=info,
                                                 overwrite=args.overwrite), []
        except OSError as exc:  # the records are still written (the placement is in them: export writes it)
            written, failed = None, [(f"the placed folder --out {out}", exc)]
        status = report_results(args, records, [], paths, extra_files=[written] if written else [], failed=failed)
    if stopped_by() is not None:  # came while writing: report_results said so
        return status
    kind = "SIMULATED" if simulated else "measured"
    try:  # everything is written: a signal from here on stops the timing only
        print(f"{written}: {best['agent']}'s placement ({np.bincount(placement, minlength=len(devices)).tolist()} "
              f"ops per device {list(backend.device_names)}, {measured.n_submodels} submodel(s)), {kind} "
              f"{_ms(measured.latency_s)} per inference ({base.objective}); compile it with "
              f"placement_gym.deploy.compile_placed({str(written)!r})")
        if not simulated:
            _print_against_singles(written, backend, base.objective, measured, base.reference_device)
    except KeyboardInterrupt:
        print(f"placement-gym place: {interruption()} after {written} and the records were written in full",
              file=sys.stderr)
        return exit_status()
    return status


def _ms(seconds: float | None) -> str:
    return "no latency" if seconds is None or seconds == float("inf") else f"{seconds * 1e3:.4g} ms"


def _print_against_singles(folder: Path, backend, objective: str, measured, reference_device: str) -> None:
    """Time the written folder as a user would compile it, against each device alone, and print the speedups
    with their 95% intervals (`placement_gym.deploy.measure_against_single_devices`, the backend's timing)."""
    from .. import deploy

    report = deploy.measure_against_single_devices(
        folder, objective=objective, warmup=backend.warmup, repeats=backend.repeats,
        target_rel_halfwidth=backend.target_rel_halfwidth, max_repeats=backend.max_repeats,
        max_timing_s=backend.max_timing_s, input_seed=backend.input_seed)
    low, high = report["latency_interval_s"]
    env_low, env_high = measured.interval_s
    print(f"the written model, compiled from {folder} ({', '.join(report['execution_devices'])}; "
          f"{report['n_submodels']} submodel(s)): {_ms(report['latency_s'])} per inference ({objective}, timed on "
          f"its own; 95% "
          f"interval {_ms(low)} to {_ms(high)})")
    paired = next((s for s in report["singles"] if s["device"] == reference_device and "relative" in s), None)
    if paired is not None and measured.reference_baseline_s is not None:
        # timed as the env times it: each run paired with a run of the reference, scaled by its baseline
        scale = measured.reference_baseline_s
        r_low, r_high = paired["relative_interval"]
        print(f"  timed as the env times it (paired with every op on {reference_device}): "
              f"{_ms(paired['relative'] * scale)} ({_ms(r_low * scale)} to {_ms(r_high * scale)}); the env's "
              f"measurement of this placement: {_ms(measured.latency_s)} ({_ms(env_low)} to {_ms(env_high)})")
    for single in report["singles"]:
        if "error" in single:
            print(f"  vs {single['device']} alone: it cannot run the whole model ({single['error']})")
            continue
        s_low, s_high = single["speedup_interval"]
        print(f"  vs {single['device']} alone ({_ms(single['latency_s'])}): speedup x{single['speedup']:.3f} "
              f"(95% interval x{s_low:.3f} to x{s_high:.3f})")


def cmd_export(args: argparse.Namespace) -> int:
    """Write a placed folder (`placement_gym.deploy`) from a placement in a results file, a placement file, a
    placed folder or an agent checkpoint."""
    from .. import deploy
    from ..backends.base import OBJECTIVES
    from ..backends.openvino import INFERENCE_PRECISION
    from ..devices import open_devices
    from ..models import load_graph

    out = deploy.check_out(args.out, args.overwrite)
    files.check_outputs({}, args.overwrite, inputs={"FILE": args.file, f"--model {args.model}": args.model},
                          folders={"--out": out})
    graph = load_graph(args.model)
    graph.require_model("export (it writes the placed OpenVINO model)")
    choice = deploy.read_placement(args.file, graph, model=evaluation.model_label(args.model)[0], agent=args.agent,
                                   seed=args.seed)
    record = choice.record
    simulated = bool(record.get("simulated"))
    # A measured placement is compiled with the devices it was measured on (open_devices refuses one this machine
    # lacks), with the real backend's default precision; a simulated one names the profile's devices.
    devices = choice.devices if simulated else \
        open_devices(choice.devices, defaults={"INFERENCE_PRECISION_HINT": INFERENCE_PRECISION})
    settings = record.get("backend_settings") if isinstance(record.get("backend_settings"), dict) else {}
    info = {"model": record.get("model", graph.name), "model_path": record.get("model_path"),
            "agent": record.get("agent", "given"), "seed": record.get("seed", 0),
            "objective": settings.get("objective") if settings.get("objective") in OBJECTIVES else None,
            "simulated": simulated,
            "latency_s": record.get("latency_s"), "reference_latency_s": record.get("reference_latency_s"),
            "n_submodels": record.get("n_submodels"), "exported_from": choice.source}
    written = deploy.save_placed(out, graph.model, choice.placement, devices, info=info, overwrite=args.overwrite)
    print(f"wrote {written} from {choice.source}; compile it with "
          f"placement_gym.deploy.compile_placed({str(written)!r})")
    return 0
