"""The graph dataset (placement_gym.models.dataset): families, the split by family, names usable as models, and a
few small entries built for real (OpenVINO conversion, the zoo's cache) and run in the simulated env."""
import gymnasium as gym
import numpy as np
import pytest

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym.env import model_list
from placement_gym.models import load_graph, zoo_names
from placement_gym.models.dataset import SPLITS, dataset_entries, dataset_names
from placement_gym.models.zoo import dataset_is_cached as is_cached

SMALL = "encoder-xs"  # 64 compute ops, seconds to build; its built model has shape ops that saving folds


def test_at_least_30_entries_in_at_least_8_families():
    entries = dataset_entries()
    assert len(entries) >= 30 and len({e.family for e in entries}) >= 8
    assert all(e.split in SPLITS and e.description and e.inputs for e in entries)
    assert dataset_entries("all") == entries


def test_splits_are_disjoint_by_family():
    families = {split: {e.family for e in dataset_entries(split)} for split in SPLITS}
    assert all(families.values())
    assert not families["train"] & families["val"] and not families["train"] & families["test"]
    assert not families["val"] & families["test"]
    assert sorted(sum((dataset_names(s) for s in SPLITS), [])) == sorted(dataset_names())
    with pytest.raises(ValueError, match="train"):
        dataset_names("training")


def test_names_are_distinct_from_the_zoo_and_name_multi_graph_envs():
    names = dataset_names()
    assert len(set(names)) == len(names) and not set(names) & set(zoo_names())
    assert model_list("dataset:test") == dataset_names("test") and model_list("dataset:all") == names
    with pytest.raises(ValueError, match="unknown dataset split"):
        model_list("dataset:nope")


def test_a_small_entry_builds_deterministically_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path))
    assert not is_cached(SMALL)
    built = load_graph(SMALL)
    assert is_cached(SMALL) and (tmp_path / f"{SMALL}-d1.manifest.json").is_file()
    cached = load_graph(SMALL)
    from placement_gym.models import load_model

    rebuilt = load_graph(load_model(SMALL, rebuild=True))
    for other in (cached, rebuilt):
        assert other.stats() == built.stats() and other.op_names == built.op_names
        assert np.array_equal(other.edge_index, built.edge_index)
    assert built.name == SMALL and 20 < built.n_ops < 200


def test_small_entries_run_in_the_simulated_env():
    env = gym.make("DevicePlacement-v0", model=["vgg-11", "resnet-10"], backend="simulated", profile="paper")
    env.action_space.seed(0)
    for name in ("vgg-11", "resnet-10"):
        _, info = env.reset(seed=0, options={"model": name})
        _, _, _, _, info = env.step(env.action_space.sample())
        assert info["ok"] and info["model"] == name


@pytest.mark.whole_dataset
def test_every_entry_builds_and_runs_in_the_simulated_env():
    """Builds every uncached entry (minutes the first time; well under a second each once cached)."""
    for name in dataset_names():
        env = gym.make("DevicePlacement-v0", model=name, backend="simulated", profile="paper")
        env.reset(seed=0)
        env.action_space.seed(0)
        _, _, _, _, info = env.step(env.action_space.sample())
        assert info["ok"], (name, info["error"])
        assert 20 <= env.unwrapped.graph.n_ops <= 1500, name
