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


def test_a_long_run_is_ranked_against_the_leaderboards_best_known(tmp_path):
    """`leaderboard_table.long_run_rows`: the long run's agents only, their gaps to the best anyone found in the
    reference file (its `optimal` row included), not to the best among themselves."""
    import json

    table = load_benchmark("leaderboard_table")
    reference = ROOT / "benchmarks" / "results" / "leaderboard" / "paper_latency.json"
    data = json.loads(reference.read_text())
    data["records"] = [r for r in data["records"] if r["agent"] in ("go", "hsdag")]
    long = tmp_path / "paper_latency.json"
    long.write_text(json.dumps(data))
    case, rows = table.long_run_rows([long], reference)
    assert case == "paper:latency" and {r["agent"] for r in rows} == {"go", "hsdag"}
    alone = table.case_rows(long)[1]  # ranked among themselves: the better of the two has no gap at all
    optimum = {r["model"]: r["latency_s"] for r in json.loads(reference.read_text())["records"]
               if r["agent"] == "optimal"}
    for row in rows:
        assert row["best_known_s"] <= optimum[row["model"]] * (1 + 1e-9)
        mine = next(r for r in alone if (r["model"], r["agent"]) == (row["model"], row["agent"]))
        assert row["gap_pct"][1000] >= mine["gap_pct"][1000]
    assert any(row["gap_pct"][1000] > 0 for row in rows)
    assert "within 2% of the best known** on paper:latency" in table.long_run_table([long], reference)
