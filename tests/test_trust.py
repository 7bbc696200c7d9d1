"""Loading a file we did not write never runs code from it, and a damaged file gets one clear error.

Real parts: every registered agent's own `load`, the CLI's ``evaluate --load``, real torch / zip / pickle files.
"""
from __future__ import annotations

import base64
import io
import json
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.core.checkpoint import CHECKPOINT_FORMAT, CheckpointError, read_checkpoint, tensor_checksum
from placement_gym import DevicePlacementEnv, cli, registry
from .refusals import BUILT_NOTHING_BYTES, peak_rss_bytes


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


# ------------------------------------------------------------------ settings checked before anything is built
def rewritten(saved, tmp_path, name: str, change) -> "Path":
    """A copy of the real checkpoint `saved` with `change(content)` applied (its tensors, and so their checksum,
    untouched): what a crafted or damaged file looks like."""
    content = torch.load(saved, weights_only=True)
    change(content)
    path = tmp_path / f"{name}.pt"
    torch.save(content, path)
    return path


def setting(key: str, value):
    return lambda content: content["hyperparameters"].__setitem__(key, value)


def spec_field(key: str, value):
    return lambda content: content["extra"]["spec"].__setitem__(key, value)


def add_tensor(content: dict, name: str) -> None:
    """A tensor the policy does not have, written with a checksum over all the tensors (as save would)."""
    content["state_dict"][name] = torch.zeros(2)
    content["checksum"] = tensor_checksum(content["state_dict"])


def assert_refused_naming_the_field(load, path, field: str) -> None:
    """`load(path)` raises a CheckpointError of one line that starts with the file and `field` ("field x.y:") and
    says what was expected."""
    with pytest.raises(CheckpointError) as error:
        load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: {field}") and "expected" in message and "\n" not in message, message


def assert_refused_before_building(load, path, field: str) -> None:
    """`assert_refused_naming_the_field`, and the refusal came before anything big was built: the process's peak
    memory grew by less than `BUILT_NOTHING_BYTES`."""
    peak = peak_rss_bytes()
    assert_refused_naming_the_field(load, path, field)
    assert peak_rss_bytes() - peak < BUILT_NOTHING_BYTES


#: (name, change, the field the error names). Widths and depths out of range are refused by the schema; a width
#: in range that is not the stored tensors' by the shapes its settings would build.
OVERSIZED = [
    ("hidden 8192", setting("hidden_channels", 8192), "field hyperparameters.hidden_channels:"),
    ("hidden 4096", setting("hidden_channels", 4096), "field hyperparameters.hidden_channels:"),
    ("hidden 17", setting("hidden_channels", 17), "field hyperparameters.hidden_channels:"),
    ("hidden text", setting("hidden_channels", "16"), "field hyperparameters.hidden_channels:"),
    ("hidden boolean", setting("hidden_channels", True), "field hyperparameters.hidden_channels:"),
    ("layers 10**6", setting("num_layers", 10**6), "field hyperparameters.num_layers:"),
    ("one layer more", setting("num_layers", 4), "field state_dict['encoder.convs.3."),
    ("samples 10**12", setting("samples_per_update", 10**12), "field hyperparameters.samples_per_update:"),
    ("max_nodes 10**9", setting("max_nodes", 10**9), "field hyperparameters.max_nodes:"),
    ("settings a list", lambda content: content.__setitem__("hyperparameters", [16]), "field hyperparameters:"),
    ("node features 10**6", spec_field("node_features", 10**6), "field extra.spec.node_features:"),
    ("node features 9999", spec_field("node_features", 9999), "field extra.spec.node_features:"),
    ("spec lacks devices", lambda content: content["extra"]["spec"].pop("n_devices"), "field extra.spec.n_devices:"),
    ("a tensor more", lambda content: add_tensor(content, "extra.weight"), "field state_dict['extra.weight']:"),
]


@pytest.mark.parametrize("change, field", [c[1:] for c in OVERSIZED], ids=[c[0] for c in OVERSIZED])
def test_settings_that_do_not_fit_the_stored_tensors_are_refused_naming_the_field(tmp_path, saved, change, field):
    from agents.hsdag import HSDAGAgent

    path = rewritten(saved, tmp_path, "crafted", change)
    assert_refused_before_building(HSDAGAgent.load, path, field)


# Loads the real checkpoint (every import and a real policy: the baseline), then each crafted one; prints how much
# each raised the process's peak memory, in MiB.
PEAK_SCRIPT = """
import resource, sys
from agents.core.checkpoint import CheckpointError
from agents.hsdag import HSDAGAgent

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

HSDAGAgent.load(sys.argv[1])
for path in sys.argv[2:]:
    before = peak()
    try:
        HSDAGAgent.load(path)
        print("loaded", path)
    except CheckpointError:
        print(peak() - before)
"""


def test_a_crafted_width_costs_no_memory_before_it_is_refused(tmp_path, saved):
    """A width in range but not the stored tensors' (4096: GBs of weights for this policy) and one out of range
    (8192) are refused with the process's peak memory raised by less than the stored tensors' size, plus slack."""
    paths = [rewritten(saved, tmp_path, f"hidden{w}", setting("hidden_channels", w)) for w in (4096, 8192)]
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(saved), *map(str, paths)], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    growth = [float(line) for line in done.stdout.split()]
    assert len(growth) == 2 and max(growth) < 64, growth  # MiB; building the 4096-wide policy takes GBs


def test_evaluate_load_refuses_a_crafted_width_in_one_line(tmp_path, saved, capsys):
    path = rewritten(saved, tmp_path, "hidden8192", setting("hidden_channels", 8192))
    argv = ["evaluate", "--agent", "hsdag", "--load", str(path), "--model", "tiny_branch", "--backend", "simulated",
            "--budget", "0", "--seeds", "1", "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{path}: field hyperparameters.hidden_channels: found 8192" in err, err


@pytest.mark.parametrize("change, field", [
    (lambda content: content.__setitem__("trained_for", ["tiny_branch"]), "field trained_for:"),
    (lambda content: content.__setitem__("trained_for", "tiny_branch"), "field trained_for:"),
    (lambda content: content["trained_for"].__setitem__("devices", "CPU"), "field trained_for.devices:"),
    (lambda content: content["extra"].__setitem__("best_placement", ["CPU", "GPU"]),
     "field extra.best_placement[0]:"),
    (lambda content: content["extra"].__setitem__("best_placement", [0, 1.5]), "field extra.best_placement[1]:"),
    (lambda content: content["extra"].__setitem__("best_latency_s", "fast"), "field extra.best_latency_s:"),
], ids=["trained_for a list", "trained_for text", "devices text", "best_placement of strings",
        "best_placement of floats", "best latency text"])
def test_run_state_fields_of_the_wrong_type_name_the_file_and_the_field(tmp_path, saved, change, field):
    from agents.hsdag import HSDAGAgent

    path = rewritten(saved, tmp_path, "crafted", change)
    assert_refused_naming_the_field(HSDAGAgent.load, path, field)


@pytest.fixture(scope="module")
def saved_ppo(tmp_path_factory):
    """A real PPO checkpoint trained on tiny_branch (simulated)."""
    from agents.ppo import PPOAgent

    agent = PPOAgent(n_steps=4, batch_size=4, n_epochs=1, seed=0, hidden_channels=16)
    agent.learn(DevicePlacementEnv("tiny_branch", backend="simulated"), budget=6)
    return agent.save(tmp_path_factory.mktemp("ppo") / "ppo.pt")


@pytest.mark.parametrize("change, field", [
    (lambda content: content["extra"]["policy_kwargs"].__setitem__("hidden_channels", 4096),
     "field extra.policy_kwargs.hidden_channels:"),
    (lambda content: content["extra"]["policy_kwargs"].__setitem__("hidden_channels", 8192),
     "field extra.policy_kwargs.hidden_channels:"),
    (lambda content: content["extra"]["observation_space"]["spaces"]["node_features"].__setitem__(
        "shape", [100_000, 100_000]), "field extra.observation_space.spaces.node_features.shape:"),
    (lambda content: content["extra"]["action_space"].__setitem__("type", "Tuple"), "field extra.action_space.type:"),
    (lambda content: content["extra"].__setitem__("policy", "builtins:eval"), "field extra.policy:"),
    # each Box within the bound of one space (2**25 elements), together 400 MB of float32 before gymnasium's copies
    (lambda content: content["extra"]["observation_space"]["spaces"].update({key: {
        "type": "Box", "low": -1.0, "high": 1.0, "shape": [1 << 25], "dtype": "float32"} for key in "abc"}),
     "field extra.observation_space: found spaces of 402"),
    # spaces in bounds (the edges do not shape the graph policy's tensors), but 65536 steps of them: SB3's rollout
    # buffer of 5 TB, which numpy refused with a MemoryError traceback
    (lambda content: (content["hyperparameters"].__setitem__("n_steps", 1 << 16),
                      content["extra"]["observation_space"]["spaces"]["edge_index"].__setitem__("shape", [2, 1 << 22]),
                      content["extra"]["observation_space"]["spaces"]["edge_features"].__setitem__("shape",
                                                                                                  [1 << 22, 1])),
     "field hyperparameters.n_steps: found 65536; expected at most"),
], ids=["policy width 4096", "policy width 8192", "huge observation", "unknown space", "unknown policy",
        "three huge boxes", "a rollout of 65536 steps of them"])
def test_a_crafted_sb3_checkpoint_is_refused_before_its_model_is_built(tmp_path, saved_ppo, change, field):
    from agents.ppo import PPOAgent

    path = rewritten(saved_ppo, tmp_path, "crafted", change)
    assert_refused_before_building(PPOAgent.load, path, field)


def test_a_checkpoint_that_unpacks_to_more_than_the_bound_is_refused_before_it_is_read(tmp_path, saved):
    from agents.core.checkpoint import MAX_CHECKPOINT_BYTES
    from agents.hsdag import HSDAGAgent

    data = bytearray(saved.read_bytes())
    entry = data.index(b"PK\x01\x02")  # the zip directory's first entry: its unpacked size is at offset 24
    data[entry + 24: entry + 28] = (MAX_CHECKPOINT_BYTES + 1).to_bytes(4, "little")
    path = tmp_path / "bomb.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"^{path}: unpacks to \d+ bytes; expected a checkpoint of at most"):
        HSDAGAgent.load(path)


# ------------------------------------------------------------------ tensors checked before their data is read
def wide(content: dict) -> None:
    """The first tensor replaced by a view of one stored float spread over 2**24 elements (stride 0): 4 bytes in
    the file, 64 MiB once anything reads it. The checksum is left as it was: it is what would read it."""
    name = next(iter(content["state_dict"]))
    content["state_dict"][name] = torch.zeros(1).expand(1 << 24)


def shared(content: dict) -> None:
    """64 tensors more, all views of one stored 400 KB tensor: each fits its storage, together 25 MB."""
    one = torch.zeros(100_000)
    for i in range(64):
        content["state_dict"][f"copy{i}"] = one


def sparse(content: dict) -> None:
    content["state_dict"]["sparse"] = torch.zeros(4, 4).to_sparse()


#: (name, change, the field the error names, what it says was found)
OVERSIZED_TENSORS = [
    ("stride 0", wide, "field state_dict.", "(torch.float32, 67108864 bytes) over 4 stored bytes"),
    ("one storage many times", shared, "field state_dict:", "found tensors of "),
    ("sparse", sparse, "field state_dict.sparse:", "found a torch.sparse_coo tensor"),
]


@pytest.mark.parametrize("change, field, found", [c[1:] for c in OVERSIZED_TENSORS],
                         ids=[c[0] for c in OVERSIZED_TENSORS])
def test_a_tensor_larger_than_its_stored_bytes_is_refused_before_its_data_is_read(tmp_path, saved, change, field,
                                                                                   found):
    from agents.hsdag import HSDAGAgent

    path = rewritten(saved, tmp_path, "crafted", change)
    assert path.stat().st_size < (1 << 20)  # small on disk: what it declares is not what it holds
    with pytest.raises(CheckpointError) as error:
        HSDAGAgent.load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: {field}") and found in message and "\n" not in message, message
    assert "expected" in message and ("bytes" in message or "dense" in message), message


def test_evaluate_load_refuses_a_stride_0_tensor_in_one_line(tmp_path, saved, capsys):
    path = rewritten(saved, tmp_path, "wide", wide)
    argv = ["evaluate", "--agent", "hsdag", "--load", str(path), "--model", "tiny_branch", "--backend", "simulated",
            "--budget", "0", "--seeds", "1", "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{path}: field state_dict." in err and "over 4 stored bytes" in err, err


def test_a_checkpoint_with_compressed_entries_is_refused_before_it_is_read(tmp_path, saved):
    """torch.load inflates a compressed entry: 1 MB of compressed zeros would unpack to a GB. torch.save stores
    its entries as they are, so a compressed one is not a file agent.save wrote."""
    from agents.hsdag import HSDAGAgent

    path = tmp_path / "deflated.pt"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            target.writestr(entry.filename, source.read(entry.filename))
    assert torch.load(path, weights_only=True)["state_dict"]  # torch itself reads it
    with pytest.raises(CheckpointError, match=rf"^{path}: entry '.*' is compressed; expected a checkpoint whose "
                                              "entries are stored uncompressed"):
        HSDAGAgent.load(path)


@pytest.mark.parametrize("change, field", [
    (lambda data: data.__setitem__("params", [1]), "field params:"),
    (lambda data: data.__setitem__("plan", ["GPU"]), "field plan[0]:"),
    (lambda data: data.__setitem__("best_latency_s", -1), "field best_latency_s:"),
    (lambda data: data.pop("agent"), "field agent:"),
    (lambda data: data["params"].__setitem__("colour", "red"), "field params:"),
], ids=["params a list", "plan of names", "negative latency", "agent missing", "a setting it does not take"])
def test_a_saved_planner_of_the_wrong_shape_names_the_file_and_the_field(tmp_path, change, field):
    from agents.baselines import SingleDevice

    saved = SingleDevice(1).learn(DevicePlacementEnv("tiny_branch", backend="simulated"), 1, 0).save(
        tmp_path / "planner.json")
    data = json.loads(saved.read_text())
    change(data)
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(data))
    assert_refused_naming_the_field(SingleDevice.load, path, field)
