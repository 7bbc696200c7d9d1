"""Sim to real: a learned agent trained on a simulated profile, then trained on for a few real measurements, and
what those real measurements added, measured for real.

`sim_to_real` runs one seed of the workflow (``placement-gym sim2real`` is its command line):

1. **simulated phase**: ``agent.learn`` on the simulated backend with `profile` (a preset or a profile calibrated
   on this machine, ``placement-gym calibrate``) for `sim_budget` placements. Its result is the best placement
   the simulator priced, the placement a user would deploy from the simulator alone.
2. **real phase**: ``agent.learn`` again, on the real backend (`devices`, the machine's own) for `real_budget`
   measured placements. A second ``learn`` continues from what the agent learned (`agents.core.run.RunAgent`:
   a fine-tuning run), so the real phase starts from the simulated phase's policy.
3. **comparison**, on the real backend, outside both budgets: the simulated phase's placement, the real phase's
   best, every device alone and every planner of `baselines` (planned on the same profile, e.g. ``dp``), each
   timed in pairs with the simulated phase's placement (`paired_real_latencies`), as ``place`` times a placed
   model against each device alone: a burst of load slows both runs of a pair alike, so the ratio keeps what the
   seconds lose on a shared machine.

The simulated profile's devices are the real devices in order (device ``d`` of the profile is ``devices[d]``): a
profile calibrated on `devices` is the intended input; a preset with as many devices works but prices other
hardware.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from . import evaluation, registry

__all__ = ["format_comparison", "paired_real_latencies", "sim_to_real"]

def sim_to_real(make_agent: Callable[[], Any], model: Any, *, sim_env: Any, real_env: Any, sim_budget: int,
                real_budget: int, seed: int = 0, label: str | None = None,
                baselines: Mapping[str, Callable[[], Any]] | None = None, repeats: int = 20, warmup: int = 3,
                on_record: Callable[[dict], None] | None = None) -> tuple[Any, list[dict], dict]:
    """Run the workflow (module docstring) for one seed: ``(agent, records, comparison)``.

    Args:
        make_agent: builds the learned agent (``registry.agent_factories``' factory).
        model: the model's name for the records (``evaluation.model_label``).
        sim_env, real_env: envs of the same graph on the simulated and on the real backend, with the agent's
            feature families and the same objective and device count.
        sim_budget, real_budget: placements each phase measures (the real phase's are real compiles and timings).
        label: the agent's name in the records.
        baselines: table label -> factory of a planner run on `sim_env` (budget 1: its plan), whose placement the
            comparison times for real too.
        repeats, warmup: timed and untimed inferences per placement of the comparison.
        on_record: called with each phase's record as soon as it is made (so an interrupted run keeps it).

    Returns:
        the agent after both phases; the records of the two phases (``extra["phase"]``: ``"simulated"`` then
        ``"real"``); the comparison (`paired_real_latencies`' result, keyed by placement label, plus
        ``"real_phase_gain"``: how much faster the real phase's best is than the simulated phase's placement on
        the real backend, the median of the paired ratios and its 95% interval).
    """
    agent = make_agent()
    if not registry.learns(agent):
        raise ValueError(f"{label or evaluation.agent_name(agent)} learns nothing (a planner or the search "
                         "baseline), so there is no policy to take from the simulator to the real backend; give a "
                         "learned agent (hsdag, placeto, rnn, post, go, ppo, doppler, ... or your own)")
    sim_base, real_base = sim_env.unwrapped, real_env.unwrapped
    if not sim_base.backend.simulated:
        raise ValueError("sim_env must be on the simulated backend; got the "
                         f"{type(sim_base.backend).__name__} backend")
    if real_base.backend.simulated:
        raise ValueError("real_env must be on a real backend (openvino); got the simulated one")
    if sim_base.n_devices != real_base.n_devices:
        raise ValueError(f"the simulated profile has {sim_base.n_devices} devices ({', '.join(sim_base.device_names)}) "
                         f"and the real backend {real_base.n_devices} ({', '.join(real_base.device_names)}); give as "
                         "many real devices as the profile has, in its order (a profile calibrated on them: "
                         "placement-gym calibrate --devices ...)")
    if sim_base.objective != real_base.objective:
        raise ValueError(f"the simulated env scores {sim_base.objective} and the real one {real_base.objective}; "
                         "give both the same objective")
    name = label or evaluation.agent_name(agent)
    model_name, model_path = evaluation.model_label(model)
    records = []
    for phase, env, budget in (("simulated", sim_env, sim_budget), ("real", real_env, real_budget)):
        # One seed and one instance: `evaluate` calls ``learn`` on the agent itself, so the real phase continues
        # from the simulated phase's policy.
        records += evaluation.evaluate(agent, env, budget, [seed], name=name, model=model_name,
                                       model_path=model_path, relative=False, extra={"phase": phase},
                                       on_record=on_record)
    sim_record, real_record = records
    placements = {"simulated phase": np.asarray(sim_record["placement"]),
                  "real phase": np.asarray(real_record["placement"])}
    for d, device in enumerate(real_base.device_names):
        placements[f"{device}-only"] = np.full(real_base.graph.n_ops, d, dtype=np.int64)
    for row, factory in (baselines or {}).items():
        planner = factory()
        planner.learn(sim_env, 1, seed)  # a planner's first measured placement is its plan
        placements[f"{row} (planned on the profile)"] = np.asarray(planner.best_placement)
    comparison = paired_real_latencies(real_base, placements, "simulated phase", repeats=repeats, warmup=warmup)
    comparison["real_phase_gain"] = _gain(comparison["placements"]["real phase"])
    return agent, records, comparison


def _gain(row: Mapping[str, Any]) -> dict:
    """How much faster a placement is than the reference: ``1 - ratio`` as a share, with its interval."""
    low, high = row["ratio_interval"]
    return {"faster_by": 1.0 - row["ratio"], "interval": (1.0 - high, 1.0 - low),
            "significant": bool(high < 1.0 or low > 1.0)}


def paired_real_latencies(env: Any, placements: Mapping[str, np.ndarray], reference: str, *, repeats: int = 20,
                          warmup: int = 3, max_repeats: int = 200, max_timing_s: float = 2.0,
                          target_rel_halfwidth: float | None = 0.01) -> dict:
    """Time every placement of `placements` (label -> device index per op, shape (N,)) on `env`'s real backend
    against the one labelled `reference`.

    Latency: each run of a placement is followed by one of the reference (`timed_pairs`), so load from other
    processes slows both; a placement's ``ratio`` is the median of its latency / the reference's per pair, with the
    distribution-free 95% interval of that median. Throughput: steady-state periods of each (`timed_periods`); the
    interval is that of the two medians' ratio (conservative). Both: `placement_gym.backends.base.timing_ratio`, as
    `deploy`'s comparison with single devices.

    Returns ``{"objective", "reference", "placements": {label: {"latency_s", "latency_interval_s", "ratio",
    "ratio_interval", "n_submodels"} or {"error"}}}``; the reference's ratio is 1."""
    from .backends.base import median_interval, timing_ratio
    from .backends.profiling import timed_pairs, timed_periods, timed_runs

    backend, graph = env.backend, env.graph
    if reference not in placements:
        raise ValueError(f"the reference {reference!r} is none of the placements {sorted(placements)}")
    objective = env.objective
    inputs = backend.example_inputs(graph)
    adaptive = dict(target_rel_halfwidth=target_rel_halfwidth, max_s=max_timing_s)

    def periods(compiled, placement) -> list[float]:
        return timed_periods(compiled, inputs, backend.requests_for(placement), warmup, max_windows=max_repeats,
                             **adaptive)

    reference_compiled, reference_submodels = backend.compile_placement(graph, placements[reference])
    reference_request = backend.infer_request(reference_compiled, inputs)
    own = (timed_runs(reference_request, repeats, warmup, max_runs=max_repeats, **adaptive)
           if objective == "latency" else periods(reference_compiled, placements[reference]))
    rows: dict[str, dict] = {reference: {"latency_s": float(np.median(own)),
                                         "latency_interval_s": tuple(map(float, median_interval(own))),
                                         "ratio": 1.0, "ratio_interval": (1.0, 1.0),
                                         "n_submodels": int(reference_submodels)}}
    for label, placement in placements.items():
        if label == reference:
            continue
        try:
            compiled, n_submodels = backend.compile_placement(graph, placement)
            if objective == "latency":
                runs, reference_runs = timed_pairs(backend.infer_request(compiled, inputs), reference_request, repeats,
                                                   warmup, max_runs=max_repeats, **adaptive)
            else:
                runs, reference_runs = periods(compiled, placement), own
            ratio, interval = timing_ratio(runs, reference_runs, paired=objective == "latency")
            rows[label] = {"latency_s": float(np.median(runs)),
                           "latency_interval_s": tuple(map(float, median_interval(runs))), "ratio": ratio,
                           "ratio_interval": interval, "n_submodels": int(n_submodels)}
            del compiled
        except Exception as exc:  # a placement that does not compile here: said, the others are still timed
            from .devices import openvino_error_text

            rows[label] = {"error": f"{type(exc).__name__}: {openvino_error_text(exc, 200)}"}
    return {"objective": objective, "reference": reference, "placements": rows}


def format_comparison(comparison: Mapping[str, Any]) -> str:
    """The comparison as a table: each placement's real latency and its ratio to the reference, with intervals."""
    kind = "seconds per inference at steady state" if comparison["objective"] == "throughput" else "latency"
    lines = [f"{'placement (measured for real)':<40} {kind + ' (ms)':>24}  vs {comparison['reference']} (95% interval)"]
    for label, row in comparison["placements"].items():
        if "error" in row:
            lines.append(f"{label:<40} {'failed: ' + row['error'][:60]}")
            continue
        low, high = row["ratio_interval"]
        lines.append(f"{label:<40} {row['latency_s'] * 1e3:>24.3f}  x{row['ratio']:.3f} ({low:.3f}-{high:.3f})")
    gain = comparison.get("real_phase_gain")
    if gain:
        than = "than the simulated phase's placement"
        lines.append(f"the real phase's best is {describe_gain(gain, than)}")
    return "\n".join(lines)


def describe_gain(gain: Mapping[str, Any], than: str = "") -> str:
    """`_gain`'s result in words: ``13.6% slower than X (faster by -15.6% to -8.4%)``, and where the interval
    holds 0, that no difference was measured."""
    low, high = gain["interval"]
    faster = 100 * gain["faster_by"]
    verdict = "" if gain["significant"] else ", no difference measured"
    return (f"{abs(faster):.1f}% {'faster' if faster >= 0 else 'slower'}{' ' + than if than else ''} "
            f"(faster by {100 * low:+.1f}% to {100 * high:+.1f}%{verdict})")
