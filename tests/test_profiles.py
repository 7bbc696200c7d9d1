"""Device profiles (presets, save/load) and calibration (the roofline, fits, real per-op profiling on a tiny model)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from placement_gym.backends.calibration import (
    calibrate, fit_boundary_costs, fit_roofline, latency_statistic, measure_op_times, real_latency, split_placements,
)
from placement_gym.backends.profiles import DeviceProfile, LinkProfile, Profile, op_bytes
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.backends.fusion import fusion_parent
from placement_gym.graph import ComputationGraph

from .conftest import TWO_DEVICES


def synthetic_graph(name: str = "synthetic") -> ComputationGraph:
    """0 -> 1 -> 2 and 0 -> 2; a convolution, an add, a relu with known FLOPs and bytes."""
    return ComputationGraph(
        name=name,
        op_names=("conv", "add", "relu"),
        op_types=("Convolution", "Add", "Relu"),
        output_shapes=(((1, 4),),) * 3,
        bytes_out=np.array([4000, 4000, 4000]),
        flops=np.array([1e9, 1e3, 1e3]),
        edge_index=np.array([[0, 0, 1], [1, 2, 2]]),
        edge_bytes=np.array([4000, 4000, 4000]),
    )


def test_paper_preset_names_its_parts_and_sources():
    profile = Profile.preset("paper")
    assert profile.device_names == ["CPU", "GPU"]
    assert "published benchmark figures" in profile.description and "SIMULATED" in profile.description
    assert any("OV-benchmark-data.csv" in source for source in profile.sources)
    assert profile.schedule == "sequential" and profile.boundary_overhead_s > 0
    assert profile.link.bandwidth_Bps == pytest.approx(24e9)
    with pytest.raises(ValueError, match="presets: \\[.*'paper'"):
        Profile.preset("laptop")


def test_roofline_formula():
    graph = synthetic_graph()
    device = DeviceProfile(name="X", peak_flops=1e12, memory_bandwidth_Bps=1e10, launch_overhead_s=1e-6,
                           efficiency={"Convolution": 0.5}, default_efficiency=0.25)
    nbytes = op_bytes(graph)
    assert nbytes.tolist() == [4000, 8000, 12000]  # read from other ops + written
    unfused = [1e-6 + max(1e9 / 1e12, 4000 / 1e10) / 0.5,
               1e-6 + max(1e3 / 1e12, 8000 / 1e10) / 0.25,
               1e-6 + max(1e3 / 1e12, 12000 / 1e10) / 0.25]
    assert device.roofline_times(graph, fused=False) == pytest.approx(unfused)
    # Kernels: the relu joins the add's elementwise kernel (fusion_parent), so it pays no launch and no memory
    # round trip of its own, only its FLOPs.
    assert fusion_parent(graph).tolist() == [-1, -1, 1]
    assert device.roofline_times(graph) == pytest.approx(unfused[:2] + [1e3 / 1e12 / 0.25])


def test_measured_times_apply_to_their_model_only():
    graph, other = synthetic_graph("m1"), synthetic_graph("m2")
    device = DeviceProfile(name="X", peak_flops=1e12, memory_bandwidth_Bps=1e10,
                           measured={"m1": {"conv": 0.5, "relu": 0.25}})
    times, measured = device.op_times(graph)
    assert measured.tolist() == [True, False, True]
    assert times[0] == 0.5 and times[2] == 0.25 and times[1] == device.roofline_times(graph)[1]
    assert not device.op_times(other)[1].any()
    profile = Profile(devices=[device])
    assert profile.coverage(graph) == {"X": pytest.approx(2 / 3)}


def test_save_load_round_trip(tmp_path):
    graph = synthetic_graph()
    profile = Profile(
        devices=[DeviceProfile(name="CPU", peak_flops=1e11, memory_bandwidth_Bps=2e10, launch_overhead_s=2e-6,
                               efficiency={"Convolution": 0.7}, measured={graph.name: {"conv": 1e-3}},
                               measured_wall_s={graph.name: 1.1e-3}),
                 DeviceProfile(name="CPU[INFERENCE_NUM_THREADS=1]", peak_flops=5e10, memory_bandwidth_Bps=1e10,
                               virtual=True)],
        link=LinkProfile(latency_s=1e-5, bandwidth_Bps=None),
        links={"CPU->CPU[INFERENCE_NUM_THREADS=1]": LinkProfile(2e-5, 1e9)},
        boundary_overhead_s=3e-5, split_overhead_s=1e-4, schedule="parallel", name="mine",
        calibration={"runs": 3},
    )
    path = profile.save(tmp_path / "profile.json")
    loaded = Profile.load(path)
    assert loaded == profile
    placement = np.array([0, 1, 0])
    assert SimulatedBackend(loaded).measure(graph, placement) == SimulatedBackend(profile).measure(graph, placement)
    with pytest.raises(FileExistsError):
        profile.save(path)
    profile.save(path, overwrite=True)
    # A preset, a path and a Profile all resolve.
    assert Profile.resolve(str(path)) == profile and Profile.resolve(profile) is profile
    assert Profile.resolve("paper").name == "paper"


def test_bad_profiles_are_refused_with_what_is_accepted(tmp_path):
    with pytest.raises(FileNotFoundError, match="presets"):
        Profile.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"devices": [{"name": "CPU"}]}))
    with pytest.raises(ValueError, match=r"bad.json: field devices\[0\].peak_flops: found nothing"):
        Profile.load(bad)
    with pytest.raises(ValueError, match="neither a preset"):
        Profile.resolve("nonsense")
    with pytest.raises(ValueError, match="must be > 0"):
        DeviceProfile(name="X", peak_flops=0, memory_bandwidth_Bps=1)
    with pytest.raises(ValueError, match="schedule"):
        Profile(devices=[DeviceProfile(name="X", peak_flops=1, memory_bandwidth_Bps=1)], schedule="random")
    with pytest.raises(ValueError, match="SRC->DST"):
        Profile(devices=[DeviceProfile(name="X", peak_flops=1, memory_bandwidth_Bps=1)], links={"X->Y": LinkProfile()})


def test_select_keeps_the_named_devices_in_order():
    paper = Profile.preset("paper")
    assert paper.select(["GPU", "CPU"]).device_names == ["GPU", "CPU"]
    with pytest.raises(ValueError, match="calibrate"):
        paper.select(["CPU", "CPU[INFERENCE_NUM_THREADS=1]"])


def test_fit_roofline_reproduces_per_type_totals():
    graph = synthetic_graph()
    truth = DeviceProfile(name="T", peak_flops=2e11, memory_bandwidth_Bps=5e9, launch_overhead_s=0,
                          efficiency={"Convolution": 0.6, "Add": 0.3, "Relu": 0.9})
    times = truth.roofline_times(graph)
    fitted = fit_roofline("T", [(graph, times)], prior_ops=0)  # no shrinkage: per-type totals exactly
    estimate = fitted.roofline_times(graph)
    for op_type in ("Convolution", "Add", "Relu"):
        mask = np.array(graph.op_types) == op_type
        assert estimate[mask].sum() == pytest.approx(times[mask].sum(), rel=1e-6)
    # With the default shrinkage, a type seen once moves towards the median efficiency.
    shrunk = fit_roofline("T", [(graph, times)])
    median = shrunk.default_efficiency
    for op_type, e in fitted.efficiency.items():
        assert min(e, median) - 1e-12 <= shrunk.efficiency[op_type] <= max(e, median) + 1e-12


def test_fit_boundary_costs_recovers_known_costs():
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(12):
        extra, transfers, nbytes = int(rng.integers(1, 60)), int(rng.integers(1, 80)), float(rng.integers(1e5, 1e8))
        compute = float(rng.uniform(0.01, 0.02))
        real = compute + 2e-4 + extra * 5e-5 + transfers * 1e-5 + nbytes / 4e9
        rows.append({"real_s": real, "compute_s": compute, "extra_submodels": extra, "transfers": transfers,
                     "transfer_bytes": nbytes})
    split, boundary, link, report = fit_boundary_costs(rows)
    assert split == pytest.approx(2e-4, rel=1e-3) and boundary == pytest.approx(5e-5, rel=1e-3)
    assert link.latency_s == pytest.approx(1e-5, rel=1e-3) and link.bandwidth_Bps == pytest.approx(4e9, rel=1e-3)
    assert report["mape_fitted"] < 1e-6 < report["mape_compute_only"]


def test_split_placements_are_real_splits(tiny_branch_graph):
    placements = split_placements(tiny_branch_graph, 2, 8, seed=0)
    assert len(placements) == 8
    assert all(set(p.tolist()) == {0, 1} for p in placements)
    assert [p.tolist() for p in placements] == [p.tolist() for p in split_placements(tiny_branch_graph, 2, 8, seed=0)]


def test_measure_op_times_on_a_real_device(tiny_branch_graph):
    from placement_gym.devices import open_devices

    device = open_devices(["CPU[INFERENCE_NUM_THREADS=1]"])[0]
    times, info = measure_op_times(tiny_branch_graph, device, runs=5, warmup=2)
    assert times.shape == (tiny_branch_graph.n_ops,)
    assert times.sum() == pytest.approx(info["wall_s"])  # scaled to the latency measured without profiling
    assert np.all(times >= 0) and info["entries"] > 0
    # The MatMul that no runtime node names (folded into FullyConnected) still gets its group's share.
    matmul = tiny_branch_graph.op_names.index("fc/matmul")
    assert times[matmul] > 0
    conv = tiny_branch_graph.op_names.index("deep2/conv")
    relu = tiny_branch_graph.op_names.index("deep2/relu")
    assert times[conv] > times[relu]  # a fused group's time goes mostly to the convolution


def test_calibrate_on_tiny_branch(tmp_path, tiny_branch_graph):
    from placement_gym import DevicePlacementEnv

    lines = []
    profile = calibrate(TWO_DEVICES, [tiny_branch_graph], runs=3, warmup=1, placements=3, seed=0, progress=lines.append)
    assert profile.device_names == TWO_DEVICES and [d.virtual for d in profile.devices] == [False, True]
    for device in profile.devices:
        assert set(device.measured[tiny_branch_graph.name]) == set(tiny_branch_graph.op_names)
    assert profile.split_overhead_s >= 0 and profile.boundary_overhead_s >= 0
    assert any("fitted" in line for line in lines)
    # the boundary costs are fitted to the segment sweep (placement_gym.backends.boundary) and the split placements
    sweep = profile.calibration["boundary_sweep"][tiny_branch_graph.name]
    assert sweep["ks"] == [1, 2, 4, 8, 16] and profile.calibration["segments"] == [1, 2, 4, 8, 16]
    kinds = [row["kind"] for row in profile.calibration["boundary_rows"]]
    assert kinds.count("split") == 3 and kinds.count("segments") == 4  # k > 1
    assert set(profile.calibration["boundary_fit"]["sweep_transfer_check"]) == {
        "per_extra_submodel", "per_crossing_tensor", "per_crossing_byte"}
    assert any("segment sweep" in source for source in profile.sources)
    # The single-device simulated latency is the measured one (the per-op times are scaled to it).
    backend = SimulatedBackend(profile)
    zeros = np.zeros(tiny_branch_graph.n_ops, dtype=np.int64)
    assert backend.measure(tiny_branch_graph, zeros).latency_s == pytest.approx(
        profile.devices[0].measured_wall_s[tiny_branch_graph.name])
    path = profile.save(tmp_path / "tiny.json")
    env = DevicePlacementEnv(tiny_branch_graph, backend="simulated", profile=str(path))
    assert env.device_names == TWO_DEVICES and env.backend.virtual_devices == [False, True]
    # The env prepares its graph when it is built (the observation's per-op costs come from the profile).
    assert env.backend.describe()["measured_op_fraction"][tiny_branch_graph.name] == {d: 1.0 for d in TWO_DEVICES}


def test_the_fastest_paired_latency_is_each_sides_fastest_run_not_the_luckiest_pair(tiny_branch_graph):
    from placement_gym.backends.base import Measurement
    from placement_gym.backends.openvino import OpenVINOBackend

    # The same placement as the reference, timed in pairs with noise: the ratio of the two fastest runs is 1, the
    # fastest per-pair ratio (a fast run beside a slow reference run) is not.
    paired = Measurement(latency_s=0.010, samples=(0.010, 0.014, 0.011), reference_samples=(0.013, 0.010, 0.011),
                         reference_baseline_s=0.010)
    assert real_latency(paired, "min") == pytest.approx(0.010)
    assert min(paired.timed_latencies_s) == pytest.approx(0.010 / 0.013 * 0.010)
    assert real_latency(paired, "median") == pytest.approx(float(np.median(paired.timed_latencies_s)))
    unpaired = Measurement(latency_s=0.011, samples=(0.012, 0.010, 0.011))
    assert real_latency(unpaired, "min") == 0.010 and real_latency(unpaired, "median") == 0.011
    # On the real backend: a placement equal to the reference comes out at the baseline's scale.
    backend = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=5)
    m = backend.measure(tiny_branch_graph, np.zeros(tiny_branch_graph.n_ops, dtype=np.int64), use_cache=False)
    assert m.reference_samples and real_latency(m, "min") == pytest.approx(
        min(m.samples) / min(m.reference_samples) * m.reference_baseline_s)


def test_calibrate_with_the_callers_backend_shares_its_reference_and_leaves_it_open(tiny_branch_graph):
    from placement_gym.backends.openvino import OpenVINOBackend

    backend = OpenVINOBackend(TWO_DEVICES, warmup=1, repeats=3, cache=False)
    profile = calibrate(TWO_DEVICES, [tiny_branch_graph], runs=3, warmup=1, placements=0, segments=(),
                        backend=backend)
    baseline = profile.calibration["real_backend"]["paired_reference"]["baseline_s"][tiny_branch_graph.name]
    later = backend.measure(tiny_branch_graph, np.ones(tiny_branch_graph.n_ops, dtype=np.int64))
    assert later.ok and later.reference_baseline_s == baseline["latency_s"]  # one reference, one scale
    with pytest.raises(ValueError, match="not the devices to calibrate"):
        calibrate(TWO_DEVICES[::-1], [tiny_branch_graph], runs=3, warmup=1, placements=0, segments=(),
                  backend=backend)


def test_latency_statistics_and_clocks(tiny_branch_graph):
    from placement_gym.backends.openvino import OpenVINOBackend

    assert latency_statistic([3.0, 1.0, 2.0], "median") == 2.0 and latency_statistic([3.0, 1.0, 2.0], "min") == 1.0
    with pytest.raises(ValueError, match="statistic"):
        latency_statistic([1.0], "mean")
    with pytest.raises(ValueError, match="clock"):
        OpenVINOBackend(TWO_DEVICES, clock="sundial")
    # Timed by CPU time, the backend compiles and runs placements as always; only its timer differs.
    backend = OpenVINOBackend(["CPU[INFERENCE_NUM_THREADS=1]"], clock="cpu", warmup=1, repeats=3)
    m = backend.measure(tiny_branch_graph, np.zeros(tiny_branch_graph.n_ops, dtype=np.int64))
    assert m.ok and len(m.samples) >= 3 and m.latency_s > 0 and not m.simulated  # adaptive: at least 3 runs
    assert backend.describe()["clock"].startswith("cpu")


def test_calibrate_command(tmp_path, capsys):
    from placement_gym.cli import main

    out = tmp_path / "tiny.json"
    argv = ["calibrate", "--devices", *TWO_DEVICES, "--model", "tiny_chain", "--out", str(out), "--runs", "2",
            "--warmup", "1", "--placements", "2"]
    assert main(argv) == 0
    profile = Profile.load(out)
    assert profile.device_names == TWO_DEVICES and "tiny_chain" in profile.devices[0].measured
    assert "wrote" in capsys.readouterr().out
    assert main(argv) == 2  # refuses to overwrite without --overwrite
    assert "exists" in capsys.readouterr().err


def test_a_damaged_profile_file_is_named_in_the_error(tmp_path):
    path = Profile.preset("paper").save(tmp_path / "p.json")
    path.write_text(path.read_text()[:50])
    with pytest.raises(ValueError, match=r"p\.json is not valid JSON .*expected a placement-gym profile"):
        Profile.load(path)


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(devices=[]), "devices"),
    (lambda d: d.update(devices="CPU"), "devices"),
    (lambda d: d["devices"][0].update(peak_flops=-1), r"devices\[0\].peak_flops"),
    (lambda d: d["devices"][0].update(peak_flops="fast"), r"devices\[0\].peak_flops"),
    (lambda d: d["devices"][1].update(memory_bytes=0), r"devices\[1\].memory_bytes"),
    (lambda d: d["devices"][0].update(efficiency={"Convolution": 0}), r"devices\[0\].efficiency"),
    (lambda d: d["devices"][0].update(measured={"resnet50": {"conv": "1 ms"}}), r"devices\[0\].measured"),
    (lambda d: d["devices"][0].update(unsupported_ops="Softmax"), r"devices\[0\].unsupported_ops"),
    (lambda d: d["devices"][0].update(shell="rm -rf /"), r"devices\[0\].shell"),
    (lambda d: d.update(schedule="random"), "schedule"),
    (lambda d: d.update(link={"latency_s": -1.0}), r"link.latency_s"),
    (lambda d: d.update(boundary_overhead_s=None), "boundary_overhead_s"),
    (lambda d: d.update(devices=[d["devices"][0]] * 100), "devices"),
])
def test_a_malformed_profile_file_is_refused_naming_the_file_and_the_field(tmp_path, change, field):
    path = Profile.preset("paper").save(tmp_path / "p.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"p\.json: field {field}\b.*expected"):
        Profile.load(path)


def test_a_profile_whose_fields_disagree_is_refused_naming_the_file(tmp_path):
    path = Profile.preset("paper").save(tmp_path / "p.json")
    data = json.loads(path.read_text())
    data["links"] = {"CPU->TPU": {"latency_s": 0.001}}  # a device the profile does not have
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"p\.json: link 'CPU->TPU' must be written"):
        Profile.load(path)
