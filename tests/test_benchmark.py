"""`placement_gym.benchmark`: versioned suites, resumable runs, the leaderboard with reference results, and an
agent of the user's with nothing but ``train``. Real runs on tiny graphs with the simulated backend."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from agents.core.run import RunAgent
from placement_gym import benchmark
from placement_gym.backends.simulated import COST_MODEL_VERSION
from placement_gym.cli import main as cli
from placement_gym.models import dataset_names
from placement_gym.files import LOCK_NAME, MAX_NAME_LEN, safe_name
from .conftest import BENCHMARKS, load_benchmark

#: Timing fields: the only ones two runs of the same seeded benchmark may differ in.
TIMINGS = {"wall_s", "env_s", "agent_s", "finish_s", "agent_ms_per_placement"}


class OnlyTrain(RunAgent):
    """A user's agent with nothing but ``train``: tries each device for every op, then random placements."""

    name = "only-train"

    def __init__(self, tries: int = 3) -> None:
        super().__init__()
        self.tries = tries

    def train(self, run, seed) -> None:
        rng = np.random.default_rng(seed)
        run.env.reset(seed=seed)
        n_ops, n_devices = run.base.graph.n_ops, run.base.n_devices
        step = 0
        while not run.done:
            placement = (np.full(n_ops, step % n_devices) if step < n_devices
                         else rng.integers(n_devices, size=n_ops))
            run.env.step(placement)
            step += 1


def tiny_suite(tmp_path: Path, **changes) -> Path:
    """A suite file of two tiny graphs, two cases, budgets 4 / 12 and two seeds (seconds to run)."""
    data = {"format": 1, "suite": "tiny", "version": 1, "description": "tiny graphs for the tests",
            "backend": "simulated", "models": ["tiny_branch", "synthetic:24:1"],
            "cases": ["ai_pc:latency", "paper:throughput"], "budgets": [4, 12], "seeds": [0, 1],
            "metrics": ["gap_pct", "predict_gap_pct", "placements_to_within", "agent_ms_per_placement"], **changes}
    path = tmp_path / f"suite-{len(list(tmp_path.glob('suite-*')))}.json"
    path.write_text(json.dumps(data))
    return path


def without_timings(value):
    """`value` with every timing field dropped, recursively (they differ between runs of the same seed)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_the_shipped_suites_are_the_ones_the_docs_describe():
    quick, standard, full = (benchmark.load_suite(name) for name in ("quick", "standard", "full"))
    assert quick.budgets == (100,) and quick.seeds == (0,)
    assert sorted(objective for _, objective in quick.cases) == ["latency", "throughput"]  # one preset per objective
    assert set(standard.models) == {"resnet", "inception", "bert", *dataset_names("test")}
    assert len(standard.cases) == 8 and standard.budgets == (100, 1000) and len(standard.seeds) == 3
    assert full.budget == 10_000 and any(m.startswith("synthetic:80000") for m in full.models)
    assert quick.versions() == {"suite": "quick", "suite_version": 1, "cost_model_version": COST_MODEL_VERSION,
                                "package_version": benchmark.__version__}


@pytest.mark.parametrize("changes, field", [
    ({"format": 2}, "format"),
    ({"suite": ""}, "suite"),
    ({"version": "1"}, "version"),
    ({"version": True}, "version"),
    ({"models": []}, "models"),
    ({"models": "resnet"}, "models"),
    ({"cases": ["ai_pc"]}, "cases"),
    ({"cases": ["mars:latency"]}, "cases"),
    ({"cases": ["ai_pc:speed"]}, "cases"),
    ({"budgets": [0]}, "budgets"),
    ({"budgets": [10 ** 9]}, "budgets"),
    ({"seeds": [-1]}, "seeds"),
    ({"seeds": [1.5]}, "seeds"),
    ({"seeds": [0, 1, 0]}, r"seeds\[2\]"),
    ({"metrics": ["accuracy"]}, "metrics"),
    ({"backend": "openvino"}, "backend"),
    ({"models": ["m"] * 1000}, "models"),
    ({"models": ["resnet", "resnett"]}, r"models\[1\]"),
    ({"models": ["dataset:unet-s"]}, r"models\[0\]"),
    ({"items": []}, "items"),
    ({"items": [["ai_pc:latency"]]}, r"items\[0\]"),
    ({"items": [["ai_pc:latency", "tiny_branch"], ["edge:latency", "tiny_branch"]]}, r"items\[1\]\[0\]"),
    ({"items": [["ai_pc:latency", "resnet"]]}, r"items\[0\]\[1\]"),
    ({"items": [["ai_pc:latency", "tiny_branch"], ["ai_pc:latency", "tiny_branch"],
                ["paper:throughput", "synthetic:24:1"]]}, r"items\[1\]"),
    ({"items": [["ai_pc:latency", "tiny_branch"], ["ai_pc:latency", "synthetic:24:1"]]}, r"cases\[1\]"),
])
def test_a_malformed_suite_file_is_refused_naming_the_file_and_the_field(tmp_path, changes, field):
    path = tiny_suite(tmp_path, **changes)
    with pytest.raises(ValueError, match=rf"{path.name}: field {field}[:.\[].*expected"):
        benchmark.load_suite(path)


def test_a_suite_of_items_runs_only_its_case_and_model_pairs(tmp_path):
    items = [["paper:throughput", "synthetic:24:1"], ["ai_pc:latency", "tiny_branch"]]
    suite = benchmark.load_suite(tiny_suite(tmp_path, items=items))
    assert suite.pairs() == (("ai_pc:latency", "tiny_branch"), ("paper:throughput", "synthetic:24:1"))  # case order
    records = benchmark.run_suite("random", suite)
    assert [(r["case"], r["model"], r["seed"]) for r in records] == [
        ("ai_pc:latency", "tiny_branch", 0), ("ai_pc:latency", "tiny_branch", 1),
        ("paper:throughput", "synthetic:24:1", 0), ("paper:throughput", "synthetic:24:1", 1)]
    assert benchmark.load_suite(tiny_suite(tmp_path)).pairs() == tuple(  # no items: every case with every model
        (case, model) for case in ("ai_pc:latency", "paper:throughput") for model in ("tiny_branch", "synthetic:24:1"))


def test_an_unreadable_or_unknown_suite_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown suite 'quik'.*quick, standard, full"):
        benchmark.load_suite("quik")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(ValueError, match="bad.json is not valid JSON .*expected a suite file"):
        benchmark.load_suite(bad)
    bad.write_text("[]")
    with pytest.raises(ValueError, match="bad.json: field \\(the whole file\\): found a list of 0 items"):
        benchmark.load_suite(bad)


def test_an_agent_with_only_train_runs_through_the_suite_and_onto_the_leaderboard(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path))
    mine = benchmark.run_suite(OnlyTrain, suite)
    reference = benchmark.run_suite("random", suite) + benchmark.run_suite("dp", suite)
    assert len(mine) == 2 * 2 * 2 and {r["agent"] for r in mine} == {"only-train"}
    assert all(r["ok"] and r["placements_measured"] == 12 and r["predict_latency_s"] is None for r in mine)
    assert all(r["settings"] == {"tries": 3} for r in mine)  # the default hyperparameters
    rows = benchmark.leaderboard(mine + reference, suite)
    assert {(r["case"], r["agent"]) for r in rows} == {
        (case, agent) for case in ("ai_pc:latency", "paper:throughput") for agent in ("only-train", "random", "dp")}
    for row in rows:
        assert set(row["gap_pct"]) == {4, 12} and all(g is None or g >= 0 for g in row["gap_pct"].values())
        assert row["gap_pct"][12] <= row["gap_pct"][4] + 1e-9  # more placements never find worse
    assert all(r["predict_gap_pct"] is None for r in rows if r["agent"] == "only-train")
    # planners: their predict is their plan, the best they measured; not shown as a policy's own placement
    assert all(r["predict_gap_pct"] is None for r in rows if r["agent"] in ("random", "dp"))
    assert min(r["gap_pct"][12] for r in rows if r["model"] == "tiny_branch" and r["case"] == "ai_pc:latency") == 0
    table = benchmark.leaderboard_markdown(rows, highlight=["only-train"])
    assert "| **only-train** |" in table and "**paper:throughput**" in table and "SIMULATED" in table


def test_the_default_save_and_load_of_a_users_agent_keep_its_settings_and_best(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path, cases=["paper:latency"], seeds=[0]))
    agent = OnlyTrain(tries=5)
    benchmark.run_suite(lambda: agent, suite, name="only-train")
    saved = agent.save(tmp_path / "agent.json")
    loaded = OnlyTrain.load(saved)
    assert loaded.tries == 5 and np.array_equal(loaded.best_placement, agent.best_placement)
    with pytest.raises(FileExistsError):
        agent.save(saved)
    data = json.loads(saved.read_text())
    saved.write_text(json.dumps({**data, "agent": "os:system"}))
    with pytest.raises(ValueError, match="agent.json: field agent: found 'os:system'"):
        OnlyTrain.load(saved)
    saved.write_text(json.dumps({**data, "best_placement": ["CPU"]}))
    with pytest.raises(ValueError, match=r"agent.json: field best_placement\[0\]"):
        OnlyTrain.load(saved)


def test_a_killed_benchmark_resumes_where_it_stopped_with_the_records_of_an_uninterrupted_one(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path))
    whole = benchmark.run_suite("hsdag", suite, out=tmp_path / "whole")

    finished = []

    def killed_after_three(record: dict) -> None:
        finished.append(record)
        if len(finished) == 3:
            raise KeyboardInterrupt  # as a kill between two runs: the three runs are on disk

    with pytest.raises(KeyboardInterrupt):
        benchmark.run_suite("hsdag", suite, out=tmp_path / "part", on_record=killed_after_three)
    assert len(list((tmp_path / "part").glob("runs/*/*/*/seed*.json"))) == 3
    with pytest.raises(FileExistsError, match="--resume"):
        benchmark.run_suite("hsdag", suite, out=tmp_path / "part")
    ran = []
    resumed = benchmark.run_suite("hsdag", suite, out=tmp_path / "part", resume=True, on_record=ran.append)
    assert len(ran) == len(whole) - 3  # nothing that had finished ran again
    assert without_timings(resumed) == without_timings(whole)


def test_resume_refuses_another_suite_agent_or_cost_model_version(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path, seeds=[0], cases=["paper:latency"]))
    benchmark.run_suite("random", suite, out=tmp_path / "b")
    other = benchmark.load_suite(tiny_suite(tmp_path, seeds=[0], cases=["paper:latency"], version=2))
    with pytest.raises(ValueError, match="field suite_version: found 1; expected 2, this benchmark's"):
        benchmark.run_suite("random", other, out=tmp_path / "b", resume=True)
    with pytest.raises(ValueError, match="field agent: found 'random'; expected 'dp'"):
        benchmark.run_suite("dp", suite, out=tmp_path / "b", resume=True)
    manifest = tmp_path / "b" / "benchmark.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "cost_model_version": 0}))
    with pytest.raises(ValueError, match="field cost_model_version: found 0"):
        benchmark.run_suite("random", suite, out=tmp_path / "b", resume=True)


def test_results_of_another_suite_or_cost_model_version_are_refused_when_compared(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path, seeds=[0], cases=["paper:latency"]))
    path = benchmark.write_results(tmp_path / "ref.json", suite, benchmark.run_suite("random", suite))
    assert [r["agent"] for r in benchmark.reference_records(suite, path)] == ["random", "random"]
    data = json.loads(path.read_text())
    for key, value in (("cost_model_version", COST_MODEL_VERSION + 1), ("suite_version", 7), ("suite", "quick")):
        path.write_text(json.dumps({**data, key: value}))
        with pytest.raises(ValueError, match=f"ref.json: field {key}: found .* not comparable"):
            benchmark.reference_records(suite, path)
    path.write_text(json.dumps({**data, "records": [{**data["records"][0], "latency_s": "fast"}]}))
    with pytest.raises(ValueError, match=r"ref.json: field records\[0\].latency_s"):
        benchmark.reference_records(suite, path)


def test_an_unknown_agent_is_refused_before_any_run(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path))
    with pytest.raises(ValueError, match="unknown agent 'hsdg' \\(did you mean 'hsdag'\\?\\)"):
        benchmark.run_suite("hsdg", suite, out=tmp_path / "never")
    with pytest.raises(ValueError, match="could not be imported"):
        benchmark.run_suite("no_such_module_here:Agent", suite, out=tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_a_suites_reference_is_read_from_the_leaderboards_runs_as_run_suite_runs_them(tmp_path):
    """`benchmarks/leaderboard/reference_results.py --from-leaderboard`: the leaderboard's `compare` files (one per
    case, graph set and seed, as benchmarks/leaderboard/leaderboard.sh names them; compressed or not) hold the records
    `run_suite` makes of the same runs; a missing run, another budget or another cost model is refused, naming it."""
    reference = load_benchmark("leaderboard.reference_results")
    suite = benchmark.load_suite(tiny_suite(tmp_path, cases=["paper:throughput"], budgets=[12]))
    board, agents = tmp_path / "board", ["single-device", "dp", "hsdag", "hybrid:post"]
    for seed in suite.seeds:
        for tag, model in (("", "tiny_branch"), ("_test", "synthetic:24:1")):
            name = f"paper_throughput{tag}_seed{seed}.json" + (".gz" if seed == 0 else "")  # as leaderboard.sh writes
            assert cli(["compare", "--models", model, "--agents", *agents, "--budget", "12", "--seed", str(seed),
                        "--profile", "paper", "--objective", "throughput", "--unsupported", "repair", "--no-progress",
                        "--json", str(board / name)]) == 0
    assert (board / "paper_throughput_seed0.csv").is_file()  # beside x.json.gz: x.csv, not x.json.csv

    def slim(records):
        rows = [without_timings({k: r.get(k) for k in benchmark.REFERENCE_KEYS}) for r in records]
        return sorted(rows, key=lambda r: (r["agent"], r["model"], int(r["seed"])))

    expected = [r for agent in agents for r in benchmark.run_suite(agent, suite)]
    assert len(expected) == (2 + 3) * 2 * 2  # a single-device row per paper device, 3 agents, 2 models, 2 seeds
    assert slim(reference.leaderboard_records(board, suite)) == slim(expected)
    out = tmp_path / "reference.json"
    assert reference.main(["--suite", str(tmp_path / "suite-0.json"), "--from-leaderboard", str(board),
                           "--out", str(out)]) == 0
    assert slim(benchmark.reference_records(suite, out)) == slim(expected)

    (board / "paper_throughput_test_seed1.json").rename(tmp_path / "aside.json")
    with pytest.raises(ValueError, match=r"5 runs of the suite tiny missing, e.g. paper:throughput CPU-only "
                                         r"synthetic:24:1 seed 1;.*run benchmarks/leaderboard/leaderboard.sh"):
        reference.leaderboard_records(board, suite)
    longer = benchmark.load_suite(tiny_suite(tmp_path, cases=["paper:throughput"], budgets=[40]))
    with pytest.raises(ValueError, match="budget 12, not the suite's 40"):
        reference.leaderboard_records(board, longer)
    data = json.loads((tmp_path / "aside.json").read_text())
    data["backend_settings"]["cost_model_version"] = COST_MODEL_VERSION + 1
    (board / "paper_throughput_test_seed1.json").write_text(json.dumps(data))
    older = f"test_seed1.json: measured with cost model version {COST_MODEL_VERSION + 1}"
    with pytest.raises(ValueError, match=older):
        reference.leaderboard_records(board, suite)


def test_an_agent_registered_later_is_added_to_a_reference_keeping_the_others_as_measured(tmp_path, capsys):
    """``reference_results.py --agents NAME --add``: NAME's runs replace its records in the existing reference and
    every other agent's stay as they were, the exact optimum's proof included; nothing to add to is refused."""
    reference = load_benchmark("leaderboard.reference_results")
    suite_file = tiny_suite(tmp_path, cases=["paper:latency"], seeds=[0])
    suite, out = benchmark.load_suite(suite_file), tmp_path / "reference.json"
    assert reference.main(["--suite", str(suite_file), "--agents", "random", "--add", "--out", str(out)]) == 2
    assert "no reference to add to" in capsys.readouterr().err and not out.exists()
    work = ["--work", str(tmp_path / "work")]
    assert reference.main(["--suite", str(suite_file), "--agents", "random", "optimal", "--out", str(out), *work]) == 0
    before = benchmark.reference_records(suite, out)
    assert reference.main(["--suite", str(suite_file), "--agents", "random", "dp", "--add", "--out", str(out),
                           *work]) == 0
    after = benchmark.reference_records(suite, out)
    assert [r for r in after if r["agent"] == "optimal"] == [r for r in before if r["agent"] == "optimal"]
    assert all(r["plan"]["status"] for r in after if r["agent"] == "optimal")
    assert sorted(r["agent"] for r in after) == sorted(["optimal", "random", "dp"] * len(suite.models))


def test_the_standard_suite_ships_no_reference_of_an_earlier_cost_model(tmp_path, capsys):
    """The `standard` suite's reference is read from the leaderboard's runs (``reference_results.py
    --from-leaderboard``). Those shipped in benchmarks/results/leaderboard were priced by cost model version 1, so
    they are refused (naming the version) and the suite ships no reference until the leaderboard runs again:
    ``benchmark --suite standard`` then ranks a user's agent among nothing it could not compare with."""
    reference = load_benchmark("leaderboard.reference_results")
    suite = benchmark.load_suite("standard")
    assert benchmark.reference_records(suite) == []
    assert reference.main(["--suite", "standard", "--from-leaderboard", str(BENCHMARKS / "results" / "leaderboard"),
                           "--out", str(tmp_path / "standard.json")]) == 2
    assert "cost model version 1" in capsys.readouterr().err and not (tmp_path / "standard.json").exists()


def test_score_measures_placements_against_the_best_known(tmp_path):
    suite = benchmark.load_suite(tiny_suite(tmp_path, seeds=[0], cases=["paper:latency"]))
    reference = benchmark.run_suite("dp", suite)
    best = {r["model"]: r for r in reference}
    scores = benchmark.score({m: r["placement"] for m, r in best.items()}, suite, reference=reference)
    assert [s["model"] for s in scores] == list(best)
    assert all(s["ok"] and s["gap_pct"] == pytest.approx(0.0, abs=1e-9) for s in scores)
    worse = benchmark.score({"tiny_branch": [1] * len(best["tiny_branch"]["placement"])}, suite,
                            reference=reference)
    assert worse[0]["gap_pct"] is None or worse[0]["gap_pct"] >= 0
    with pytest.raises(ValueError, match="models \\['resnet'\\] are not in suite 'tiny'"):
        benchmark.score({"resnet": [0]}, suite, reference=reference)


def test_a_suite_runs_on_ray_with_the_records_of_a_serial_run(tmp_path, local_ray):
    suite = benchmark.load_suite(tiny_suite(tmp_path, cases=["edge:latency"], seeds=[0, 1]))
    serial = benchmark.run_suite("hsdag", suite)
    written = []
    on_ray = benchmark.run_suite("hsdag", suite, ray="local:2", out=tmp_path / "ray", on_record=written.append)
    assert len(written) == len(serial) == 4
    assert len(list((tmp_path / "ray").glob("runs/*/*/*/seed*.json"))) == 4  # each written as it finished
    assert without_timings(on_ray) == without_timings(serial)


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_agent.py"


def test_the_benchmark_command_ranks_a_users_file_agent_among_the_reference_results(tmp_path, capsys):
    from placement_gym import cli

    suite_path = tiny_suite(tmp_path, seeds=[0])
    suite = benchmark.load_suite(suite_path)
    reference = benchmark.write_results(tmp_path / "ref.json", suite, benchmark.run_suite("random", suite))
    out = tmp_path / "bench"
    argv = ["benchmark", "--agent", f"{EXAMPLE}:BlockHillClimb", "--suite", str(suite_path), "--out", str(out),
            "--reference", str(reference), "--no-progress"]
    assert cli.main(argv) == 0
    printed, said = capsys.readouterr()
    assert "| **block-hill-climb** |" in printed and "| random |" in printed and "**paper:throughput**" in printed
    assert "4 runs of" in said and "0 done already, 4 to run, roughly" in said  # said up front, with a duration
    assert {p.name for p in out.iterdir()} >= {"benchmark.json", "runs", "leaderboard.json", "leaderboard.md",
                                               "curves.ai_pc_latency.png", "curves.paper_throughput.png"}
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["agents"] == ["block-hill-climb"] and board["cost_model_version"] == COST_MODEL_VERSION
    assert cli.main(argv) == 2 and "--resume" in capsys.readouterr().err  # never over a finished benchmark
    assert cli.main(argv + ["--resume"]) == 0 and "4 done already, 0 to run" in capsys.readouterr().err
    stale = json.loads(reference.read_text())
    reference.write_text(json.dumps({**stale, "cost_model_version": COST_MODEL_VERSION + 1}))
    assert cli.main(argv + ["--resume"]) == 2 and "not comparable" in capsys.readouterr().err


def test_an_unknown_agent_exits_2_before_any_work_in_every_command(tmp_path, capsys):
    from placement_gym import cli

    suite_path = tiny_suite(tmp_path, seeds=[0])
    assert cli.main(["benchmark", "--agent", "hsdg", "--suite", str(suite_path), "--out", str(tmp_path / "b")]) == 2
    assert "did you mean 'hsdag'" in capsys.readouterr().err and not (tmp_path / "b").exists()
    compare = ["compare", "--models", "tiny_branch", "--agents", "hsdg", "random", "--backend", "simulated",
               "--budget", "3", "--seeds", "1", "--json", str(tmp_path / "c.json"), "--no-progress"]
    assert cli.main(compare) == 2
    printed, said = capsys.readouterr()
    assert "unknown agent 'hsdg'" in said and printed == "" and not (tmp_path / "c.json").exists()
    compare[compare.index("hsdg")] = "not_a_module_anywhere:Agent"
    assert cli.main(compare) == 2 and "could not be imported" in capsys.readouterr().err
    for command in ("train", "evaluate"):
        assert cli.main([command, "--agent", "hsdg", "--model", "tiny_branch", "--backend", "simulated"]) == 2
        assert "unknown agent 'hsdg'" in capsys.readouterr().err


def test_an_agent_with_only_train_runs_through_compare_as_a_file(tmp_path, capsys):
    from placement_gym import cli

    out = tmp_path / "c.json"
    argv = ["compare", "--models", "tiny_branch", "--agents", f"{EXAMPLE}:BlockHillClimb", "random", "--backend",
            "simulated", "--budget", "8", "--seeds", "1", "--json", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    records = {r["agent"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"block-hill-climb", "random"} and records["block-hill-climb"]["ok"]
    assert records["block-hill-climb"]["predict_latency_s"] is None  # no policy of its own: no predict


#: The ceiling on every wait for another process's event in these tests: generous, so a busy machine (a start
#: that takes minutes) never fails them; each wait ends on the event itself, not on this.
CEILING_S = 300

#: Set in a benchmark subprocess: `WaitsOnSeed1` announces seed 1 by creating this file, then waits for a signal.
MARKER_ENV = "PLACEMENT_GYM_TEST_BENCH_MARKER"


class WaitsOnSeed1(OnlyTrain):
    """`OnlyTrain`, except that where `MARKER_ENV` is set its seed-1 run announces itself and waits (as a long
    run does) until a signal stops the process."""

    name = "waits-on-seed-1"

    def train(self, run, seed) -> None:
        if seed == 1 and MARKER_ENV in os.environ:
            Path(os.environ[MARKER_ENV]).touch()
            deadline = time.monotonic() + CEILING_S  # never outlive a test that failed to send its signal
            while time.monotonic() < deadline:
                time.sleep(0.05)
        super().train(run, seed)


def benchmark_in_seed_1(argv: list[str], marker: Path) -> subprocess.Popen:
    """Start ``placement-gym ARGV`` (a benchmark of `WaitsOnSeed1`) in a subprocess and return it once its seed-1
    run has started (`marker` exists), its seed-0 run finished; the caller stops it. The wait ends on that event,
    under `CEILING_S`: a busy machine's slow start does not fail it."""
    repository = Path(__file__).resolve().parents[1]
    env = {**os.environ, MARKER_ENV: str(marker),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(repository), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "placement_gym.cli", *argv], cwd=repository, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + CEILING_S
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"seed 1 never started: {proc.communicate()}")
        time.sleep(0.05)
    return proc


def test_a_benchmark_stopped_by_sigterm_resumes_with_the_records_of_an_uninterrupted_run(tmp_path):
    from placement_gym import cli

    suite_path = tiny_suite(tmp_path, cases=["edge:latency"], models=["tiny_branch"], seeds=[0, 1, 2])
    agent = "tests.test_benchmark:WaitsOnSeed1"
    out = tmp_path / "bench"
    argv = ["benchmark", "--agent", agent, "--suite", str(suite_path), "--out", str(out), "--no-progress"]
    proc = benchmark_in_seed_1(argv, tmp_path / "seed1-started")
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=CEILING_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143 and "interrupted by SIGTERM" in err and "--resume" in err, err
    assert [p.name for p in out.glob("runs/*/*/*/seed*.json")] == ["seed0.json"]  # the finished run, kept
    assert cli.main(argv + ["--resume"]) == 0  # in this process: MARKER_ENV is not set, seed 1 runs
    resumed = [json.loads(p.read_text()) for p in sorted(out.glob("runs/*/*/*/seed*.json"))]
    whole = benchmark.run_suite(WaitsOnSeed1, benchmark.load_suite(suite_path))
    assert without_timings(resumed) == without_timings(whole)


def test_only_a_learned_policys_predict_is_its_own():
    """`benchmark.has_own_predict`: a run that made parameter updates has a policy of its own; a planner's predict
    is its plan; a record without its run's summary (reference results) tells by the value."""
    run = {"latency_s": 1.0, "predict_latency_s": 1.5}
    assert benchmark.has_own_predict({**run, "extra": {"run": {"updates": 3}}})
    assert not benchmark.has_own_predict({**run, "extra": {"run": {"updates": 0}}})
    assert not benchmark.has_own_predict({**run, "predict_latency_s": None, "extra": {"run": {"updates": 3}}})
    assert benchmark.has_own_predict(run) and not benchmark.has_own_predict({**run, "predict_latency_s": 1.0})
    rows = benchmark.leaderboard([{**run, "case": "c", "model": "m", "agent": a, "seed": 0, "curve": [[1, 1.0]],
                                   "extra": {"run": {"updates": n}}} for a, n in (("learned", 5), ("planner", 0))],
                                 [1])
    assert {r["agent"]: r["predict_gap_pct"] for r in rows} == {"learned": 50.0, "planner": None}
    table = benchmark.leaderboard_markdown(rows)
    assert "| learned | +0.0 (+50.0) |" in table and "| planner | +0.0 |" in table


# ----------------------------------------------------------------------------------------- files read back
@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> tuple[Path, Path, dict]:
    """A benchmark folder of one finished run (random, tiny_branch, seed 0): ``(suite file, folder, its record)``."""
    folder = tmp_path_factory.mktemp("one-run")
    suite = tiny_suite(folder, cases=["paper:latency"], models=["tiny_branch"], seeds=[0], budgets=[3])
    benchmark.run_suite("random", benchmark.load_suite(suite), out=folder / "bench")
    [path] = (folder / "bench").glob("runs/*/*/*/seed0.json")
    return suite, folder / "bench", json.loads(path.read_text())


#: (name, a change to a run's record, the field named). Each was trusted: an AttributeError (plan, extra), a run
#: counted as ok ("no"), a leaderboard's best known of 1e-30 s.
BAD_RECORDS = [
    ("plan a list", {"plan": [1]}, "plan"),
    ("plan text", {"plan": "optimal"}, "plan"),
    ("extra a list", {"extra": []}, "extra"),
    ("extra.plan text", {"extra": {"plan": "x"}}, "extra.plan"),
    ("extra.run a list", {"extra": {"run": [0]}}, "extra.run"),
    ("extra.run.updates text", {"extra": {"run": {"updates": "many"}}}, "extra.run.updates"),
    ("ok text", {"ok": "no"}, "ok"),
    ("ok a number", {"ok": 0}, "ok"),
    ("latency 1e-30", {"latency_s": 1e-30}, "latency_s"),
    ("latency zero", {"latency_s": 0}, "latency_s"),
    ("latency negative", {"latency_s": -1.0}, "latency_s"),
    ("latency of years", {"latency_s": 1e9}, "latency_s"),
    ("predict latency 1e-30", {"predict_latency_s": 1e-30}, "predict_latency_s"),
    ("curve point 1e-30", {"curve": [[1, 1e-30]]}, r"curve\[0\]"),
    ("curve point swapped", {"curve": [[0.001, 1]]}, r"curve\[0\]"),
    ("curve point of three", {"curve": [[1, 0.001, 2]]}, r"curve\[0\]"),
    ("plan bound negative", {"plan": {"status": "optimal", "lower_bound_s": -1}}, "plan.lower_bound_s"),
    ("wall time text", {"wall_s": "slow"}, "wall_s"),
    ("seed beyond int64", {"seed": 10 ** 30}, "seed"),
    ("search text", {"search": "boundary"}, "search"),
    ("error a number", {"error": 5}, "error"),
    ("other field of 10^30", {"speedup_vs_reference": 10 ** 30}, "speedup_vs_reference"),
]


@pytest.mark.parametrize("change, field", [c[1:] for c in BAD_RECORDS], ids=[c[0] for c in BAD_RECORDS])
def test_a_run_record_read_back_is_checked_field_by_field(tmp_path, one_run, change, field):
    """`--resume` (the runs of the folder) and `--reference` (a results file) read records written by others:
    every field that is read is typed and bounded, refused in one line naming the file and the field."""
    suite_path, folder, good = one_run
    suite = benchmark.load_suite(suite_path)
    resumed = tmp_path / "bench"
    shutil.copytree(folder, resumed)
    [run] = resumed.glob("runs/*/*/*/seed0.json")
    run.write_text(json.dumps({**good, **change}))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(run))}: field {field}: found .*; expected [^\n]*$"):
        benchmark.run_suite("random", suite, out=resumed, resume=True)
    reference = benchmark.write_results(tmp_path / "ref.json", suite, [good])
    data = json.loads(reference.read_text())
    data["records"][0].update(change)
    reference.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(reference))}: field records\[0\]\.{field}: found "):
        benchmark.reference_records(suite, reference)


def test_the_lowest_latency_a_record_may_give_is_documented_and_its_runs_pass(one_run):
    _, _, good = one_run
    assert benchmark.MIN_LATENCY_S == 1e-9 and good["latency_s"] > 1e3 * benchmark.MIN_LATENCY_S
    assert benchmark.reference_records("quick")  # the shipped reference results pass the checks


# ----------------------------------------------------------------------------------------- names and folders
def test_a_suite_or_agent_name_never_leads_outside_the_working_folder(tmp_path, monkeypatch, capsys):
    from placement_gym import cli

    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    suite = tiny_suite(work, suite="../../../escaped", cases=["paper:latency"], models=["tiny_branch"], seeds=[0],
                       budgets=[2])
    assert cli.main(["benchmark", "--suite", str(suite), "--agent", "random", "--no-progress"]) == 0
    made = sorted(p.name for p in work.iterdir() if p.is_dir())
    assert made == ["benchmark-_.._.._escaped-random"], made  # in the working folder, named after the suite
    outside = [p for p in tmp_path.rglob("*") if work not in (p, *p.parents) and p not in work.parents]
    assert outside == [], outside
    assert list((work / made[0]).glob("runs/paper_latency/tiny_branch/random/seed0.json"))


@pytest.mark.parametrize("name, made", [("../../x", "_.._x"), ("..", "_"), (".", "_"), ("", "_"),
                                        ("/etc/passwd", "_etc_passwd"), ("hybrid:hsdag", "hybrid_hsdag"),
                                        ("a\\..\\b", "a_.._b"), ("résumé", "r_sum_")])
def test_every_name_made_into_a_path_is_one_component_inside_its_folder(tmp_path, name, made):
    assert safe_name(name) == made
    run = benchmark.BenchmarkRun(agent=name, case=name, model=name, seed=0)
    assert run.path(tmp_path).resolve().parent.parent.parent.parent == (tmp_path / "runs").resolve()
    long = safe_name("x" * 1000)
    assert len(long) <= MAX_NAME_LEN and long != safe_name("x" * 999)  # cut, and still apart


# ----------------------------------------------------------------------------------------- one writer a folder
def test_a_second_benchmark_on_a_folder_in_use_is_refused_naming_the_first_and_a_dead_ones_lock_is_not(tmp_path,
                                                                                                      capsys):
    """Two ``--resume`` runs on one folder would both compute every run: the second is refused in one line naming
    the first's pid. A holder killed outright (SIGKILL: no clean-up) leaves its lock file, which blocks nothing."""
    from placement_gym import cli

    suite_path = tiny_suite(tmp_path, cases=["edge:latency"], models=["tiny_branch"], seeds=[0, 1, 2])
    out = tmp_path / "bench"
    argv = ["benchmark", "--agent", "tests.test_benchmark:WaitsOnSeed1", "--suite", str(suite_path), "--out",
            str(out), "--no-progress"]
    first = benchmark_in_seed_1(argv, tmp_path / "seed1-started")
    try:
        assert cli.main(argv + ["--resume"]) == 2  # this process, the second, while the first is in seed 1
        err = capsys.readouterr().err.strip()
        assert err == (f"placement-gym benchmark: error: {out} is in use by pid {first.pid} (another process is "
                       "writing there); wait for it to finish, or choose another folder"), err
        assert (out / LOCK_NAME).read_text() == str(first.pid)
        first.kill()  # SIGKILL: its lock file stays behind
        first.communicate()
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert (out / LOCK_NAME).read_text() == str(first.pid)
    assert cli.main(argv + ["--resume"]) == 0  # the dead process's lock is no lock
    assert "1 done already, 2 to run" in capsys.readouterr().err
    assert len(list(out.glob("runs/*/*/*/seed*.json"))) == 3 and not (out / LOCK_NAME).exists()
