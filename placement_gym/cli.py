"""The `placement-gym` command: parse arguments, run agents (`evaluation`), present results (`results`).

Subcommands: ``info`` (devices, models, graph statistics), ``train``, ``evaluate``, ``compare``, ``benchmark``
(an agent on a versioned suite, ranked among reference results), ``show`` (a picture of a placement),
``place`` and ``export`` (a placed model folder to compile and ship: `placement_gym.deploy`),
``calibrate`` (a measured profile for the simulated backend). Agents are found by
name in `registry`, so importing `placement_gym` never imports the agents.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from . import evaluation, registry, results
# A model argument naming a split of the graph dataset (``dataset:train``): the env draws from its graphs.
from .models.dataset import DATASET_PREFIX as DATASET_SPLIT_PREFIX


def _cmd_info(args: argparse.Namespace) -> int:
    from .devices import available_devices
    from .graph import format_stats_table
    from .models import load_graph, zoo_names

    from .backends.profiles import PRESETS, Profile

    presets = {}
    for name in PRESETS:
        profile = Profile.preset(name)
        presets[name] = {"description": profile.description, "schedule": profile.schedule, "devices": [
            {"name": d.name, "description": d.description, "memory_bytes": d.memory_bytes,
             "unsupported_ops": list(d.unsupported_ops)} for d in profile.devices]}
    report: dict = {"devices": available_devices(), "models": zoo_names(), "presets": presets}
    if args.model:
        report["graph"] = load_graph(args.model).stats()
    if args.dataset:
        report["dataset"] = _dataset_rows(load_graph)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"OpenVINO devices: {', '.join(report['devices'])}")
    print(f"zoo models: {', '.join(report['models'])}")
    print("simulated presets (--profile NAME):")
    for name, preset in presets.items():
        print(f"  {name}: " + ", ".join(d["name"] + (f" ({d['memory_bytes'] / 1e9:g} GB)" if d["memory_bytes"] else "")
                                      for d in preset["devices"]))
    if args.model:
        s = report["graph"]
        print("\n" + format_stats_table([s]))
        top = list(s["compute"]["op_types"].items())[:8]
        print("  most common compute ops: " + ", ".join(f"{t} {c}" for t, c in top))
    if args.dataset:
        rows = report["dataset"]
        print(f"\ndataset ({len(rows)} graphs; model=NAME, or model='dataset:train|val|test|all' for a multi-graph env):")
        print(f"  {'name':<14} {'family':<10} {'split':<6} {'ops':>6} {'edges':>6}  description")
        for r in rows:
            print(f"  {r['name']:<14} {r['family']:<10} {r['split']:<6} {r['compute_ops']:>6} {r['edges']:>6}  "
                  f"{r['description']}")
    return 0


def _dataset_rows(load_graph) -> list[dict]:
    """One row per dataset entry with its graph's size; entries not cached yet are built first (seconds each,
    once), which is said on stderr."""
    from .models.dataset import dataset_entries
    from .models.zoo import dataset_is_cached as is_cached

    rows = []
    for entry in dataset_entries():
        if not is_cached(entry.name):
            print(f"building dataset graph {entry.name} (once; cached after)...", file=sys.stderr, flush=True)
        graph = load_graph(entry.name)
        rows.append({"name": entry.name, "family": entry.family, "split": entry.split, "compute_ops": graph.n_ops,
                     "edges": graph.n_edges, "description": entry.description, "inputs": entry.inputs})
    return rows


# ------------------------------------------------------------------------------------------ settings
def _key_values(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` -> dict, values parsed as JSON where they are (``0.01``, ``false``, ``null``; also
    Python's ``None``, ``True``, ``False``, which would otherwise arrive as strings), else kept as strings."""
    python_spellings = {"None": None, "True": True, "False": False}
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE (JSON values: 0.01, false, null), got {item!r}")
        try:
            out[key.replace("-", "_")] = python_spellings[value] if value in python_spellings else json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


def _env_factory(args: argparse.Namespace):
    """``(make_env(model, feature_families), backend)``: one backend for every env of the command, so the real
    backend's measurement cache and the reference placement are shared, and one graph object per model."""
    from .backends import make_backend
    from .backends.published import published_backend_of
    from .env import DevicePlacementEnv
    from .models import load_graph
    from .models.published import is_published

    options = _key_values(args.backend_option, "--backend-option")
    for key in ("warmup", "repeats", "profile", "objective"):  # given flags only: the backend's defaults otherwise
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    graphs: dict = {}
    models = getattr(args, "models", None) or [getattr(args, "model", None)]
    models = [m for m in (models if isinstance(models, (list, tuple)) else [models]) if isinstance(m, str)]
    # A published benchmark carries its costs: its authors' cost model prices it (one backend for all models,
    # which must share the family and the device set; the backend refuses a model that does not).
    graphs.update({m: load_graph(m) for m in models if is_published(m)})
    backend = published_backend_of([graphs.get(m, m) for m in models], args.backend, args.devices or "auto",
                                   **options) or make_backend(args.backend, args.devices or "auto", **options)

    def make_env(model: "str | Sequence[str]", families=None):
        """An env of one model, or of several (a list, or one ``dataset:SPLIT``), one drawn per reset."""
        features = {} if families is None else {"features": families}
        if not isinstance(model, str) or model.startswith(DATASET_SPLIT_PREFIX):
            # The env loads and draws the graphs itself (`DevicePlacementEnv` with a list or "dataset:SPLIT").
            many = list(model) if not isinstance(model, str) else model
            return DevicePlacementEnv(many, backend=backend, unsupported=args.unsupported, **features)
        if model not in graphs:
            graphs[model] = load_graph(model)
        return DevicePlacementEnv(graphs[model], backend=backend, unsupported=args.unsupported, **features)

    return make_env, backend


def _callback(args: argparse.Namespace, run_label: str):
    """The progress bar and TensorBoard log the command asks for, as an agent callback."""
    from .callbacks import make_callback

    return make_callback(progress_bar=not args.no_progress and args.command == "train",
                         tensorboard_log=f"{args.tensorboard}/{run_label}" if args.tensorboard else None)


def _output_paths(args: argparse.Namespace) -> dict[str, Path]:
    """Where the results go (JSON; CSV and the curves PNG next to it; compare's bar chart too), by kind:
    ``json``, ``csv``, ``curves``, ``bars``. `_check_outputs` checks them before any work."""
    paths: dict[str, Path] = {}
    if args.json:
        stem = Path(args.json)  # x.json or x.json.gz (written compressed): x.csv and x.png beside it
        paths = {"json": stem, "csv": results.beside(stem, ".csv"), "curves": results.beside(stem, ".png")}
        if args.command == "compare":
            paths["bars"] = results.beside(stem, ".bars.png")
    if args.csv:
        paths["csv"] = Path(args.csv)
    if args.plot:
        paths["curves"] = Path(args.plot)
    return paths


def _check_outputs(args: argparse.Namespace, paths: Mapping[str, Path],
                   more: Mapping[str, Path] | None = None) -> None:
    """Refuse a run command's outputs before any work (`results.check_outputs`): the results files `paths`
    (`_output_paths`) and `more` (train's checkpoints and placements, by name) may not share a path or replace
    a file the command reads (--load, --profile, model files), nor an existing file without --overwrite."""
    named_by = {"json": "--json", "csv": "--csv" if args.csv else "the CSV beside --json (--csv moves it)",
                "curves": "--plot" if args.plot else "the curves PNG beside --json (--plot moves it)",
                "bars": "the bar chart beside --json"}
    outputs = {named_by[kind]: path for kind, path in paths.items()}
    outputs.update(more or {})
    inputs = {"--load": getattr(args, "load", None), "--profile": args.profile}
    for flag in ("model", "models"):  # zoo and dataset names are no files: check_outputs skips them
        value = getattr(args, flag, None)
        for model in [value] if isinstance(value, str) else value or []:
            inputs[f"--{flag} {model}"] = model
    results.check_outputs(outputs, args.overwrite, inputs)


# ------------------------------------------------------------------------------------------- report
def _report(args: argparse.Namespace, records: list[dict], skipped: list[dict], paths: dict[str, Path],
            extra_files: Sequence[Path] = ()) -> int:
    """Print the tables and write the files of a finished command. A SIGINT or SIGTERM that arrives meanwhile
    waits until every file is written (`_signals_deferred`), then ends the command with its exit status."""
    with _signals_deferred():
        status = _print_and_write(args, records, skipped, paths, extra_files)
    if _stopped_by is not None:
        print(f"placement-gym {args.command}: {_interruption()} while writing the results; they were written in "
              "full", file=sys.stderr)
        return _exit_status()
    return status


def _print_and_write(args: argparse.Namespace, records: list[dict], skipped: list[dict], paths: dict[str, Path],
                     extra_files: Sequence[Path]) -> int:
    """`_report`'s work: the tables on stdout, the records and pictures in their files."""
    if not records:
        print(f"placement-gym {args.command}: no agent produced a result", file=sys.stderr)
        return 1
    rows = results.summarize(records)
    reference = f"{records[0]['devices'][0]}-only"
    settings = records[0]["backend_settings"]
    objective = settings.get("objective", "latency")
    kind = (f"SIMULATED {'seconds per inference at steady state (1/throughput)' if objective == 'throughput' else 'latencies'}, "
            f"profile {settings.get('profile')}, {settings.get('schedule')} schedule"
            if records[0]["simulated"] else f"measured latencies, median of {settings.get('repeats')} runs")
    print(f"\nbackend {records[0]['backend']} ({kind}); devices {', '.join(records[0]['devices'])}; "
          f"budget {args.budget} placements; {len({r['seed'] for r in records})} seed(s); mean±std over seeds; "
          f"* = fastest; '% vs {reference}' = latency reduction (positive = faster)")
    print(results.format_table(rows, reference_label=reference))
    notes = [note for prefix, note in ROW_NOTES if any(r["agent"].endswith(prefix) or r["agent"] == prefix
                                                        for r in rows)]
    if notes:
        print("rows: " + "; ".join(notes))
    for r in records:  # the exact optimum: proven, or the interval the time limit left
        plan = r["extra"].get("plan", {})
        if r["agent"] == results.OPTIMAL_AGENT and "lower_bound_s" in plan and r["seed"] == records[0]["seed"]:
            proof = "proven optimal" if plan["status"] == "optimal" else f"best found, gap {100 * plan['gap']:.2f}% to its bound"
            fastest = min(x["latency_s"] for x in records if x["model"] == r["model"] and x["latency_s"] is not None)
            beaten = (f"; an agent found {fastest * 1e3:.3f} ms, the gaps above are to that"
                      if fastest < plan["latency_s"] * (1 - 1e-9) else "")
            if plan.get("best_from", "solver") != "solver":
                beaten += f"; its best placement is {plan['best_from']}'s, which it was given as a warm start"
            print(f"optimal on {r['model']}: {plan['latency_s'] * 1e3:.3f} ms, lower bound "
                  f"{plan['lower_bound_s'] * 1e3:.3f} ms ({proof}, {plan['solve_s']:.1f} s, {plan['schedule']} schedule"
                  f"{beaten})")
    learning = results.format_learning_table(rows)
    if learning:
        print("\nhow they learned (best = the best placement found, re-measured; predict = the agent's own "
              "deterministic placement; to N% = placements until within N% of the best known latency, median "
              "over seeds (seeds that got there/all)):")
        print(learning)
    transfer = _transfer_lines(records)
    if transfer:
        print("\n" + transfer)
    for skip in skipped:
        print(f"skipped {skip['agent']} on {skip['model']}: {skip['reason']}")
    written = list(extra_files) + _write_records(args, records, paths, summary=rows, skipped=skipped,
                                                 backend_settings=records[0]["backend_settings"])
    if "curves" in paths:
        written.append(results.plot_curves(paths["curves"], records, overwrite=args.overwrite))
    if "bars" in paths:
        written.append(results.plot_summary(paths["bars"], rows, reference_label=reference, overwrite=args.overwrite))
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("(nothing saved: pass --json PATH to keep the records, curves and, for train, the checkpoints)")
    return 0


def _transfer_lines(records: list[dict]) -> str:
    """For `evaluate --load`: one line per record saying what the saved agent's placement is worth on this model,
    zero-shot (budget 0: its own placement, the one placement measured) or after fine-tuning, against the
    reference and the best and worst single device (measured afresh, not counted as placements)."""
    lines = []
    for r in records:
        singles = r["extra"].get("single_device_latency_s")
        if not singles:
            continue
        how = ("zero-shot (predict only, 1 placement measured)" if r["placements_measured"] == 0 else
               f"fine-tuned for {r['placements_measured']} placements")
        latency = r["predict_latency_s"] if r["placements_measured"] == 0 else r["latency_s"]
        if latency is None:
            lines.append(f"{r['model']}, {r['agent']} seed {r['seed']}, {how}: the placement FAILED ({r['error']})")
            continue
        feasible = {name: v for name, v in singles.items() if v is not None}
        best = min(feasible, key=feasible.get)
        worst = max(feasible, key=feasible.get)
        vs = lambda other: f"{100 * (1 - latency / other):+.1f}%"  # noqa: E731 - positive = faster
        lines.append(f"{r['model']}, {r['agent']} seed {r['seed']}, {how}: {latency * 1e3:.3f} ms; vs reference "
                     f"({r['devices'][0]}-only) {vs(r['reference_latency_s'])}, vs best single device ({best}-only, "
                     f"{feasible[best] * 1e3:.3f} ms) {vs(feasible[best])}, vs worst ({worst}-only) {vs(feasible[worst])}")
    if not lines:
        return ""
    return "the saved agent on this model (positive % = faster):\n" + "\n".join(lines)


#: What the baseline rows of a table are (printed under it when they appear).
ROW_NOTES = (
    ("-only", "X-only = every op on device X"),
    ("openvino-auto", "openvino-auto = the one device OpenVINO's AUTO plugin picks"),
    ("openvino-hetero", "openvino-hetero = the op-by-op map OpenVINO's HETERO plugin makes by itself"),
    ("optimal", "optimal = the exact optimum of the simulated cost model (proven or with its bound, below)"),
)


# ------------------------------------------------------------------------------------ run commands
def _run_rows(args: argparse.Namespace, factories: dict, make_env, records: list, written: list,
              outputs: dict | None = None) -> None:
    """Each table row's agent on ``args.model`` for every seed, a fresh agent per seed (its feature families
    decide the env it observes), appending each record to `records` as it is made (so an interrupted command
    keeps them); with `outputs`, each seed's agent and best placement are saved and listed in `written`."""
    from tqdm.auto import tqdm

    seeds = evaluation.seed_list(args.seed if args.seed is not None else args.seeds)
    label_, model_path = (evaluation.model_label(args.model) if isinstance(args.model, str)
                          else ("+".join(map(str, args.model)), None))
    options = _key_values(args.agent_option, "--agent-option")
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
    results.write_json(placement_path, placement, overwrite=args.overwrite)
    picture = _draw(placement, base.graph, placement_path.with_suffix(".png"), args.overwrite)
    record["extra"].update(checkpoint=str(saved), placement_file=str(placement_path), placement_png=str(picture))
    return [saved, placement_path, picture]


#: What a placement file (``train``'s ``<stem>.placement.json``) holds besides ``by_op``; also what `show` reads.
PLACEMENT_KEYS = ("model", "model_path", "agent", "seed", "devices", "latency_s", "reference_latency_s",
                  "speedup_vs_reference", "n_submodels", "simulated", "placement")


def _draw(placement: dict, graph, out: Path, overwrite: bool) -> Path:
    """Write the picture of a placement record (`PLACEMENT_KEYS`) of `graph` to `out`."""
    from .render import save_placement

    return save_placement(out, graph, placement["placement"], placement["devices"], overwrite=overwrite,
                          latency_s=placement.get("latency_s"),
                          reference_latency_s=placement.get("reference_latency_s"),
                          n_submodels=placement.get("n_submodels"), simulated=placement.get("simulated"),
                          title=f"{placement['model']}, {placement['agent']}, seed {placement['seed']}")


def _cmd_show(args: argparse.Namespace) -> int:
    """Draw placements from a results JSON (every record that matches the filters), a placement file or a placed
    folder (`placement_gym.deploy`: its placement.json on its own model.xml)."""
    from .deploy import MODEL_XML, PLACEMENT_JSON
    from .models import load_graph
    from .schema import mismatch

    path = Path(args.file)
    folder = path if path.is_dir() else None  # a placed folder: the graph is its own model.xml
    if folder is not None:
        path = folder / PLACEMENT_JSON
    placements = results.read_placements(path)  # the file is checked before anything is built from it
    picked = [i for i, r in enumerate(placements.records)
              if (args.agent is None or r["agent"] == args.agent)
              and (args.model is None or r["model"] == args.model)
              and (args.seed is None or r["seed"] in args.seed)]
    chosen = [placements.records[i] for i in picked]
    if not chosen:
        seeds = None if args.seed is None else " ".join(map(str, args.seed))
        raise ValueError(f"no placement in {path} matches --agent {args.agent} --model {args.model} --seed {seeds}")
    if args.out and len(chosen) > 1:
        raise ValueError(f"--out names one file but {len(chosen)} placements match; narrow them with --agent, "
                         "--model or --seed")
    outs = [Path(args.out)] if args.out else [
        path.with_suffix(".png") if not placements.results_file else
        results.beside(path, f".{r['model']}.{r['agent']}.seed{r['seed']}.placement.png") for r in chosen]
    names = ["--out"] if args.out else [f"the picture of {r.get('model')}, {r.get('agent')}, seed {r.get('seed')}"
                                        f" (#{i + 1} in FILE)" for i, r in enumerate(chosen)]
    results.check_outputs(dict(zip(names, outs)), args.overwrite, inputs={"FILE": path})
    # Every graph is loaded and every placement checked against its graph before the first picture is drawn:
    # a bad record anywhere in the file leaves no pictures behind.
    graphs: dict = {}  # one graph per model named
    drawn = []
    for i, record in zip(picked, chosen):
        key = "model_path" if record.get("model_path") else "model"
        if record[key] not in graphs:
            try:
                graphs[record[key]] = load_graph(folder / MODEL_XML if folder is not None else record[key])
            except (ValueError, FileNotFoundError) as exc:  # a model the file names that cannot be loaded here
                raise mismatch(path, placements.field(i, key), record[key], f"a model that loads here ({exc})") \
                    from None
        placements.check_fits(i, graphs[record[key]].n_ops)
        drawn.append(graphs[record[key]])
    for record, graph, out in zip(chosen, drawn, outs):
        print(f"wrote {_draw(record, graph, out, args.overwrite)}")
    return 0


def _cmd_place(args: argparse.Namespace) -> int:
    """Plan a placement of one model with one agent and write it as a placed folder (`placement_gym.deploy`); on
    the real backend, time the written model against each device alone."""
    import numpy as np

    from . import deploy

    out = deploy.check_out(args.out, args.overwrite)  # refused before any work
    paths = _output_paths(args)
    _check_outputs(args, paths)
    seeds = evaluation.seed_list(args.seed if args.seed is not None else args.seeds)
    if len(seeds) != 1:
        raise ValueError(f"place writes one placement: give one seed (--seed S), not {len(seeds)}")
    args.seed = seeds
    make_env, backend = _env_factory(args)
    base = make_env(args.model).unwrapped
    if base.multi_graph:
        raise ValueError(f"place writes the placement of one model; --model {args.model} names several graphs")
    base.graph.require_model("place (it writes the placed OpenVINO model)")
    factories, saved = _one_agent(args, backend)
    if args.budget is None:  # a saved agent places zero-shot; any other plans or learns with the usual budget
        args.budget = 0 if saved else BUDGET
    records, stopped = _run_one_agent(args, factories, make_env, paths)
    if stopped is not None:
        return stopped
    working = [r for r in records if r["ok"] and r["latency_s"] is not None]
    if not working:
        print(f"placement-gym place: {args.agent} found no working placement of {args.model} "
              f"({records[0]['error'] if records else 'no run finished'}); nothing written", file=sys.stderr)
        return 1
    best = min(working, key=lambda r: r["latency_s"])  # an agent with several rows (single-device): the fastest
    placement = np.asarray(best["placement"], dtype=np.int64)
    measured = base.measure(placement)  # afresh, for its interval (free on the simulator)
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
    written = deploy.save_placed(out, base.graph.model, placement, devices, info=info, overwrite=args.overwrite)
    status = _report(args, records, [], paths, extra_files=[written])
    kind = "SIMULATED" if simulated else "measured"
    print(f"{written}: {best['agent']}'s placement ({np.bincount(placement, minlength=len(devices)).tolist()} "
          f"ops per device {list(backend.device_names)}, {measured.n_submodels} submodel(s)), {kind} "
          f"{_ms(measured.latency_s)} per inference ({base.objective}); compile it with "
          f"placement_gym.deploy.compile_placed({str(written)!r})")
    if not simulated:
        _print_against_singles(written, backend, base.objective, measured, base.reference_device)
    return status


def _ms(seconds: float | None) -> str:
    return "no latency" if seconds is None or seconds == float("inf") else f"{seconds * 1e3:.4g} ms"


def _print_against_singles(folder: Path, backend, objective: str, measured, reference_device: str) -> None:
    """Time the written folder as a user would compile it, against each device alone, and print the speedups
    with their 95% intervals (`placement_gym.deploy.measure_against_single_devices`, the backend's timing)."""
    from . import deploy

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


def _cmd_export(args: argparse.Namespace) -> int:
    """Write a placed folder (`placement_gym.deploy`) from a placement in a results file, a placement file, a
    placed folder or an agent checkpoint."""
    from . import deploy
    from .backends.base import OBJECTIVES
    from .backends.openvino import INFERENCE_PRECISION
    from .devices import open_devices
    from .models import load_graph

    out = deploy.check_out(args.out, args.overwrite)
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


def _one_agent(args: argparse.Namespace, backend) -> tuple[dict[str, Any], bool]:
    """The agent factories of `evaluate` and `place` (table row -> factory), and whether the agent is a saved one:
    the saved agent of ``--load``; else, for an agent that ships trained checkpoints (``imitation``), the one for
    the backend's device set and objective (`registry.pretrained_checkpoint`: a simulated preset's full device set;
    any other gets one line naming the shipped ones); else the agent built here from ``--agent-option``."""
    load, shipped = args.load, None
    if not load:
        from .backends.simulated import SimulatedBackend

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
                                    _key_values(args.agent_option, "--agent-option")), False


def _run_one_agent(args: argparse.Namespace, factories, make_env, paths) -> tuple[list, int | None]:
    """Run every row of `evaluate`'s or `place`'s one agent: ``(records, None)``, or, where Ctrl-C stopped the
    runs, the records so far and the exit status once `_interrupted` has kept and reported them."""
    records: list = []
    try:
        _run_rows(args, factories, make_env, records, [])
    except KeyboardInterrupt:
        return records, _interrupted(args, records, paths)
    evaluation.add_placements_to_within(records)
    return records, None


def _cmd_evaluate(args: argparse.Namespace) -> int:
    """Run one agent (every table row it stands for) on one model; `--load` evaluates a saved agent."""
    paths = _output_paths(args)
    _check_outputs(args, paths)
    make_env, backend = _env_factory(args)
    factories, _ = _one_agent(args, backend)
    records, stopped = _run_one_agent(args, factories, make_env, paths)
    if stopped is not None:
        return stopped
    return _report(args, records, [], paths)


def _cmd_train(args: argparse.Namespace) -> int:
    """Train an agent on a model for a budget and seeds; write the records, checkpoints and best placements."""
    paths = _output_paths(args)
    outputs = _train_outputs(args, evaluation.seed_list(args.seed if args.seed is not None else args.seeds))
    _check_outputs(args, paths, _train_output_names(args, outputs))
    cls = registry.load_agent_class(args.agent)
    options = _key_values(args.agent_option, "--agent-option")
    bare = args.agent.removeprefix(registry.HYBRID_PREFIX)
    label = args.agent if bare in registry.AGENTS else evaluation.agent_name(cls)
    if args.models:  # train over several graphs: the env draws one per reset
        args.model = args.models[0] if len(args.models) == 1 else list(args.models)
    make_env, _ = _env_factory(args)
    records: list = []
    written: list = []
    try:
        _run_rows(args, {label: lambda: registry.make_agent(cls, options, hybrid=registry.is_hybrid(args.agent))},
                  make_env, records, written, outputs)
    except KeyboardInterrupt:
        return _interrupted(args, records, paths, written)
    evaluation.add_placements_to_within(records)
    return _report(args, records, [], paths, extra_files=written)


def _compare_agent_options(items: Sequence[str] | None, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """compare's ``--agent-option [AGENT:]KEY=VALUE`` items -> {agent name: its constructor options}: a scoped one
    for that agent only, an unscoped one for every agent of `names` whose constructor takes KEY (a baseline
    without the setting is left alone). ValueError for an agent not compared or a KEY no compared agent takes."""
    scoped: dict[str, list[str]] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        agent, colon, key = key.rpartition(":")  # rpartition: a user's class path has a colon of its own
        if colon and agent not in names:
            raise ValueError(f"--agent-option {item!r} names agent {agent!r}, which is not compared "
                             f"(--agents {' '.join(names)})")
        scoped.setdefault(agent if colon else "", []).append(f"{key}{sep}{value}")
    common = _key_values(scoped.pop("", None), "--agent-option")
    options: dict[str, dict[str, Any]] = {name: {} for name in names}
    for key, value in common.items():
        takers = [name for name in names if _takes(name, key)]
        if not takers:
            raise ValueError(f"--agent-option {key}: none of the compared agents ({', '.join(names)}) takes it")
        for name in takers:
            options[name][key] = value
    for name, own in scoped.items():
        options[name].update(_key_values(own, "--agent-option"))
    return options


def _takes(name: str, key: str) -> bool:
    """Whether the constructor of agent `name` takes keyword `key` (False for an agent that cannot be loaded:
    compare reports it as missing). A constructor that passes ``**kwargs`` on is followed to its base class."""
    import inspect

    try:
        cls = registry.load_agent_class(name)
    except ValueError:
        return False
    if key in getattr(cls, "SEARCH_OPTIONS", ()):  # a search setting: taken by the agents built with a search
        return True
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters
        if key in parameters:
            return True
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return False
    return False


def _agent_rows(names: Sequence[str], device_names: Sequence[str],
                options: dict[str, dict[str, Any]] | None = None) -> tuple[dict, dict[str, str], list[dict]]:
    """``(factories, rows, missing)`` of compare's agents (`options`: each agent's constructor options, from
    `_compare_agent_options`): table row -> agent factory, table row -> registry name, and ``{"model": "*",
    "agent", "seeds": [], "reason"}`` for each agent that cannot be built here."""
    factories: dict = {}
    rows: dict[str, str] = {}  # compare --ray rebuilds each row's agent in a worker from its registry name
    missing = []
    for name in names:
        try:
            made = registry.agent_factories([name], device_names, (options or {}).get(name))
        except ValueError as exc:
            missing.append({"model": "*", "agent": name, "seeds": [], "reason": str(exc)})
            continue
        factories.update(made)
        rows.update({label: name for label in made})
    return factories, rows, missing


def _cmd_compare(args: argparse.Namespace) -> int:
    """Run several agents on several models and print the paper's table."""
    from tqdm.auto import tqdm

    paths = _output_paths(args)
    _check_outputs(args, paths)
    names = args.agents or list(registry.AGENTS)
    _check_agent_names(names)
    make_env, backend = _env_factory(args)
    options = _compare_agent_options(args.agent_option, names)  # bad options: an error before any run
    finished: list = []
    seeds = evaluation.seed_list(args.seed if args.seed is not None else args.seeds)
    try:  # around the bar: it is closed, its line ended, before an interruption is reported
        with tqdm(total=0, desc="compare", unit="run", disable=args.no_progress) as bar:
            def planned(n: int) -> None:
                bar.total += n
                bar.refresh()

            def done(record: dict) -> None:
                finished.append(record)
                bar.set_postfix_str(f"{record['model']}/{record['agent']}")
                bar.update(1)

            def skipped_run(skip: dict) -> None:
                bar.update(len(skip["seeds"]))
                tqdm.write(f"note: {skip['agent']} on {skip['model']} skipped: {skip['reason']}")

            def rows_known(rows: Sequence[str], missing: list[dict]) -> None:
                if missing:  # before any run: an agent asked for and not compared would go unnoticed
                    raise ValueError("; ".join(f"agent {skip['agent']!r}: {skip['reason']}" for skip in missing))
                args.planned_runs = len(args.models) * len(rows) * len(seeds)

            if args.ray:  # the driver never imports the agents: the Ray workers do, each in parallel
                records, skipped, missing = _compare_on_ray(args, names, backend, seeds, rows_known, planned, done)
            else:
                agents, rows, missing = _agent_rows(names, backend.device_names, options)
                rows_known(list(rows), missing)
                records, skipped = evaluation.compare(args.models, agents, make_env, args.budget, seeds,
                                                      on_record=done, on_plan=planned, on_skip=skipped_run)
    except KeyboardInterrupt:
        return _interrupted(args, finished, paths)
    return _report(args, records, missing + skipped, paths)


def _check_agent_names(names: Sequence[str]) -> None:
    """Refuse (ValueError, exit 2) an agent name that is neither registered nor a class that imports, before any
    work. A user's own class is imported here to check it; registered agents are not (``compare --ray``'s driver
    leaves importing them to the workers)."""
    for name in names:
        if name.removeprefix(registry.HYBRID_PREFIX) not in registry.AGENTS:
            registry.load_agent_class(name)


def _compare_on_ray(args: argparse.Namespace, names: Sequence[str], backend, seeds: list[int], rows_known,
                    on_plan, on_record) -> tuple[list[dict], list[dict], list[dict]]:
    """compare's runs as Ray tasks (`placement_gym.distributed.compare`), records in the serial order:
    ``(records, skipped, missing)``. The table's rows come from `_compare_plan` on the workers."""
    from . import distributed
    from .models import load_graph

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    real = not backend.simulated
    with _signal_handlers_kept():  # Ray's start replaces this process's SIGTERM handling with its own
        plan = distributed.warm_up(args.ray, _compare_plan, settings, names, real=real)
    rows_known(list(plan["rows"]), plan["missing"])
    on_plan(args.planned_runs)
    order = [(model, label, name, seed) for model in args.models for label, name in plan["rows"].items()
             for seed in seeds]
    size = {model: load_graph(model).n_ops for model in args.models}  # a job's weight: bigger graphs take longer
    jobs = [{"index": index, "model": model, "label": label, "agent": name, "seed": seed, "weight": size[model],
             "real": real, "args": settings} for index, (model, label, name, seed) in enumerate(order)]
    warm = set(plan["warm"])
    records, skipped = distributed.compare(jobs, _compare_job, args.ray, warm_started=lambda j: j["label"] in warm,
                                           failed=_failed_job, on_record=on_record)
    evaluation.add_placements_to_within(records)
    return records, skipped, plan["missing"]


#: Per worker process: the env factory of each command's settings, so the jobs of one (model, row) share a
#: graph and backend as the serial compare does (the exact optimum reuses its solve across seeds).
_JOB_ENVS: dict[str, tuple] = {}


def _job_env(settings: dict) -> tuple:
    """In a Ray worker: ``(make_env, backend)`` of compare's `settings`, built once per worker."""
    key = json.dumps(settings, sort_keys=True, default=str)
    if key not in _JOB_ENVS:
        _JOB_ENVS[key] = _env_factory(argparse.Namespace(**settings))
    return _JOB_ENVS[key]


def _compare_plan(settings: dict, names: Sequence[str]) -> dict:
    """In every Ray worker before compare --ray's runs (`placement_gym.distributed.warm_up`): import the agents
    and build the backend and graphs the runs will use (seconds, the workers in parallel, instead of on each
    worker's first run), and say what the table's rows are: ``{"rows": {row label: registry name}, "warm": [row
    labels whose agent takes warm starts], "missing": [agents that cannot be built]}``."""
    make_env, backend = _job_env(settings)
    factories, rows, missing = _agent_rows(names, backend.device_names,
                                           _compare_agent_options(settings.get("agent_option"), names))
    for model in settings["models"]:
        make_env(model)  # loads the graph once for this worker's runs (the env factory keeps it)
    warm = [label for label, factory in factories.items() if isinstance(factory(), evaluation.TakesWarmStarts)]
    return {"rows": rows, "warm": warm, "missing": missing}


def _compare_job(job: dict, warm_starts: list) -> dict:
    """One (agent, model, seed) run of ``compare --ray``, in a Ray worker: ``{"records", "skipped"}``."""
    args = argparse.Namespace(**job["args"])
    make_env, backend = _job_env(job["args"])
    names = job["args"].get("agents") or list(registry.AGENTS)
    options = _compare_agent_options(job["args"].get("agent_option"), names)[job["agent"]]
    agent = registry.agent_factories([job["agent"]], backend.device_names, options)[job["label"]]()
    label, path = evaluation.model_label(job["model"])
    try:
        env = make_env(job["model"], None if agent.feature_families is None else tuple(agent.feature_families))
        env.unwrapped.reference  # the reference first, as the serial compare pins it before any agent runs
        if isinstance(agent, evaluation.TakesWarmStarts):
            agent.warm_start(warm_starts)
        records = evaluation.evaluate(agent, env, args.budget, [job["seed"]], name=job["label"], model=label,
                                      model_path=path, relative=False)
    except evaluation.SKIPPABLE as exc:
        return _failed_job(job, exc)
    return {"records": records, "skipped": None}


def _failed_job(job: dict, exc: Exception) -> dict:
    """The outcome of a ``compare --ray`` run that gave no record: skipped, with why (`exc`), as the serial compare
    reports a run it skipped. For an error the run raised (in its worker), and for a run whose Ray task failed for
    good (its worker died on every retry: on the driver)."""
    label, _ = evaluation.model_label(job["model"])
    return {"records": [], "skipped": evaluation.skip_entry(label or str(job["model"]), job["label"], [job["seed"]],
                                                            exc)}


def _write_records(args: argparse.Namespace, records: list[dict], paths: dict[str, Path], **metadata) -> list[Path]:
    """Write `records` as the command's JSON (with its arguments and `metadata`) and CSV, where asked for."""
    metadata = {"command": args.command, "arguments": {k: v for k, v in vars(args).items() if k != "func"},
                "budget": args.budget, **metadata}
    if sys.argv and sys.argv[0].endswith("placement-gym"):  # run from the shell: keep the exact command line
        metadata["command_line"] = "placement-gym " + " ".join(sys.argv[1:])
    written = []
    if "json" in paths:
        written.append(results.write_records(paths["json"], records, overwrite=args.overwrite, **metadata))
    if "csv" in paths:
        written.append(results.write_csv(paths["csv"], records, overwrite=args.overwrite))
    return written


def _interrupted(args: argparse.Namespace, records: list[dict], paths: dict[str, Path],
                 written: Sequence[Path] = ()) -> int:
    """Ctrl-C or SIGTERM (`_signals_interrupt`): keep the runs that finished (records marked incomplete, with
    what was left), say so in one line, and return the exit status a shell reports for the signal."""
    planned = getattr(args, "planned_runs", None)
    left = None if planned is None else planned - len(records)
    saved = list(written)
    if records:
        evaluation.add_placements_to_within(records)
        saved += _write_records(args, records, paths, incomplete=True,
                                interrupted={"finished_runs": len(records), "planned_runs": planned, "left_runs": left})
    where = f"; wrote {', '.join(map(str, saved))} (marked incomplete)" if saved else (
        "; nothing saved" + ("" if "json" in paths else " (no --json given)"))
    print(f"placement-gym {args.command}: {_interruption()} after {len(records)} finished run(s)"
          f"{'' if left is None else f' of {planned}'}{where}", file=sys.stderr)
    return _exit_status()


#: The signal stopping the command `main` runs, set by `_signals_interrupt`'s handler; None while none came
#: (a KeyboardInterrupt then is Ctrl-C as Python delivers it, or raised by code). Kept here rather than on the
#: exception, because a library may replace the KeyboardInterrupt with one of its own (Ray's waits do).
_stopped_by: signal.Signals | None = None


def _interruption() -> str:
    """What stopped the command, for its one-line message: "interrupted", or "interrupted by SIGTERM"."""
    return "interrupted" if _stopped_by in (None, signal.SIGINT) else f"interrupted by {_stopped_by.name}"


def _exit_status() -> int:
    """128 + the number of the signal that stopped the command (130 for Ctrl-C, 143 for SIGTERM), as a shell
    reports a command a signal ended."""
    return 128 + (_stopped_by or signal.SIGINT)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM both raise KeyboardInterrupt (noting the signal in
    `_stopped_by`), so a SIGTERM (from ``timeout``, CI cancellation, ``docker stop``, Slurm) takes the path
    Ctrl-C takes: finished runs saved, one line, exit 128 + the signal's number. The previous handlers come
    back after, so `main` called from a program leaves its signal handling as it was.

    A signal is taken over only while Python handles it its default way: one the parent ignores (SIGINT of a
    background job, say) or that the calling program handles itself is left alone, and so is every signal
    outside the main thread, where Python cannot set handlers."""
    global _stopped_by
    _stopped_by = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum, default in defaults.items()
                if signal.getsignal(signum) is default}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _stopped_by = None


def _raise_interrupt(signum: int, frame: object) -> None:
    """`_signals_interrupt`'s handler: note the signal, raise KeyboardInterrupt."""
    global _stopped_by
    _stopped_by = signal.Signals(signum)
    raise KeyboardInterrupt(_stopped_by.name)


def _note_signal(signum: int, frame: object) -> None:
    """`_signals_deferred`'s handler: note the signal only (the first one is kept)."""
    global _stopped_by
    _stopped_by = _stopped_by or signal.Signals(signum)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """While the block runs, a SIGINT or SIGTERM that `_signals_interrupt` would raise is only noted in
    `_stopped_by`: writing the results of finished runs is never cut short (a KeyboardInterrupt there would lose
    every record). The caller checks `_stopped_by` after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = {signum: signal.signal(signum, _note_signal) for signum in (signal.SIGINT, signal.SIGTERM)
             if signal.getsignal(signum) is _raise_interrupt}
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, _raise_interrupt)


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Put SIGINT's and SIGTERM's handlers back as they were before the block, once it ends.

    For a block that starts Ray (``compare --ray``): ``ray.init`` gives the driver SIGTERM handlers of its own
    (a Python one that exits at once, and a C++ one that prints a stack trace and dies), which would skip the
    saving of finished runs that `_signals_interrupt` arranges."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None:  # None: set outside Python; it cannot be put back from here
                signal.signal(signum, handler)


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
    `_check_outputs`' messages."""
    where = "named by --save" if args.save else "beside --json (--save moves it)"
    named = {}
    for seed, (checkpoint, placement) in outputs.items():
        whose = "" if len(outputs) == 1 else f"seed {seed} "
        named[f"the {whose}checkpoint {where}"] = checkpoint
        named[f"the {whose}best-placement file {where}"] = placement
        named[f"the {whose}best-placement picture {where}"] = placement.with_suffix(".png")
    return named


class _Seeds(argparse.Action):
    """``--seed S...``, each seed once (`evaluation.seed_list`), refused while the arguments are parsed: a seed
    given twice would run twice, and its outputs, named by seed, collide once the runs are done. One line and
    exit 2, as the commands refuse bad input."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        try:
            evaluation.seed_list(values)
        except ValueError as exc:
            parser.exit(2, f"{parser.prog}: error: argument {option_string}: {exc}\n")
        setattr(namespace, self.dest, values)


#: Placements each agent may measure per seed, unless --budget says (`place` of a saved agent: 0, zero-shot).
BUDGET = 500


def _add_run_arguments(parser: argparse.ArgumentParser, budget_help: str | None = None) -> None:
    """Arguments shared by `train`, `evaluate`, `compare` and `place` (`budget_help`: a command whose --budget
    defaults to None, decided by the command, says how)."""
    parser.add_argument("--backend", default="auto", help="openvino, simulated or auto (default)")
    parser.add_argument("--devices", nargs="+", help="device specs, e.g. CPU 'CPU[INFERENCE_NUM_THREADS=1]' "
                        "(default: the backend's own choice)")
    parser.add_argument("--profile", help="simulated backend: a preset name (paper, ai_pc, server, edge: see "
                        "`placement-gym info`) or a profile JSON file")
    parser.add_argument("--objective", choices=["latency", "throughput"],
                        help="what a placement is scored by: one synchronous inference (latency, default) or "
                        "steady-state seconds per inference with requests in flight (throughput)")
    parser.add_argument("--unsupported", choices=["fail", "repair"], default="fail",
                        help="an op placed on a device that cannot run it fails the placement (default) or is "
                        "moved to its fastest device that can (repair)")
    parser.add_argument("--backend-option", action="append", metavar="KEY=VALUE",
                        help="extra backend setting (repeatable), e.g. schedule=parallel")
    parser.add_argument("--budget", type=int, default=BUDGET if budget_help is None else None,
                        help=budget_help or "placements each agent may measure per seed")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0..n-1)")
    parser.add_argument("--seed", type=int, nargs="+", action=_Seeds,
                        help="the seeds themselves, each once (overrides --seeds)")
    parser.add_argument("--warmup", type=int, help="real backend: untimed inferences per placement (default 3)")
    parser.add_argument("--repeats", type=int, help="real backend: timed inferences per placement (default 20)")
    parser.add_argument("--json", help="write the records as JSON here (CSV and the curves PNG next to it; a path "
                        "ending in .json.gz is written gzip-compressed)")
    parser.add_argument("--csv", help="write one CSV row per record here")
    parser.add_argument("--plot", help="write the best-so-far curves (PNG) here")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the one-agent commands, `train` and `evaluate`."""
    parser.add_argument("--agent", required=True,
                        help=f"registered agent ({', '.join(registry.AGENTS)}) or your own class as "
                        "'package.module:Class' or 'path/to/file.py:Class'; prefix 'hybrid:' for the search layer "
                        "around it (hybrid:hsdag)")
    parser.add_argument("--model", default="resnet", help="zoo name, dataset entry, synthetic:N[:SEED] or model file "
                        "(default resnet)")
    parser.add_argument("--agent-option", action="append", metavar="KEY=VALUE",
                        help="agent constructor argument (repeatable, JSON values), e.g. max_levels=2")
    parser.add_argument("--tensorboard", metavar="DIR", help="TensorBoard log directory (one run per seed)")


def _add_load_argument(parser: argparse.ArgumentParser) -> None:
    """``--load`` of `evaluate` and `place`."""
    parser.add_argument("--load", help="a saved agent: --budget 0 evaluates its policy as it is, a budget "
                        "fine-tunes it (its own placement measured first, then the heuristic start's); for "
                        "--agent imitation on a simulated preset the checkpoint shipped for it is the default")


# ----------------------------------------------------------------------------------------- benchmark
def _cmd_benchmark(args: argparse.Namespace) -> int:
    """Run one agent on a benchmark suite, each run written as it finishes, and rank it among the suite's
    reference results (`placement_gym.benchmark`); on a suite with proven optima (``sanity``) run ``random`` too and
    give the sanity verdict (`placement_gym.sanity`)."""
    from . import benchmark, sanity

    suite = benchmark.load_suite(args.suite)
    options = _key_values(args.agent_option, "--agent-option")
    reference = benchmark.reference_records(suite, args.reference)  # refused here if of another version
    optima = sanity.load_optima(suite) if sanity.optima_path(suite).is_file() else None
    if args.check and optima is None:
        raise ValueError(f"--check gives the sanity verdict, which needs a suite with proven optima (sanity); suite "
                         f"{suite.name!r} has none")
    if args.json:
        results.check_outputs({"--json": Path(args.json)}, args.overwrite)  # before the minutes of running
    out = Path(args.out or f"benchmark-{results.safe_name(suite.name)}-{results.safe_name(Path(args.agent).name)}")
    runs = [(args.agent, out, options)]
    if optima is not None and args.agent != sanity.RANDOM_AGENT:  # the verdict compares with random's runs
        runs.append((sanity.RANDOM_AGENT, out / sanity.RANDOM_AGENT, {}))
    done: list[list[dict]] = []
    for agent, folder, agent_options in runs:
        records = _run_benchmark(args, suite, agent, folder, agent_options, reference)
        if records is None:
            return _exit_status()
        done.append(records)
    records, others = done[0], [r for rs in done[1:] for r in rs]
    mine = list(dict.fromkeys(r["agent"] for r in records))
    extra = others + (sanity.optima_records(optima) if optima is not None else [])
    rows = benchmark.leaderboard(records + extra + [r for r in reference if r["agent"] not in mine], suite)
    table = benchmark.leaderboard_markdown(rows, highlight=mine)
    written = [results.write_json(out / "leaderboard.json", {**suite.versions(), "agents": mine, "rows": rows},
                                  overwrite=True),
               results.write_text(out / "leaderboard.md", table + "\n", overwrite=True)]
    for preset, objective in suite.cases:
        case = f"{preset}:{objective}"
        shown = [r for r in records + others + reference if r["case"] == case and r.get("curve") is not None]
        written.append(results.plot_curves(out / f"curves.{preset}_{objective}.png", shown, overwrite=True,
                                           title=f"{suite.name} suite, {case} (SIMULATED)"))
    print(table)
    verdict = [] if optima is None else sanity.sanity_check(records + others, suite, optima)
    if verdict:
        written += _print_sanity(out, suite, verdict, mine)
    elif not reference:
        print(f"note: suite {suite.name} ships no reference results: the table holds your agent alone "
              "(benchmarks/leaderboard/reference_results.py makes them)", file=sys.stderr)
    if args.json:
        written.append(_write_benchmark_json(args, suite, records + others, mine, verdict))
    print(f"wrote {', '.join(map(str, written))}", file=sys.stderr)
    if all(not r.get("ok", True) for r in records):
        return 1
    return 1 if args.check and any(not row["passed"] for row in verdict if row["agent"] in mine) else 0


def _print_sanity(out: Path, suite, verdict: list[dict], mine: list[str]) -> list[Path]:
    """Print the sanity verdict of the agents `mine` (a table, then one line on stderr) and write every row
    (random's own too: whether random alone reaches an optimum says what a case tests) beside the runs."""
    from . import sanity

    rows = [row for row in verdict if row["agent"] in mine]
    text = sanity.sanity_markdown(rows)
    print("\n" + text)
    passed = sum(row["passed"] for row in rows)
    print(f"sanity: {'PASS' if passed == len(rows) else 'FAIL'} ({passed} of {len(rows)} rows of {', '.join(mine)} "
          "passed)", file=sys.stderr)
    return [results.write_json(out / "sanity.json", {**suite.versions(), "rows": verdict}, overwrite=True),
            results.write_text(out / "sanity.md", text + "\n", overwrite=True)]


def _run_benchmark(args: argparse.Namespace, suite, agent: str, out: Path, options: dict,
                   reference: list[dict]) -> list[dict] | None:
    """`benchmark.run_suite` of `agent` into `out` with a progress bar and an up-front estimate; None when a
    signal interrupted it (every finished run is in `out`: the message says how to resume)."""
    from tqdm.auto import tqdm

    from . import benchmark

    finished: list[dict] = []
    with tqdm(total=0, desc=f"benchmark {agent}", unit="run", disable=args.no_progress) as bar:
        def planned(total: int, todo: list) -> None:
            span = benchmark.estimate_seconds(todo, reference)
            rough = "" if span is None else (f", roughly {_duration(span[0])} to {_duration(span[1])} (what the "
                                             "reference agents took, fastest to slowest)")
            tqdm.write(f"suite {suite.name} v{suite.version} (cost model v{benchmark.COST_MODEL_VERSION}, SIMULATED): "
                       f"{total} runs of {agent} ({len(suite.pairs())} (case, model) pairs x {len(suite.seeds)} "
                       f"seeds, {suite.budget} placements each): {total - len(todo)} done already, "
                       f"{len(todo)} to run{rough}; each written to {out} as it finishes", file=sys.stderr)
            bar.total = len(todo)
            bar.refresh()

        def done(record: dict) -> None:
            finished.append(record)
            bar.set_postfix_str(f"{record['case']}/{record['model']}")
            bar.update(1)

        try:
            if args.ray:  # started here: Ray's start replaces this process's SIGTERM handling, which is put back
                from . import distributed

                with _signal_handlers_kept():
                    distributed.connect(args.ray)
            return benchmark.run_suite(agent, suite, out=out, resume=args.resume, options=options, ray=args.ray,
                                       on_plan=planned, on_record=done)
        except KeyboardInterrupt:
            print(f"placement-gym benchmark: {_interruption()} after {len(finished)} run(s) of {agent} in this "
                  f"session; every finished run is in {out}: add --resume to finish it", file=sys.stderr)
            return None


def _write_benchmark_json(args: argparse.Namespace, suite, records: list[dict], agents: list[str],
                          verdict: list[dict]) -> Path:
    """``benchmark --json``: the runs' records (`benchmark.write_results`, random's included on a sanity suite),
    with the command, the date, the versions, the machine, your agents and the sanity verdict's rows."""
    import datetime
    import shlex

    from . import benchmark

    words = ["placement-gym", "benchmark", "--suite", args.suite, "--agent", args.agent]
    for option in args.agent_option or []:
        words += ["--agent-option", option]
    return benchmark.write_results(
        args.json, suite, records, overwrite=args.overwrite, command=shlex.join(words),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        versions=results.versions(), machine=results.machine(), agents=agents, sanity=verdict)


def _duration(seconds: float) -> str:
    """`seconds` as a rough duration for people ("40 s", "12 min", "3.5 h")."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


# ----------------------------------------------------------------------------------------- calibrate
def _cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure a device profile for the simulated backend on this machine's real devices."""
    from .backends.calibration import calibrate
    from .devices import two_cpu_devices

    out = Path(args.out)
    results.check_outputs({"--out": out}, args.overwrite,  # checked before the minutes of measuring
                          inputs={f"--model {model}": model for model in args.model})
    profile = calibrate(args.devices or two_cpu_devices(), args.model, runs=args.runs, warmup=args.warmup,
                        placements=args.placements, seed=args.seed, statistic=args.statistic, clock=args.clock,
                        name=args.name or out.stem, progress=print)
    profile.save(out, overwrite=args.overwrite)
    print(f"wrote {out}; use it with DevicePlacementEnv(model, backend='simulated', profile='{out}')")
    return 0


class _ShowDefaults(argparse.HelpFormatter):
    """``--help`` shows each option's default (where it has one its help does not already state), so that the
    defaults (budget 500, 3 seeds, ...) are read where the options are."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text and action.option_strings:
            shown = " ".join(map(str, action.default)) if isinstance(action.default, list) else action.default
            text += f" (default: {shown})"
        return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="placement-gym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, formatter_class=_ShowDefaults, **kwargs)

    info = command("info", help="devices, zoo models and graph statistics")
    info.add_argument("--model", help="zoo name, synthetic:N[:SEED] or model file to print graph statistics for")
    info.add_argument("--dataset", action="store_true",
                      help="list the graph dataset (name, family, split, compute ops, edges); builds and caches the "
                           "entries not cached yet first (seconds each, a few minutes for all)")
    info.add_argument("--json", action="store_true", help="print machine-readable JSON")
    info.set_defaults(func=_cmd_info)

    evaluate = command("evaluate", help="run one agent on one model for a budget and seeds")
    _add_agent_arguments(evaluate)
    _add_load_argument(evaluate)
    _add_run_arguments(evaluate)
    evaluate.set_defaults(func=_cmd_evaluate)

    compare = command("compare", help="run several agents on several models; print the paper's table")
    compare.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"], help="zoo names, synthetic:N[:SEED] or model files")
    compare.add_argument("--agents", nargs="+",
                         help=f"agent names (default: every registered agent: {', '.join(registry.AGENTS)}); "
                              "prefix 'hybrid:' for an agent with the search layer around it (hybrid:hsdag)")
    compare.add_argument("--ray", metavar="ADDRESS",
                         help="run the (agent, model, seed) runs as Ray tasks: local:N (N at once on this machine) or "
                              "a Ray cluster address whose measurement nodes offer the 'placement_bench' resource "
                              "(pip install -e '.[distributed]'; docs/ray.md)")
    compare.add_argument("--agent-option", action="append", metavar="[AGENT:]KEY=VALUE",
                         help="agent constructor argument (repeatable, JSON values): AGENT:KEY=VALUE for one agent "
                              "(e.g. ppo:ent_coef=0.03), KEY=VALUE for every compared agent that takes KEY (e.g. "
                              "learning_rate=0.01; a search setting such as split_patience=50 turns that component "
                              "of the search layer on: agents.search.config)")
    _add_run_arguments(compare)
    compare.set_defaults(func=_cmd_compare)

    train = command("train", help="train an agent on a model; save its records, checkpoint and best placement")
    _add_agent_arguments(train)
    _add_run_arguments(train)
    train.add_argument("--models", nargs="+", metavar="MODEL",
                       help="train one agent over several graphs (replaces --model): zoo names, synthetic:N[:SEED], "
                       "model files, dataset entries, or dataset:SPLIT (train, val, test); each reset draws one")
    train.add_argument("--save", help="checkpoint path (default: next to --json, as <stem>.pt and "
                       "<stem>.placement.json; <stem>.seedN.* with several seeds)")
    train.set_defaults(func=_cmd_train)

    show = command("show", help="draw placements (ops coloured by device, cuts marked) as PNG")
    show.add_argument("file", help="a results JSON (--json of train/evaluate/compare), a placement file "
                      "(train's <stem>.placement.json) or a placed folder (place/export --out)")
    show.add_argument("--agent", help="only this agent's records")
    show.add_argument("--model", help="only this model's records")
    show.add_argument("--seed", type=int, nargs="+", help="only these seeds' records (as --seed S... of the run "
                      "commands)")
    show.add_argument("--out", help="PNG path (one placement); default: next to FILE, named by model, agent, seed")
    show.add_argument("--overwrite", action="store_true", help="replace existing PNG files")
    show.set_defaults(func=_cmd_show)

    place = command("place", help="plan a placement with one agent and write the placed model (model.xml, .bin, "
                    "placement.json, README.md) to compile and ship")
    _add_agent_arguments(place)
    _add_load_argument(place)
    _add_run_arguments(place, budget_help=f"placements the agent may measure (default: 0 for a saved agent, --load "
                       f"or the checkpoint shipped for --agent imitation: its own placement, zero-shot; {BUDGET} for "
                       "any other)")
    place.add_argument("--out", required=True, metavar="DIR", help="folder to write (refused if it holds anything, "
                       "unless --overwrite)")
    place.set_defaults(func=_cmd_place, seeds=1)

    export = command("export", help="write the placed model folder of a placement from a results file, placement "
                     "file or agent checkpoint")
    export.add_argument("file", help="a results JSON (--json of train/evaluate/compare/place), a placement file "
                        "(train's <stem>.placement.json), a placed folder or an agent checkpoint (its best placement)")
    export.add_argument("--model", required=True, help="the model the placement is of: zoo name, dataset entry or "
                        "model file")
    export.add_argument("--out", required=True, metavar="DIR", help="folder to write (refused if it holds anything, "
                        "unless --overwrite)")
    export.add_argument("--agent", help="a results file: only this agent's records (default: the fastest record of "
                        "the model)")
    export.add_argument("--seed", type=int, help="a results file: only this seed's records")
    export.add_argument("--overwrite", action="store_true", help="replace the placed files in an existing --out")
    export.set_defaults(func=_cmd_export)

    bench = command("benchmark", help="run your agent on a versioned suite and rank it among the shipped "
                           "reference results (resumable)")
    bench.add_argument("--agent", required=True,
                       help="registered agent, 'package.module:Class' or 'path/to/file.py:Class' (prefix 'hybrid:' "
                       "for the search layer around it)")
    bench.add_argument("--suite", default="quick", help="quick, standard, full, sanity, or a suite .json file")
    bench.add_argument("--out", help="folder for the runs and the leaderboard (default: benchmark-SUITE-AGENT)")
    bench.add_argument("--resume", action="store_true", help="finish the benchmark in --out, re-running nothing "
                       "that finished")
    bench.add_argument("--reference", help="reference results to rank against (default: those the suite ships)")
    bench.add_argument("--agent-option", action="append", metavar="KEY=VALUE",
                       help="agent constructor argument (repeatable, JSON values)")
    bench.add_argument("--ray", metavar="ADDRESS", help="run the runs as Ray tasks: local:N or a cluster address")
    bench.add_argument("--json", help="write the records (random's too on the sanity suite) and the sanity verdict "
                       "as JSON here")
    bench.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    bench.add_argument("--check", action="store_true", help="sanity suite: exit 1 when a row of the agent fails the "
                       "sanity verdict (placement_gym.sanity)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(func=_cmd_benchmark)

    calibrate = command("calibrate", help="measure a device profile for the simulated backend "
                               "(per-op OpenVINO profiling + real split placements)")
    calibrate.add_argument("--devices", nargs="+",
                           help="real OpenVINO device specs (default: placement_gym.two_cpu_devices(), i.e. CPU and "
                           "a bf16 virtual CPU where the CPU runs bf16, else a one-thread virtual CPU)")
    # --models and --repeats as in the run commands (--model and --runs: their earlier names, still taken)
    calibrate.add_argument("--models", "--model", dest="model", nargs="+", default=["resnet"],
                           help="zoo names or model files to profile")
    calibrate.add_argument("--out", default="profile.json", help="profile JSON to write")
    calibrate.add_argument("--repeats", "--runs", dest="runs", type=int, default=20,
                           help="timed inferences per measurement (see --statistic)")
    calibrate.add_argument("--warmup", type=int, default=3, help="untimed inferences after each compile")
    calibrate.add_argument("--placements", type=int, default=8,
                           help="real split placements per model to fit link and boundary costs")
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
    """Run the command of `argv` (default: the process's arguments); its exit status: 0, 1 (no result), 2 (bad
    input), or 128 + the signal that interrupted it (130 for Ctrl-C, 143 for SIGTERM)."""
    args = build_parser().parse_args(argv)
    with _signals_interrupt():
        try:
            return args.func(args)
        except (ValueError, FileNotFoundError, FileExistsError, TypeError) as exc:
            print(f"placement-gym {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # before any run finished (the run commands keep finished runs themselves)
            print(f"placement-gym {args.command}: {_interruption()}; nothing was finished, nothing saved",
                  file=sys.stderr)
            return _exit_status()


if __name__ == "__main__":
    sys.exit(main())
