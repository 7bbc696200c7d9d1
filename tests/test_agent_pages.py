"""Each learned agent's page lists its settings with their defaults as the code has them (the "Settings" table of
docs/agents/NAME.md against ``hyperparameters()`` of an agent built with no options), so that the page that says
which defaults are the paper's method says what the agent runs."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from placement_gym import registry

PAGES = Path(__file__).resolve().parents[1] / "docs" / "agents"
#: A settings table row: | `name` | `default` | meaning |
ROW = re.compile(r"^\| `(?P<name>\w+)` \| `(?P<default>[^`]*)` \|", re.M)
#: Settings whose default the page writes as the constructor's keyword default while ``hyperparameters()`` gives the
#: value it stands for (None: no PPO settings, no search).
GIVEN_AS_NONE = {"ppo", "search"}


def _settings_table(page: Path) -> dict[str, str]:
    text = page.read_text()
    start = text.index("\n## Settings")
    end = text.find("\n## ", start + 1)
    return {m["name"]: m["default"] for m in ROW.finditer(text[start:end if end > 0 else None])}


@pytest.mark.parametrize("name", ["hsdag", "placeto", "rnn", "post", "go"])
def test_the_settings_table_gives_the_codes_defaults(name):
    table = _settings_table(PAGES / f"{name}.md")
    defaults = registry.make_agent(name, {}).hyperparameters()
    compared = 0
    for key, written in table.items():
        if key in GIVEN_AS_NONE or key not in defaults:
            continue
        try:
            value = ast.literal_eval(written)
        except (ValueError, SyntaxError):
            continue  # prose, not a literal (a default described in words)
        assert value == defaults[key], f"docs/agents/{name}.md: {key} is written {written}, the code has " \
                                       f"{defaults[key]!r}"
        compared += 1
    assert compared >= 10, f"docs/agents/{name}.md: only {compared} settings read from its table"
