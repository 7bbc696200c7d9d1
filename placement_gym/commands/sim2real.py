"""``sim2real``: a learned agent trained on a simulated profile, trained on for a few real measurements, and what
the real measurements added, timed for real (`placement_gym.sim2real`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import registry
from .report import check_outputs, interrupted, write_results
from .settings import key_values

#: ``(simulated, real)`` placements when neither ``--sim-budget`` nor ``--real-budget`` is given and the agent's
#: class names no schedule of its own (``SIM_TO_REAL_BUDGETS``, DOPPLER's: its paper's stages scaled down).
DEFAULT_BUDGETS = (500, 50)


def budgets_of(args: argparse.Namespace, cls: type) -> tuple[int, int]:
    """The two phases' budgets: the flags where given (checked by the argument parser), else the agent class's
    ``SIM_TO_REAL_BUDGETS``, else `DEFAULT_BUDGETS`."""
    sim, real = getattr(cls, "SIM_TO_REAL_BUDGETS", DEFAULT_BUDGETS)
    sim = args.sim_budget if args.sim_budget is not None else sim
    real = args.real_budget if args.real_budget is not None else real
    return sim, real


def cmd_sim2real(args: argparse.Namespace) -> int:
    """Train on the simulated profile, train on with real measurements, time both phases' placements for real."""
    from ..devices import two_cpu_devices
    from ..env import DevicePlacementEnv
    from ..models import load_graph
    from ..sim2real import format_comparison, sim_to_real

    paths = {"json": Path(args.json)} if args.json else {}
    check_outputs(args, paths, {"--save": Path(args.save)} if args.save else None)
    options = key_values(args.agent_option, "--agent-option")
    if options:
        registry.check_options(args.agent, options)
    cls = registry.load_agent_class(args.agent)
    sim_budget, real_budget = budgets_of(args, cls)
    args.budget = {"simulated": sim_budget, "real": real_budget}
    devices = args.devices or two_cpu_devices()
    names = [str(device) for device in devices]
    factory, = registry.agent_factories([args.agent], names, options).values()
    baselines = registry.agent_factories(args.baselines, names) if args.baselines else {}
    graph = load_graph(args.model)
    families = factory().feature_families
    features = {} if families is None else {"features": families}
    real_options = {k: getattr(args, k) for k in ("warmup", "repeats") if getattr(args, k) is not None}
    sim_env = DevicePlacementEnv(graph, backend="simulated", profile=args.profile, objective=args.objective,
                                 unsupported=args.unsupported, **features)
    real_env = DevicePlacementEnv(graph, backend="openvino", devices=devices, objective=args.objective,
                                  unsupported=args.unsupported, **real_options, **features)
    records: list[dict] = []
    args.planned_runs = 2
    label = args.agent if args.agent.removeprefix(registry.HYBRID_PREFIX) in registry.AGENTS else None
    try:
        agent, records, comparison = sim_to_real(
            factory, args.model, sim_env=sim_env, real_env=real_env, sim_budget=sim_budget, real_budget=real_budget,
            seed=args.seed, label=label, baselines=baselines, repeats=args.repeats or 20, warmup=args.warmup or 3,
            on_record=records.append)  # the simulated phase's record is kept if the real phase is interrupted
    except KeyboardInterrupt:
        return interrupted(args, records, paths)
    finally:
        real_env.close()
    for record in records:
        phase = record["extra"]["phase"]
        kind = "SIMULATED" if record["simulated"] else "measured"
        print(f"{phase} phase: {record['placements_measured']} placements, best {record['latency_s'] * 1e3:.3f} ms "
              f"({kind}, {record['backend']}, devices {', '.join(record['devices'])})")
    print(format_comparison(comparison))
    written = []
    if args.save:
        written.append(agent.save(args.save, overwrite=args.overwrite))
    written = write_results(args, records, paths, written, sim2real=comparison) if paths else written
    return 0
