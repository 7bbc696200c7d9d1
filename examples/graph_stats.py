"""The paper's Table 1: size of each benchmark model's computation graph.

|V| counts nodes, |E| edges, the average degree is 2|E|/|V|. Two views: every IR layer after constant folding
(what the paper counts: its code read the IR XML, Constants, Parameters and Results included) and the compute
ops an agent places (the env's nodes). Same numbers as ``placement-gym info --model <name> --json``.

Run:  python examples/graph_stats.py [--models resnet inception bert] [--json stats.json]
"""
from __future__ import annotations

import argparse

from placement_gym import load_graph
from placement_gym.graph import format_stats_table
from placement_gym.files import write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet", "inception", "bert"])
    parser.add_argument("--json", help="also write the full statistics (op-type counts included) here")
    args = parser.parse_args()
    stats = []
    for model in args.models:
        s = load_graph(model).stats()
        s["model"] = model
        stats.append(s)
    print(format_stats_table(stats))
    if args.json:
        print(f"wrote {write_json(args.json, stats)}")


if __name__ == "__main__":
    main()
