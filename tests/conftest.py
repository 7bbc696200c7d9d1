"""Shared fixtures: tiny zoo graphs and the two-device (one virtual) real OpenVINO setup."""
from __future__ import annotations

import pytest

# The two-device setup every real-backend test uses: the CPU plus a virtual one-thread copy of it.
TWO_DEVICES = ["CPU", "CPU[INFERENCE_NUM_THREADS=1]"]


@pytest.fixture(scope="session")
def tiny_branch_graph():
    from placement_gym import load_graph

    return load_graph("tiny_branch")


@pytest.fixture(scope="session")
def tiny_chain_graph():
    from placement_gym import load_graph

    return load_graph("tiny_chain")
