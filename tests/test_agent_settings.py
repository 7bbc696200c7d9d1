"""Each agent's settings are declared once (`agents.core.settings`, their values `agents.core.bounds`): the
constructor takes exactly the declared keywords, shows them in its signature, refuses others in one line, and
rebuilds from its hyperparameters; ``--agent-option`` values outside a setting's declared type and range are refused
in one line before anything is built (issue 82)."""
from __future__ import annotations

import inspect
import json
import re

import pytest

from agents.core.run import RunAgent
from agents.core.settings import field_values
from placement_gym import cli, registry
from placement_gym.commands.settings import compare_agent_options

from .refusals import BUILT_NOTHING_BYTES, peak_rss_bytes


def _declared_agents() -> list[type]:
    classes = [registry.load_agent_class(name) for name in registry.AGENTS]
    return [cls for cls in classes if isinstance(cls, type) and issubclass(cls, RunAgent) and cls.SETTINGS is not None]


def test_every_learned_agent_declares_its_settings():
    assert {cls.name for cls in _declared_agents()} == {"hsdag", "placeto", "rnn", "post", "go", "doppler", "imitation", "ppo",
                                                         "ppo-node"}


@pytest.mark.parametrize("cls", _declared_agents(), ids=lambda cls: cls.name)
def test_signature_shows_the_declared_keywords_with_their_defaults(cls):
    parameters = inspect.signature(cls).parameters
    assert tuple(parameters) == cls.option_names()
    for name, value in cls.option_defaults().items():
        assert parameters[name].default == value
    agent = cls()
    assert all(getattr(agent, name) == value for name, value in field_values(cls.SETTINGS).items())


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

    for build, message in [
        (lambda: PostAgent(n_groups=0), "PostSettings: field n_groups: found 0; expected null or an integer from 1"),
        (lambda: RNNAgent(reward="latency"), "RNNSettings: field reward: found 'latency'; expected one of"),
        (lambda: PlacetoAgent(start="middle"), "PlacetoSettings: field start: found 'middle'; expected one of"),
        (lambda: PPOAgent(n_steps=0), "SB3PPOSettings: field n_steps: found 0; expected an integer from 1"),
        (lambda: ImitationAgent(balance=True), "balance=True adds columns"),
        (lambda: PostAgent(max_nodes=0), "RunSettings: field max_nodes: found 0; expected an integer from 1"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            build()


# ------------------------------------------------------------------------------- declared types and ranges
#: (agent, option as given on the command line, what the one-line refusal says): issue 82's cases, each a
#: traceback, a crash, a hang or gigabytes before.
REFUSED_OPTIONS = [
    ("ppo", "device=cuda", "device 'cuda' is not on this machine"),
    ("hsdag", "hidden_channels=0",
     "HSDAGPolicySettings: field hidden_channels: found 0; expected an integer from 1 to 1024"),
    ("rnn", "hidden_channels=-3", "RNNSettings: field hidden_channels: found -3"),
    ("go", "heads=0", "GOPolicySettings: field heads: found 0; expected an integer from 1 to 64"),
    ("go", "heads=3", "hidden_channels 64 must be divisible by heads (3)"),
    ("ppo", "learning_rate=abc", "SB3PPOSettings: field learning_rate: found 'abc'; expected a positive number"),
    ("hsdag", "learning_rate=NaN", "--agent-option learning_rate is not strict JSON (NaN is not a JSON number)"),
    ("rnn", "learning_rate=1e400", "--agent-option: field learning_rate: found 1e400 (beyond the range of a float)"),
    ("hsdag", "learning_rate=-0.1", "FullBanditTrainerSettings: field learning_rate: found -0.1; expected a positive number"),
    ("hsdag", "hidden_channels=20000", "HSDAGPolicySettings: field hidden_channels: found 20000"),
    ("hsdag", "num_layers=1000000",
     "HSDAGPolicySettings: field num_layers: found 1000000; expected an integer from 1 to 16"),
    ("hsdag", "torch_threads=1000000", "RunSettings: field torch_threads: found 1000000"),
    ("placeto", "sweeps=1000000000", "PlacetoSettings: field sweeps: found 1000000000; expected an integer from 1 "
     "to 100"),
    ("ppo", "n_steps=1000000000", "SB3PPOSettings: field n_steps: found 1000000000"),
    ("hsdag", "stay_bias=" + "[" * 5000 + "]" * 5000, "--agent-option stay_bias is nested too deeply"),
    ("hsdag", "pooling=yes", "HSDAGPolicySettings: field pooling: found 'yes'; expected true or false"),
    ("hsdag", "split_patience=0", "SearchConfig: field split_patience: found 0"),
]


@pytest.mark.parametrize("agent, option, said", [c for c in REFUSED_OPTIONS], ids=[c[1][:30] for c in REFUSED_OPTIONS])
def test_an_agent_option_outside_its_declared_values_is_refused_in_one_line_before_anything_is_built(
        tmp_path, capsys, agent, option, said):
    out = tmp_path / "r.json"
    argv = ["evaluate", "--agent", agent, "--model", "tiny_branch", "--backend", "simulated", "--budget", "2",
            "--seeds", "1", "--no-progress", "--agent-option", option, "--json", str(out)]
    peak = peak_rss_bytes()
    assert cli.main(argv) == 2
    printed = capsys.readouterr()
    err = printed.err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and said in err, err
    assert printed.out == "" and list(tmp_path.iterdir()) == []  # nothing ran, nothing was written
    assert peak_rss_bytes() - peak < BUILT_NOTHING_BYTES


def test_a_benchmark_with_a_bad_option_makes_no_folder_and_every_benchmark_made_can_be_resumed(tmp_path, capsys):
    """Before, a bad value was found at the first run, after the folder was made: then neither a rerun (the folder
    holds a benchmark) nor --resume (its manifest's options could not be read back) was accepted."""
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"format": 1, "suite": "tiny", "version": 1, "description": "",
                                 "backend": "simulated", "models": ["tiny_chain"], "cases": ["paper:latency"],
                                 "budgets": [2], "seeds": [0], "metrics": ["gap_pct"]}))
    out = tmp_path / "bench"
    for option in ["hidden_channels=0", "learning_rate=NaN", "learning_rate=1e400",
                   "stay_bias=[" + ",".join(["1"] * 20_000) + "]"]:
        argv = ["benchmark", "--suite", str(suite), "--agent", "hsdag", "--agent-option", option, "--out", str(out),
                "--no-progress"]
        assert cli.main(argv) == 2, option
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err, err
        assert not out.exists(), option
    # an option it takes: the benchmark written, its manifest read back by --resume
    argv = ["benchmark", "--suite", str(suite), "--agent", "hsdag", "--agent-option", "stay_bias=0.5",
            "--out", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    assert cli.main(argv + ["--resume"]) == 0


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
