"""Write the model card of every shipped imitation checkpoint (`agents.imitation.shipped`, package data in
``agents/imitation/pretrained/``): ``imitation-PRESET-OBJECTIVE-s0.md`` beside the checkpoint.

    python benchmarks/learned_placer/train_learned_placer.py --seeds 0 --out agents/imitation/pretrained
    python benchmarks/learned_placer/learned_transfer.py --seeds 0 --checkpoints agents/imitation/pretrained \\
        --json benchmarks/results/learned_transfer_shipped.json
    python benchmarks/learned_placer/learned_transfer.py --seeds 0 --checkpoints agents/imitation/pretrained \\
        --test-models validation --json benchmarks/results/learned_transfer_shipped_val.json
    python benchmarks/learned_placer/imitation_model_cards.py

A card says, from the JSON the training script wrote beside the checkpoint, what it was trained on (the training
graphs, the digest of the labels imitated and their settings, the network, the recipe, the wall times and the
machine), and, from the transfer script's results of the shipped checkpoints themselves, its zero-shot figures on
the test graphs (the dataset's test split and the zoo) and on the validation graphs (the val split and the
held-out synthetic graphs), each with the command that made it; and the command that rebuilds it. All figures
SIMULATED. A case missing from a results file gets a card that says so. Existing cards are replaced (they are
made from the files above, nothing else).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agents.imitation.labels import validation_parts
from agents.imitation.shipped import REBUILD, checkpoint_name, shipped_cases
from placement_gym.files import load_json
from placement_gym.schema import stored

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks.leaderboard.leaderboard_table import geomean_gap  # noqa: E402
from benchmarks.learned_placer.learned_transfer import reference_gap  # noqa: E402
from benchmarks.learned_placer.recipes import RECIPES  # noqa: E402

PRETRAINED = REPOSITORY / "agents" / "imitation" / "pretrained"
TEST = REPOSITORY / "benchmarks" / "results" / "learned_transfer_shipped.json"
VAL = REPOSITORY / "benchmarks" / "results" / "learned_transfer_shipped_val.json"


def _pct(value: "float | None") -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def _case_result(results: dict | None, preset: str, objective: str) -> dict | None:
    """The transfer result of (`preset`, `objective`), seed 0, in a results file, or None."""
    for case in (results or {}).get("cases", []):
        s = case["summary"]
        if (s["preset"], s["objective"], s["seed"]) == (preset, objective, 0):
            return case
    return None


def _figures(rows: list[dict]) -> dict:
    """Geometric-mean gaps (% above each graph's best known) and counts over `rows` (transfer-script rows)."""
    ran = [r for r in rows if r["zero_shot_gap"] is not None]
    return {"graphs": len(rows), "failed": len(rows) - len(ran),
            "zero_shot": geomean_gap([r["zero_shot_gap"] for r in ran]),
            "reference": geomean_gap([reference_gap(r) for r in rows]),
            "dp": geomean_gap([r["dp_gap"] for r in ran if r["dp_gap"] is not None]),
            "best_classical": geomean_gap([r["best_classical_gap"] for r in ran]),
            "best_single": geomean_gap([r["best_single_gap"] for r in ran]),
            "beats": sum(r["beats_best_classical"] for r in rows),
            "worse": sum(r["worse_than_best_single"] for r in rows),
            # throughput: the whole graph on every device, beside the placements (never the best known)
            **({"replicate": geomean_gap([r["replicate_gap"] for r in rows if r["replicate_gap"] is not None]),
                "beats_replicate": sum(r["beats_replicate"] for r in rows)}
               if rows and "replicate_gap" in rows[0] else {})}


def _figure_row(name: str, f: dict) -> str:
    failed = f" ({f['failed']} failed)" if f["failed"] else ""
    return (f"| {name} | {f['graphs']} | {_pct(f['zero_shot'])}{failed} | {_pct(f['reference'])} | {_pct(f['dp'])} | "
            f"{_pct(f['best_classical'])} | {_pct(f['best_single'])} | {f['beats']}/{f['graphs']} | "
            f"{f['worse']}/{f['graphs']} |"
            + (f" {_pct(f['replicate'])} | {f['beats_replicate']}/{f['graphs']} |" if "replicate" in f else ""))


def figure_header(replicate: bool) -> str:
    """The figures' table head; `replicate`: with `replicate`'s gap and how many graphs the placer beats it on."""
    return ("| graphs | n | zero-shot | reference label | dp | best classical | best single device | beats best "
            "classical | worse than best single |" + (" `replicate` | beats `replicate` |" if replicate else "")
            + "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if replicate else ""))


def _graphs_line(graphs: list[str]) -> str:
    """The training graphs in one line: the dataset's train-split graphs by name, the synthetic ones by range."""
    dataset = [g for g in graphs if not g.startswith("synthetic:")]
    synthetic = [g.split(":") for g in graphs if g.startswith("synthetic:")]
    sizes = sorted({int(n) for _, n, _ in synthetic})
    seeds = sorted(int(s) for _, _, s in synthetic)
    text = f"{len(graphs)} graphs: the dataset's train split ({len(dataset)}: {', '.join(dataset)})"
    if synthetic:
        text += (f" and {len(synthetic)} synthetic graphs `synthetic:N:SEED`, seeds {seeds[0]} to {seeds[-1]}, N "
                 f"cycling through {', '.join(map(str, sizes))}")
    return text


def card(preset: str, objective: str, record: dict, test: dict | None, val: dict | None) -> str:
    """The model card (Markdown) of one shipped checkpoint: `record`, the JSON the training script wrote beside
    it; `test` and `val`, the transfer script's results files of the shipped checkpoints (None: not made)."""
    name = checkpoint_name(preset, objective)
    recipe = RECIPES[(preset, objective)]
    imitation = record["imitation"]
    lines = [
        f"# Model card: `{name}`",
        "",
        f"The imitation placer (`--agent imitation`, `agents.imitation.ImitationAgent`) for the simulated "
        f"**`{preset}`** preset's full device set under the **{objective}** objective, training seed "
        f"{record['seed']}. `placement-gym evaluate` and `place` load it by default for `--agent imitation "
        f"--profile {preset} --objective {objective}` (`--load CHECKPOINT` for another); in Python "
        f"`agents.imitation.shipped.load_shipped({preset!r}, {objective!r})`. It places a graph it has never seen "
        "in one forward pass (no measurement, no search). All figures SIMULATED (the cost model).",
        "",
        "## How it was trained",
        "",
        f"- Command: `{record['command']}` ({record['created']}; {record['machine']['cpu_model']}, "
        f"{record['machine']['cpu_count']} cores; torch {record['versions']['torch']}).",
        f"- Training graphs: {_graphs_line(record['graphs'])} (the full list: `{Path(name).with_suffix('.json')}`, "
        "`graphs`; no val or test family, no zoo model, no held-out synthetic graph: "
        "`agents.imitation.labels.check_training_graphs`).",
        f"- Labels: the best placement of the planners and the search per training graph "
        f"(`agents.imitation.labels`; settings {json.dumps(record['label_settings'])}), read from the labels "
        f"shipped in `benchmarks/learned_placer/labels`; SHA-256 of the (graph, placement) pairs imitated "
        f"(`labels_sha256`): `{record['labels_sha256']}`; label sources {json.dumps(record['label_sources'])}.",
        f"- Network: {json.dumps(record['network'])} (`NETWORK` of `benchmarks/learned_placer/recipes.py`; GO's "
        "network, narrower, deciding the ops in topological order with the placement state).",
        f"- Recipe (`RECIPES`): {imitation['epochs']} passes of imitation ({imitation['steps']} steps, one Adam step "
        f"per graph; cross-entropy of the last pass {imitation['loss']:.4f})"
        + (f", ending with the mean of the weights of passes {record['average_from']} to {imitation['epochs']}"
           if record["average_from"] else "")
        + (f", then {record['rl_budget']} placements of GO's PPO over the same graphs" if record["rl_budget"] else "")
        + (f"; the placement state's balance columns" if recipe.balance else "") + ".",
        f"- Wall time: {record['train_s']:.0f} s (imitation {imitation['seconds']:.0f} s, PPO "
        f"{record['rl_s']:.0f} s, labels read in {record['label_s']:.1f} s), beside other jobs.",
        "",
        "## Figures",
        "",
        "Zero-shot gap: geometric mean over the graphs of % above each graph's best known placement (the fastest of "
        "its reference label's planners: every single device, `cheapest`, `dp`, `topo`, `metis`, `local-search` "
        "with 100 placements, `optimal` within 10 s, and the zero-shot placement itself); the reference label's "
        "gap beside it is how far the best of those planners is from the same best known.",
        "",
    ]
    for title, data, results_file, validation in (
            ("Test: the dataset's test split and the zoo's ResNet, Inception, BERT", test, TEST, False),
            ("Validation: the val split and the held-out synthetic graphs", val, VAL, True)):
        lines += [f"**{title}.**", ""]
        case = _case_result(data, preset, objective)
        if case is None:
            lines += [f"Not measured: `{results_file.relative_to(REPOSITORY)}` has no seed-0 result of this case "
                      "(the commands of `benchmarks/learned_placer/imitation_model_cards.py` make it).", ""]
            continue
        rows = case["rows"]
        lines.append(figure_header(bool(rows) and "replicate_gap" in rows[0]))
        if validation:
            for part, graphs in validation_parts().items():
                lines.append(_figure_row(part, _figures([r for r in rows if r["model"] in graphs])))
        lines.append(_figure_row("all", _figures(rows)))
        lines += ["", f"Command: `{data['command']}` ({data['created']}; {data['machine']['cpu_model']}); results: "
                  f"`{results_file.relative_to(REPOSITORY)}`. Median predict "
                  f"{1e3 * case['summary']['predict_s_median']:.0f} ms per graph.", ""]
    lines += [
        "## Rebuild",
        "",
        "```bash",
        REBUILD.format(preset=preset, objective=objective),
        "python benchmarks/learned_placer/imitation_model_cards.py   # after the two learned_transfer.py commands of "
        "its docstring",
        "```",
        "",
        "From the shipped labels the training is deterministic on a given CPU model: the JSON beside the checkpoint "
        "records `labels_sha256`, so a rebuild shows whether it imitated the same labels. Float rounding differs "
        "between CPU models, and a seeded training carries it forward: a rebuild on another kind of machine gives "
        "another checkpoint of the same recipe (the results of docs/agents/learned-placer.md were made on an Intel "
        "machine from checkpoints of the same command, which differ from these by that rounding).",
        "",
    ]
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    test = load_json(TEST) if stored(TEST).exists() else None
    val = load_json(VAL) if stored(VAL).exists() else None
    for preset, objective in shipped_cases():
        checkpoint = PRETRAINED / checkpoint_name(preset, objective)
        record = json.loads(checkpoint.with_suffix(".json").read_text())
        text = card(preset, objective, record, test, val)
        checkpoint.with_suffix(".md").write_text(text)
        print(f"wrote {checkpoint.with_suffix('.md')}")


if __name__ == "__main__":
    main()
