"""The `placement-gym` command.

Subcommands: ``info`` (devices, models, graph statistics). Agents are found by name through `AGENTS`, a
registry of import paths, so importing `placement_gym` never imports the agents.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

#: Agent name -> "module:Class"; imported only when a command needs the agent.
AGENTS: dict[str, str] = {}


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
        s = report["graph"]
        print(f"\n{s['model']}            |V|    |E|   avg degree")
        for key in ("all_layers", "compute"):
            b = s[key]
            print(f"  {key:<12} {b['nodes']:>6} {b['edges']:>6} {b['average_degree']:>10.2f}")
        top = list(s["compute"]["op_types"].items())[:8]
        print("  most common compute ops: " + ", ".join(f"{t} {c}" for t, c in top))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="placement-gym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="devices, zoo models and graph statistics")
    info.add_argument("--model", help="zoo name or model file to print graph statistics for")
    info.add_argument("--json", action="store_true", help="print machine-readable JSON")
    info.set_defaults(func=_cmd_info)
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
