"""What the model-cache tests share (`test_models`, `test_reliability_files`): a torch-kind zoo entry that goes
through the real cache but is built from the tiny opset model, so that a test of the cache is fast."""
from __future__ import annotations

import pytest

from placement_gym.models import ZOO, load_model
from placement_gym.models.zoo import ZooEntry


def count_cached_tiny_builds(monkeypatch: pytest.MonkeyPatch, cache_dir) -> list:
    """Registers the zoo entry "cached_tiny" (for this test only) with the model cache at `cache_dir`; returns the
    list that gets one item each time the model is built rather than read from the cache."""
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(cache_dir))
    builds = []

    def build():
        builds.append(1)
        return load_model("tiny_branch")

    monkeypatch.setitem(ZOO, "cached_tiny", ZooEntry(build, "tiny_branch through the cache", "x", "torch"))
    return builds
