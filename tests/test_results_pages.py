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

    from placement_gym.files import load_json

    table = load_benchmark("leaderboard.leaderboard_table")
    reference = ROOT / "benchmarks" / "results" / "leaderboard" / "paper_latency_seed0.json"  # stored as .json.gz
    data = load_json(reference)
    data["records"] = [r for r in data["records"] if r["agent"] in ("go", "hsdag")]
    long = tmp_path / "paper_latency.json"
    long.write_text(json.dumps(data))
    case, rows = table.long_run_rows([long], reference)
    assert case == "paper:latency" and {r["agent"] for r in rows} == {"go", "hsdag"}
    alone = table.case_rows(long)[1]  # ranked among themselves: the better of the two has no gap at all
    optimum = {r["model"]: r["latency_s"] for r in load_json(reference)["records"]
               if r["agent"] == "optimal"}
    for row in rows:
        assert row["best_known_s"] <= optimum[row["model"]] * (1 + 1e-9)
        mine = next(r for r in alone if (r["model"], r["agent"]) == (row["model"], row["agent"]))
        assert row["gap_pct"][1000] >= mine["gap_pct"][1000]
    assert any(row["gap_pct"][1000] > 0 for row in rows)
    assert "within 2% of the best known** on paper:latency" in table.long_run_table([long], reference)


def test_long_runs_join_their_case_by_settings_and_a_rerun_replaces_the_earlier_run(tmp_path):
    """`leaderboard_table.long_run_table_files` groups the long runs' files by the case their settings name (a file
    named after its agent, ``paper_latency_hsdag_seed0``, included) and `long_run_rows` keeps one run per (agent,
    model, seed): the newest file's, so a rerun with new defaults replaces the earlier long run."""
    import json

    from placement_gym.files import load_json

    table = load_benchmark("leaderboard.leaderboard_table")
    reference = ROOT / "benchmarks" / "results" / "leaderboard" / "paper_latency_seed0.json"  # stored as .json.gz
    data = load_json(reference)
    hsdag = [r for r in data["records"] if r["agent"] == "hsdag"]
    earlier, rerun = tmp_path / "earlier", tmp_path / "rerun"
    earlier.mkdir(), rerun.mkdir()
    (earlier / "paper_latency_seed0.json").write_text(json.dumps(
        {**data, "created": "2026-01-01T00:00:00+00:00", "records": hsdag}))
    better = [{**r, "latency_s": 0.5 * r["latency_s"], "curve": [[1, 0.5 * r["latency_s"]]]} for r in hsdag]
    (rerun / "paper_latency_hsdag_seed0.json").write_text(json.dumps(
        {**data, "created": "2026-01-02T00:00:00+00:00", "records": better}))
    groups = table.long_run_table_files([earlier, rerun])
    assert list(groups) == ["paper_latency"] and len(groups["paper_latency"]) == 2
    _, rows = table.long_run_rows(groups["paper_latency"], reference)
    assert len(rows) == len({r["model"] for r in hsdag})  # one row per model: the rerun replaced the earlier run
    assert all(row["gap_pct"][1000] == 0.0 and row["best_known_s"] == min(
        r["latency_s"] for r in better if r["model"] == row["model"]) for row in rows)


def test_the_sanity_curves_draw_every_row_against_its_proven_optimum(tmp_path):
    """benchmarks/leaderboard/sanity_curves.py: a panel per (case, graph) of the suite, each with its proven
    optimum, every pure learned agent's runs and `random`'s once, last; it writes the PNG and refuses to replace
    one without --overwrite."""
    curves = load_benchmark("leaderboard.sanity_curves")
    from placement_gym.benchmark import load_suite

    records, optima = curves.suite_records(ROOT / "benchmarks" / "results", "sanity")
    suite = load_suite("sanity")
    assert sorted(optima) == sorted(f"{case} {model}" for case, model in suite.pairs())
    assert {r["model"] for r in records} == set(optima) and all(v > 0 for v in optima.values())
    agents = list(dict.fromkeys(r["agent"] for r in records))
    assert agents[-1] == "random" and set(agents[:-1]) == set(load_benchmark("leaderboard.leaderboard_table").LEARNED)
    assert len([r for r in records if r["agent"] == "random"]) == len(optima) * len(suite.seeds)
    out = tmp_path / "curves.png"
    assert curves.main(["--out", str(out)]) == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    try:
        curves.main(["--out", str(out)])
    except FileExistsError:
        pass
    else:
        raise AssertionError("an existing picture was replaced without --overwrite")


def test_reruns_replace_their_agents_rows_and_the_newest_file_wins(tmp_path):
    """`leaderboard_table.case_records` with an update: every agent the reruns hold comes from them, in the place
    of its first rows; the other agents' rows stay; where two rerun files hold the same (agent, model, seed), the
    later-created one's record is used (an agent rerun again after its defaults changed once more)."""
    import json

    from placement_gym.files import load_json

    table = load_benchmark("leaderboard.leaderboard_table")
    reference = ROOT / "benchmarks" / "results" / "leaderboard" / "paper_latency_seed0.json"  # stored as .json.gz
    data = load_json(reference)
    old = [r for r in data["records"] if r["agent"] == "hsdag"]
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps({**data, "created": "2026-01-01T00:00:00+00:00",
                                 "records": [{**r, "latency_s": 2.0} for r in old]}))
    second.write_text(json.dumps({**data, "created": "2026-01-02T00:00:00+00:00",
                                  "records": [{**r, "latency_s": 1.0} for r in old[:1]]}))
    case, budget, records = table.case_records(reference, [second, first])  # order of the files does not matter
    mine = [r for r in records if r["agent"] == "hsdag"]
    assert case == "paper:latency" and len(mine) == len(old)
    assert sorted(r["latency_s"] for r in mine) == [1.0] + [2.0] * (len(old) - 1)
    assert [r["agent"] for r in records if r["agent"] != "hsdag"] == [
        r["agent"] for r in data["records"] if r["agent"] != "hsdag"]
    agents = list(dict.fromkeys(r["agent"] for r in records))
    assert agents == list(dict.fromkeys(r["agent"] for r in data["records"]))
    assert set(table.update_cases(tmp_path)) == {"paper_latency"}
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**data, "budget": 500}))
    try:
        table.case_records(reference, [other])
    except ValueError as error:
        assert "different cases or budgets" in str(error)
    else:
        raise AssertionError("a rerun of another budget was accepted")


def test_the_test_splits_files_are_a_graph_set_of_their_own(tmp_path):
    """`leaderboard_table.folder_cases`: a case's zoo and test-split files are read apart when a graph set is
    named (the zoo's tables keep their three models; the test split gets tables of its own), together when not."""
    table = load_benchmark("leaderboard.leaderboard_table")
    names = ("paper_latency_seed0", "paper_latency_seed1", "paper_latency_test_seed0", "paper_latency_seed0.partial")
    for name in names:
        (tmp_path / f"{name}.json").write_text("{}")
    assert [p.name for p in table.folder_cases(tmp_path, "zoo")["paper_latency"]] == [
        "paper_latency_seed0.json", "paper_latency_seed1.json"]
    assert [p.name for p in table.folder_cases(tmp_path, "test")["paper_latency"]] == ["paper_latency_test_seed0.json"]
    assert len(table.folder_cases(tmp_path)["paper_latency"]) == 3
    assert table.main(["--graphs", "tset", str(tmp_path)]) == 2


def test_the_published_benchmarks_run_through_compare_and_render_as_the_page_does(tmp_path, monkeypatch):
    """benchmarks/published/published_benchmarks.py runs each model as one `evaluation.compare` and writes only its
    JSON; results_pages' ``published`` table renders it (their DP optimum reproduced by ``dp``, the expert split
    priced)."""
    import json

    script = load_benchmark("published.published_benchmarks")
    out = tmp_path / "published.json"
    model = "tarnawski:throughput-inputs/LayerGraphs/bert24_inference"
    assert script.main(["--inputs", model, "--agents", "single-device", "dp", "--budget", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    agents = [r["agent"] for r in data["records"]]
    assert agents[-1] == script.BEST_SINGLE and "dp" in agents and all("skipped" not in r for r in data["records"])
    monkeypatch.setattr(pages, "load", lambda name: data)
    text = pages.published()
    assert "| dp | 17.790 (1.000x) |" in text and "### DOPPLER" not in text
    assert "| human expert (their split, priced here = their -expert) | 20.084 (1.129x) |" in text
    assert text.index("| best single device |") < text.index("| dp |") and "-only |" not in text


def test_the_machine_line_names_only_the_versions_a_file_recorded():
    assert "openvino" not in pages._machine({"machine": {"cpu_count": 2}})
    line = pages._machine({"versions": {"openvino": "2026.4.1-22982-e2", "torch": "2.13.0+cpu"}})
    assert line.endswith(", openvino 2026.4.1, torch 2.13.0+cpu")


def test_the_machine_line_names_the_cpu_model_a_file_recorded():
    """A file names its CPU model (`files.machine`, which reads this machine's); one written before it did is
    from the earlier machines."""
    from placement_gym import files

    host = files.machine()
    assert host["cpu_model"] and host["cpu_count"] >= 1
    recorded = pages._machine({"machine": {"cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) Processor"}})
    assert recorded.startswith("the project's 2-core Intel Xeon Processor VM")
    assert pages.EARLIER_CPU in pages._machine({"machine": {"cpu_count": 2}})


def test_each_results_file_is_read_once(monkeypatch):
    """`load` (`leaderboard_table.read`) caches: regenerating every page reads each file once, plain or
    compressed (the leaderboard's files are ``.json.gz``)."""
    table = load_benchmark("leaderboard.leaderboard_table")  # the module the pages use
    table._read.cache_clear()  # a fresh cache
    reads: list[str] = []
    load_json = table.load_json
    monkeypatch.setattr(table, "load_json", lambda path: reads.append(str(path)) or load_json(path))
    for name in pages.TABLES:
        if name.startswith(("leaderboard", "sample")):
            pages.TABLES[name]()
    assert reads and len(reads) == len(set(reads)) and any(r.endswith(".json.gz") for r in reads)


def test_the_group_space_program_returns_placements_of_the_space():
    """benchmarks/leaderboard/group_space.py: with G groups every group has one device; with one group per op the
    program's cuts are everywhere, so it returns what ``dp``'s program returns; ``dp``'s own cut positions are
    left as they are."""
    import numpy as np

    from agents.baselines import dp
    from placement_gym.env import DevicePlacementEnv
    from placement_gym.wrappers import contiguous_groups

    script = load_benchmark("leaderboard.group_space")
    env = DevicePlacementEnv("synthetic:20:11", backend="simulated", profile="ai_pc", unsupported="repair")
    everywhere = dp._cut_positions
    for n_groups in (1, 4):
        placement = script.group_space_placement(env, n_groups)
        groups = contiguous_groups(20, n_groups)
        assert all(len(set(placement[groups == g].tolist())) == 1 for g in range(n_groups))
    per_op = script.group_space_placement(env, 20)
    assert np.array_equal(per_op, dp.contiguous_dp(env.unwrapped.backend, env.unwrapped.graph)[0])
    assert dp._cut_positions is everywhere
