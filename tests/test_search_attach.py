"""The search attaches from above at named points: a class without the layer runs its method only and refuses the
layer's components; with it, the points run the search (the seeded pins are in tests/test_search_layer.py)."""
from __future__ import annotations

import numpy as np
import pytest

from agents.algos import PolicyGradientAgent, ReinforceConfig, ReinforceTrainer
from agents.algos.hooks import TrainingHooks
from agents.core import PolicySpec, RunLoop
from agents.search.attach import SearchDuringTraining, SearchLayer
from agents.search.config import SearchConfig
from agents.search.heuristic_start import start_placements
from placement_gym.env import DevicePlacementEnv

from .test_common import CountingBackend, NodeAgent, NodePolicy, chain_graph
from .test_transfer import Placements


class SearchingNodeAgent(NodeAgent):
    """A user's `PolicyGradientAgent` subclass that takes a ``search``, without the search layer."""

    def __init__(self, search=None, seed=None):
        PolicyGradientAgent.__init__(self, {"learning_rate": 0.02}, seed=seed, search=search)
        self.learning_rate = 0.02


class AttachedNodeAgent(SearchLayer, SearchingNodeAgent):
    """The same with the search layer attached."""


def test_a_class_without_the_search_layer_refuses_the_layers_components():
    with pytest.raises(ValueError, match="run only on a class that composes agents.search.attach.SearchLayer"):
        SearchingNodeAgent(search={"heuristic_start": "measure"})
    assert SearchingNodeAgent(search={"distill_steps": 10}).search.distill_steps == 10  # its own training's


def test_with_the_layer_the_run_starts_with_the_heuristic_start():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend())
    seen = Placements()
    AttachedNodeAgent(search={"heuristic_start": "measure"}, seed=0).learn(env, budget=12, callback=seen)
    starts = start_placements(env.reset(seed=0)[0])
    assert [p.tolist() for p in seen.placements[:len(starts)]] == [p.tolist() for p in starts]


def test_the_named_points_do_nothing_without_the_layer():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend())
    agent = NodeAgent(seed=0)
    obs, _ = env.reset(seed=0)
    run = RunLoop(env, budget=4, seed=0)
    assert agent.measure_heuristic_start(run, obs, 0) == 0 and run.steps == 0
    placement = np.ones(6, dtype=np.int64)
    assert agent.on_predict(placement, obs) is placement
    hooks = TrainingHooks()
    assert hooks.fit_samples(run, obs) is None and hooks.proposals(run, obs) is None
    assert hooks.after_update(run, []) is False


def test_a_trainer_refuses_search_settings_its_hooks_do_not_run():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend())
    policy = NodePolicy(PolicySpec.from_env(env))
    with pytest.raises(ValueError, match="search layer"):
        ReinforceTrainer(policy, ReinforceConfig(), search=SearchConfig(search_proposals=2))
    search = SearchConfig(search_proposals=2)
    trainer = ReinforceTrainer(policy, ReinforceConfig(), hooks=SearchDuringTraining(search), search=search)
    run = RunLoop(env, budget=12, seed=0)
    run.env.reset(seed=0)
    run.env.step(np.zeros(6, dtype=np.int64))  # a best to propose around
    trainer.train(run, run.env, seed=0)
    assert run.done and any(h.get("search_proposals") for h in run.history)
