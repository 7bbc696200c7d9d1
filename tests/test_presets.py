"""The presets are the hardware they name: each preset device reproduces OpenVINO's published batch-1 latency of
ResNet-50, BERT-base and MobileNet-V2 (mapped to its precision, `placement_gym.backends.published_figures`) within
35%, the devices rank as published, the shipped fit is what the fit script computes today, the generated page is the
table of the shipped presets, and no placement OpenVINO cannot compile (the NPU sharing a model) is planned or
priced as valid. Real zoo graphs and the real simulated backend; nothing mocked."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement_gym.backends.profiles import PRESET_SPECS, build_preset, fitted_presets
from placement_gym.backends.published_figures import (fit_precision_exponent, published_latency,
                                                      published_rows)
from placement_gym.models import load_graph
from .conftest import load_benchmark


@pytest.fixture(scope="module")
def script():
    return load_benchmark("published.fit_presets")


@pytest.fixture(scope="module")
def graphs(script):
    return {published: load_graph(zoo) for published, zoo in script.MODELS.items()}


@pytest.fixture(scope="module")
def rows(script, graphs):
    return script.comparison({name: build_preset(name) for name in PRESET_SPECS}, graphs)


def test_every_preset_device_is_within_35_percent_of_its_published_latency(rows, script):
    compared = [r for r in rows if r["published_s"] is not None]
    assert len(compared) >= 3 * len(PRESET_SPECS) * 2  # every preset, every model, most devices
    off = [(r["preset"], r["model"], r["device"], round(r["ratio"], 2)) for r in compared
           if not abs(r["ratio"] - 1) <= script.TOLERANCE]
    assert not off, f"preset devices outside +-{script.TOLERANCE:.0%} of the published latency: {off}"


def test_the_devices_of_each_preset_rank_as_published(rows):
    swapped = [(r["preset"], r["model"], r["device"], r["published_rank"], r["simulated_rank"]) for r in rows
               if "published_rank" in r and r["published_rank"] != r["simulated_rank"]]
    assert not swapped, f"devices ranked otherwise than published (preset, model, device, published, simulated): {swapped}"


def test_the_shipped_fit_is_what_the_fit_script_computes(script, graphs):
    shipped = fitted_presets()
    fresh = script.fit_all(graphs)
    assert shipped["precision_exponent"] == pytest.approx(fresh["precision_exponent"])
    for preset, devices in fresh["presets"].items():
        for device, fit in devices.items():
            for key in ("launch_overhead_s", "matrix_efficiency", "default_efficiency"):
                assert shipped["presets"][preset][device][key] == pytest.approx(fit[key], rel=1e-6, abs=1e-12), \
                    (preset, device, key)


def test_the_results_page_is_the_table_of_the_shipped_presets(script, rows):
    from placement_gym.backends.published_figures import precision_exponent

    assert script.TABLE_PAGE.read_text(encoding="utf-8") == script.markdown(rows, precision_exponent())


def test_the_mapping_uses_the_published_latency_at_the_precision_where_there_is_one():
    assert published_latency("resnet-50", "Xeon Platinum 8490H", "CPU", "bf16").seconds == pytest.approx(1.29e-3)
    mapped = published_latency("resnet-50", "Core Ultra 7-165H", "CPU", "f32")
    exponent = fit_precision_exponent(published_rows())
    assert mapped.seconds == pytest.approx(7.98e-3 * (257.66 / 58.85) ** exponent)
    assert 0 < exponent < 1  # latency grows with precision, less than throughput does
    assert published_latency("mobilenet-v2", "Core Ultra 7-165H", "iGPU", "f16").seconds is None  # none published
    with pytest.raises(ValueError, match="unknown precision"):
        published_latency("resnet-50", "Atom x7425E", "CPU", "fp64")


def test_every_preset_figure_names_its_source():
    for name, spec in PRESET_SPECS.items():
        profile = build_preset(name)
        assert spec.link_source in profile.sources and all(p.spec in profile.sources for p in spec.parts)
        assert any("hetero_boundary" in s for s in profile.sources)
        assert all(p.spec and p.platform and p.precision in ("f32", "bf16", "f16") for p in spec.parts)
    assert "command" in fitted_presets() and fitted_presets()["sources"]


@pytest.mark.parametrize("agent", ["cheapest", "greedy", "topo", "dp", "optimal"])
def test_planners_never_share_a_model_with_the_npu(agent):
    """On ai_pc every planner's placement either keeps the NPU out or puts the whole model on it, and measures."""
    from placement_gym import registry
    from placement_gym.env import DevicePlacementEnv

    env = DevicePlacementEnv(model="tiny_branch", backend="simulated", profile="ai_pc")
    try:
        planner = registry.make_agent(agent, {})
        planner.learn(env, budget=4, seed=0)
        placement = np.asarray(planner.best_placement)
        npu = env.unwrapped.device_names.index("NPU")
        assert (placement == npu).all() or not (placement == npu).any()
        assert math.isfinite(planner.best_latency_s)
    finally:
        env.close()
