"""`placement-gym evaluate` and `placement-gym compare`: the table, the files, the JSON schema, bad input.

Real parts: the CLI's own entry point, the tiny zoo models measured on the real OpenVINO backend.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.core.run import RunAgent
from placement_gym import cli
from placement_gym.evaluation import RECORD_KEYS

from .conftest import TWO_DEVICES

REAL = ["--backend", "openvino", "--devices", *TWO_DEVICES, "--warmup", "1", "--repeats", "3"]


def test_compare_prints_the_table_and_writes_json_csv_png(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    argv = ["compare", "--models", "tiny_chain", "tiny_branch", "--agents", "random", "single-device", "metis",
            "greedy", "--budget", "2", "--seeds", "2", "--json", str(out), *REAL]
    # An unknown agent (a typo) is refused before any run, exit 2 (tests/test_benchmark.py checks every command).
    assert cli.main(argv[:9] + ["no-such-agent"] + argv[9:]) == 2 and not out.exists()
    assert "unknown agent 'no-such-agent'" in capsys.readouterr().err
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    assert "% vs CPU-only" in printed.out and "CPU-only" in printed.out and "*" in printed.out
    assert "skipped greedy on tiny_chain" in printed.out  # no cost model on the real backend: a note, no crash

    data = json.loads(out.read_text())
    records = data["records"]
    agents = {r["agent"] for r in records}
    assert agents == {"random", "CPU-only", "CPU[INFERENCE_NUM_THREADS=1]-only", "metis"}
    assert len(records) == 2 * 4 * 2  # models x agents x seeds
    for r in records:
        assert set(RECORD_KEYS) <= set(r) and r["backend"] == "openvino" and r["seed"] in (0, 1)
        assert r["placements_measured"] == (2 if r["agent"] == "random" else 1)
    assert {"versions", "machine", "command", "summary", "skipped", "budget"} <= set(data)
    assert {s["agent"] for s in data["skipped"]} == {"greedy"}
    assert (tmp_path / "cmp.csv").read_text().count("\n") == len(records) + 1
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"  # the best-so-far curves
    assert (tmp_path / "cmp.bars.png").read_bytes()[:4] == b"\x89PNG"

    # The existing results are never overwritten; the refusal comes before any work.
    assert cli.main(argv) == 2
    assert "exists" in capsys.readouterr().err


def test_evaluate_a_users_class_by_import_path(tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = ["evaluate", "--agent", "agents.baselines.simple:RandomSearch", "--model", "tiny_chain", "--budget", "2",
            "--seeds", "1", "--json", str(out), *REAL]
    assert cli.main(argv) == 0
    record = json.loads(out.read_text())["records"][0]
    assert record["agent"] == "random" and record["placements_measured"] == 2
    assert "random" in capsys.readouterr().out


def test_evaluate_a_saved_agent_without_training(tmp_path):
    from agents.baselines import SingleDevice
    from placement_gym import DevicePlacementEnv

    env = DevicePlacementEnv("tiny_chain", devices=TWO_DEVICES, backend="openvino", warmup=1, repeats=3)
    saved = SingleDevice(1).learn(env, 1, 0).save(tmp_path / "one.json")
    out = tmp_path / "eval.json"
    argv = ["evaluate", "--agent", "single-device", "--load", str(saved), "--model", "tiny_chain", "--budget", "0",
            "--seeds", "1", "--json", str(out), *REAL]
    assert cli.main(argv) == 0
    record = json.loads(out.read_text())["records"][0]
    assert record["placements_measured"] == 0 and set(record["placement"]) == {1}


def test_bad_input_gets_a_clear_error(capsys):
    assert cli.main(["evaluate", "--agent", "nope", "--model", "tiny_chain", *REAL]) == 2
    assert "unknown agent 'nope'" in capsys.readouterr().err
    assert cli.main(["compare", "--agents", "nope", "--models", "tiny_chain", *REAL]) == 2
    assert "unknown agent 'nope'" in capsys.readouterr().err
    assert cli.main(["evaluate", "--agent", "random", "--model", "tiny_chain", "--backend-option", "oops", *REAL]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_compare_agent_options_go_to_one_agent_or_to_every_agent_that_takes_them(tmp_path, capsys):
    out = tmp_path / "opts.json"
    argv = ["compare", "--models", "tiny_branch", "--agents", "random", "hsdag", "ppo", "--backend", "simulated",
            "--budget", "6", "--seeds", "1", "--no-progress", "--json", str(out),
            "--agent-option", "heuristic_start=measure", "--agent-option", "ppo:ent_coef=0.03",
            "--agent-option", "hsdag:split_patience=7"]
    assert cli.main(argv) == 0
    records = json.loads(out.read_text())["records"]
    settings = {r["agent"]: r["settings"] for r in records}
    # hybrid:hsdag: a search setting given to a pure agent turns that component on (and labels the record)
    assert settings["hybrid:hsdag"]["search"] == {"heuristic_start": "measure", "split_patience": 7}
    assert settings["hybrid:ppo"]["search"] == {"heuristic_start": "measure"}
    assert {r["agent"]: r["search"] for r in records}["hybrid:ppo"] == ["heuristic_start"]
    assert settings["hybrid:ppo"]["ent_coef"] == 0.03 and "ent_coef" not in settings["hybrid:hsdag"]
    assert "search" not in settings["random"]  # a baseline without the setting is left alone
    capsys.readouterr()
    base = argv[:argv.index("--json")]
    assert cli.main([*base, "--agent-option", "no_such=1"]) == 2
    assert "none of the compared agents (random, hsdag, ppo) takes it" in capsys.readouterr().err
    assert cli.main([*base, "--agent-option", "post:n_groups=4"]) == 2
    assert "names agent 'post', which is not compared" in capsys.readouterr().err


def test_info_prints_table_1_statistics(capsys):
    assert cli.main(["info", "--model", "tiny_branch", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["graph"]
    assert stats["compute"]["nodes"] > 0 and stats["all_layers"]["nodes"] >= stats["compute"]["nodes"]
    assert stats["compute"]["average_degree"] == pytest.approx(2 * stats["compute"]["edges"] / stats["compute"]["nodes"], abs=1e-3)


def test_compare_on_the_simulated_backend_shows_the_gap_to_the_optimum(tmp_path, capsys):
    out = tmp_path / "sim.json"
    argv = ["compare", "--models", "tiny_branch", "--agents", "single-device", "openvino", "greedy", "topo",
            "optimal", "--backend", "simulated", "--budget", "3", "--seeds", "2", "--json", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "SIMULATED" in printed and "gap to opt %" in printed
    data = json.loads(out.read_text())
    rows = {row["agent"]: row for row in data["summary"]}
    assert set(rows) == {"CPU-only", "GPU-only", "openvino-auto", "openvino-hetero", "greedy", "topo", "optimal"}
    optimum = rows["optimal"]["latency_mean_s"]
    assert all(row["latency_mean_s"] >= optimum * (1 - 1e-9) for row in rows.values())
    assert rows["optimal"]["gap_to_optimal_pct"] == 0.0 and rows["optimal"]["best"]
    assert all(r["simulated"] and r["backend_settings"]["profile"] == "paper" for r in data["records"])
    optimal_records = [r for r in data["records"] if r["agent"] == "optimal"]
    assert all(r["placements_measured"] == 1 for r in optimal_records)


def test_a_users_run_agent_from_the_examples_runs_from_the_command_line(tmp_path):
    # By file path: no PYTHONPATH needed. The example defines only __init__ and train.
    example = Path(__file__).resolve().parents[1] / "examples" / "custom_agent.py"
    out = tmp_path / "mine.json"
    argv = ["evaluate", "--agent", f"{example}:BlockHillClimb", "--model", "tiny_branch", "--backend", "simulated",
            "--budget", "12", "--seeds", "2", "--agent-option", "max_block=4", "--json", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    records = json.loads(out.read_text())["records"]
    assert [r["agent"] for r in records] == ["block-hill-climb"] * 2
    # The default hyperparameters read the constructor's keyword back from the attribute of the same name.
    assert all(r["placements_measured"] == 12 and r["extra"]["hyperparameters"] == {"max_block": 4} for r in records)
    # Hill climbing has no policy of its own (no predict): its result is its best, and no predict is reported.
    assert all(r["latency_s"] is not None and r["predict_latency_s"] is None for r in records)


def test_registry_lists_agents_in_table_order_and_explains_unknown_ones():
    from placement_gym import registry

    assert list(registry.AGENTS)[:2] == ["single-device", "openvino"] and list(registry.AGENTS)[-1] == "optimal"
    rows = registry.agent_factories(["single-device", "random"], ["CPU", "GPU"])
    assert list(rows) == ["CPU-only", "GPU-only", "random"]
    assert rows["GPU-only"]().hyperparameters() == {"device": 1}
    with pytest.raises(ValueError, match="unknown agent 'nope'.*registered agents"):
        registry.load_agent_class("nope")
    with pytest.raises(ValueError, match="rejected the options"):
        registry.agent_factories(["random"], ["CPU"], {"no_such_option": 1})["random"]()


class StopsOnSeed1(RunAgent):
    """Measures one placement, except on seed 1, where it is interrupted (as Ctrl-C interrupts a run)."""

    name = "stops-on-seed-1"

    def train(self, run, seed):
        if seed == 1:
            raise KeyboardInterrupt
        run.env.reset(seed=seed)
        run.env.step(np.zeros(run.base.graph.n_ops, dtype=np.int64))

    def predict(self, obs, deterministic=True):
        return np.zeros(len(obs["placement"]), dtype=np.int64)


@pytest.mark.parametrize("command", ["train", "evaluate", "compare"])
def test_ctrl_c_keeps_the_finished_runs(tmp_path, capsys, command):
    out = tmp_path / "partial.json"
    agent = ["--agents" if command == "compare" else "--agent", "tests.test_cli_compare:StopsOnSeed1"]
    model = ["--models" if command == "compare" else "--model", "tiny_chain"]
    argv = [command, *agent, *model, "--backend", "simulated", "--budget", "3", "--seeds", "3", "--json", str(out),
            "--no-progress"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interrupted after 1 finished run(s) of 3" in err[0] and "Traceback" not in err[0]
    data = json.loads(out.read_text())
    assert data["incomplete"] is True and data["interrupted"] == {"finished_runs": 1, "planned_runs": 3,
                                                                  "left_runs": 2}
    assert [r["seed"] for r in data["records"]] == [0] and data["records"][0]["placements_measured"] == 1
    assert (tmp_path / "partial.csv").exists()
    if command == "train":  # the finished seed's checkpoint was written before the interruption
        assert (tmp_path / "partial.seed0.pt").exists() and not (tmp_path / "partial.seed1.pt").exists()
    if command == "compare":  # resumed, and interrupted again at seed 1: the resumed run is kept as it was
        assert cli.main(argv + ["--resume"]) == 130
        again = json.loads(out.read_text())
        assert again["records"] == data["records"] and again["interrupted"]["finished_runs"] == 1


def test_compare_resume_runs_what_the_file_lacks_and_gives_the_uninterrupted_records(tmp_path, capsys):
    """``compare --resume``: the runs the file holds are kept as they are (not run again), the others run, and the
    records are those of an uninterrupted compare, the exact optimum's warm starts included; a file of other
    settings, or none, is refused in one line before any run."""
    argv = ["compare", "--models", "tiny_chain", "tiny_branch", "--agents", "random", "greedy", "optimal",
            "--backend", "simulated", "--profile", "paper", "--budget", "5", "--seeds", "2", "--no-progress"]
    assert cli.main([*argv, "--json", str(tmp_path / "full.json")]) == 0
    full = json.loads((tmp_path / "full.json").read_text())
    partial = dict(full, incomplete=True, records=full["records"][:3])  # tiny_chain's random (2 seeds), greedy seed 0
    partial["records"][0] = dict(partial["records"][0], wall_s=12345.0)  # a run resumed is never run again
    out = tmp_path / "partial.json"
    out.write_text(json.dumps(partial))
    capsys.readouterr()
    assert cli.main([*argv, "--budget", "6", "--json", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was run with --budget 5, this command has --budget 6" in err[0]
    assert cli.main([*argv, "--json", str(tmp_path / "none.json"), "--resume"]) == 2
    assert "no results file at" in capsys.readouterr().err
    assert cli.main([*argv, "--json", str(out), "--csv", str(tmp_path / "full.json"), "--resume"]) == 2
    assert "--resume replaces only the files beside --json; --csv" in capsys.readouterr().err
    crafted = tmp_path / "crafted.json"  # a latency no run gives would become every row's best known
    crafted.write_text(json.dumps(dict(partial, records=[dict(partial["records"][0], latency_s=1e-30)])))
    assert cli.main([*argv, "--json", str(crafted), "--resume"]) == 2
    assert "records[0].latency_s" in capsys.readouterr().err
    assert json.loads(out.read_text()) == partial  # the refusals left the file as it was

    assert cli.main([*argv, "--json", str(out), "--resume"]) == 0
    resumed = json.loads(out.read_text())
    same = ("model", "agent", "seed", "latency_s", "placement", "curve", "placements_to_within")
    assert [[r[k] for k in same] for r in resumed["records"]] == [[r[k] for k in same] for r in full["records"]]
    assert resumed["records"][0]["wall_s"] == 12345.0 and "incomplete" not in resumed
    [source] = resumed["resumed_from"]  # where the kept runs were made
    assert source["runs"] == 3 and source["incomplete"] and source["created"] == full["created"]
    assert "resumed_from" not in resumed["arguments"]
    assert (tmp_path / "partial.csv").read_text().count("\n") == len(full["records"]) + 1
