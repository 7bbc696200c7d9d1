"""benchmarks/results_pages.py: the committed results pages are what the script writes from the committed results
files (it only reads JSON). That every file they cite exists and every command they quote parses is
tests/test_docs.py's check of every docs page."""
from __future__ import annotations

from pathlib import Path

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
