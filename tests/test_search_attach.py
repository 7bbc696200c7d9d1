"""The search is an object a learned agent holds, called at named points: a class without the layer runs its
method only and refuses search; with it (its ``SEARCH_LAYER``), the points run the search (the seeded pins are in
tests/test_seeded_pins.py)."""
from __future__ import annotations

import numpy as np
import pytest

from agents.algos import PolicyGradientAgent, ReinforceConfig, ReinforceTrainer
from agents.algos.hooks import TrainingHooks
from agents.core import PolicySpec, RunLoop
from agents.search.attach import SearchDuringTraining, SearchLayer
from agents.search.config import OUTSIDE_TRAINING, SearchConfig
from agents.search.heuristic_start import start_placements
from placement_gym.env import DevicePlacementEnv

from .test_common import CountingBackend, NodeAgent, NodePolicy, chain_graph
from .test_transfer import Placements


class SearchingNodeAgent(NodeAgent):
    """A user's `PolicyGradientAgent` subclass that takes a ``search``, without the search layer."""

    def __init__(self, search=None, seed=None, **options):
        PolicyGradientAgent.__init__(self, {"learning_rate": 0.02}, seed=seed, search=search, **options)
        self.learning_rate = 0.02


class AttachedNodeAgent(SearchingNodeAgent):
    """The same holding the search layer: its class names the layer and the components it runs."""

    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = OUTSIDE_TRAINING
    HYBRID = SearchConfig()


def test_a_class_without_the_search_layer_refuses_search():
    with pytest.raises(ValueError, match="composes no search layer"):
        SearchingNodeAgent(search={"heuristic_start": "measure"})
    agent = SearchingNodeAgent(distill_steps=10)  # the learned script's own setting, not the layer's
    assert agent.distillation.distill_steps == 10 and agent.search is None
    assert agent.search_components() == ["distill_steps"]


def test_with_the_layer_the_run_starts_with_the_heuristic_start():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend())
    seen = Placements()
    agent = AttachedNodeAgent(search={"heuristic_start": "measure"}, seed=0)
    assert isinstance(agent._search, SearchLayer) and agent.search == SearchConfig(heuristic_start="measure")
    agent.learn(env, budget=12, callback=seen)
    starts = start_placements(env.reset(seed=0)[0])
    assert [p.tolist() for p in seen.placements[:len(starts)]] == [p.tolist() for p in starts]


def test_an_agent_built_without_search_holds_no_layer_and_its_points_do_nothing():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend())
    assert AttachedNodeAgent(seed=0)._search is None and AttachedNodeAgent(search="off")._search is None
    agent = NodeAgent(seed=0)
    obs, _ = env.reset(seed=0)
    run = RunLoop(env, budget=4, seed=0)
    agent._measure_starts(run, run.env, 0, False, obs)
    assert run.steps == 0 and not agent.overrides_zero_shot
    hooks = TrainingHooks()
    assert hooks.fit_samples(run, obs) is None and hooks.proposals(run, obs) is None
    assert hooks.after_update(run, []) is False


def test_a_trainer_runs_the_layers_hooks_and_they_check_its_mode():
    env = DevicePlacementEnv(chain_graph(), backend=CountingBackend())
    policy = NodePolicy(PolicySpec.from_env(env))
    with pytest.raises(ValueError, match="needs mode='bandit'"):
        ReinforceTrainer(policy, ReinforceConfig(mode="episodic"),
                         hooks=SearchDuringTraining(SearchConfig(fit_memory=True)))
    search = SearchConfig(search_proposals=2)
    trainer = ReinforceTrainer(policy, ReinforceConfig(), hooks=SearchDuringTraining(search))
    run = RunLoop(env, budget=12, seed=0)
    run.env.reset(seed=0)
    run.env.step(np.zeros(6, dtype=np.int64))  # a best to propose around
    trainer.train(run, run.env, seed=0)
    assert run.done and any(h.get("search_proposals") for h in run.history)
