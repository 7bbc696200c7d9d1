"""The learning curves of a sanity suite (SIMULATED): every pure learned agent's best-so-far gap to each row's proven
optimum against the placements measured, one panel per (case, graph), `random` beside them.

    python benchmarks/leaderboard/sanity_curves.py                        # benchmarks/results/sanity_curves.png
    python benchmarks/leaderboard/sanity_curves.py --suite sanity-holdout # benchmarks/results/sanity-holdout_curves.png

It reads the files `placement-gym benchmark --suite SUITE --agent NAME --json benchmarks/results/SUITE_NAME.json`
wrote (each holds its agent's runs, `random`'s beside them and the verdict's rows with the proven optima) and runs
nothing. docs/results/sanity.md shows the pictures.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from placement_gym import results
from placement_gym.files import load_json

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks.leaderboard.leaderboard_table import LEARNED  # noqa: E402


def suite_files(folder: Path, suite: str) -> list[Path]:
    """`suite`'s results files in `folder` (``SUITE_AGENT.json``), the pure learned agents first in the
    leaderboard's order (`LEARNED`), then any other agent's by name."""
    def order(path: Path) -> tuple[int, str]:
        agent = path.stem.removeprefix(f"{suite}_")
        return (LEARNED.index(agent) if agent in LEARNED else len(LEARNED), path.name)

    return sorted(folder.glob(f"{suite}_*.json"), key=order)


def suite_records(folder: Path, suite: str) -> tuple[list[dict], dict[str, float]]:
    """The runs of `suite`'s results files in `folder` (`suite_files`: every pure learned agent's, then `random`'s
    from the first file: the same seeded runs in each) with ``model`` renamed to ``"case graph"`` (a panel each),
    and the proven optimum (s) of every such panel."""
    files = suite_files(folder, suite)
    if not files:
        raise SystemExit(f"sanity_curves.py: no {suite}_*.json in {folder}: run `placement-gym benchmark --suite "
                         f"{suite} --agent NAME --json {folder}/{suite}_NAME.json` first")
    records, bar, optima = [], [], {}
    for path in files:
        data = load_json(path)
        records += [r for r in data["records"] if r["agent"] in data["agents"]]
        bar = bar or [r for r in data["records"] if r["agent"] == "random"]
        optima.update({f"{row['case']} {row['model']}": row["optimum_s"] for row in data["sanity"]})
    return [{**r, "model": f"{r['case']} {r['model']}"} for r in records + bar], optima


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="sanity", help="sanity or sanity-holdout (default: %(default)s)")
    parser.add_argument("--results", default="benchmarks/results", help="folder of the suite's results files")
    parser.add_argument("--out", help="PNG to write (default: RESULTS/SUITE_curves.png)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing picture")
    args = parser.parse_args(argv)
    folder = Path(args.results)
    records, optima = suite_records(folder, args.suite)
    out = Path(args.out or folder / f"{args.suite}_curves.png")
    columns = min(4, -(-len(optima) // 2))  # two rows
    results.plot_curves(out, records, optima=optima, columns=columns, overwrite=args.overwrite,
                        title=f"{args.suite}: best so far, gap % to the proven optimum (SIMULATED; median over "
                              "seeds, band: min-max; dotted: 2%)")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
