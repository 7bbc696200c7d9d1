"""The `placement-gym` command: parse arguments, run agents (`evaluation`), present results (`results`).

Subcommands: ``info`` (devices, models, graph statistics), ``train``, ``evaluate``, ``compare``, ``benchmark``
(an agent on a versioned suite, ranked among reference results), ``show`` (a picture of a placement),
``place`` and ``export`` (a placed model folder to compile and ship: `placement_gym.deploy`),
``calibrate`` (a measured profile for the simulated backend). Agents are found by
name in `registry`, so importing `placement_gym` never imports the agents.

This module is the argument parsing (`build_parser`) and `main`, which runs a command under the signal handling
of `placement_gym.commands.signals`; each command's work is a function ``cmd_NAME(args) -> exit status`` in
`placement_gym.commands` (``info``, ``run``: train and evaluate, ``compare``, ``deploy``: show, place and export,
``benchmark``, ``calibrate``), and ``compare --ray``'s jobs are `placement_gym.distributed`'s.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from . import evaluation, registry
from . import files, results  # noqa: F401 - `cli.results`: the module the commands write through (tests patch it here)
from .commands import signals
from .commands.benchmark import cmd_benchmark
from .commands.calibrate import cmd_calibrate
from .commands.compare import cmd_compare
from .commands.deploy import cmd_export, cmd_place, cmd_show
from .commands.info import cmd_info
from .commands.run import cmd_evaluate, cmd_train
from .commands.sim2real import cmd_sim2real
from .commands.settings import BUDGET
from .commands.sim2real import DEFAULT_BUDGETS
from .schema import MAX_OPS

#: The most split placements `calibrate --placements` measures per model (each is a real compile and
#: measurement: seconds; a thousand is hours).
MAX_CALIBRATION_PLACEMENTS = 1000


class _Checked(argparse.Action):
    """An option whose value (a list, with ``nargs``) `check` turns into what the command takes, or refuses with a
    ValueError: refused while the arguments are parsed, in one line and exit 2, as the commands refuse bad input
    (argparse's own errors print the usage too)."""

    def __init__(self, *args: Any, check: Callable[[Any], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check = check

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        try:
            value = self.check(values)
        except ValueError as exc:
            parser.exit(2, f"{parser.prog}: error: argument {option_string}: {exc}\n")
        setattr(namespace, self.dest, value)


def _seeds(values: list[int]) -> list[int]:
    """``--seed S...``, each seed once (`evaluation.seed_list`): a seed given twice would run twice, and its
    outputs, named by seed, collide once the runs are done."""
    evaluation.seed_list(values)
    return values


def _count(low: int, high: int | None, what: str) -> Callable[[Any], Any]:
    """A `_Checked` check: an integer from `low` to `high` (None: no upper bound; `what` it counts, for the
    message), or a list of them (``nargs``). Bounds that keep a command's memory and time in its scale: each of
    calibrate's placements is a real compile and measurement, and it draws them all first (``--placements 10**9``
    took gigabytes before measuring anything)."""
    expected = f"{what} from {low} to {high}" if high is not None else f"{what}, an integer >= {low}"

    def one(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer; expected {expected}") from None
        if value < low or (high is not None and value > high):
            raise ValueError(f"found {value}; expected {expected}")
        return value

    return lambda values: [one(v) for v in values] if isinstance(values, list) else one(values)


#: ``--budget`` and sim2real's ``--sim-budget`` / ``--real-budget``: what `evaluation.check_budget` takes, checked
#: here so that a bad value is refused before anything is built (``agent.learn`` is where a Python caller's is).
_budget = _count(0, None, "placements to measure")


def _profile_name(text: str) -> str:
    """A `_Checked` check of calibrate's ``--name``: a name the profile file's reader takes back
    (`profiles.PROFILE_FILE`), so that the profile written is one ``--profile`` reads."""
    from .backends.profiles import PROFILE_FILE
    from .schema import check

    try:
        return check(text, PROFILE_FILE.optional["name"], "--name", error=ValueError)
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("--name: field (the whole file): ")) from None


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
    parser.add_argument("--budget", action=_Checked, check=_budget, default=BUDGET if budget_help is None else None,
                        help=budget_help or "placements each agent may measure per seed")
    parser.add_argument("--seeds", action=_Checked, check=_count(1, None, "a number of seeds"), default=3,
                        help="number of seeds (0..n-1)")
    parser.add_argument("--seed", type=int, nargs="+", action=_Checked, check=_seeds,
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
    info.set_defaults(func=cmd_info)

    evaluate = command("evaluate", help="run one agent on one model for a budget and seeds")
    _add_agent_arguments(evaluate)
    _add_load_argument(evaluate)
    _add_run_arguments(evaluate)
    evaluate.set_defaults(func=cmd_evaluate)

    compare = command("compare", help="run several agents on several models; print the paper's table")
    compare.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"], help="zoo names, synthetic:N[:SEED] or model files")
    compare.add_argument("--agents", nargs="+",
                         help=f"agent names (default: every registered agent: {', '.join(registry.AGENTS)}); "
                              "prefix 'hybrid:' for an agent with the search layer around it (hybrid:hsdag)")
    compare.add_argument("--resume", action="store_true",
                         help="go on with the interrupted compare whose results --json names: its finished runs are "
                              "kept, not run again, and the file is rewritten with every run (same settings only)")
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
    compare.set_defaults(func=cmd_compare)

    train = command("train", help="train an agent on a model; save its records, checkpoint and best placement")
    _add_agent_arguments(train)
    _add_run_arguments(train)
    train.add_argument("--models", nargs="+", metavar="MODEL",
                       help="train one agent over several graphs (replaces --model): zoo names, synthetic:N[:SEED], "
                       "model files, dataset entries, or dataset:SPLIT (train, val, test); each reset draws one")
    train.add_argument("--save", help="checkpoint path (default: next to --json, as <stem>.pt and "
                       "<stem>.placement.json; <stem>.seedN.* with several seeds)")
    train.set_defaults(func=cmd_train)

    show = command("show", help="draw placements (ops coloured by device, cuts marked) as PNG")
    show.add_argument("file", help="a results JSON (--json of train/evaluate/compare), a placement file "
                      "(train's <stem>.placement.json) or a placed folder (place/export --out)")
    show.add_argument("--agent", help="only this agent's records")
    show.add_argument("--model", help="only this model's records")
    show.add_argument("--seed", type=int, nargs="+", help="only these seeds' records (as --seed S... of the run "
                      "commands)")
    show.add_argument("--out", help="PNG path (one placement); default: next to FILE, named by model, agent, seed")
    show.add_argument("--overwrite", action="store_true", help="replace existing PNG files")
    show.set_defaults(func=cmd_show)

    place = command("place", help="plan a placement with one agent and write the placed model (model.xml, .bin, "
                    "placement.json, README.md) to compile and ship")
    _add_agent_arguments(place)
    _add_load_argument(place)
    _add_run_arguments(place, budget_help=f"placements the agent may measure (default: 0 for a saved agent, --load "
                       f"or the checkpoint shipped for --agent imitation: its own placement, zero-shot; {BUDGET} for "
                       "any other)")
    place.add_argument("--out", required=True, metavar="DIR", help="folder to write (refused if it holds anything, "
                       "unless --overwrite)")
    place.set_defaults(func=cmd_place, seeds=1)

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
    export.set_defaults(func=cmd_export)

    sim2real = command("sim2real", help="train a learned agent on a simulated profile, train it on with real "
                       "measurements, and time both phases' placements for real")
    _add_agent_arguments(sim2real)
    sim2real.add_argument("--profile", required=True, help="the simulated phase's profile: a profile JSON calibrated "
                          "on --devices (placement-gym calibrate) or a preset name with as many devices")
    sim2real.add_argument("--devices", nargs="+", help="the real devices, in the profile's device order (default: "
                          "placement_gym.two_cpu_devices())")
    sim2real.add_argument("--sim-budget", action=_Checked, check=_budget, help="placements of the simulated phase "
                          f"(default: the agent's own schedule where it has one, else {DEFAULT_BUDGETS[0]})")
    sim2real.add_argument("--real-budget", action=_Checked, check=_budget, help="real measured placements of the "
                          f"real phase (default: the agent's own schedule where it has one, else {DEFAULT_BUDGETS[1]})")
    sim2real.add_argument("--baselines", nargs="*", default=["dp"], help="planners run on the profile whose "
                          "placements are timed for real beside the agent's (none: no planner)")
    sim2real.add_argument("--objective", choices=["latency", "throughput"], help="what a placement is scored by "
                          "(default latency)")
    sim2real.add_argument("--unsupported", choices=["fail", "repair"], default="fail",
                          help="an op placed on a device that cannot run it fails the placement or is moved")
    sim2real.add_argument("--seed", type=int, default=0, help="the seed of both phases")
    sim2real.add_argument("--warmup", type=int, help="real backend: untimed inferences per placement (default 3)")
    sim2real.add_argument("--repeats", type=int, help="real backend: timed inferences per placement (default 20)")
    sim2real.add_argument("--json", help="write both phases' records and the real comparison as JSON here")
    sim2real.add_argument("--save", help="write the agent after both phases (a checkpoint) here")
    sim2real.add_argument("--overwrite", action="store_true", help="replace existing output files")
    sim2real.set_defaults(func=cmd_sim2real, csv=None, plot=None, backend="openvino")

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
    bench.set_defaults(func=cmd_benchmark)

    calibrate = command("calibrate", help="measure a device profile for the simulated backend "
                               "(per-op OpenVINO profiling + real split placements)")
    calibrate.add_argument("--devices", nargs="+",
                           help="real OpenVINO device specs (default: placement_gym.two_cpu_devices(), i.e. CPU and "
                           "a bf16 virtual CPU where the CPU runs bf16, else a one-thread virtual CPU)")
    # --models and --repeats as in the run commands (--model and --runs: their earlier names, still taken)
    calibrate.add_argument("--models", "--model", dest="model", nargs="+", default=["resnet"],
                           help="zoo names or model files to profile")
    calibrate.add_argument("--out", default="profile.json", help="profile JSON to write")
    calibrate.add_argument("--repeats", "--runs", dest="runs", action=_Checked,
                           check=_count(1, 10_000, "timed inferences"), default=20,
                           help="timed inferences per measurement (see --statistic)")
    calibrate.add_argument("--warmup", action=_Checked, check=_count(0, 1000, "untimed inferences"), default=3,
                           help="untimed inferences after each compile")
    calibrate.add_argument("--placements", action=_Checked, check=_count(0, MAX_CALIBRATION_PLACEMENTS, "placements"),
                           default=8,
                           help="real split placements per model (blocks, random) to fit the boundary costs with the "
                           "segment sweep")
    calibrate.add_argument("--segments", action=_Checked, check=_count(1, MAX_OPS, "segment counts"), nargs="*",
                           default=[1, 2, 4, 8, 16],
                           help="segment counts of the sweep: each model in k contiguous segments alternating "
                           "between two devices, measured for the boundary fit (default 1 2 4 8 16; none: the split "
                           "placements alone)")
    calibrate.add_argument("--segment-rounds", type=int, default=2,
                           help="interleaved rounds of the sweep and of each device's whole-model latency (the "
                           "fastest counts)")
    calibrate.add_argument("--seed", type=int, default=0, help="seed of the split placements")
    calibrate.add_argument("--statistic", choices=["median", "min"], default="median",
                           help="latency of timed runs: median (as the real backend) or min (robust on a busy machine)")
    calibrate.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                           help="time runs by wall clock (as the real backend) or process CPU time (load-robust, "
                           "for one-thread devices only)")
    calibrate.add_argument("--name", action=_Checked, check=_profile_name,
                           help="profile name (default: the file name)")
    calibrate.add_argument("--overwrite", action="store_true", help="replace an existing profile file")
    calibrate.set_defaults(func=cmd_calibrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of `argv` (default: the process's arguments); its exit status: 0, 1 (no result), 2 (bad
    input), or 128 + the signal that interrupted it (130 for Ctrl-C, 143 for SIGTERM)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "calibrate" and args.name is None:  # the profile is named after its file: a name too
        _profile_name_or_exit(parser, Path(args.out).stem)
    with signals.signals_interrupt():
        try:
            return args.func(args)
        except (ValueError, TypeError) as exc:
            print(f"placement-gym {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # a file missing or in the way, an output that could not be written (a full disk)
            print(f"placement-gym {args.command}: error: {files.os_error_text(exc)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # before any run finished (the run commands keep finished runs themselves)
            print(f"placement-gym {args.command}: {signals.interruption()}; nothing was finished, nothing saved",
                  file=sys.stderr)
            return signals.exit_status()


def _profile_name_or_exit(parser: argparse.ArgumentParser, name: str) -> None:
    """Exit 2 in one line, as a bad --name is refused, unless the profile file's reader takes `name` (calibrate's
    default profile name, its --out's stem)."""
    try:
        _profile_name(name)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog} calibrate: error: the profile is named after --out's file name (no --name "
                       f"given): {exc}; give a shorter --name\n")


if __name__ == "__main__":
    sys.exit(main())
