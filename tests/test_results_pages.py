"""benchmarks/results_pages.py: the committed results pages are what the script writes from the committed results
files (it only reads JSON), every results file they cite exists, and every `placement-gym ...` command they quote
parses with today's command line."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from .conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
pages = load_benchmark("results_pages")


def test_the_committed_pages_are_up_to_date(tmp_path):
    assert pages.main(["--out", str(tmp_path)]) == 0
    for page in pages.PAGES:
        assert (tmp_path / page).read_text() == (ROOT / page).read_text(), (
            f"{page} is not what benchmarks/results/ gives: run python benchmarks/results_pages.py")


def test_every_generated_block_is_known_and_every_table_is_on_a_page():
    used = [m["name"] for page in pages.PAGES for m in pages.MARKER.finditer((ROOT / page).read_text())]
    assert sorted(used) == sorted(pages.TABLES)


@pytest.mark.parametrize("page", pages.PAGES)
def test_every_cited_results_file_exists(page):
    missing = [p for p in pages.cited_files((ROOT / page).read_text()) if not (ROOT / p).exists()]
    assert not missing, f"{page} cites missing files: {missing}"


def _quoted_commands(text: str) -> list[str]:
    """`placement-gym ...` in inline code (joined over line breaks) and at the start of code-block lines."""
    inline = [" ".join(c.split()) for c in re.findall(r"`(placement-gym [^`]+)`", text)]
    blocks = [line.split("  #")[0].strip() for line in text.splitlines() if line.startswith("placement-gym ")]
    return inline + blocks


@pytest.mark.parametrize("page", pages.PAGES)
def test_every_quoted_command_parses(page):
    from placement_gym.cli import build_parser

    for command in _quoted_commands((ROOT / page).read_text()):
        args = shlex.split(command)[1:]
        build_parser().parse_args(args)  # exits (SystemExit) on a command today's CLI does not take
