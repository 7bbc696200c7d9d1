"""agents/core, nn and algos: observation batching, directed GNN blocks, the run loop, the REINFORCE trainer, callbacks,
save/load."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from agents.algos import PolicyGradientAgent, ReinforceConfig, ReinforceTrainer
from agents.core import BaseAgent, PolicySpec, RunLoop
from agents.nn import DirectedConv, DirectedGNN, PolicySample, obs_to_batch, sample_categorical
from placement_gym.callbacks import Callback, make_callback
from placement_gym.backends.base import Backend, Measurement
from placement_gym.env import DevicePlacementEnv
from placement_gym.graph import ComputationGraph


# ------------------------------------------------------------------------------------------ fixtures
def chain_graph(n: int = 6) -> ComputationGraph:
    edges = np.array([np.arange(n - 1), np.arange(1, n)])
    return ComputationGraph(
        "chain", tuple(f"op{i}" for i in range(n)), ("MatMul",) * n, (((4, 4),),) * n,
        np.full(n, 64), np.full(n, 1e3), edges, np.full(n - 1, 64),
    )


class CountingBackend(Backend):
    """A deterministic cost function with a known optimum, for testing the trainer (not a latency model):
    an op costs 1 ms on device 1 and 2 ms on device 0, plus 0.1 ms per edge cut. Optimum: all on device 1."""

    name, simulated = "counting", True
    device_names, virtual_devices = ["slow", "fast"], [False, False]

    def __init__(self) -> None:
        self.calls = []

    def measure(self, graph, placement, *, use_cache=True):
        self.calls.append(use_cache)
        p = np.asarray(placement)
        cuts = int((p[graph.edge_index[0]] != p[graph.edge_index[1]]).sum())
        return Measurement(latency_s=1e-3 * float(np.where(p == 1, 1.0, 2.0).sum()) + 1e-4 * cuts, simulated=True)

    def describe(self):
        return {"backend": self.name}

    def close(self):
        pass


class NodePolicy(nn.Module):
    """Per-node placement over the shared encoder: the smallest policy that uses every common piece."""

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__()
        self.encoder = DirectedGNN(spec.node_features, 16, 2, edge_dim=spec.edge_features)
        self.head = nn.Linear(16, spec.n_devices)

    def act(self, obs, num_samples=1, deterministic=False):
        batch = obs_to_batch(obs)
        h = self.encoder(batch.x, batch.edge_index, batch.edge_attr)
        return PolicySample(*sample_categorical(self.head(h), num_samples, deterministic))


class NodeAgent(PolicyGradientAgent):
    name = "node"

    def __init__(self, learning_rate: float = 0.02, seed=None, device="cpu", **kwargs):
        super().__init__({"learning_rate": learning_rate, **kwargs}, seed=seed, device=device)
        self.learning_rate = learning_rate

    def hyperparameters(self):
        return {"learning_rate": self.learning_rate, "seed": self.seed}

    def build_policy(self, spec):
        return NodePolicy(spec)


@pytest.fixture
def env():
    return DevicePlacementEnv(chain_graph(), backend=CountingBackend())


# ------------------------------------------------------------------------------------------ graph batch
def test_single_observation_batch(env):
    obs, _ = env.reset(seed=0)
    b = obs_to_batch(obs)
    assert b.num_graphs == 1 and b.x.shape == obs["node_features"].shape and b.x.dtype == torch.float32
    assert b.edge_index.dtype == torch.long and torch.equal(b.edge_index, torch.as_tensor(obs["edge_index"]))
    assert b.edge_attr.shape == (5, 1) and b.placement.tolist() == [0] * 6 and b.batch.tolist() == [0] * 6


def test_sb3_float_batch_is_offset_and_long(env):
    obs, _ = env.reset(seed=0)
    batched = {k: torch.as_tensor(np.stack([v, v, v]), dtype=torch.float32) for k, v in obs.items()}
    b = obs_to_batch(batched)
    assert b.num_graphs == 3 and b.x.shape == (18, obs["node_features"].shape[1])
    assert b.edge_index.dtype == torch.long and b.edge_index.shape == (2, 15)
    assert b.edge_index[:, 5:10].tolist() == (torch.as_tensor(obs["edge_index"]) + 6).tolist()
    assert b.ptr.tolist() == [0, 6, 12, 18] and b.placement.dtype == torch.long
    dense, mask = b.to_dense(torch.arange(18.0))
    assert dense.shape == (3, 6) and mask.all() and dense[2, 0] == 12


def test_padded_batch_drops_padding(env):
    obs, _ = env.reset(seed=0)
    nf = np.zeros((2, 6, obs["node_features"].shape[1]), np.float32)
    nf[:, :, 0] = 1.0
    ei = np.zeros((2, 2, 5), np.int64)
    ei[0] = obs["edge_index"]
    ei[1, :, :2] = [[0, 1], [1, 2]]  # second graph: 3 nodes, 2 real edges, the rest (0, 0) padding
    node_mask = np.array([[1] * 6, [1, 1, 1, 0, 0, 0]])
    b = obs_to_batch({"node_features": nf, "edge_index": ei, "node_mask": node_mask})
    assert b.num_nodes == 9 and b.ptr.tolist() == [0, 6, 9]
    assert b.edge_index[:, 5:].tolist() == [[6, 7], [7, 8]]


def test_bad_observation_is_explained():
    with pytest.raises(ValueError, match="node_features"):
        obs_to_batch({"edge_index": np.zeros((2, 0))})
    with pytest.raises(ValueError, match="outside"):
        obs_to_batch({"node_features": np.zeros((2, 3)), "edge_index": np.array([[0], [5]])})


# ------------------------------------------------------------------------------------------ gnn
def test_directed_conv_tells_producers_from_consumers():
    torch.manual_seed(0)
    conv = DirectedConv(4, 8)
    x = torch.randn(3, 4)
    forward = torch.tensor([[0, 1], [1, 2]])
    y_fwd, y_rev = conv(x, forward), conv(x, forward.flip(0))
    assert y_fwd.shape == (3, 8)
    assert not torch.allclose(y_fwd, y_rev)  # reversing the edges changes the embedding
    sym = DirectedConv(4, 8, directed=False)
    assert torch.allclose(sym(x, forward), sym(x, forward.flip(0)), atol=1e-6)


def test_encoder_shapes_and_gradients(env):
    obs, _ = env.reset(seed=0)
    b = obs_to_batch(obs)
    enc = DirectedGNN(b.x.shape[1], 16, num_layers=2, edge_dim=1)
    h = enc(b.x, b.edge_index, b.edge_attr)
    assert h.shape == (6, 16)
    h.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())
    with pytest.raises(ValueError, match="width"):
        enc(torch.zeros(6, 3), b.edge_index, b.edge_attr)


def test_sample_categorical_matches_torch_distribution():
    torch.manual_seed(0)
    logits = torch.randn(5, 3)
    actions, log_prob, entropy = sample_categorical(logits, num_samples=4)
    dist = torch.distributions.Categorical(logits=logits)
    assert actions.shape == (4, 5)
    assert torch.allclose(log_prob, dist.log_prob(actions).sum(1))
    assert torch.allclose(entropy, dist.entropy().mean())
    greedy, _, _ = sample_categorical(logits, 2, deterministic=True)
    assert torch.equal(greedy[0], logits.argmax(1)) and torch.equal(greedy[1], logits.argmax(1))


# ------------------------------------------------------------------------------------------ trainer
@pytest.mark.parametrize("seed", [0, 1])
def test_reinforce_learns_the_known_optimum(seed):
    # 12 ops: a random placement is optimal with probability 1/4096, so 160 samples find it by learning.
    env = DevicePlacementEnv(chain_graph(12), backend=CountingBackend())
    agent = NodeAgent(seed=seed).learn(env, budget=160)
    assert agent.best_placement.tolist() == [1] * 12  # all on the fast device
    assert agent.best_latency_s == pytest.approx(12e-3)
    # The policy itself moved to the optimum (at most one op still undecided), not only the search.
    assert (agent.predict(env.reset(seed=0)[0]) == 1).sum() >= 11
    summary = agent.run_summary
    assert summary.steps == 160 and summary.updates == 20 and summary.agent_s > 0
    assert env.unwrapped.backend.calls[-1] is False  # best re-measured bypassing the cache


def test_trainer_is_reproducible(env):
    a = NodeAgent(seed=3).learn(env, budget=24)
    b = NodeAgent(seed=3).learn(env, budget=24)
    assert [h["reward_mean"] for h in a.history] == [h["reward_mean"] for h in b.history]


def _policy_gradient_agents() -> list[type]:
    from placement_gym import registry

    classes = [registry.load_agent_class(name) for name in registry.AGENTS]
    return [cls for cls in classes if isinstance(cls, type) and issubclass(cls, PolicyGradientAgent)]


@pytest.mark.parametrize("cls", _policy_gradient_agents(), ids=lambda cls: cls.name)
def test_each_trainer_default_is_declared_once_in_trainer(cls):
    """Every trainer keyword an agent's constructor takes (the fields of its ``TRAINER``, an instance of its trainer
    form) defaults to its ``TRAINER``'s value (as its signature shows it: ``help()``, IDEs), and an agent built with
    no settings trains with ``TRAINER`` (in its form's mode, `ReinforceConfig`'s defaults for the rest); one given
    replaces its own field only. A class without a form takes none and trains with `ReinforceConfig`'s defaults."""
    import dataclasses
    import inspect

    built = cls().trainer_config  # a PPOConfig with algorithm="ppo": its REINFORCE settings are compared
    config = {f.name: getattr(built, f.name) for f in dataclasses.fields(ReinforceConfig)}
    if cls.TRAINER is None:
        assert config == dataclasses.asdict(ReinforceConfig())
        assert "learning_rate" not in cls.option_names()
        return
    trainer = dataclasses.asdict(cls.TRAINER)
    parameters = inspect.signature(cls).parameters
    for name, default in trainer.items():
        assert parameters[name].default == default, (cls.__name__, name)
    assert config == {**dataclasses.asdict(ReinforceConfig()), "mode": cls.TRAINER.MODE, **trainer}
    for name, default in trainer.items():
        value = not default if isinstance(default, bool) else default + 1 if isinstance(default, int) else default / 2
        agent = cls(**{name: value})
        assert getattr(agent.trainer_config, name) == value and agent.hyperparameters()[name] == value
        assert {f: getattr(agent.trainer_config, f) for f in trainer if f != name} == \
            {f: v for f, v in trainer.items() if f != name}
    assert [name for name in cls().hyperparameters() if name in trainer] == list(trainer)


def test_switches_change_the_update(env):
    config = ReinforceConfig(baseline=False, normalize_advantage=False, entropy_coef=0.0, max_grad_norm=None)
    torch.manual_seed(0)
    trainer = ReinforceTrainer(NodePolicy(PolicySpec.from_env(env)), config)
    run = RunLoop(env, budget=16, seed=0)
    trainer.train(run, run.env, seed=0)
    assert run.steps == 16 and run.updates == 2 and all(np.isnan(h["grad_norm"]) for h in run.history)
    assert trainer.advantages.baseline is None  # no baseline was tracked
    with pytest.raises(ValueError, match="mode"):
        ReinforceConfig(mode="ppo")


def test_episodic_mode_uses_per_step_baselines():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend(), horizon=3)
    agent = NodeAgent(seed=0, mode="episodic", episodes_per_update=2).learn(env, budget=30)
    assert agent.run_summary.steps == 30 and agent.run_summary.updates == 5
    assert len(agent.trainer.advantages.step_baselines) == 3  # one baseline per step of the episode


def test_episodic_leave_one_out_compares_each_step_with_the_other_episodes():
    """``leave_one_out`` in episodic mode: a step's return is compared with the mean return of the update's other
    episodes at the same step index (a step only one episode reached, with itself: advantage 0); the moving
    average per step index is then never used."""
    trainer = ReinforceTrainer(NodePolicy(PolicySpec(node_features=4, edge_features=0, n_devices=2)),
                               ReinforceConfig(mode="episodic", episodes_per_update=3, leave_one_out=True))
    returns = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 4.0]), torch.tensor([5.0, 0.0, 6.0])]
    compared = trainer.step_comparison(returns)
    assert [c.tolist() for c in compared] == [[4.0, 2.0, 6.0], [3.0, 1.0], [2.0, 3.0, 3.0]]
    assert trainer.step_comparison(returns[:1]) is None  # one episode: the moving average
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend(), horizon=3)
    agent = NodeAgent(seed=0, mode="episodic", episodes_per_update=2, leave_one_out=True).learn(env, budget=30)
    assert agent.run_summary.updates == 5 and agent.trainer.advantages.step_baselines == []


def test_callback_sees_every_step_and_can_stop(env):
    class Recorder(Callback):
        def __init__(self):
            self.steps, self.updates, self.started, self.ended = [], 0, None, None

        def on_training_start(self, budget, config):
            self.started = budget

        def on_step(self, step, reward, info):
            self.steps.append(step)
            return step < 12

        def on_update(self, step, stats):
            self.updates += 1

        def on_training_end(self, summary):
            self.ended = summary

    rec = Recorder()
    agent = NodeAgent(seed=0).learn(env, budget=40, callback=rec)
    assert rec.started == 40 and rec.steps == list(range(1, 13)) and rec.updates == 2
    assert rec.ended["steps"] == 12 and agent.run_summary.steps == 12


def test_tensorboard_and_progress_bar(env, tmp_path):
    cb = make_callback(progress_bar=True, tensorboard_log=str(tmp_path / "tb"))
    NodeAgent(seed=0).learn(env, budget=16, callback=cb)
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


# ------------------------------------------------------------------------------------------ run loop
def test_run_loop_keeps_the_curve_and_measures_best_and_predict_afresh(env):
    agent = NodeAgent(seed=0).learn(env, budget=40)
    s = agent.run_summary
    latencies = [v for _, v in s.curve]
    assert s.curve[0][0] == 1 and latencies == sorted(latencies, reverse=True)  # it only ever improves
    assert s.best_step == s.curve[-1][0] and s.best_latency_seen_s == latencies[-1]
    assert s.placement_source == "best_placement" and np.array_equal(agent.best_placement, s.placement)
    assert agent.best_latency_s == s.latency_s == pytest.approx(latencies[-1])  # the cost is deterministic
    assert s.predict_latency_s == pytest.approx(s.predict.latency_s) and s.predict_placement.shape == (6,)
    assert s.agent_ms_per_placement == pytest.approx(1e3 * s.agent_s / 40)
    assert s.wall_s >= s.env_s + s.agent_s
    assert s.to_dict()["agent_ms_per_placement"] == s.agent_ms_per_placement


def test_zero_budget_measures_only_the_policy_and_the_budget_is_enforced(env):
    agent = NodeAgent(seed=0).learn(env, budget=0)
    s = agent.run_summary
    assert s.steps == 0 and s.curve == [] and s.placement_source == "predict" and s.agent_ms_per_placement is None
    assert np.array_equal(s.placement, s.predict_placement) and agent.best_latency_s == s.predict_latency_s
    for bad in (-1, 1.5, "10", "abc", True, None):  # refused where the budget enters, in one line
        with pytest.raises(ValueError, match=r"^budget must be a number of placements to measure, an integer >= 0; "
                                             r"got .*$"):
            NodeAgent().learn(env, budget=bad)
    run = RunLoop(env, budget=1)
    run.env.reset(seed=0)
    run.env.step(np.zeros(6, dtype=np.int64))
    assert run.done and run.remaining == 0
    with pytest.raises(RuntimeError, match="budget of 1"):
        run.env.step(np.zeros(6, dtype=np.int64))


def test_a_share_of_a_run_ends_when_its_placements_are_measured_and_the_budget_is_the_runs_again_after(env):
    run = RunLoop(env, budget=5)
    run.env.reset(seed=0)
    run.env.step(np.zeros(6, dtype=np.int64))
    with run.share(2):  # the hybrid's agent share: the rest of the run is the local search's
        assert (run.budget, run.remaining) == (3, 2)
        while not run.done:
            run.env.step(np.zeros(6, dtype=np.int64))
        with pytest.raises(RuntimeError, match="budget of 3"):
            run.env.step(np.zeros(6, dtype=np.int64))
    assert (run.steps, run.budget, run.remaining, run.done) == (3, 5, 2, False)


def test_torch_threads_are_pinned_while_learning_and_restored(env):
    seen = []

    class Threads(Callback):
        def on_step(self, step, reward, info):
            seen.append(torch.get_num_threads())
            return True

    before = torch.get_num_threads()
    NodeAgent(seed=0).learn(env, budget=8, callback=Threads())
    assert set(seen) == {1} and torch.get_num_threads() == before


# ------------------------------------------------------------------------------------------ base agent
def test_save_load_round_trip_and_no_overwrite(env, tmp_path):
    agent = NodeAgent(seed=1).learn(env, budget=16)
    obs, _ = env.reset(seed=0)
    path = agent.save(tmp_path / "agent.pt")
    with pytest.raises(ValueError, match="its own class"):  # an unregistered class is never imported by name
        BaseAgent.load(path)
    loaded = NodeAgent.load(path)
    assert type(loaded) is NodeAgent and loaded.best_latency_s == agent.best_latency_s
    assert loaded.trained_for == {"graph": "chain", "n_ops": 6, "devices": ["slow", "fast"],
                                  "feature_families": list(env.feature_families), "simulated": True}
    assert np.array_equal(loaded.best_placement, agent.best_placement)
    assert np.array_equal(loaded.predict(obs), agent.predict(obs))
    with pytest.raises(FileExistsError):
        agent.save(path)
    agent.save(path, overwrite=True)
    with pytest.raises(RuntimeError, match="learn"):
        NodeAgent().predict(obs)


def test_spec_checks_feature_families(env):
    spec = PolicySpec.from_env(env)
    assert spec.n_devices == 2 and spec.edge_features == 1
    with pytest.raises(ValueError, match="features="):
        PolicySpec.from_env(env, expected_families=("op_type",))


def test_device_scorer_follows_the_devices_wherever_they_are_listed_and_any_count():
    """The shared device head has no device count in its weights: the same weights score 2 or 3 devices, and
    listing the devices in another order permutes its logits the same way (what makes a checkpoint portable)."""
    import gymnasium as gym
    import torch

    from agents.nn.device_head import DeviceScorer
    from agents.nn.graph_batch import obs_to_batch

    batch = obs_to_batch(gym.make("DevicePlacement-v0", model="tiny_branch", backend="simulated",
                                  profile="ai_pc").reset(seed=0)[0])
    scorer = DeviceScorer(8, batch.device_features.shape[-1])
    torch.nn.init.normal_(scorer.cost[-1].weight)  # a trained-looking cost term, so costs matter below
    h = torch.randn(batch.num_nodes, 8)
    logits = scorer(h, batch.device_features[0], batch.node_cost, batch.action_mask)
    assert logits.shape == (batch.num_nodes, 3)
    order = [2, 0, 1]
    swapped = scorer(h, batch.device_features[0][order], batch.node_cost[:, order], batch.action_mask[:, order])
    assert torch.allclose(swapped, logits[:, order], atol=1e-6)
    two = scorer(h, batch.device_features[0][:2], batch.node_cost[:, :2])
    assert two.shape == (batch.num_nodes, 2)
    # A device that cannot run an op gets (almost) no probability for it.
    mask = torch.ones_like(batch.action_mask)
    mask[:, 1] = False
    assert torch.softmax(scorer(h, batch.device_features[0], batch.node_cost, mask), -1)[:, 1].max() < 1e-6


def test_the_whole_graph_cost_term_leans_every_item_of_a_graph_towards_its_fastest_single_device():
    """`DeviceScorer.enable_graph_cost`: w x 10 log(T_d / min T) on every item's logits (w from GRAPH_COST_WEIGHT),
    T_d the graph's total cost on device d, however the graph's items are cut (ops, groups that partition it, or
    one item with the total given), per graph in a batch; off at scale 0; never on a head that does not place
    graphs; built by loading a state dict that has it."""
    import gymnasium as gym
    import torch

    from agents.nn.device_head import GRAPH_COST_WEIGHT, DeviceScorer, enable_graph_cost
    from agents.nn.graph_batch import obs_to_batch

    obs = gym.make("DevicePlacement-v0", model="tiny_branch", backend="simulated", profile="ai_pc").reset(seed=0)[0]
    batch = obs_to_batch(obs)
    features, cost = batch.device_features[0], batch.node_cost
    scorer = DeviceScorer(8, features.shape[-1])
    h = torch.randn(batch.num_nodes, 8)
    plain = scorer(h, features, cost)
    assert scorer.graph_cost is None and scorer.enable_graph_cost() and not scorer.enable_graph_cost()
    total = cost.double().sum(0)
    expected = (GRAPH_COST_WEIGHT * 10.0 * torch.log(total / total.min())).float()  # (D,)
    assert expected.min() < -1.0  # the devices differ: the term matters here
    # float32 logits of tens: compare to their precision (relative), not to an absolute 1e-4
    assert torch.allclose(scorer(h, features, cost) - plain, expected.expand_as(plain), atol=1e-4, rtol=1e-4)
    # Groups that partition the graph sum to the same totals; one item with the total given gets the same term.
    groups = torch.arange(batch.num_nodes) % 3
    group_cost = torch.zeros(3, cost.shape[1]).index_add_(0, groups, cost)
    g = torch.randn(3, 8)
    with torch.no_grad():
        scorer.graph_cost_scale.fill_(0.0)  # off
        assert torch.allclose(scorer(h, features, cost), plain)
        grouped_plain = scorer(g, features, group_cost)
        one_plain = scorer(g[:1], features, group_cost[:1])
        scorer.graph_cost_scale.fill_(1.0)
    assert torch.allclose(scorer(g, features, group_cost) - grouped_plain, expected.expand(3, -1), atol=1e-4)
    one = scorer(g[:1], features, group_cost[:1], graph_total=cost.sum(0))
    assert torch.allclose(one - one_plain, expected.view(1, -1), atol=1e-4)
    # A batch of two graphs: each item leans towards its own graph's fastest device.
    other = cost.flip(-1)  # the same graph with the devices' costs reversed
    both = scorer(torch.cat([h, h]), features.expand(2, -1, -1), torch.cat([cost, other]),
                  graph=torch.arange(2).repeat_interleave(batch.num_nodes))
    other_total = other.double().sum(0)
    other_expected = (GRAPH_COST_WEIGHT * 10.0 * torch.log(other_total / other_total.min())).float()
    scorer.graph_cost_scale.fill_(0.0)
    both_plain = scorer(torch.cat([h, h]), features.expand(2, -1, -1), torch.cat([cost, other]),
                        graph=torch.arange(2).repeat_interleave(batch.num_nodes))
    scorer.graph_cost_scale.fill_(1.0)
    n = batch.num_nodes
    assert torch.allclose((both - both_plain)[:n], expected.expand(n, -1), atol=1e-3, rtol=1e-4)
    assert torch.allclose((both - both_plain)[n:], other_expected.expand(n, -1), atol=1e-3, rtol=1e-4)
    assert not torch.allclose(expected, other_expected)
    # A head that scores something else than a graph's items (the refinement's overrides) never gets it.
    refiner_head = DeviceScorer(8, features.shape[-1], places_graphs=False)
    policy = torch.nn.ModuleDict({"placer": DeviceScorer(8, features.shape[-1]), "refiner": refiner_head})
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    enable_graph_cost(policy, optimizer)
    assert refiner_head.graph_cost is None and policy["placer"].graph_cost is not None
    assert any(p is policy["placer"].graph_cost.weight for group in optimizer.param_groups for p in group["params"])
    # Loading a state dict saved with the term builds it (a checkpoint of a policy trained across graphs).
    fresh = DeviceScorer(8, features.shape[-1])
    fresh.load_state_dict(scorer.state_dict())
    assert fresh.graph_cost is not None and torch.allclose(fresh(h, features, cost), scorer(h, features, cost))
