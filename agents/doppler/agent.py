"""`DopplerAgent`: DOPPLER (Yao et al., ICLR 2026: "DOPPLER: Dual-Policy Learning for Device Assignment in
Asynchronous Dataflow Graphs"; code: github.com/xinyuyao/Doppler).

>>> env = gym.make("DevicePlacement-v0", model="resnet", backend="simulated")
>>> agent = DopplerAgent(seed=0).learn(env, budget=500)
>>> agent.best_placement, agent.best_latency_s, agent.predict(env.reset()[0])

An episode builds one placement op by op, as a list scheduler does: the selection policy picks a ready op, the
placement policy a device for it, and the episode's schedule (`agents.baselines.critical_path.ListSchedule`, priced
on the observation's costs) records when the op would start and finish there, which the next steps' device states
read (`agents.doppler.policy`). Each decision is epsilon-greedy: with probability epsilon a uniformly random ready
op (allowed device), otherwise the policy's most likely one; its log-probability under the policy's softmax is what
the update uses (DOPPLER's ``node_selection`` / ``device_selection``).

Training is DOPPLER's curriculum, read top to bottom in `DopplerAgent.train`:

1. **imitation** (``imitation_episodes``; DOPPLER's stage 1, 2,000 episodes): at every step of an episode, the
   log-probability of what the critical-path heuristic would do in that state (the ready op of largest bottom
   level; the device where the chosen op finishes first, within memory) is maximised, plus a small entropy bonus;
   epsilon falls linearly from ``imitation_epsilon`` (1.0: the first episodes wander at random, so the heuristic is
   imitated on states the policy will meet) to 0. The heuristic plans on the run's cost model (the one the
   ``critical-path`` baseline plans on). Nothing is measured: the placements of this stage do not count against the
   budget.
2. **REINFORCE** (DOPPLER's stages 2 and 3, 2,000 simulated and 4,000 real episodes): one measured placement per
   episode, the whole budget; the reward is the running mean cost of the episodes so far minus this episode's cost
   (milliseconds), given at the last step and discounted back by ``gamma``; epsilon falls linearly from ``epsilon``
   to 0 over the budget. One Adam step per episode.

``predict`` is the policies' deterministic episode (both argmax) on the observation. Differences from the paper are
listed on docs/agents/doppler.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from agents.algos.learned import LEARNED_RUN
from agents.baselines.constraints import Constraints
from agents.baselines.costs import CostModel, cost_model, standalone_devices
from agents.baselines.critical_path import ListSchedule, bottom_levels, critical_path_schedule
from agents.core.base import BaseAgent, PolicySpec
from agents.core.checkpoint import CheckpointError
from agents.core.bounds import COEFFICIENT, DEPTH, LEARNING_RATE, SHARE, WIDTH, check_settings, setting
from agents.core.loop import RunLoop
from agents.core.run import agent_predict
from agents.search.attach import SearchLayer
from agents.search.config import SearchConfig, option_names
from agents.search.node_by_node import graph_key
from placement_gym.backends.base import shareable_devices
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.env import strip_padding
from placement_gym.schema import MAX_DEVICES, Boolean, Integer, ListOf, Number

from .graph import GraphContext, device_state, link_table
from .policy import DopplerPolicy

__all__ = ["DopplerAgent", "DopplerSettings", "Episode", "Teacher"]

#: Imitation episodes at most (DOPPLER's stage 1 runs 2,000).
EPISODES = Integer(0, 1 << 20)


@dataclass(frozen=True)
class DopplerSettings:
    """DOPPLER's own settings (`DopplerAgent`'s keywords besides the run's), with their defaults.

    Args:
        hidden_channels: embedding width of both encoders (DOPPLER's ``hidden1`` is 128; 64 here, the other agents'
            width: an encoder's edge network costs H^3 per edge, 8 times less, docs/agents/doppler.md).
        head_channels: width of the scoring layers (DOPPLER's ``hidden2``, 64).
        num_layers: message-passing steps of each encoder (DOPPLER's ``num_step_message_passing``, 6).
        imitation_episodes: episodes of the imitation stage, measured by nothing (DOPPLER: 2,000); 0: none. It runs
            on the first ``learn`` only (a trained policy goes on with REINFORCE).
        imitation_learning_rate: Adam step size of the imitation stage (DOPPLER: 1e-3).
        imitation_epsilon: exploration at the first imitation episode, falling linearly to 0 (DOPPLER: 1.0).
        imitation_entropy_coef: weight of the entropy bonus while imitating (DOPPLER: 0.001).
        learning_rate: Adam step size of the REINFORCE stage (DOPPLER: 1e-4).
        epsilon: exploration at the first REINFORCE episode, falling linearly to 0 over the budget (DOPPLER: 0.2).
        entropy_coef: weight of the entropy bonus in the REINFORCE stage (DOPPLER: 0).
        gamma: discount of the episode's reward back from its last decision (DOPPLER: 0.99).
    """

    hidden_channels: int = setting(64, WIDTH)
    head_channels: int = setting(64, WIDTH)
    num_layers: int = setting(6, DEPTH)
    imitation_episodes: int = setting(200, EPISODES)
    imitation_learning_rate: float = setting(1e-3, LEARNING_RATE)
    imitation_epsilon: float = setting(1.0, SHARE)
    imitation_entropy_coef: float = setting(1e-3, COEFFICIENT)
    learning_rate: float = setting(1e-4, LEARNING_RATE)
    epsilon: float = setting(0.2, SHARE)
    entropy_coef: float = setting(0.0, COEFFICIENT)
    gamma: float = setting(0.99, SHARE)

    def __post_init__(self) -> None:
        check_settings(self)


class Teacher:
    """The critical-path heuristic the imitation stage imitates, on a cost model and memory limits: its schedule
    follows the episode's decisions (`start`), and at each step it says what it would choose
    (`ListSchedule.critical_op` by `levels`, `ListSchedule.earliest_device`). `whole`: the device outside HETERO
    that takes the whole graph where the ``critical-path`` baseline's answer is that device alone (its candidate
    of its own, `agents.baselines.costs.standalone_devices`), wanted at the episode's first placement; else None."""

    def __init__(self, costs: CostModel, constraints: Constraints | None, whole: int | None = None) -> None:
        self.costs, self.constraints, self.whole = costs, constraints, whole
        self.levels: np.ndarray | None = None  # (N,) bottom levels, computed at the first episode

    def start(self, edge_index: np.ndarray) -> ListSchedule:
        """A fresh schedule of the graph of `edge_index` (2, E) for one episode."""
        if self.levels is None:
            self.levels = bottom_levels(edge_index, self.costs)
        return ListSchedule(edge_index, self.costs, self.constraints)


@dataclass
class Episode:
    """One episode's placement and what its update reads (empty when it was run without gradients).

    Attributes:
        placement: (N,) int64; order: the ops in the order they were placed; n_steps: N.
        log_probs: the log-probability of each decision taken that had more than one choice (a forced one has 0);
        steps: the step (0..N-1) of each of them.
        neg_entropy: () the sum over decisions of sum_a p log p (DOPPLER's entropy term).
        imitation: () the summed log-probability of the teacher's choices (0 without a teacher).
        matched: decisions equal to the teacher's (forced ones included).
    """

    placement: np.ndarray
    order: list[int]
    n_steps: int = 0
    log_probs: list[Tensor] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    neg_entropy: Tensor | float = 0.0
    imitation: Tensor | float = 0.0
    matched: int = 0


def _choose(logits: Callable[[], Tensor], allowed: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    """Epsilon-greedy (DOPPLER): with probability `epsilon` a uniformly random index of `allowed` (the choices the
    policy's scores do not forbid), else the argmax of the scores, which `logits` computes only then (a random
    decision needs no network call; the update scores every decision afterwards, `DopplerAgent.episode`)."""
    if epsilon > 0 and rng.random() < epsilon:
        return int(allowed[int(rng.integers(len(allowed)))])
    return int(torch.argmax(logits()))


def _descend(optimizer: torch.optim.Optimizer, loss: "Tensor | float") -> float:
    """One optimiser step on `loss`; none where it depends on no parameter (every decision of the episode had one
    choice). Returns the loss's value."""
    if isinstance(loss, Tensor) and loss.requires_grad:
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return float(loss.detach()) if isinstance(loss, Tensor) else float(loss)


class DopplerAgent(BaseAgent):
    """DOPPLER's dual policy and its imitation-then-REINFORCE training (module docstring).

    Keywords: its own settings (`DopplerSettings`) and the run's (``seed``, ``torch_threads``, ``device``,
    ``coarsen_above``, ``max_nodes``, ``search``: `agents.core.run.RunAgent`; of the search components it runs only
    ``finetune_from_predict``, at the run loop's named point `RunAgent._measure_starts`);
    ``hybrid:doppler`` puts the generic search layer around it (`agents.search.hybrid.SearchAround`).
    """

    name = "doppler"
    #: The search layer it holds when built with ``search`` and the one component it runs: a fine-tuning run's first
    #: measurement of the trained policy's own placement.
    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = option_names("finetune_from_predict")
    #: No hybrid preset of its own: ``hybrid:doppler`` is the generic layer around it (`SearchAround`).
    HYBRID = SearchConfig()
    SETTINGS = DopplerSettings()
    RUN = LEARNED_RUN
    #: ``placement-gym sim2real``'s default ``(simulated, real)`` placements for DOPPLER: its paper's three-stage
    #: schedule (2,000 imitation, 2,000 simulated, 4,000 real episodes) scaled to a tenth, as ``imitation_episodes``
    #: (200) scales its first stage (docs/agents/doppler.md#sim-to-real: what the real phase costs here).
    SIM_TO_REAL_BUDGETS = (200, 400)
    #: `alone` and `links`, kept with the weights: a loaded policy predicts with the devices outside HETERO and the
    #: link table it was trained with.
    SAVED_STATE = {"alone": ListOf(Boolean(), max_len=MAX_DEVICES),
                   "links": ListOf(ListOf(ListOf(Number(0.0, 1e3), max_len=2, min_len=2), max_len=MAX_DEVICES),
                                   max_len=MAX_DEVICES)}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._contexts: dict[tuple[int, int, float], GraphContext] = {}  # by (ops, edges, summed op costs)
        #: (D,) bool: the devices of the last run's backend that HETERO cannot share (`shareable_devices`: the NPU),
        #: each of which takes the whole graph or nothing; None before a run (the observation does not say).
        self.alone: np.ndarray | None = None
        #: (D, D, 2) the link table of the last simulated backend trained on (`agents.doppler.graph.link_table`):
        #: the observation describes each device's slowest link, not each pair; None: price by the observation.
        self.links: np.ndarray | None = None

    def _saved_state(self) -> dict[str, Any]:
        saved: dict[str, Any] = {}
        if self.alone is not None:
            saved["alone"] = [bool(v) for v in self.alone]
        if self.links is not None:
            saved["links"] = self.links.tolist()
        return saved

    def _restore_saved_state(self, saved: Mapping[str, Any]) -> None:
        if "alone" in saved:
            self.alone = np.asarray(saved["alone"], dtype=bool)
        if "links" in saved:
            rows = saved["links"]
            if any(len(row) != len(rows) for row in rows):
                raise CheckpointError(f"DOPPLER's saved link table is not square ({len(rows)} rows of "
                                      f"{sorted({len(row) for row in rows})} pairs); expected D rows of D pairs")
            self.use_links(np.asarray(rows, dtype=np.float64).reshape(len(rows), len(rows), 2))

    def use_links(self, links: np.ndarray | None) -> None:
        """Price the episodes' transfers with `links` (`link_table`; None: the observation's slowest links); the
        graphs' contexts built with the former table are dropped."""
        if (links is None) != (self.links is None) or (links is not None and not np.array_equal(links, self.links)):
            self._contexts.clear()
        self.links = links

    def alone_devices(self, graph: GraphContext) -> np.ndarray:
        """(D,) bool: `alone` where it describes `graph`'s devices; else none (every device shares the graph)."""
        if self.alone is not None and self.alone.shape[0] == graph.n_devices:
            return self.alone
        return np.zeros(graph.n_devices, dtype=bool)

    def build_policy(self, spec: PolicySpec) -> DopplerPolicy:
        return DopplerPolicy(spec, self.hidden_channels, self.head_channels, self.num_layers)

    # ------------------------------------------------------------------ one episode
    def context(self, obs: Mapping[str, Any]) -> GraphContext:
        """The `GraphContext` of the graph of `obs`, built once per graph (by its size and the observation's
        costs) and kept."""
        obs = strip_padding(obs)
        key = graph_key(obs) + (float(np.asarray(obs["node_device_cost"], dtype=np.float64).sum()),)
        if key not in self._contexts:
            self._contexts[key] = GraphContext.of_observation(obs, self.links)
        return self._contexts[key]

    def episode(self, graph: GraphContext, rng: np.random.Generator, epsilon: float = 0.0,
                teacher: Teacher | None = None, grad: bool = True) -> Episode:
        """Place every op of `graph` (module docstring): SEL picks a ready op, PLC its device, both
        epsilon-greedy; with a `teacher`, also sum the log-probabilities of its choices.

        A device outside HETERO (`alone`, the NPU) runs the whole graph or nothing, so the episode's first placement
        decides: a device outside HETERO there takes every op; any other device shuts them out of the episode.

        The decisions are taken step by step without gradients; with `grad`, the log-probabilities the update reads
        are then computed again for all the decisions at once from the states recorded (`_score`): the same
        numbers as scoring each step as it is taken, with one autograd graph of a few dozen nodes instead of one
        per step, on the episode's one encoding of the graph per policy."""
        policy = self.policy
        sel_steps: list[int] = []  # SEL decisions: step, ready ops, taken index, teacher's index
        sel_ready: list[list[int]] = []
        sel_taken: list[int] = []
        sel_wanted: list[int] = []
        plc_steps: list[int] = []  # PLC decisions: step, op, device state, placed matrix, taken, teacher's
        plc_ops: list[int] = []
        plc_states: list[np.ndarray] = []
        plc_placed: list[np.ndarray] = []
        plc_taken: list[int] = []
        plc_wanted: list[int] = []
        plc_masks: list[np.ndarray] = []
        alone = self.alone_devices(graph)
        # (D,) the devices this episode may use: at first every HETERO device and each device outside HETERO that
        # runs every op; after the first placement, that device alone or the HETERO devices.
        usable = ~alone | graph.action_mask.all(axis=0)
        # Each policy encodes the graph once per episode (DOPPLER's first step): with `grad`, the encodings keep
        # their autograd graph for the scoring below, and the step-by-step decisions read them detached.
        with torch.set_grad_enabled(grad):
            encoded = policy.selection.encode(graph), policy.placement.encode(graph)
        selection, placement = (e.detached() for e in encoded)
        with torch.no_grad():
            schedule = ListSchedule(graph.edge_index, graph.costs)
            taught = None if teacher is None else teacher.start(graph.edge_index)
            placed = np.zeros((graph.n_devices, graph.n_ops), dtype=np.float32)  # which ops each device holds
            episode = Episode(np.empty(0, dtype=np.int64), [])
            step = 0
            while not schedule.done:
                ready = sorted(schedule.ready)
                want_op = None if taught is None else taught.critical_op(teacher.levels)
                # A decision with one choice is no decision: no network call, no randomness, log-probability 0
                # (exactly what the softmax over one item gives), so chains of ops cost no policy time.
                if len(ready) == 1:
                    op = ready[0]
                else:
                    pick = _choose(lambda: policy.selection.logits(graph, selection, torch.as_tensor(ready)),
                                   np.arange(len(ready)), epsilon, rng)
                    op = ready[pick]
                    if grad:
                        sel_steps.append(step)
                        sel_ready.append(ready)
                        sel_taken.append(pick)
                        sel_wanted.append(-1 if want_op is None else ready.index(want_op))
                # The teacher wants its whole-graph device at the first placement and, once that device holds the
                # episode, for every op after (the baseline's placement there); else the heuristic's device.
                whole = None if taught is None else teacher.whole
                want_device = None if taught is None else (
                    whole if whole is not None and (step == 0 or usable.sum() == 1 and usable[whole])
                    else taught.earliest_device(op))
                mask = graph.action_mask[op] & usable
                mask = mask if mask.any() else graph.action_mask[op]
                allowed = np.flatnonzero(mask)
                if allowed.size == 1:
                    device = int(allowed[0])
                else:
                    state = device_state(schedule, op)
                    device = _choose(lambda: policy.placement.logits(graph, placement, op, state,
                                                                     torch.from_numpy(placed), mask),
                                     allowed, epsilon, rng)
                    if grad:
                        plc_steps.append(step)
                        plc_ops.append(op)
                        plc_states.append(state)
                        plc_placed.append(placed.copy())
                        plc_taken.append(device)
                        plc_wanted.append(-1 if want_device is None else want_device)
                        plc_masks.append(mask)
                if step == 0 and alone.any():
                    usable = np.eye(graph.n_devices, dtype=bool)[device] if alone[device] else ~alone
                if taught is not None:
                    episode.matched += int(want_op == op) + int(want_device == device)
                    taught.place(op, device)
                schedule.place(op, device)
                placed[device, op] = 1.0
                step += 1
        episode.placement, episode.order, episode.n_steps = schedule.placement.copy(), list(schedule.order), step
        if grad and (sel_steps or plc_steps):
            node_log_p = device_log_p = None
            if sel_steps:
                # The steps with as many ready ops are scored together; each row padded to the widest with -inf.
                node_logits = torch.full((len(sel_ready), max(map(len, sel_ready))), float("-inf"))
                for size in sorted({len(ready) for ready in sel_ready}):
                    rows = [k for k, ready in enumerate(sel_ready) if len(ready) == size]
                    scores = policy.selection.batch_logits(graph, encoded[0],
                                                           torch.as_tensor([sel_ready[k] for k in rows]))
                    node_logits = node_logits.index_put(
                        (torch.as_tensor(rows).unsqueeze(1), torch.arange(size).unsqueeze(0)), scores)
                node_log_p = torch.log_softmax(node_logits, dim=1)
            if plc_steps:
                device_logits = policy.placement.batch_logits(
                    graph, encoded[1], torch.as_tensor(plc_ops), torch.from_numpy(np.stack(plc_states)),
                    torch.from_numpy(np.stack(plc_placed)), torch.from_numpy(np.stack(plc_masks)))
                device_log_p = torch.log_softmax(device_logits, dim=1)
            self._score(episode, node_log_p, sel_steps, sel_taken, sel_wanted, device_log_p, plc_steps, plc_taken,
                        plc_wanted)
        return episode

    @staticmethod
    def _score(episode: "Episode", node_log_p: Tensor | None, sel_steps: list[int], sel_taken: list[int],
               sel_wanted: list[int], device_log_p: Tensor | None, plc_steps: list[int], plc_taken: list[int],
               plc_wanted: list[int]) -> None:
        """Fill `episode`'s log-probabilities of the decisions taken (SEL's then PLC's, each with its step), its
        summed p log p and, with a teacher (wanted >= 0), the summed log-probability of the teacher's choices, from
        the log-softmax (decisions, choices) of each policy (-inf where a choice is not allowed)."""
        log_probs, steps, neg_entropy, imitation = [], [], 0.0, 0.0
        for log_p, at, taken, wanted in ((node_log_p, sel_steps, sel_taken, sel_wanted),
                                         (device_log_p, plc_steps, plc_taken, plc_wanted)):
            if log_p is None:
                continue
            rows = torch.arange(len(at))
            log_probs.append(log_p[rows, torch.as_tensor(taken)])
            steps.extend(at)
            # sum p log p over the allowed choices (a forbidden one, -inf, would make the gradient NaN)
            neg_entropy = neg_entropy + (log_p.exp() * log_p.masked_fill(~torch.isfinite(log_p), 0.0)).sum()
            wanted_t = torch.as_tensor(wanted)
            if bool((wanted_t >= 0).any()):
                imitation = imitation + log_p[rows, wanted_t.clamp(min=0)][wanted_t >= 0].sum()
        episode.log_probs = list(torch.cat(log_probs).unbind(0))
        episode.steps, episode.neg_entropy, episode.imitation = steps, neg_entropy, imitation

    # ------------------------------------------------------------------ training
    def teacher(self, run: RunLoop, obs: Mapping[str, Any]) -> Teacher:
        """The critical-path heuristic for the run's graph: on the run's cost model and memory limits (what the
        ``critical-path`` baseline plans on) where it has one for the graph the agent sees; else (the real backend,
        a coarsened or multi-graph run) on the observation's costs."""
        graph = run.base.graph
        if not run.many_graphs and run.coarsening is None:
            try:
                costs = cost_model(run.env)
            except ValueError:  # the real backend: no cost model of its own
                costs = None
            if costs is not None:
                backend = run.base.backend
                if not isinstance(backend, SimulatedBackend):
                    return Teacher(costs, None)
                constraints = Constraints.of(backend, graph)
                # The ``critical-path`` baseline's answer: its heuristic's placement, or a device outside HETERO
                # alone where the cost model prices that faster (`standalone_devices` ranks them, cheapest first).
                heuristic = critical_path_schedule(graph.edge_index, costs, constraints)[0]
                best = next(standalone_devices(run.env, iter([heuristic])))
                whole = int(best[0]) if (best == best[0]).all() and self.alone_devices(self.context(obs))[best[0]] \
                    else None
                return Teacher(costs, constraints, whole)
        return Teacher(self.context(obs).costs, None)

    def train(self, run: RunLoop, seed: int | None) -> None:
        rng = np.random.default_rng(seed)
        obs, _ = run.env.reset(seed=seed)
        fresh = self.policy is None
        spec = PolicySpec.from_env(run.env)
        self._setup(spec, seed)
        self.alone = ~shareable_devices(run.base.backend)
        # The link table of a simulated backend; a backend without one (the real backend, after a simulated phase
        # on a profile of the same devices) keeps the table trained with where it has the run's device count.
        links = link_table(run.base.backend)
        if links is not None or (self.links is not None and self.links.shape[0] != spec.n_devices):
            self.use_links(links)
        self.policy.train()
        # The run loop's named point: a fine-tuning run measures the trained policy's own placement first where
        # ``finetune_from_predict`` asks (off by default: the paper's method measures nothing else).
        self._measure_starts(run, run.env, seed, not fresh, run.predict_observation())

        # Stage 1: imitation of the critical-path heuristic on the states the policy visits (nothing measured).
        if fresh and self.imitation_episodes > 0:
            optimizer = torch.optim.Adam(self.policy.parameters(), lr=self.imitation_learning_rate)
            teachers: dict[tuple, Teacher] = {}
            for k in range(self.imitation_episodes):
                if run.many_graphs:
                    obs, _ = run.env.reset()
                graph = self.context(obs)
                key = graph_key(strip_padding(obs))
                if key not in teachers:
                    teachers[key] = self.teacher(run, strip_padding(obs))
                epsilon = self.imitation_epsilon * (1.0 - k / self.imitation_episodes)
                episode = self.episode(graph, rng, epsilon, teachers[key])
                loss = _descend(optimizer, -episode.imitation + self.imitation_entropy_coef * episode.neg_entropy)
                run.record_update({"stage": "imitation", "loss": loss, "epsilon": epsilon,
                                   "matched": episode.matched / (2 * graph.n_ops)})

        # Stage 2: REINFORCE, one measured placement per episode, against the running mean cost.
        optimizer = torch.optim.Adam(self.policy.parameters(), lr=self.learning_rate)
        episodes, total_cost = run.remaining, 0.0
        k = 0
        while not run.done:
            if k > 0:
                obs, _ = run.env.reset()
            graph = self.context(obs)
            epsilon = self.epsilon * (1.0 - k / max(episodes, 1))
            episode = self.episode(graph, rng, epsilon)
            _, _, _, _, info = run.env.step(self.full_action(episode.placement, obs))
            cost = float(info["latency_corrected_s"]) * 1e3  # milliseconds
            total_cost += cost
            reward = total_cost / (k + 1) - cost
            # The reward comes at the last step; step t's return is gamma^(T-1-t) of it (its two decisions alike).
            discount = torch.tensor([self.gamma ** (episode.n_steps - 1 - t) for t in episode.steps])
            log_probs = torch.stack(episode.log_probs) if episode.log_probs else torch.zeros(0)
            loss = _descend(optimizer, -(log_probs * discount).sum() * reward + self.entropy_coef * episode.neg_entropy)
            run.record_update({"stage": "reinforce", "loss": loss, "epsilon": epsilon, "cost_ms": cost,
                               "reward": reward})
            k += 1

    @staticmethod
    def full_action(placement: np.ndarray, obs: Mapping[str, Any]) -> np.ndarray:
        """`placement` (N,) as the env's action: padded with device 0 to a multi-graph env's width."""
        width = int(np.shape(obs["placement"])[0])
        if width == placement.shape[0]:
            return placement
        return np.concatenate([placement, np.zeros(width - placement.shape[0], dtype=np.int64)])

    # ------------------------------------------------------------------ inference
    @agent_predict
    def predict(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        """(N,) int64: the deterministic episode (both policies' argmax) on `obs`'s graph; ``deterministic=False``
        draws nothing more (DOPPLER's policies are epsilon-greedy, not sampled)."""
        self._require_policy()
        self.policy.eval()
        placement = self.episode(self.context(obs), np.random.default_rng(0), 0.0, grad=False).placement
        return self.full_action(placement, obs)
