"""Device specs, discovery and virtual devices."""
import pytest

from placement_gym.devices import (
    DeviceSpec, available_devices, compile_properties, open_devices, shared_core, two_cpu_devices,
)


def test_parse_specs():
    spec = DeviceSpec.parse("cpu[inference_num_threads=1, PERFORMANCE_HINT=LATENCY]")
    assert spec.base == "CPU"
    assert spec.properties == (("INFERENCE_NUM_THREADS", 1), ("PERFORMANCE_HINT", "LATENCY"))
    assert spec.name == "CPU[INFERENCE_NUM_THREADS=1,PERFORMANCE_HINT=LATENCY]"
    assert DeviceSpec.parse(spec.name) == spec
    assert DeviceSpec.parse("GPU.1").plugin == "GPU"


@pytest.mark.parametrize("bad", ["CPU[", "CPU[x]", "", "C P U"])
def test_unparseable_specs(bad):
    with pytest.raises(ValueError, match="device"):
        DeviceSpec.parse(bad)


def test_cpu_is_present():
    assert "CPU" in available_devices()


def test_virtual_copy_of_cpu():
    devices = open_devices(["CPU", "CPU[INFERENCE_NUM_THREADS=1]"])
    assert [d.virtual for d in devices] == [False, True]
    assert devices[1].ov_name != "CPU" and "." not in devices[1].ov_name
    assert compile_properties(devices)[devices[1].ov_name] == {"INFERENCE_NUM_THREADS": 1}
    # registering again (a second env in the same process) reuses the name
    assert open_devices(["CPU", "CPU[INFERENCE_NUM_THREADS=1]"])[1].ov_name == devices[1].ov_name
    assert "CPU" in available_devices() and devices[1].ov_name not in available_devices()


def test_two_cpu_devices_follow_the_cpus_bf16_support():
    pair = two_cpu_devices()
    bf16 = "BF16" in shared_core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    assert pair == ["CPU", "CPU[INFERENCE_PRECISION_HINT=bf16]" if bf16 else "CPU[INFERENCE_NUM_THREADS=1]"]
    devices = open_devices(pair)  # a valid pair of devices here: the second one is a virtual CPU
    assert [d.virtual for d in devices] == [False, True]


def test_unknown_device_lists_what_exists():
    with pytest.raises(ValueError, match=r"does not exist.*present: \['CPU'"):
        open_devices(["CPU", "NOPE"])


def test_unknown_property_and_duplicates():
    with pytest.raises(ValueError, match="no property 'NOT_A_PROPERTY'"):
        open_devices(["CPU[NOT_A_PROPERTY=1]"])
    with pytest.raises(ValueError, match="listed twice"):
        open_devices(["CPU", "CPU"])


def test_devices_must_be_auto_or_specs():
    from placement_gym import DevicePlacementEnv

    for bad in (None, 3, {"CPU": 1}):
        for backend in ("openvino", "simulated"):
            with pytest.raises(ValueError, match="devices must be 'auto'"):
                DevicePlacementEnv("tiny_chain", backend=backend, devices=bad)


def test_a_bf16_hint_without_native_bf16_is_called_out(monkeypatch, caplog):
    import logging

    from placement_gym import backends, devices

    monkeypatch.setattr(devices, "cpu_runs_bf16", lambda core=None: False)
    with pytest.warns(UserWarning, match="no native bf16.*computes in f32"):
        devices.open_devices(["CPU", "CPU[INFERENCE_PRECISION_HINT=bf16]"])
    assert devices.two_cpu_devices() == ["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]
    # backend='auto' on a one-device machine says what real measurements need here instead of recommending
    # a virtual pair that HETERO would not keep apart.
    monkeypatch.setattr(backends, "_auto_choice_logged", False)
    monkeypatch.setattr(devices, "available_devices", lambda core=None: ["CPU"])
    caplog.clear()  # two_cpu_devices() above logged its own warning (it names itself); judge only the backend's
    with caplog.at_level(logging.WARNING):
        backends.make_backend("auto", "auto")
    assert "no native bf16" in caplog.text and "two_cpu_devices" not in caplog.text
