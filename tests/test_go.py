"""GO: the policy's contract, a checkpoint that places graphs and device sets it was not trained on, training
that moves from graph to graph, and the command line's train -> zero-shot evaluate."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agents.core.base import PolicySpec
from agents.go import GOAgent, GOPolicy, SegmentRecurrentAttention
from placement_gym import cli
from placement_gym.env import DevicePlacementEnv
from agents.search.config import hybrid_options
from .conftest import load_example

SIM = ["--backend", "simulated", "--no-progress"]


def make_env(model: str, **options) -> DevicePlacementEnv:
    return DevicePlacementEnv(model, backend="simulated", features=GOAgent.feature_families, **options)


def small_agent(**options) -> GOAgent:
    return GOAgent(seed=0, hidden_channels=16, heads=2, segment_length=4, samples_per_update=8, **options)


def test_act_and_evaluate_agree_on_shapes_and_log_probs():
    env = make_env("tiny_branch")
    obs, _ = env.reset(seed=0)
    policy = GOPolicy(PolicySpec.from_env(env), hidden_channels=16, heads=2, segment_length=4)
    sample = policy.act(obs, num_samples=5)
    n, d = obs["node_features"].shape[0], env.n_devices
    assert sample.actions.shape == (5, n) and sample.actions.dtype == torch.int64
    assert int(sample.actions.min()) >= 0 and int(sample.actions.max()) < d
    assert sample.log_prob.shape == (5,) and sample.entropy.shape == ()
    assert sample.embedding.shape == (32,)
    again = policy.evaluate(obs, sample)
    assert torch.allclose(again.log_prob.detach(), sample.log_prob.detach(), atol=1e-5)
    # placement_log_prob scores one placement: the mean per op of the same log-probability
    assert float(policy.placement_log_prob(obs, sample.actions[0].numpy()).detach()) == pytest.approx(
        float(sample.log_prob[0].detach()) / n, abs=1e-5)


def test_a_go_state_from_before_the_shared_whole_graph_term_loads_into_the_head():
    """GO's whole-graph cost term was its own (``graph_cost.weight``, ``graph_cost_scale``) before the shared head
    had it (``head.graph_cost.*``): older checkpoints load, with the same logits."""
    env = make_env("tiny_branch")
    obs, _ = env.reset(seed=0)
    policy = GOPolicy(PolicySpec.from_env(env), hidden_channels=16, heads=2, segment_length=4)
    with torch.no_grad():
        policy.head.graph_cost.weight.fill_(-1.5)
        policy.head.graph_cost_scale.fill_(0.5)
    old = {k.replace("head.graph_cost", "graph_cost"): v for k, v in policy.state_dict().items()}
    assert "graph_cost.weight" in old and "graph_cost_scale" in old
    loaded = GOPolicy(PolicySpec.from_env(env), hidden_channels=16, heads=2, segment_length=4, graph_cost=False)
    loaded.load_state_dict(old)
    assert float(loaded.head.graph_cost.weight.detach()) == -1.5 and float(loaded.head.graph_cost_scale) == 0.5
    assert torch.allclose(loaded.logits(obs)[0], policy.logits(obs)[0])


def test_segments_see_the_segment_before_them_and_nothing_later():
    torch.manual_seed(0)
    attention = SegmentRecurrentAttention(8, heads=2, num_layers=1, segment_length=3).eval()
    h = torch.randn(7, 8)  # segments [0..2], [3..5], [6]
    batch, ptr = torch.zeros(7, dtype=torch.long), torch.tensor([0, 7])
    out = attention(h, batch, ptr)
    later = h.clone()
    later[6] += 1.0  # the last segment changes: the earlier ones must not
    assert torch.allclose(attention(later, batch, ptr)[:6], out[:6])
    earlier = h.clone()
    earlier[0] += 1.0  # the first segment changes: its successor reads it as memory, the one after does not
    moved = attention(earlier, batch, ptr)
    assert not torch.allclose(moved[3:6], out[3:6]) and torch.allclose(moved[6], out[6])


def test_a_checkpoint_places_another_graph_on_another_device_set(tmp_path):
    agent = small_agent()
    agent.learn(make_env("tiny_chain"), budget=24)
    path = agent.save(tmp_path / "go.pt")
    loaded = GOAgent.load(path)
    for env in (make_env("tiny_branch"), make_env("tiny_branch", profile="ai_pc")):  # 2 devices, then 3
        obs, _ = env.reset(seed=0)
        placement = loaded.predict(obs)
        assert placement.shape == (env.graph.n_ops,) and placement.max() < env.n_devices
    # fine-tuning on the 3-device graph continues from the checkpoint: its own placement is measured and works
    env = make_env("tiny_branch", profile="ai_pc")
    loaded.learn(env, budget=16)
    assert loaded.run_summary.steps == 16 and loaded.run_summary.predict.ok


def test_predict_follows_a_device_wherever_it_is_listed():
    agent = small_agent()
    env = make_env("tiny_branch", profile="ai_pc")
    agent.learn(env, budget=16)
    obs, _ = env.reset(seed=0)
    order = np.array([2, 0, 1])  # the same devices, listed in another order
    swapped = dict(obs, action_mask=obs["action_mask"][:, order], device_features=obs["device_features"][order],
                   node_device_cost=obs["node_device_cost"][:, order])
    assert order[agent.predict(swapped)].tolist() == agent.predict(obs).tolist()


def test_training_moves_from_graph_to_graph():
    # finetune_search=0: a continued run on one graph is PPO (the default spends it on the local search).
    agent = small_agent(**hybrid_options(GOAgent, distill_steps=0, finetune_search=0.0))
    for model in ("tiny_chain", "tiny_branch", "tiny_chain"):  # graphs of different sizes, one set of weights
        agent.learn(make_env(model), budget=16)
        assert agent.run_summary.steps == 16 and agent.history
    assert agent.trained_for["graph"] == "tiny_chain"


def test_cli_trains_on_several_models_and_places_a_new_one_zero_shot(tmp_path, capsys):
    ckpt = tmp_path / "go.pt"
    options = ["--agent-option", "hidden_channels=16", "--agent-option", "heads=2", "--agent-option", "distill_steps=0"]
    assert cli.main(["train", "--agent", "go", "--models", "tiny_chain", "tiny_branch", "--budget", "16", "--seed", "0",
                     "--save", str(ckpt), *options, *SIM]) == 0
    capsys.readouterr()
    out_json = tmp_path / "zero.json"
    assert cli.main(["evaluate", "--agent", "go", "--load", str(ckpt), "--model", "tiny_branch", "--budget", "0",
                     "--seed", "0", "--profile", "ai_pc", "--json", str(out_json), *SIM]) == 0
    out = capsys.readouterr().out
    assert "zero-shot (predict only, 1 placement measured)" in out and "vs best single device" in out
    record = json.loads(out_json.read_text())["records"][0]
    assert record["placements_measured"] == 0 and record["devices"] == ["CPU", "GPU", "NPU"]
    assert set(record["extra"]["single_device_latency_s"]) == {"CPU", "GPU", "NPU"}
    assert cli.main(["evaluate", "--agent", "go", "--load", str(ckpt), "--model", "tiny_branch", "--budget", "8",
                     "--seed", "0", *SIM]) == 0
    assert "fine-tuned for 8 placements" in capsys.readouterr().out


def test_the_transfer_example_runs(capsys):
    """examples/transfer.py with small budgets, run in this process (`load_example`)."""
    load_example("transfer").main(["--train-budget", "16", "--finetune", "4", "--test", "unet-s"])
    out = capsys.readouterr().out
    assert "GO zero-shot" in out and "GO fine-tuned" in out
