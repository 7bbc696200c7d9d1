"""Each agent's settings are declared once (`agents.core.settings`): the constructor takes exactly the declared
keywords, shows them in its signature, refuses others in one line, and rebuilds from its hyperparameters."""
from __future__ import annotations

import inspect

import pytest

from agents.core.run import RunAgent
from placement_gym import registry
from placement_gym.commands.settings import compare_agent_options


def _declared_agents() -> list[type]:
    classes = [registry.load_agent_class(name) for name in registry.AGENTS]
    return [cls for cls in classes if isinstance(cls, type) and issubclass(cls, RunAgent) and cls.SETTINGS is not None]


def test_every_learned_agent_declares_its_settings():
    assert {cls.name for cls in _declared_agents()} == {"hsdag", "placeto", "rnn", "post", "go", "imitation", "ppo",
                                                         "ppo-node"}


@pytest.mark.parametrize("cls", _declared_agents(), ids=lambda cls: cls.name)
def test_signature_shows_the_declared_keywords_with_their_defaults(cls):
    parameters = inspect.signature(cls).parameters
    assert tuple(parameters) == cls.option_names()
    for name, value in cls.option_defaults().items():
        assert parameters[name].default == value
    agent = cls()
    assert all(getattr(agent, name) == getattr(cls.SETTINGS, name) for name in cls.own_setting_names())


@pytest.mark.parametrize("cls", _declared_agents(), ids=lambda cls: cls.name)
def test_an_agent_rebuilds_from_its_hyperparameters(cls):
    hyperparameters = cls(seed=3).hyperparameters()
    assert set(hyperparameters) <= set(cls.option_names())
    assert cls(**hyperparameters).hyperparameters() == hyperparameters


@pytest.mark.parametrize("cls", _declared_agents(), ids=lambda cls: cls.name)
def test_an_unknown_keyword_is_refused_in_one_line_naming_the_accepted_ones(cls):
    with pytest.raises(TypeError) as caught:
        cls(no_such_setting=1)
    message = str(caught.value)
    assert "\n" not in message and "no_such_setting" in message
    assert all(name in message for name in cls.option_names())


def test_the_settings_checks_live_in_the_dataclasses():
    from agents.imitation import ImitationAgent
    from agents.placeto import PlacetoAgent
    from agents.post import PostAgent
    from agents.ppo import PPOAgent
    from agents.rnn import RNNAgent

    for build, message in [(lambda: PostAgent(n_groups=0), "n_groups must be >= 1"),
                           (lambda: RNNAgent(reward="latency"), "reward must be one of"),
                           (lambda: PlacetoAgent(start="middle"), "start must be one of"),
                           (lambda: PPOAgent(n_steps=0), "n_steps and batch_size must be >= 1"),
                           (lambda: ImitationAgent(balance=True), "balance=True adds columns"),
                           (lambda: PostAgent(max_nodes=0), "max_nodes must be a positive number")]:
        with pytest.raises(ValueError, match=message):
            build()


def test_the_imitation_agent_refuses_trainer_settings_it_would_ignore():
    from agents.imitation import ImitationAgent

    with pytest.raises(TypeError, match="ImitationAgent takes no learning_rate; accepted: "):
        ImitationAgent(learning_rate=0.01)
    options = compare_agent_options(["learning_rate=0.01"], ["go", "imitation"])
    assert options == {"go": {"learning_rate": 0.01}, "imitation": {}}


def test_post_takes_no_algorithm():
    from agents.post import PostAgent

    assert "algorithm" not in PostAgent.option_names()
    with pytest.raises(TypeError, match="PostAgent takes no algorithm"):
        PostAgent(algorithm="reinforce")
