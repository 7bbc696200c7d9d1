"""Loading a file we did not write never runs code from it, and a damaged file gets one clear error.

Real parts: every registered agent's own `load`, the CLI's ``evaluate --load``, real torch / zip / pickle files.
"""
from __future__ import annotations

import base64
import io
import json
import pickle
import sys
import zipfile

import numpy as np
import pytest
import torch

from agents.core.checkpoint import CHECKPOINT_FORMAT, CheckpointError, read_checkpoint
from placement_gym import DevicePlacementEnv, cli, registry


class Payload:
    """Unpickling this creates the file `marker`: proof that loading ran code from the file."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def crafted_files(tmp_path) -> dict:
    """name -> path of a crafted file; all create ``tmp_path / "ran"`` if anything unpickles them unsafely."""
    marker = tmp_path / "ran"
    files = {}
    files["pickle"] = tmp_path / "pickle.pt"
    files["pickle"].write_bytes(pickle.dumps({"format": CHECKPOINT_FORMAT, "x": Payload(marker)}))
    files["torch"] = tmp_path / "torch.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": {"w": torch.zeros(2)}, "x": Payload(marker)},
               files["torch"])
    # Stable-Baselines3's zip layout: a "data" JSON whose ":serialized:" values are cloudpickled objects.
    files["sb3_zip"] = tmp_path / "sb3.zip"
    serialized = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    with zipfile.ZipFile(files["sb3_zip"], "w") as z:
        z.writestr("data", json.dumps({"policy_class": {":type:": "<class 'type'>", ":serialized:": serialized}}))
        buffer = io.BytesIO()
        torch.save({}, buffer)
        z.writestr("policy.pth", buffer.getvalue())
        z.writestr("_stable_baselines3_version", "2.9.2")
    # A checkpoint in our own layout that names a module to import: `this` prints when imported.
    files["unknown_class"] = tmp_path / "unknown.pt"
    from agents.core.checkpoint import tensor_checksum

    state = {"w": torch.zeros(2)}
    torch.save({"format": CHECKPOINT_FORMAT, "agent": "this", "agent_class": "this:Zen", "hyperparameters": {},
                "state_dict": state, "checksum": tensor_checksum(state), "trained_for": {}, "extra": {}},
               files["unknown_class"])
    return files


LEARNED = ["hsdag", "placeto", "rnn", "ppo", "ppo-node"]


@pytest.mark.parametrize("agent", LEARNED)
def test_crafted_files_run_nothing_through_load(tmp_path, agent):
    cls = registry.load_agent_class(agent)
    for kind, path in crafted_files(tmp_path).items():
        with pytest.raises(CheckpointError) as error:
            cls.load(path)
        assert str(path) in str(error.value) and "\n" not in str(error.value), kind
        assert not (tmp_path / "ran").exists(), kind
    assert "this" not in sys.modules


def test_crafted_files_run_nothing_through_the_command_line(tmp_path, capsys):
    for agent in LEARNED + ["random", "single-device"]:
        for kind, path in crafted_files(tmp_path).items():
            argv = ["evaluate", "--agent", agent, "--load", str(path), "--model", "tiny_branch", "--backend",
                    "simulated", "--budget", "0", "--seeds", "1", "--no-progress"]
            assert cli.main(argv) == 2, (agent, kind)
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and "error" in err and str(path) in err, (agent, kind, err)
            assert not (tmp_path / "ran").exists(), (agent, kind)
    assert "this" not in sys.modules


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real HSDAG checkpoint trained on tiny_branch (simulated)."""
    from agents.hsdag import HSDAGAgent

    agent = HSDAGAgent(seed=0, hidden_channels=16)
    env = DevicePlacementEnv("tiny_branch", backend="simulated", features=agent.feature_families)
    agent.learn(env, budget=10)
    return agent.save(tmp_path_factory.mktemp("ckpt") / "hsdag.pt")


def test_damaged_checkpoints_get_one_clear_error(tmp_path, saved):
    from agents.hsdag import HSDAGAgent

    data = saved.read_bytes()
    cases = {
        "empty": b"",
        "truncated": data[: len(data) // 2],
        "random": np.random.default_rng(0).bytes(4096),
        "text": b"not a checkpoint at all\n",
    }
    for name, content in cases.items():
        path = tmp_path / f"{name}.pt"
        path.write_bytes(content)
        with pytest.raises(CheckpointError, match=str(path).replace(".", r"\.")):
            HSDAGAgent.load(path)
    wrong_keys = tmp_path / "wrong_keys.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "weights": torch.zeros(1)}, wrong_keys)
    with pytest.raises(CheckpointError, match="lacks"):
        HSDAGAgent.load(wrong_keys)
    old = tmp_path / "old.pt"
    torch.save({"format": "placement-gym-agent/1"}, old)
    with pytest.raises(CheckpointError, match="format"):
        HSDAGAgent.load(old)
    # A weight changed inside the file: the checksum written with the tensors no longer matches.
    content = torch.load(saved, weights_only=True)
    name = next(iter(content["state_dict"]))
    content["state_dict"][name] = content["state_dict"][name] + 1.0
    flipped = tmp_path / "flipped.pt"
    torch.save(content, flipped)
    with pytest.raises(CheckpointError, match="checksum"):
        HSDAGAgent.load(flipped)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        HSDAGAgent.load(tmp_path / "missing.pt")
    with pytest.raises(CheckpointError, match="not a file"):
        HSDAGAgent.load(tmp_path)
    # Another agent's checkpoint is refused by name, without importing anything from the file.
    from agents.rnn import RNNAgent

    with pytest.raises(CheckpointError, match="not a RNNAgent"):
        RNNAgent.load(saved)


def test_a_checkpoint_records_what_it_was_trained_for(saved):
    data = read_checkpoint(saved)
    assert data["agent"] == "hsdag" and data["trained_for"]["graph"] == "tiny_branch"
    assert data["trained_for"]["devices"] == ["CPU", "GPU"] and data["trained_for"]["n_ops"] > 0
    assert all(isinstance(v, torch.Tensor) for v in data["state_dict"].values())


def test_ppo_checkpoint_is_plain_data_and_places_another_graph(tmp_path):
    from agents.ppo import PPOAgent

    agent = PPOAgent(n_steps=4, batch_size=4, n_epochs=1, seed=0)
    env = DevicePlacementEnv("tiny_branch", backend="simulated")
    agent.learn(env, budget=6)
    path = agent.save(tmp_path / "ppo.pt")
    assert zipfile.is_zipfile(path) and "data" not in zipfile.ZipFile(path).namelist()  # not SB3's pickled zip
    loaded = PPOAgent.load(path)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(loaded.predict(obs), agent.predict(obs))
    # The graph policy holds no graph size or device count: the checkpoint places another graph.
    other_env = DevicePlacementEnv("tiny_chain", backend="simulated")
    other, _ = other_env.reset(seed=0)
    placement = loaded.predict(other)
    assert placement.shape == (other_env.graph.n_ops,) and other_env.measure(placement).ok
