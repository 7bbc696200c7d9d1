"""The proven optima the learning sanity suite ships (`placement_gym.sanity`), proven by the exact solver.

    python benchmarks/leaderboard/sanity_optima.py --overwrite   # prove every (case, model), write the optima file
    python benchmarks/leaderboard/sanity_optima.py --check       # prove them again: exit 1 where the file differs

Each (case, model) pair of the suite is solved by the registered ``optimal`` agent (SIMULATED: the cost model's
optimum, with a proof) on a fresh graph; the file (``placement_gym/suites/reference/sanity_optima.json`` for the
``sanity`` suite) is written only when every pair is proven optimal within the time limit. Prove them again
whenever the cost model's version or the suite's changes (`load_optima` refuses a file of another version).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Mapping, Sequence

from placement_gym import benchmark, sanity

#: Seconds the solver may take per pair: far above what the suite's pairs need (about a minute for the slowest,
#: `ai_pc` throughput, on a loaded 2-core machine), so that a slower machine still proves them.
TIME_LIMIT_S = 300.0
#: Relative difference of a re-proven optimum's latency from the shipped one that counts as "the same".
SAME_LATENCY = 1e-9


def prove_all(suite: benchmark.Suite, time_limit_s: float = TIME_LIMIT_S, *, verbose: bool = False) \
        -> list[sanity.Optimum]:
    """The optimum of every (case, model) pair of `suite`, in its order (proven or not: see each ``status``)."""
    optima = []
    for case, model in suite.pairs():
        optimum = sanity.prove_optimum(case, model, time_limit_s)
        optima.append(optimum)
        if verbose:
            print(f"{case} {model}: {optimum.status} {optimum.latency_s * 1e3:.4f} ms (bound "
                  f"{optimum.lower_bound_s * 1e3:.4f}), {'mixed' if optimum.mixed else 'one device'} (best single "
                  f"device +{100 * (optimum.best_single_device_s / optimum.latency_s - 1):.1f}%), proof "
                  f"{optimum.solve_s:.1f} s", flush=True)
    return optima


def differences(shipped: Mapping[tuple[str, str], sanity.Optimum], proven: Sequence[sanity.Optimum]) -> list[str]:
    """What differs between the `shipped` optima and those `proven` now, one line each ([] when nothing does):
    a pair not proven optimal now, or proven at another latency (beyond `SAME_LATENCY`, relative)."""
    lines = []
    for now in proven:
        key = (now.case, now.model)
        if now.status != "optimal":
            lines.append(f"{now.case} {now.model}: not proven now ({now.status} after {now.time_limit_s:g} s)")
        elif key not in shipped:
            lines.append(f"{now.case} {now.model}: not in the shipped file")
        elif abs(now.latency_s - shipped[key].latency_s) > SAME_LATENCY * shipped[key].latency_s:
            lines.append(f"{now.case} {now.model}: proven {now.latency_s!r} s now, the file says "
                         f"{shipped[key].latency_s!r} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="sanity", help="a shipped suite or a suite file (default: %(default)s)")
    parser.add_argument("--out", help="the optima file (default: the suite's, placement_gym/suites/reference/)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, help="solver seconds per pair "
                        "(default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="prove again and compare with the file; write nothing")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing optima file")
    args = parser.parse_args(argv)
    suite = benchmark.load_suite(args.suite)
    target = Path(args.out) if args.out else sanity.optima_path(suite)
    if not args.check and target.exists() and not args.overwrite:
        print(f"{target} exists: --overwrite to replace it", file=sys.stderr)
        return 2
    proven = prove_all(suite, args.time_limit, verbose=True)
    if args.check:
        lines = differences(sanity.load_optima(suite, target), proven)
        print("\n".join(lines) if lines else f"{target}: every optimum proven again, the same")
        return 1 if lines else 0
    unproven = [f"{o.case} {o.model} ({o.status})" for o in proven if o.status != "optimal"]
    if unproven:
        print(f"not proven within {args.time_limit:g} s: {', '.join(unproven)}; nothing written (choose other "
              "graphs or a longer --time-limit)", file=sys.stderr)
        return 1
    print(f"wrote {sanity.write_optima(target, suite, proven, overwrite=args.overwrite)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
