"""Rebuild the imitation placer's checkpoints (``imitation``, `agents.imitation`), one per preset x objective x seed.

    python benchmarks/learned_placer/train_learned_placer.py

Its defaults are the shipped results' settings: every case of `CASES`, each case's `RECIPES` (``--synthetic 640
--epochs 25 --rl-budget 3000`` for ai_pc throughput, ``--synthetic 640 --epochs 40 --average-from 20 --rl-budget
12000`` for edge throughput, ``--synthetic 128 --epochs 100 --rl-budget 3000`` for the other six, with
``--average-from 50`` for edge latency; the placement state's balance columns under throughput), ``--seeds 0 1 2
--out runs/learned_placer``. ``--synthetic``, ``--varied``, ``--epochs``, ``--average-from``, ``--rl-budget`` or
``--agent-option balance=...`` given on the command line apply to every case. ``--val-labels DIR`` scores every
imitation pass on the validation graphs (`agents.imitation.labels.validation_parts`); with ``--validate-only`` it
scores the existing checkpoints of ``--out`` and trains nothing.

For each case: label the training graphs (the dataset's train split plus ``--synthetic`` and ``--varied``
synthetic graphs; never a val or test family nor a held-out synthetic graph:
`agents.imitation.labels.check_training_graphs`), read from ``--labels`` (default: the
labels shipped in ``benchmarks/learned_placer/labels``, so the checkpoints come out the same on any
machine), the missing ones computed by ``--workers`` processes (or as tasks on the Ray cluster of ``--ray``) and
written there; imitate the labels for
``--epochs`` passes (the weights averaged over the passes from ``--average-from`` on; 0: the last pass's); then
``--rl-budget`` placements of GO's PPO (0: none). Writes
``imitation-PRESET-OBJECTIVE-sSEED.pt`` and, beside it, ``.json`` naming the case, the training graphs, the label
settings and the wall time of each phase. All figures SIMULATED.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agents.imitation.labels import LabelCache, LabelSettings, labels_for, validation_parts
from agents.imitation.training import train_case, zero_shot_gap
from placement_gym.commands.settings import key_values  # the CLI's KEY=VALUE parser (JSON values), as transfer.py uses
from placement_gym.files import write_json

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks._outputs import refuse_existing_outputs, run_metadata  # noqa: E402
from benchmarks.learned_placer.recipes import (  # noqa: E402
    CASES, NETWORK, RECIPES, REFERENCE, SEEDS, SHIPPED_LABELS, Recipe, checkpoint_path, parse_case,
)

def recipe_of(case: tuple[str, str], args: argparse.Namespace) -> Recipe:
    """`case`'s (preset, objective) `RECIPES` entry with what the command line set (``--synthetic``, ``--varied``,
    ``--epochs``, ``--rl-budget``, ``--average-from``) over it."""
    given = {"synthetic": args.synthetic, "varied": args.varied, "epochs": args.epochs, "rl_budget": args.rl_budget,
             "average_from": args.average_from}
    return RECIPES[case]._replace(**{key: value for key, value in given.items() if value is not None})


def val_references(folder: str, preset: str, objective: str, args: argparse.Namespace) -> dict[str, list]:
    """The reference labels of each of `validation_parts` under (`preset`, `objective`), as `learned_transfer`
    makes its test graphs' (read from `folder`, the missing ones computed there by ``--workers`` processes or on
    the ``--ray`` cluster)."""
    return {part: labels_for(graphs, preset, objective, REFERENCE, LabelCache(folder), args.workers, args.ray)
            for part, graphs in validation_parts().items()}


def val_gaps(agent, val: dict[str, list]) -> dict[str, float]:
    """`zero_shot_gap` of `agent` on each part of `val_references`' labels."""
    return {part: round(zero_shot_gap(agent, labels), 2) for part, labels in val.items()}


def validate(args: argparse.Namespace) -> None:
    """``--validate-only``: `val_gaps` of each existing checkpoint of ``--out`` (cases x seeds), printed."""
    from agents.imitation import ImitationAgent

    for preset, objective in args.cases:
        val = val_references(args.val_labels, preset, objective, args)
        for seed in args.seeds:
            path = checkpoint_path(args.out, preset, objective, seed)
            print(json.dumps({"checkpoint": str(path), "val_gap": val_gaps(ImitationAgent.load(path), val)}),
                  flush=True)


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", type=parse_case, default=CASES,
                        help="PRESET:OBJECTIVE pairs (default: all eight)")
    parser.add_argument("--synthetic", type=int, default=None,
                        help="synthetic training graphs beside dataset:train (default: the objective's RECIPES)")
    parser.add_argument("--varied", type=int, default=None,
                        help="synthetic training graphs of varied sizes, 32 to 480 ops, beside those (default: the "
                             "objective's RECIPES)")
    parser.add_argument("--epochs", type=int, default=None, help="imitation passes (default: the objective's)")
    parser.add_argument("--average-from", type=int, default=None,
                        help="average the weights of the imitation passes from this one on (0: none; default: "
                             "the case's RECIPES)")
    parser.add_argument("--max-seconds", type=float, default=None, help="cap on each case's imitation wall time")
    parser.add_argument("--rl-budget", type=int, default=None,
                        help="placements of PPO after imitation (0: none; default: the objective's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS, help="(default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="processes that compute missing labels")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="compute missing labels as tasks on this Ray cluster instead (local:N or a cluster "
                             "address, as placement-gym compare --ray takes)")
    parser.add_argument("--label-optimal-s", type=float, default=LabelSettings.optimal_time_limit_s)
    parser.add_argument("--label-search-budget", type=int, default=LabelSettings.local_search_budget)
    parser.add_argument("--label-search-from-best", type=int, default=LabelSettings.search_from_best,
                        help="placements of block moves around each label's best planner placement (0: none)")
    parser.add_argument("--agent-option", action="append", default=[], metavar="KEY=JSON",
                        help="a setting of the network over NETWORK's, e.g. graph_cost=true")
    parser.add_argument("--val-labels", default=None, metavar="DIR",
                        help="folder of the validation graphs' reference labels (learned_transfer's, computed "
                             "there when missing): print and record the zero-shot gap to them after every imitation "
                             "pass, on the val split and on the held-out synthetic graphs apart "
                             "(`validation_parts`; the checks' time counts in the imitation's)")
    parser.add_argument("--labels", default=str(SHIPPED_LABELS),
                        help="folder of label files, read and completed (default: the labels shipped in the repo)")
    parser.add_argument("--validate-only", action="store_true",
                        help="train nothing: score the existing checkpoints of --out for these cases and seeds on "
                             "the validation graphs (with --val-labels), one JSON line each")
    parser.add_argument("--out", default="runs/learned_placer")
    parser.add_argument("--overwrite", action="store_true", help="replace existing checkpoints of these cases")
    args = parser.parse_args(argv)
    if args.validate_only:
        if not args.val_labels:
            parser.error("--validate-only scores on the validation graphs' labels: give --val-labels DIR")
        validate(args)
        return
    outputs = [checkpoint_path(args.out, preset, objective, seed) for preset, objective in args.cases
               for seed in args.seeds]
    refuse_existing_outputs(parser, outputs + [path.with_suffix(".json") for path in outputs], args.overwrite)
    options = key_values(args.agent_option, "--agent-option")
    try:
        settings = LabelSettings(local_search_budget=args.label_search_budget,
                                 optimal_time_limit_s=args.label_optimal_s,
                                 search_from_best=args.label_search_from_best)
    except ValueError as exc:
        parser.error(f"--label-search-from-best: {exc}")
    for preset, objective in args.cases:
        recipe = recipe_of((preset, objective), args)
        network = {**NETWORK, "balance": recipe.balance, **options}
        val = val_references(args.val_labels, preset, objective, args) if args.val_labels else {}
        for seed in args.seeds:
            by_epoch: list[dict[str, float]] = []  # per imitation pass, of that pass's weights (not their mean)

            def watch_val(agent, epoch: int, loss: float) -> None:
                by_epoch.append(val_gaps(agent, val))
                print(f"  epoch {epoch}: val zero-shot gap to the labels {by_epoch[-1]}", flush=True)

            agent, report = train_case(preset, objective, recipe.graphs(), epochs=recipe.epochs,
                                       seed=seed, rl_budget=recipe.rl_budget, settings=settings,
                                       cache=LabelCache(args.labels), workers=args.workers, ray=args.ray,
                                       max_seconds=args.max_seconds, agent_options=network,
                                       average_from=recipe.average_from, on_epoch=watch_val if val else None)
            if val:
                report["val_gap_by_epoch"] = by_epoch
                report["val_gap"] = val_gaps(agent, val)  # the checkpoint's: mean weights, after PPO
            path = checkpoint_path(args.out, preset, objective, seed)
            agent.save(path, overwrite=args.overwrite)
            write_json(path.with_suffix(".json"), {**run_metadata(argv, "SIMULATED; one imitation checkpoint"),
                                                   "checkpoint": path.name, "network": network, **report},
                       overwrite=args.overwrite)
            print(json.dumps({"checkpoint": str(path), "label_s": round(report["label_s"], 1),
                              "imitation_s": round(report["imitation"]["seconds"], 1),
                              "rl_s": round(report["rl_s"], 1), "train_s": round(report["train_s"], 1),
                              **({"val_gap": report["val_gap"]} if val else {})}), flush=True)


if __name__ == "__main__":
    main()
