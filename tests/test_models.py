"""The model zoo: tiny models, loading from files / ov.Model, errors, example inputs, IR cache."""

from __future__ import annotations

import collections

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from placement_gym.models import ZOO, example_inputs, load_model, model_cache_dir, zoo_names
from placement_gym.models.zoo import ZOO_VERSION, _save_ir_atomically

from .cached_zoo import count_cached_tiny_builds

NON_COMPUTE = {"Constant", "Parameter", "Result"}


def n_compute(model: ov.Model) -> int:
    return sum(op.get_type_name() not in NON_COMPUTE for op in model.get_ordered_ops())


def test_zoo_names_has_canonical_names_and_aliases():
    names = zoo_names()
    for name in ["resnet50", "inception_v3", "bert_base", "mobilenet_v2", "tiny_chain", "tiny_branch",
                 "resnet", "inception", "bert", "mobilenet"]:
        assert name in names
    assert set(ZOO) == {"resnet50", "inception_v3", "bert_base", "mobilenet_v2", "tiny_chain", "tiny_branch"}
    assert {entry.kind for entry in ZOO.values()} == {"torch", "opset"}


@pytest.mark.parametrize("name", ["tiny_chain", "tiny_branch"])
def test_tiny_model_compiles_and_runs_on_cpu(name):
    model = load_model(name)
    assert model.get_friendly_name() == name
    names = [op.get_friendly_name() for op in model.get_ordered_ops()]
    assert len(names) == len(set(names)), "friendly names must be unique (placements are applied by name)"

    compiled = ov.Core().compile_model(model, "CPU")
    probs = compiled(example_inputs(model))["probs"]
    assert probs.shape == (1, 10)
    assert np.isfinite(probs).all() and probs.sum() == pytest.approx(1.0, abs=1e-5)


def test_tiny_model_shapes_and_sizes():
    chain, branch = load_model("tiny_chain"), load_model("tiny_branch")
    assert 6 <= n_compute(chain) <= 10
    assert 15 <= n_compute(branch) <= 30
    # The chain is a chain: every compute op feeds exactly one op.
    for op in chain.get_ordered_ops():
        if op.get_type_name() not in NON_COMPUTE:
            assert len(op.output(0).get_target_inputs()) == 1
    # The branch model forks: the stem feeds three branches that meet in a Concat.
    stem = next(op for op in branch.get_ordered_ops() if op.get_friendly_name() == "stem/relu")
    assert len(stem.output(0).get_target_inputs()) == 3
    concat = next(op for op in branch.get_ordered_ops() if op.get_type_name() == "Concat")
    assert concat.get_input_size() == 3


def test_zoo_names_are_case_insensitive():
    assert load_model("  TINY_Chain ").get_friendly_name() == "tiny_chain"


def test_tiny_models_are_deterministic():
    a, b = load_model("tiny_branch"), load_model("tiny_branch")
    inputs = example_inputs(a)
    core = ov.Core()
    np.testing.assert_array_equal(
        core.compile_model(a, "CPU")(inputs)["probs"], core.compile_model(b, "CPU")(inputs)["probs"]
    )


def test_ov_model_input_returns_a_clone():
    original = load_model("tiny_chain")
    clone = load_model(original)
    assert clone is not original
    assert len(clone.get_ordered_ops()) == len(original.get_ordered_ops())
    for op in clone.get_ordered_ops():
        op.get_rt_info()["affinity"] = "CPU"
    assert all("affinity" not in op.get_rt_info() for op in original.get_ordered_ops())


def test_ir_file_roundtrip(tmp_path):
    model = load_model("tiny_branch")
    xml = tmp_path / "branch.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    for arg in (xml, str(xml)):
        loaded = load_model(arg)
        assert len(loaded.get_ordered_ops()) == len(model.get_ordered_ops())


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="model file not found"):
        load_model(tmp_path / "nope.xml")
    with pytest.raises(FileNotFoundError, match="model file not found"):
        load_model(str(tmp_path / "nope.onnx"))


def test_xml_without_bin(tmp_path):
    xml = tmp_path / "m.xml"
    ov.save_model(load_model("tiny_chain"), xml)
    xml.with_suffix(".bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"m\.bin"):
        load_model(xml)


def test_corrupt_xml(tmp_path):
    xml = tmp_path / "broken.xml"
    xml.write_text("<net name='x'><layers><layer id='0' type='Nope'")
    xml.with_suffix(".bin").write_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match="could not read model .*broken.xml: ") as info:
        load_model(xml)
    assert "\n" not in str(info.value) and "Exception from" not in str(info.value)


def test_ir_without_outputs(tmp_path):
    xml = tmp_path / "empty.xml"
    xml.write_text('<?xml version="1.0"?><net name="e" version="11"><layers/><edges/></net>')
    xml.with_suffix(".bin").write_bytes(b"")
    with pytest.raises(ValueError, match="no outputs"):
        load_model(xml)


def test_corrupt_onnx(tmp_path, capfd):
    path = tmp_path / "broken.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(2000))
    with pytest.raises(ValueError, match=r"could not read model .*broken\.onnx: Unable to read the model"):
        load_model(path)
    assert capfd.readouterr().err == ""  # the frontends' parser logs are not shown


def test_truncated_user_ir_and_a_directory_named_like_a_model(tmp_path):
    xml = tmp_path / "m.xml"
    ov.save_model(load_model("tiny_branch"), xml, compress_to_fp16=False)
    bin_path = xml.with_suffix(".bin")
    bin_path.write_bytes(bin_path.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"m\.xml: its weights file .*m\.bin is truncated \(100 bytes"):
        load_model(xml)
    (tmp_path / "d.xml").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        load_model(tmp_path / "d.xml")


def test_a_damaged_cached_zoo_model_is_rebuilt(monkeypatch, tmp_path):
    """A torch-kind zoo entry (here built from the tiny opset model, so the test is fast) goes through the cache."""
    builds = count_cached_tiny_builds(monkeypatch, tmp_path)
    load_model("cached_tiny")
    load_model("cached_tiny")
    assert len(builds) == 1  # built once, then read from the cache
    xml = tmp_path / f"cached_tiny-{ZOO_VERSION}.xml"
    bin_path = xml.with_suffix(".bin")
    stale = tmp_path / f".cached_tiny-{ZOO_VERSION}.4242-deadbeef.tmp.bin"  # left by a killed build
    stale.write_bytes(b"\0" * 1000)

    bin_path.write_bytes(bin_path.read_bytes()[:-64])  # truncated
    with pytest.warns(UserWarning, match="damaged: .*truncated.*rebuilding"):
        model = load_model("cached_tiny")
    assert len(builds) == 2 and n_compute(model) == n_compute(load_model("tiny_branch")) and not stale.exists()

    data = bytearray(bin_path.read_bytes())  # same size, one byte changed
    data[len(data) // 2] ^= 0xFF
    bin_path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="differs from what was built"):
        load_model("cached_tiny")
    assert len(builds) == 3
    ov.Core().compile_model(load_model("cached_tiny"), "CPU")  # the rebuilt cache is whole


def test_unsupported_suffix(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"\.xml.*\.onnx"):
        load_model(path)


def test_unknown_name():
    with pytest.raises(ValueError) as info:
        load_model("resnet18")
    message = str(info.value)
    assert "resnet18" in message and "resnet50" in message and "tiny_branch" in message
    assert ".xml" in message and ".onnx" in message and "ov.Model" in message


@pytest.mark.parametrize("bad", [42, None, ["resnet"]])
def test_wrong_type(bad):
    with pytest.raises(TypeError, match="zoo name"):
        load_model(bad)


def _int_input_model() -> ov.Model:
    """input_ids, attention_mask, token_type_ids (1, 8) i64 + features (2, 3) f32 -> one output."""
    params = [ops.parameter([1, 8], ov.Type.i64, name=n) for n in ("input_ids", "attention_mask", "token_type_ids")]
    feats = ops.parameter([2, 3], ov.Type.f32, name="features")
    for p in params:
        p.output(0).get_tensor().set_names({p.get_friendly_name()})
    total = ops.add(ops.add(params[0], params[1]), params[2])
    out = ops.add(ops.convert(ops.reduce_sum(total, [0, 1]), ov.Type.f32), ops.reduce_sum(feats, [0, 1]))
    return ov.Model([out], params + [feats], "ints")


def test_example_inputs_shapes_dtypes_and_ranges():
    model = _int_input_model()
    arrays = example_inputs(model)
    # "features" has no tensor name: keyed by its friendly name.
    assert list(arrays) == ["input_ids", "attention_mask", "token_type_ids", "features"]
    assert all(arrays[k].shape == (1, 8) and arrays[k].dtype == np.int64 for k in list(arrays)[:3])
    assert arrays["features"].shape == (2, 3) and arrays["features"].dtype == np.float32
    assert (arrays["attention_mask"] == 1).all()
    assert arrays["input_ids"].min() >= 0 and arrays["input_ids"].max() < 30522
    assert set(np.unique(arrays["token_type_ids"])) <= {0, 1}
    # Same seed -> same arrays; another seed -> different ones.
    np.testing.assert_array_equal(example_inputs(model)["features"], arrays["features"])
    assert not np.array_equal(example_inputs(model, seed=1)["features"], arrays["features"])


def test_example_inputs_rejects_dynamic_shapes():
    x = ops.parameter(ov.PartialShape([-1, 4]), ov.Type.f32, name="dyn_input")
    model = ov.Model([ops.relu(x)], [x], "dyn")
    with pytest.raises(ValueError, match="dyn_input"):
        example_inputs(model)


def test_model_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path / "a" / "b"))
    assert model_cache_dir() == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()
    monkeypatch.delenv("PLACEMENT_GYM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir() == tmp_path / "xdg" / "placement_gym"


def test_save_ir_atomically_leaves_only_the_pair(tmp_path):
    xml = tmp_path / "tiny-v0.xml"
    _save_ir_atomically(load_model("tiny_branch"), xml)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-v0.bin", "tiny-v0.manifest.json", "tiny-v0.xml"]
    assert n_compute(load_model(xml)) == n_compute(load_model("tiny_branch"))


@pytest.mark.slow
def test_torch_zoo_model_is_built_once_then_read_from_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path))
    built = load_model("resnet")  # alias of resnet50; builds and caches
    assert (tmp_path / f"resnet50-{ZOO_VERSION}.xml").is_file()
    assert (tmp_path / f"resnet50-{ZOO_VERSION}.bin").is_file()
    assert built.get_friendly_name() == "resnet50"
    # Randomised BatchNorms survive conversion: one Add (BN shift) per Convolution.
    assert (len(built.get_ordered_ops()), n_compute(built)) == (288, 176)

    written = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("resnet50-*")}
    cached = load_model("resnet50")
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("resnet50-*")} == written  # read, not rebuilt
    assert cached.get_friendly_name() == "resnet50"
    assert len(cached.get_ordered_ops()) == len(built.get_ordered_ops())
    assert [op.get_friendly_name() for op in cached.get_ordered_ops()] == [
        op.get_friendly_name() for op in built.get_ordered_ops()
    ]

    logits = ov.Core().compile_model(cached, "CPU")(example_inputs(cached))["logits"]
    assert logits.shape == (1, 1000) and np.isfinite(logits).all()


@pytest.mark.slow
def test_mobilenet_v2_structure(monkeypatch, tmp_path):
    """MobileNet-V2: a stem conv, 17 inverted residual blocks (the first without its 1x1 expansion: 1 + 2 x 16
    pointwise convs, 17 depthwise ones), the 1x1 conv to 1280 channels; ReLU6 as Clamp(0, 6); residual adds in
    the 10 blocks that keep their shape; logits (1, 1000)."""
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path))
    model = load_model("mobilenet")  # alias of mobilenet_v2; builds and caches
    assert model.get_friendly_name() == "mobilenet_v2"
    assert (tmp_path / f"mobilenet_v2-{ZOO_VERSION}.xml").is_file()
    ops_ = model.get_ordered_ops()
    names = [op.get_friendly_name() for op in ops_]
    assert len(names) == len(set(names)), "friendly names must be unique (placements are applied by name)"
    counts = collections.Counter(op.get_type_name() for op in ops_ if op.get_type_name() not in NON_COMPUTE)
    assert counts == {"Convolution": 35, "GroupConvolution": 17, "Clamp": 35, "Add": 63, "MatMul": 1,
                      "ReduceMean": 1, "Reshape": 1}
    assert (len(ops_), n_compute(model)) == (263, 153)
    for op in ops_:
        if op.get_type_name() == "GroupConvolution":  # depthwise: one group per channel
            groups, out_per_group, in_per_group = list(op.input_value(1).get_shape())[:3]
            assert out_per_group == in_per_group == 1 and groups == op.get_output_shape(0)[1]
        if op.get_type_name() == "Clamp":
            assert (op.get_attributes()["min"], op.get_attributes()["max"]) == (0.0, 6.0)
    # Randomised BatchNorms survive conversion (one shift Add per conv), plus the classifier's bias and 10 residuals.
    residual = [op for op in ops_ if op.get_type_name() == "Add"
                and all(op.input_value(i).get_node().get_type_name() != "Constant" for i in range(2))]
    assert len(residual) == 10

    cached = load_model("mobilenet_v2")  # read from the cache: the same graph
    assert [op.get_friendly_name() for op in cached.get_ordered_ops()] == names
    logits = ov.Core().compile_model(cached, "CPU")(example_inputs(cached))["logits"]
    assert logits.shape == (1, 1000) and np.isfinite(logits).all()
