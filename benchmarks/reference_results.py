"""The reference results a benchmark suite ships with: every registered agent and the hybrid of every learned one,
run on the suite (SIMULATED), written to ``placement_gym/suites/reference/<suite>.json``.

    python benchmarks/reference_results.py --suite quick [--ray local:2] [--overwrite]

Each agent's runs go to ``--work/<agent>/`` as they finish (a killed run resumes where it stopped when the
command is run again); the reference file is written once every agent is done, and replaces an existing one
only with ``--overwrite``. ``placement-gym benchmark`` then runs only the user's agent and ranks it among these.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.algos.learned import LearnedAgent
from placement_gym import benchmark, registry


def reference_agents() -> list[str]:
    """Every registered agent in table order, then the hybrid of every learned agent (``hybrid:hsdag``, ...)."""
    learned = [name for name in registry.AGENTS if issubclass(registry.load_agent_class(name), LearnedAgent)]
    return list(registry.AGENTS) + [registry.HYBRID_PREFIX + name for name in learned]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="quick", help="a shipped suite (default: %(default)s)")
    parser.add_argument("--agents", nargs="+", default=None, help="default: every registered agent and hybrid")
    parser.add_argument("--work", default=None, help="folder of the runs (default: benchmarks/results/reference-SUITE)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="run on Ray, e.g. local:2")
    parser.add_argument("--overwrite", action="store_true", help="replace the suite's reference file")
    args = parser.parse_args(argv)

    suite = benchmark.load_suite(args.suite)
    target = benchmark.reference_path(suite)
    if target.exists() and not args.overwrite:
        print(f"{target} exists: --overwrite to replace it", file=sys.stderr)
        return 2
    work = Path(args.work or f"benchmarks/results/reference-{suite.name}")
    records = []
    for agent in args.agents or reference_agents():
        folder = work / agent.replace(":", "_")
        records += benchmark.run_suite(agent, suite, out=folder, resume=folder.exists(), ray=args.ray)
        print(f"{agent}: {len(records)} records so far", flush=True)
    print(f"wrote {benchmark.write_results(target, suite, records, overwrite=args.overwrite)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
