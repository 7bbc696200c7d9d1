"""`placement_gym.deploy`, ``placement-gym place`` / ``export`` / ``show DIR``: a placement leaves the project.

Real parts: the tiny zoo models, compiled and run with real OpenVINO on this machine's two devices
(`placement_gym.two_cpu_devices()`: the CPU and a virtual copy, bf16 where the CPU runs bf16), the CLI's own entry
point. A placed folder must compile as the env compiled that placement (the same execution devices and HETERO
submodels) and compute what the original model computes; show, compile and export read one placement from it.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil

import numpy as np
import openvino as ov
import pytest

import placement_gym
from placement_gym import cli, deploy
from placement_gym.backends.openvino import OpenVINOBackend
from placement_gym.models import example_inputs, load_graph, load_model
from .conftest import load_example

DEVICES = placement_gym.two_cpu_devices()
#: Few timed runs: a tiny model's measurement takes a fraction of a second.
REAL = ["--backend", "openvino", "--devices", *DEVICES, "--warmup", "1", "--repeats", "5"]
#: Outputs of a placement that uses a bf16 device differ from f32's: bf16 keeps 8 significant bits (2**-8
#: relative rounding per op), which over the tiny models' layers stays within a few percent of the output's scale.
BF16_TOLERANCE = 0.05


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    return lines[0]


def outputs(compiled: ov.CompiledModel, model: str) -> np.ndarray:
    """The first output of `compiled` on `model`'s example inputs (seed 0)."""
    return compiled(list(example_inputs(load_model(model), seed=0).values()))[0]


def original_outputs(model: str) -> np.ndarray:
    """The original model's first output, on CPU in f32."""
    compiled = ov.Core().compile_model(load_model(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return outputs(compiled, model)


def assert_same_outputs(placed: np.ndarray, original: np.ndarray) -> None:
    scale = float(np.max(np.abs(original)))
    assert placed.shape == original.shape
    assert float(np.max(np.abs(placed - original))) <= BF16_TOLERANCE * scale


@pytest.fixture(scope="module")
def backend():
    backend = OpenVINOBackend(DEVICES, warmup=1, repeats=3)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    """``place --agent cheapest`` on tiny_branch, real backend: (folder, results file, what it printed)."""
    root = tmp_path_factory.mktemp("place")
    out, run = root / "placed", root / "run.json"
    status = cli.main(["place", "--model", "tiny_branch", "--agent", "cheapest", *REAL, "--json", str(run),
                       "--out", str(out), "--no-progress"])
    assert status == 0
    return out, run


def test_place_cheapest_writes_a_folder_openvino_reads(placed, capsys):
    out, run = placed
    assert sorted(p.name for p in out.iterdir()) == sorted(deploy.FILES)
    model = ov.Core().read_model(str(out / "model.xml"))
    document = json.loads((out / "placement.json").read_text())
    graph = load_graph("tiny_branch")
    # a device per op by name, the devices with their properties, the target, the latency labelled
    assert list(document["by_op"]) == list(graph.op_names)
    assert document["devices"] == DEVICES and document["agent"] == "cheapest" and document["seed"] == 0
    assert all(d["properties"].get("INFERENCE_PRECISION_HINT") for d in document["openvino_devices"])
    assert document["openvino_devices"][1]["virtual"] and document["device"]
    assert document["simulated"] is False and document["latency_kind"].startswith("measured")
    assert document["latency_s"] > 0 and document["objective"] == "latency"
    assert {"openvino", "numpy", "placement_gym"} <= set(document["versions"])
    assert {op.get_friendly_name() for op in model.get_ordered_ops()} >= set(graph.op_names)
    assert "compile_placed" in (out / "README.md").read_text()


def test_the_placed_folder_compiles_as_the_env_compiled_it_and_computes_the_same(placed, backend):
    out, _ = placed
    document = json.loads((out / "placement.json").read_text())
    graph = load_graph("tiny_branch")
    placement = np.array([DEVICES.index(document["by_op"][op]) for op in graph.op_names])
    compiled = deploy.compile_placed(out)
    env_compiled, env_submodels = backend.compile_placement(graph, placement)
    assert list(compiled.get_property("EXECUTION_DEVICES")) == list(env_compiled.get_property("EXECUTION_DEVICES"))
    submodels = 1 if len(set(placement.tolist())) == 1 else int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))
    assert submodels == env_submodels
    assert_same_outputs(outputs(compiled, "tiny_branch"), original_outputs("tiny_branch"))


@pytest.mark.parametrize("model", ["tiny_branch", "tiny_chain"])
def test_a_split_placement_saved_and_compiled_matches_the_env(model, backend, tmp_path):
    """A placement that cuts the graph into many HETERO submodels: the same submodels and outputs."""
    graph = load_graph(model)
    placement = (np.arange(graph.n_ops) // 3) % 2  # runs of three ops, alternating devices
    out = deploy.save_placed(tmp_path / "placed", load_model(model), placement, backend.devices)
    compiled = deploy.compile_placed(out)
    env_compiled, env_submodels = backend.compile_placement(graph, placement)
    assert env_submodels > 2
    assert int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")) == env_submodels
    assert list(compiled.get_property("EXECUTION_DEVICES")) == list(env_compiled.get_property("EXECUTION_DEVICES"))
    assert_same_outputs(outputs(compiled, model), original_outputs(model))
    # apply_placement: an affinity on every op of a copy; the caller's model untouched
    original = load_model(model)
    placed_model = deploy.apply_placement(original, placement, backend.devices)
    assert all("affinity" in op.get_rt_info() for op in placed_model.get_ordered_ops())
    assert not any("affinity" in op.get_rt_info() for op in original.get_ordered_ops())


def test_place_prints_the_speedup_against_each_device_with_its_interval(tmp_path, capsys):
    assert cli.main(["place", "--model", "tiny_chain", "--agent", "single-device", *REAL, "--out",
                     str(tmp_path / "p"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    for device in DEVICES:
        assert f"vs {device} alone" in printed
    assert "95% interval x" in printed and "timed as the env times it" in printed


def test_export_from_the_results_file_gives_the_same_folder(placed, tmp_path, capsys):
    out, run = placed
    again = tmp_path / "exported"
    assert cli.main(["export", str(run), "--model", "tiny_branch", "--out", str(again)]) == 0
    for name in ("model.xml", "model.bin"):
        assert (again / name).read_bytes() == (out / name).read_bytes()
    first, second = (json.loads((d / "placement.json").read_text()) for d in (out, again))
    for key in ("model", "agent", "seed", "devices", "placement", "by_op", "openvino_devices", "device", "config"):
        assert first[key] == second[key], key
    # and from the placed folder itself, and from a placement array
    third = tmp_path / "from-folder"
    assert cli.main(["export", str(out), "--model", "tiny_branch", "--out", str(third)]) == 0
    assert json.loads((third / "placement.json").read_text())["by_op"] == first["by_op"]
    choice = deploy.read_placement(np.array(first["placement"]), load_graph("tiny_branch"), devices=DEVICES)
    assert choice.placement.tolist() == first["placement"]


def test_show_draws_a_placed_folder(placed, tmp_path):
    out, _ = placed
    copy = tmp_path / "placed"
    shutil.copytree(out, copy)
    assert cli.main(["show", str(copy)]) == 0
    assert (copy / "placement.png").stat().st_size > 0


def test_place_on_the_simulator_writes_a_folder_labelled_simulated(tmp_path, capsys):
    out = tmp_path / "sim"
    assert cli.main(["place", "--model", "tiny_branch", "--agent", "cheapest", "--backend", "simulated", "--profile",
                     "ai_pc", "--objective", "throughput", "--out", str(out), "--no-progress"]) == 0
    document = json.loads((out / "placement.json").read_text())
    assert document["simulated"] is True and document["latency_kind"].startswith("simulated")
    assert document["devices"] == ["CPU", "GPU", "NPU"] and document["objective"] == "throughput"
    if "GPU" not in ov.Core().available_devices:  # compiled on a machine that lacks a device it names: one line
        with pytest.raises(ValueError, match="does not exist on this machine"):
            deploy.compile_placed(out)


# ------------------------------------------------------------------------------------------------- refusals
def test_an_existing_folder_is_refused_without_overwrite(placed, tmp_path, capsys):
    out, run = placed
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("the user's")
    argv = ["export", str(run), "--model", "tiny_branch", "--out", str(taken)]
    assert cli.main(argv) == 2
    assert "exists and is not empty" in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in taken.iterdir()) == ["mine.txt"]
    assert cli.main(["place", "--model", "tiny_branch", "--agent", "cheapest", *REAL, "--out", str(taken)]) == 2
    assert "--overwrite" in one_line(capsys.readouterr().err)
    # --overwrite replaces a placed folder placement-gym wrote, whole; a folder holding the user's files is not one
    assert cli.main(argv + ["--overwrite"]) == 2
    assert "is not a placed folder placement-gym wrote (it holds mine.txt)" in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in taken.iterdir()) == ["mine.txt"]


def test_a_device_listed_twice_is_refused_before_anything_is_written(tmp_path):
    """Issue 82: ``save_placed`` with devices ``["CPU", "CPU"]`` wrote a folder ``read_placed`` refuses."""
    with pytest.raises(ValueError, match=r"device 'CPU' is listed twice \(devices \['CPU', 'CPU'\]\); expected each "
                                         "device once"):
        deploy.save_placed(tmp_path / "cc", load_model("tiny_branch"), np.zeros(24, dtype=np.int64), ["CPU", "CPU"])
    assert list(tmp_path.iterdir()) == []


def test_show_compile_and_export_read_one_placement_from_a_placed_folder(placed, tmp_path, capsys):
    """Issue 82: ``show`` drew the ``placement`` array while compile and export used ``by_op``, never compared, and
    drew folders ``compile_placed`` refuses. Now all three read by_op, checked against the array, the same way."""
    out, _ = placed
    document = json.loads((out / "placement.json").read_text())
    graph = load_graph("tiny_branch")
    _, own_graph, placement = deploy.read_placed_graph(out)
    assert placement.tolist() == [DEVICES.index(document["by_op"][op]) for op in graph.op_names]
    assert own_graph.op_names == graph.op_names
    disagree = tmp_path / "disagree"
    shutil.copytree(out, disagree)
    document["placement"][5] = 1 - document["placement"][5]
    (disagree / "placement.json").write_text(json.dumps(document))
    said = (f"{disagree / 'placement.json'}: field placement[5]: found {document['placement'][5]}; expected "
            f"{1 - document['placement'][5]}, the device by_op gives op {graph.op_names[5]!r}")
    with pytest.raises(ValueError, match=re.escape(said)):
        deploy.compile_placed(disagree)
    assert cli.main(["show", str(disagree)]) == 2
    assert said in one_line(capsys.readouterr().err) and not (disagree / "placement.png").exists()
    assert cli.main(["export", str(disagree), "--model", "tiny_branch", "--out", str(tmp_path / "x")]) == 2
    assert said in one_line(capsys.readouterr().err) and not (tmp_path / "x").exists()
    # a folder compile_placed refuses for what it holds (an op on a device not listed) show refuses too
    document["placement"][5] = 1 - document["placement"][5]
    document["by_op"][graph.op_names[0]] = "NPU"
    (disagree / "placement.json").write_text(json.dumps(document))
    assert cli.main(["show", str(disagree)]) == 2
    assert "expected one of devices" in one_line(capsys.readouterr().err)


def test_a_placed_folder_with_its_placement_json_compressed_is_read_by_export_as_by_show_and_compile(placed,
                                                                                                   tmp_path):
    """Issue 82: export ignored a placement.json.gz twin that show and compile read."""
    out, _ = placed
    packed = tmp_path / "packed"
    shutil.copytree(out, packed)
    text = (packed / "placement.json").read_bytes()
    (packed / "placement.json.gz").write_bytes(gzip.compress(text))
    (packed / "placement.json").unlink()
    assert cli.main(["export", str(packed), "--model", "tiny_branch", "--out", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "placement.json").read_text())["by_op"] == \
        json.loads(text)["by_op"]
    assert cli.main(["show", str(packed)]) == 0
    assert deploy.read_placed_graph(packed)[2].tolist() == json.loads(text)["placement"]


def test_a_placement_for_another_graph_is_refused_in_one_line(placed, tmp_path, capsys):
    out, run = placed
    assert cli.main(["export", str(run), "--model", "tiny_chain", "--out", str(tmp_path / "x")]) == 2
    assert "another graph" in one_line(capsys.readouterr().err) and not (tmp_path / "x").exists()
    # a placed folder whose placement.json names an op its model.xml lacks
    bad = tmp_path / "renamed"
    shutil.copytree(out, bad)
    document = json.loads((bad / "placement.json").read_text())
    document["by_op"]["no/such/op"] = document["by_op"].pop(next(iter(document["by_op"])))
    (bad / "placement.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="another graph") as error:
        deploy.compile_placed(bad)
    assert "\n" not in str(error.value)


def test_a_device_the_machine_lacks_is_refused_in_one_line(placed, tmp_path, capsys):
    out, run = placed
    records = json.loads(run.read_text())
    records["records"][0]["devices"] = ["CPU", "NPU.7"]
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(records))
    assert cli.main(["export", str(elsewhere), "--model", "tiny_branch", "--out", str(tmp_path / "x")]) == 2
    assert "does not exist on this machine" in one_line(capsys.readouterr().err)
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    document = json.loads((bad / "placement.json").read_text())
    document["openvino_devices"][1]["base"] = "NPU"
    (bad / "placement.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="'NPU' does not exist on this machine") as error:
        deploy.compile_placed(bad)
    assert "\n" not in str(error.value)


def test_a_bad_placement_json_is_refused_before_anything_is_built(placed, tmp_path):
    out, _ = placed
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    (bad / "model.xml").write_text("not an IR")  # never read: placement.json is checked first
    document = json.loads((bad / "placement.json").read_text())
    document["placement"][0] = "CPU"
    (bad / "placement.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"placement.json: field placement\[0\]"):
        deploy.compile_placed(bad)
    document["placement"][0] = 0
    document["by_op"][next(iter(document["by_op"]))] = "GPU"  # not one of its devices
    (bad / "placement.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="expected one of devices"):
        deploy.compile_placed(bad)


# ------------------------------------------------------------------------------------------------- the example
def test_the_deploy_example_runs_end_to_end(tmp_path, capsys):
    """examples/deploy_placement.py: plan with cheapest, write the folder, compile it back, same outputs."""
    result = load_example("deploy_placement").main(["--model", "tiny_chain", "--out", str(tmp_path / "placed")])
    assert result["relative_error"] <= BF16_TOLERANCE
    assert (tmp_path / "placed" / "placement.json").is_file()
    assert "outputs within" in capsys.readouterr().out


def test_export_from_a_checkpoint_takes_its_best_placement(tmp_path, capsys):
    run = tmp_path / "rnn.json"
    assert cli.main(["train", "--agent", "rnn", "--model", "tiny_chain", "--backend", "simulated", "--budget", "4",
                     "--seed", "0", "--json", str(run), "--no-progress"]) == 0
    out = tmp_path / "from-checkpoint"
    assert cli.main(["export", str(tmp_path / "rnn.pt"), "--model", "tiny_chain", "--out", str(out)]) == 0
    document = json.loads((out / "placement.json").read_text())
    saved = json.loads((tmp_path / "rnn.placement.json").read_text())
    assert document["placement"] == saved["placement"] and document["devices"] == saved["devices"]
    assert document["simulated"] is True and "best placement" in document["exported_from"]
