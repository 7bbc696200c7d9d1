"""One case's training of the imitation placer: label the training graphs, imitate the labels, optionally PPO.

`train_case` is what `benchmarks/learned_placer/train_learned_placer.py` runs per (preset, objective); it returns the
agent and a report of what ran and how long each phase took (labelling, imitation, RL).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict
from typing import Any, Callable, Sequence

from .agent import ImitationAgent
from .labels import Label, LabelCache, LabelSettings, check_training_graphs, label_env, labels_for

__all__ = ["labels_digest", "place_zero_shot", "train_case", "zero_shot_gap"]


def labels_digest(labels: Sequence[Label]) -> str:
    """SHA-256 of the (graph, placement) pairs of `labels`, in order: two trainings that imitated the same
    placements of the same graphs have the same digest (a label computed afresh may differ from a cached one: the
    time-limited `optimal` among its planners finds what the machine's speed allows)."""
    pairs = [[label.graph, [int(device) for device in label.placement]] for label in labels]
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()


def place_zero_shot(agent: Any, graph: str, preset: str, objective: str) -> tuple[Any, Any, Any, float]:
    """`agent`'s zero-shot placement of `graph` under (`preset`, `objective`) on the env labels are measured on
    (`label_env`), measured once: ``(env, placement (N,), measurement, predict wall seconds)``. `agent`: an
    `ImitationAgent`, or any agent with ``predict`` (`benchmarks/learned_placer/learned_transfer_others.py` places the
    other learned agents with it)."""
    env = label_env(graph, preset, objective, agent.feature_families).unwrapped
    obs = env.reset(seed=0)[0]
    started = time.perf_counter()
    placement = agent.predict(obs)
    predict_s = time.perf_counter() - started
    return env, placement, env.measure(placement), predict_s


def zero_shot_gap(agent: ImitationAgent, references: Sequence[Label]) -> float:
    """Geometric-mean % gap of `agent`'s zero-shot placements (`place_zero_shot`) of the graphs of `references` to
    those labels' latencies; a placement that fails counts as ten times its label (+900%)."""
    logs = []
    for reference in references:
        measured = place_zero_shot(agent, reference.graph, reference.preset, reference.objective)[2]
        logs.append(math.log(measured.latency_s / reference.latency_s) if measured.ok else math.log(10.0))
    return 100.0 * (math.exp(sum(logs) / len(logs)) - 1.0)


def train_case(preset: str, objective: str, graphs: Sequence[str], *, epochs: int, seed: int = 0,
               rl_budget: int = 0, settings: LabelSettings = LabelSettings(), cache: LabelCache | None = None,
               workers: int = 2, ray: str | None = None, max_seconds: float | None = None,
               agent_options: "dict[str, Any] | None" = None, average_from: int = 0, log: Callable[[str], None] = print,
               on_epoch: Callable[[ImitationAgent, int, float], None] | None = None,
               ) -> tuple[ImitationAgent, dict[str, Any]]:
    """Train an `ImitationAgent` for (`preset`, `objective`) on `graphs` (checked: train split and synthetic only).

    Phases: labels (`labels_for`, cached, `workers` processes or tasks on the Ray cluster at `ray`), imitation
    (`ImitationAgent.pretrain`, `epochs` passes, at most `max_seconds`, the weights averaged from pass
    `average_from` on when it is > 0; `on_epoch(agent, pass, mean loss)` after each pass, with that pass's own
    weights), then `rl_budget` placements of GO's PPO over the same graphs (0: none).
    Returns the agent and ``{"preset", "objective", "seed", "graphs", "label_settings", "label_s", "label_sources",
    "labels_sha256", "imitation", "average_from", "rl_budget", "rl_s", "train_s"}`` (``train_s``: all three phases;
    ``labels_sha256``: `labels_digest` of the labels imitated, so a rebuild shows whether it had the same ones)."""
    check_training_graphs(graphs)
    started = time.perf_counter()
    labels = labels_for(graphs, preset, objective, settings, cache, workers, ray)
    label_s = time.perf_counter() - started
    log(f"{preset}/{objective}: {len(labels)} labels in {label_s:.1f} s")

    agent = ImitationAgent(**{"seed": seed, **dict(agent_options or {})})
    features = agent.feature_families
    envs = [label_env(label.graph, preset, objective, features) for label in labels]
    examples = [(env, label.check_fits(env)) for env, label in zip(envs, labels)]  # a file's label, checked

    def after_pass(epoch: int, loss: float) -> None:
        if epoch == 1 or epoch % 10 == 0:
            log(f"  epoch {epoch}: cross-entropy {loss:.4f}")
        if on_epoch is not None:
            on_epoch(agent, epoch, loss)

    imitation = agent.pretrain(examples, epochs, seed=seed, max_seconds=max_seconds, average_from=average_from,
                               on_epoch=after_pass)
    log(f"{preset}/{objective}: imitation {imitation['epochs']} epochs in {imitation['seconds']:.1f} s")

    rl_s = 0.0
    if rl_budget > 0:
        rl_started = time.perf_counter()
        agent.learn(label_env(graphs, preset, objective, features), rl_budget, seed=seed)
        rl_s = time.perf_counter() - rl_started
        log(f"{preset}/{objective}: PPO {rl_budget} placements in {rl_s:.1f} s")
    sources: dict[str, int] = {}
    for label in labels:
        sources[label.source] = sources.get(label.source, 0) + 1
    return agent, {"preset": preset, "objective": objective, "seed": seed, "graphs": list(graphs),
                   "label_settings": asdict(settings), "label_s": label_s, "label_sources": sources,
                   "labels_sha256": labels_digest(labels),
                   "imitation": imitation, "average_from": average_from, "rl_budget": rl_budget, "rl_s": rl_s,
                   "train_s": time.perf_counter() - started}
