"""The reference results a benchmark suite ships with: every registered agent and the hybrid of every learned one,
run on the suite (SIMULATED), written to ``placement_gym/suites/reference/<suite>.json``.

    python benchmarks/leaderboard/reference_results.py --suite quick [--ray local:2] [--overwrite]
    python benchmarks/leaderboard/reference_results.py --suite standard \
        --from-leaderboard benchmarks/results/leaderboard
    python benchmarks/leaderboard/reference_results.py --suite quick --agents doppler --add

Each agent's runs go to ``--work/<agent>/`` as they finish (a killed run resumes where it stopped when the
command is run again); the reference file is written once every agent is done, and replaces an existing one
only with ``--overwrite``. ``placement-gym benchmark`` then runs only the user's agent and ranks it among these.

``--from-leaderboard FOLDER`` runs nothing: the `standard` suite's runs are the leaderboard's
(`benchmarks/leaderboard/leaderboard.sh` with GRAPHS ``zoo`` and ``test``: the same agents, cases, graphs, budget and
seeds, one `placement-gym compare` per file), so its reference is read from those files (`leaderboard_records`) instead
of running everything a second time. It is refused while a run is missing.

``--add`` runs only ``--agents`` (an agent registered after the reference was made) and puts their records into
the suite's existing reference, replacing theirs and keeping every other agent's as measured; the file must be of
the suite's version and cost model (`benchmark.reference_records`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.algos.policy_gradient import PolicyGradientAgent
from agents.ppo.agent import SB3Agent
from placement_gym import benchmark, registry

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:  # run as a file (python benchmarks/KIND/NAME.py): import benchmarks.*
    sys.path.insert(0, str(REPOSITORY))

from benchmarks.leaderboard import leaderboard_table  # noqa: E402

#: The cost model of leaderboard files written before the simulated backend recorded its version in
#: ``backend_settings``: version 1, the only one there was until then (``git log -S"COST_MODEL_VERSION = "``).
UNRECORDED_COST_MODEL_VERSION = 1


def reference_agents() -> list[str]:
    """Every registered agent in table order, then the hybrid of every learned agent (``hybrid:hsdag``, ...): the
    policy-gradient and SB3 agents and the leaderboard's learned agents (`leaderboard_table.LEARNED`: ``doppler``,
    whose hybrid leaderboard.sh runs too)."""
    learned = [name for name in registry.AGENTS if name in leaderboard_table.LEARNED or issubclass(
        registry.load_agent_class(name), (PolicyGradientAgent, SB3Agent))]
    return list(registry.AGENTS) + [registry.HYBRID_PREFIX + name for name in learned]


def leaderboard_records(folder: "str | Path", suite: benchmark.Suite) -> list[dict]:
    """The runs of `suite` read from the leaderboard's results files in `folder` (`leaderboard_table.case_files`):
    for every case of the suite, every agent row the files ran on every (model, seed) of the suite, ``optimal``
    with seed 0 only (the leaderboard runs it once: its solve does not depend on the seed). Refused (ValueError,
    naming what is wrong) where a case's files are missing, ran another budget or cost model, or lack a run."""
    files = leaderboard_table.folder_cases(Path(folder))
    records, missing = [], []
    for preset, objective in suite.cases:
        paths = files.get(f"{preset}_{objective}")
        if not paths:
            raise ValueError(f"{folder}: no leaderboard file of the case {preset}:{objective}; run "
                             f"benchmarks/leaderboard/leaderboard.sh with CASES {preset}:{objective}")
        for path in paths:
            settings = leaderboard_table.read(path)["backend_settings"]
            version = settings.get("cost_model_version", UNRECORDED_COST_MODEL_VERSION)
            if version != benchmark.COST_MODEL_VERSION:
                raise ValueError(f"{path}: measured with cost model version {version}, not "
                                 f"{benchmark.COST_MODEL_VERSION}: run it again")
        case, budget, found = leaderboard_table.case_records(paths)
        if budget != suite.budget:
            raise ValueError(f"{', '.join(map(str, paths))}: budget {budget}, not the suite's {suite.budget}")
        found = [r for r in found if r["model"] in suite.models and int(r["seed"]) in suite.seeds]
        runs = {(r["agent"], r["model"], int(r["seed"])) for r in found}
        for agent in dict.fromkeys(r["agent"] for r in found):
            seeds = (0,) if agent == "optimal" else suite.seeds
            missing += [f"{case} {agent} {model} seed {seed}" for model in suite.models for seed in seeds
                        if (agent, model, seed) not in runs]
        records += found
    if missing:
        raise ValueError(f"{folder}: {len(missing)} runs of the suite {suite.name} missing, e.g. "
                         f"{'; '.join(missing[:3])}: run benchmarks/leaderboard/leaderboard.sh for them")
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="quick", help="a shipped suite (default: %(default)s)")
    parser.add_argument("--agents", nargs="+", default=None, help="default: every registered agent and hybrid")
    parser.add_argument("--work", default=None, help="folder of the runs (default: benchmarks/results/reference-SUITE)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="run on Ray, e.g. local:2")
    parser.add_argument("--from-leaderboard", default=None, metavar="FOLDER",
                        help="read the runs from benchmarks/leaderboard/leaderboard.sh's results files in FOLDER; run "
                             "nothing")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="where to write the reference (default: the suite's, placement_gym/suites/reference/)")
    parser.add_argument("--overwrite", action="store_true", help="replace the suite's reference file")
    parser.add_argument("--add", action="store_true",
                        help="run only --agents and put their records into the existing reference, keeping the "
                             "other agents' records")
    args = parser.parse_args(argv)
    if args.from_leaderboard and args.agents:
        parser.error("--from-leaderboard reads the leaderboard's agents; --agents runs agents: give one of them")
    if args.add and (not args.agents or args.from_leaderboard):
        parser.error("--add runs the agents given with --agents and adds them to the existing reference")

    suite = benchmark.load_suite(args.suite)
    target = Path(args.out) if args.out else benchmark.reference_path(suite)
    kept = []
    if args.add:
        try:
            kept = benchmark.reference_records(suite, target)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        if not kept:
            print(f"{target}: no reference to add to; run without --add first", file=sys.stderr)
            return 2
    elif target.exists() and not args.overwrite:
        print(f"{target} exists: --overwrite to replace it", file=sys.stderr)
        return 2
    if args.from_leaderboard:
        try:
            records = leaderboard_records(args.from_leaderboard, suite)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
    else:
        work = Path(args.work or f"benchmarks/results/reference-{suite.name}")
        records = []
        for agent in args.agents or reference_agents():
            folder = work / agent.replace(":", "_")
            records += benchmark.run_suite(agent, suite, out=folder, resume=folder.exists(), ray=args.ray)
            print(f"{agent}: {len(records)} records so far", flush=True)
    if args.add:
        added = {r["agent"] for r in records}
        records = [r for r in kept if r["agent"] not in added] + records
    print(f"wrote {benchmark.write_results(target, suite, records, overwrite=args.overwrite or args.add)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
