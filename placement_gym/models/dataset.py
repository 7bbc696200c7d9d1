"""The graph dataset (stub, filled in below)."""
from __future__ import annotations

DATASET_PREFIX = "dataset:"
SPLITS = ("train", "val", "test")


def dataset_names(split: str | None = None) -> list[str]:
    return []
