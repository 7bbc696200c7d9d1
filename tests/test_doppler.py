"""DOPPLER (`agents.doppler`): it learns through the shared run loop within its budget, predicts, saves and loads,
is reproducible from its seed, its imitation stage alone reproduces the critical-path heuristic's placement, and bad
settings are refused in one line. Real parts on tiny graphs (the simulated backend); small networks keep it fast."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.baselines import cost_model, critical_path_schedule
from agents.baselines.critical_path import ListSchedule
from agents.core.checkpoint import CheckpointError
from agents.doppler import DopplerAgent
from agents.doppler.graph import DEVICE_STATE, GraphContext, device_state, link_table
from placement_gym import DevicePlacementEnv, registry
from placement_gym.backends.base import shareable_devices

from .conftest import PlacementsSeen

#: A small network and a short imitation stage: the behaviours tested do not depend on the width.
SMALL = {"hidden_channels": 16, "head_channels": 16, "num_layers": 2, "imitation_episodes": 10}


def _env(model: str = "tiny_chain", profile: str = "paper") -> DevicePlacementEnv:
    return DevicePlacementEnv(model, backend="simulated", profile=profile)


def test_it_learns_within_the_budget_predicts_and_round_trips_a_checkpoint(tmp_path):
    env = _env()
    agent = registry.make_agent("doppler", {**SMALL, "seed": 0})
    agent.learn(env, budget=6, seed=0)
    summary = agent.run_summary
    assert summary.steps == 6  # the imitation stage measures nothing: every placement is a REINFORCE episode's
    stages = [h["stage"] for h in agent.history]
    assert stages == ["imitation"] * 10 + ["reinforce"] * 6
    obs = env.reset(seed=0)[0]
    placement = agent.predict(obs)
    assert placement.shape == (env.graph.n_ops,) and placement.dtype == np.int64
    assert summary.predict_latency_s > 0 and agent.best_latency_s > 0 and agent.search_components() == []
    loaded = DopplerAgent.load(agent.save(tmp_path / "doppler.pt"))
    assert loaded.hyperparameters() == agent.hyperparameters()
    assert np.array_equal(loaded.predict(obs), placement)
    # A trained policy continues with REINFORCE alone (the imitation stage is the first run's).
    loaded.learn(env, budget=2, seed=1)
    assert [h["stage"] for h in loaded.history] == ["reinforce"] * 2
    # The policy holds no graph size or device count: it places another graph on another device set.
    other = _env("tiny_branch", "ai_pc")
    assert loaded.predict(other.reset(seed=0)[0]).shape == (other.graph.n_ops,)


def test_a_fine_tuning_run_can_measure_the_trained_policys_placement_first():
    env = _env()
    agent = registry.make_agent("doppler", {**SMALL, "seed": 0, "finetune_from_predict": True})
    agent.learn(env, budget=2)
    trained = agent.predict(env.reset(seed=0)[0]).tolist()
    seen = PlacementsSeen()
    agent.learn(env, budget=2, callback=seen)
    assert seen.placements[0] == trained and agent.search_components() == ["finetune_from_predict"]


def test_a_seed_reproduces_the_run():
    runs = []
    for _ in range(2):
        seen = PlacementsSeen()
        agent = DopplerAgent(**SMALL, seed=3).learn(_env("tiny_branch"), budget=5, callback=seen)
        runs.append((seen.placements, [h["loss"] for h in agent.history]))
    assert runs[0] == runs[1]
    seen = PlacementsSeen()
    DopplerAgent(**SMALL, seed=4).learn(_env("tiny_branch"), budget=5, callback=seen)
    assert seen.placements != runs[0][0]


def test_the_imitation_stage_alone_reproduces_the_critical_path_heuristic():
    env = _env("tiny_branch", "paper")
    agent = DopplerAgent(hidden_channels=32, num_layers=3, imitation_episodes=150, seed=0).learn(env, budget=0)
    heuristic, _, _ = critical_path_schedule(env.graph.edge_index, cost_model(env))
    assert np.array_equal(agent.predict(env.reset(seed=0)[0]), heuristic)
    matched = [h["matched"] for h in agent.history]
    assert matched[-1] == 1.0 > matched[0]  # every decision of the last episode was the heuristic's


def test_an_episodes_batched_scores_are_those_of_each_step_as_it_was_taken():
    """`DopplerAgent.episode` scores its decisions in one batched pass after taking them: the log-probability of
    each decision taken and of the teacher's choice equal those of scoring each step's state on its own (the
    policies' per-step `logits`), and their gradients too."""
    import torch

    from agents.baselines.critical_path import ListSchedule
    from agents.core.base import PolicySpec
    from agents.doppler.agent import Teacher
    from agents.doppler.graph import device_state

    env = _env("tiny_branch", "ai_pc")
    agent = DopplerAgent(**SMALL, seed=0)
    agent._setup(PolicySpec.from_env(env), 0)
    agent.alone = ~shareable_devices(env.unwrapped.backend)  # the NPU: whole graph or nothing, as `train` sets it
    graph = agent.context(env.reset(seed=0)[0])
    teacher = Teacher(cost_model(env), None)
    episode = agent.episode(graph, np.random.default_rng(1), 0.5, teacher)
    assert episode.log_probs and len(episode.steps) == len(episode.log_probs)
    batched = (torch.stack(episode.log_probs).sum(), episode.imitation, episode.neg_entropy)

    policy = agent.policy
    selection, placement = policy.selection.encode(graph), policy.placement.encode(graph)
    schedule, taught = ListSchedule(graph.edge_index, graph.costs), teacher.start(graph.edge_index)
    placed = np.zeros((graph.n_devices, graph.n_ops), dtype=np.float32)
    taken, wanted, neg_entropy, choices = [], [], 0.0, 0
    usable = np.ones(graph.n_devices, dtype=bool)
    for step, op in enumerate(episode.order):
        device = int(episode.placement[op])
        ready, want_op = sorted(schedule.ready), taught.critical_op(teacher.levels)
        decisions = []
        if len(ready) > 1:
            decisions.append((policy.selection.logits(graph, selection, torch.as_tensor(ready)), ready.index(op),
                              ready.index(want_op)))
        mask = graph.action_mask[op] & usable
        if np.flatnonzero(mask).size > 1:
            decisions.append((policy.placement.logits(graph, placement, op, device_state(schedule, op),
                                                      torch.tensor(placed), mask), device, taught.earliest_device(op)))
        if step == 0:
            usable = np.eye(graph.n_devices, dtype=bool)[device] if agent.alone[device] else ~agent.alone
        for logits, chosen, teachers in decisions:
            log_p = torch.log_softmax(logits, dim=0)
            taken.append(log_p[chosen])
            wanted.append(log_p[teachers])
            neg_entropy = neg_entropy + (log_p.exp() * log_p.masked_fill(~torch.isfinite(log_p), 0.0)).sum()
            choices += 1
        taught.place(op, device)
        schedule.place(op, device)
        placed[device, op] = 1.0
    stepwise = (torch.stack(taken).sum(), torch.stack(wanted).sum(), neg_entropy)
    assert choices == len(episode.log_probs)
    for a, b in zip(batched, stepwise):
        assert float(a.detach()) == pytest.approx(float(b.detach()), rel=1e-5, abs=1e-5)
    grads = []
    for loss in (sum(batched), sum(stepwise)):
        policy.zero_grad()
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("distinct, channels", [(3, 1), (40, 1), (3, 2)],
                         ids=["few distinct edge features", "every edge its own", "two numbers per edge"])
def test_the_encoder_gives_each_edge_the_message_of_its_own_matrix(distinct, channels):
    """`MPNNEncoder` computes one matrix per distinct edge feature and multiplies the edges that share it together
    (or, where most differ, each edge with its own): the embeddings and the gradients are those of DGL's NNConv,
    each edge's message ``h_src @ Theta(e)`` summed at its destination, computed edge by edge here."""
    import torch

    from agents.doppler.policy import MPNNEncoder

    torch.manual_seed(0)
    n, e, width = 12, 40, 8
    encoder = MPNNEncoder(5, width, channels, num_layers=3)
    x = torch.randn(n, 5)
    edge_index = torch.randint(0, n, (2, e))
    edge_attr = torch.randn(distinct, channels)[torch.arange(e) % distinct]

    def edge_by_edge() -> torch.Tensor:
        h = encoder.project(x)
        hidden = h.unsqueeze(0)
        for _ in range(encoder.num_layers):
            summed = torch.zeros(n, width)
            for k in range(e):
                theta = encoder.edge_network(edge_attr[k]).view(width, width)
                summed = summed.index_add(0, edge_index[1, k:k + 1], (h[edge_index[0, k]] @ theta).unsqueeze(0))
            h, hidden = encoder.gru(torch.relu(summed + encoder.bias).unsqueeze(0), hidden)
            h = h.squeeze(0)
        return h

    grads = []
    outputs = []
    for forward in (lambda: encoder(x, edge_index, edge_attr), edge_by_edge):
        encoder.zero_grad()
        out = forward()
        (out ** 2).sum().backward()
        outputs.append(out.detach())
        grads.append(torch.cat([p.grad.flatten() for p in encoder.parameters()]))
    assert torch.allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)


def test_a_device_outside_hetero_takes_the_whole_graph_or_nothing_in_every_episode():
    # ai_pc's NPU cannot share a model with HETERO: an episode's first placement decides whether it takes every op.
    env = _env("tiny_branch", "ai_pc")
    agent = DopplerAgent(**SMALL, seed=0)
    agent.learn(env, budget=1, seed=0)
    npu = int(np.flatnonzero(~shareable_devices(env.unwrapped.backend))[0])
    graph = agent.context(env.reset(seed=0)[0])
    rng = np.random.default_rng(0)
    kinds = set()
    for _ in range(40):  # epsilon 1: uniformly random decisions among those allowed
        on_npu = agent.episode(graph, rng, epsilon=1.0, grad=False).placement == npu
        assert on_npu.all() or not on_npu.any()
        kinds.add(bool(on_npu.all()))
    assert kinds == {True, False}  # both kinds of episode happen


def test_the_policys_device_state_prices_a_device_change_as_its_teacher_does():
    # The observation's costs carry its submodel overhead, so the episode's schedule (the device state's earliest
    # start) charges a change of device what the critical-path teacher charges on the run's cost model.
    env = _env("tiny_chain", "paper")
    obs = env.reset(seed=0)[0]
    observed = GraphContext.of_observation(obs).costs
    assert observed.submodel_overhead_s == pytest.approx(float(obs["submodel_overhead"][0]))
    assert observed.submodel_overhead_s > 0
    assert observed.submodel_overhead_s == pytest.approx(cost_model(env).submodel_overhead_s)
    schedule = ListSchedule(np.asarray(obs["edge_index"]), observed)
    first = 0
    schedule.place(first, 0)
    consumer = schedule.ready[0]
    edge = int(np.flatnonzero((np.asarray(obs["edge_index"]) == [[first], [consumer]]).all(axis=0))[0])
    state = device_state(schedule, consumer)
    start = DEVICE_STATE.index("earliest_start")
    # on the other device: the producer's finish, its tensor's transfer and one submodel's overhead
    assert state[1, start] == pytest.approx(schedule.finish_s[first] + observed.edge_time_s[edge, 0, 1]
                                            + observed.submodel_overhead_s)
    assert state[0, start] == pytest.approx(schedule.finish_s[first])


def test_the_policys_schedule_prices_each_link_as_its_teacher_does():
    # `edge`'s links differ by pair (CPU <-> GPU.0 is faster than either's link to GPU.1); the observation describes
    # each device's slowest link only, so the policy prices transfers with the link table of the backend it trained
    # on, and its schedule then charges every tensor on every pair what the teacher's cost model charges.
    env = _env("tiny_branch", "edge")
    obs = env.reset(seed=0)[0]
    teacher = cost_model(env).edge_time_s
    agent = DopplerAgent(**SMALL, seed=0).learn(env, budget=1, seed=0)
    assert np.array_equal(agent.links, link_table(env.unwrapped.backend))
    assert np.allclose(agent.context(obs).costs.edge_time_s, teacher, rtol=1e-5, atol=1e-12)
    # without the table, a crossing is priced over the slower of the two devices' slowest links
    assert not np.allclose(GraphContext.of_observation(obs).costs.edge_time_s, teacher, rtol=1e-2, atol=0)


def test_the_imitation_stage_takes_the_npu_alone_where_critical_path_answers_with_it():
    # On tiny_chain under ai_pc the critical-path baseline's answer is the NPU alone, a candidate of its own; the
    # teacher wants it at the episode's first placement, so the imitation stage alone places as the baseline does.
    env = _env("tiny_chain", "ai_pc")
    heuristic = registry.make_agent("critical-path", {})
    heuristic.learn(env, budget=5, seed=0)
    npu = int(np.flatnonzero(~shareable_devices(env.unwrapped.backend))[0])
    assert (heuristic.best_placement == npu).all()
    # 20 imitation episodes: 10 are too few for every seed to learn the first placement's choice
    agent = registry.make_agent("doppler", {**SMALL, "imitation_episodes": 20, "seed": 0})
    agent.learn(env, budget=1, seed=0)
    assert agent.predict(env.reset(seed=0)[0]).tolist() == heuristic.best_placement.tolist()


def test_a_loaded_checkpoint_keeps_the_devices_outside_hetero_it_was_trained_with(tmp_path):
    # The observation does not say which device HETERO cannot share; the checkpoint does, so a loaded policy asked
    # to predict before any run keeps the whole-graph-or-nothing rule (without it, the NPU alone is not reachable).
    env = _env("tiny_chain", "ai_pc")
    agent = registry.make_agent("doppler", {**SMALL, "seed": 0})
    agent.learn(env, budget=1, seed=0)
    obs = env.reset(seed=0)[0]
    loaded = DopplerAgent.load(agent.save(tmp_path / "doppler.pt"))
    assert loaded.alone.tolist() == agent.alone.tolist() and loaded.alone.any()
    assert np.array_equal(loaded.links, agent.links) and agent.links is not None
    # a link table that is not D x D pairs is refused in one line
    payload = torch.load(tmp_path / "doppler.pt", weights_only=True)
    payload["extra"]["links"] = payload["extra"]["links"][:-1]
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="link table is not square"):
        DopplerAgent.load(tmp_path / "bad.pt")
    assert loaded.predict(obs).tolist() == agent.predict(obs).tolist()
    graph = loaded.context(obs)
    rng = np.random.default_rng(0)
    for _ in range(20):
        on_npu = loaded.episode(graph, rng, epsilon=1.0, grad=False).placement == np.flatnonzero(loaded.alone)[0]
        assert on_npu.all() or not on_npu.any()


def test_hybrid_doppler_is_the_generic_search_layer_around_it():
    agent = registry.make_agent("hybrid:doppler", {**SMALL, "seed": 0})
    agent.learn(_env(), budget=8, seed=0)
    assert agent.name == "hybrid:doppler" and "heuristic_start" in agent.search_components()
    assert agent.run_summary.steps == 8


@pytest.mark.parametrize("option, message", [
    ({"hidden_channels": 0}, "DopplerSettings: field hidden_channels: found 0; expected an integer from 1"),
    ({"gamma": 1.5}, "DopplerSettings: field gamma: found 1.5"),
    ({"imitation_episodes": -1}, "DopplerSettings: field imitation_episodes: found -1"),
    ({"epsilon": "high"}, "DopplerSettings: field epsilon"),
])
def test_bad_settings_are_refused_in_one_line(option, message):
    with pytest.raises(ValueError) as caught:
        registry.make_agent("doppler", option)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_setting_names_the_accepted_ones():
    with pytest.raises(TypeError) as caught:
        DopplerAgent(n_layers=3)
    assert "n_layers" in str(caught.value) and "num_layers" in str(caught.value) and "\n" not in str(caught.value)


def test_the_encoder_benchmark_times_both_ways_on_the_same_weights(tmp_path):
    """benchmarks/performance/doppler_encoder.py: both ways give the same embeddings and gradients up to rounding,
    and whole runs of each way are timed; the results file says how it was made."""
    import json

    from agents.doppler.policy import MPNNEncoder

    from .conftest import load_benchmark

    bench = load_benchmark("performance.doppler_encoder")
    out = tmp_path / "encoder.json"
    assert bench.main(["--models", "tiny_branch", "--rounds", "2", "--imitation-episodes", "2", "--budget", "2",
                       "--no-pin", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    row = written["rows"][0]
    assert row["distinct_edge_features"] < row["edges_both_ways"] * MPNNEncoder.GROUPED_BELOW  # the grouped path ran
    assert row["max_rel_embedding_difference"] < 1e-5 and row["max_rel_gradient_difference"] < 1e-4
    assert set(row["run_s"]) == {"grouped", "per_edge"} and row["encoder_speedup"] > 0
    assert MPNNEncoder.GROUPED_BELOW > 0  # the per-edge runs gave the threshold back
    assert written["command"].startswith("python") and "cost_model_version" in written
