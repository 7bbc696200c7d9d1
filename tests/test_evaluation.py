"""The evaluation harness: any agent with learn/predict, records with the design.md schema, tables and files.

Real parts: the tiny zoo models measured on the real OpenVINO backend (CPU + a one-thread virtual CPU).
"""
from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import numpy as np
import pytest

from agents.core.run import RunAgent
from placement_gym import DevicePlacementEnv
from placement_gym.evaluation import (
    RECORD_KEYS, add_placements_to_within, compare, evaluate, model_label,
)
from placement_gym.results import CSV_KEYS, format_learning_table, format_table, plot_curves, plot_summary, records_to_json, summarize, write_csv, write_records
from placement_gym.files import write_atomically, write_json

from .conftest import TWO_DEVICES


@pytest.fixture(scope="module")
def env():
    env = DevicePlacementEnv("tiny_chain", devices=TWO_DEVICES, backend="openvino", warmup=1, repeats=3)
    yield env
    env.close()


class CountingAgent(RunAgent):
    """A user's agent written against the documented interface only: it measures random placements and its
    own policy alternates devices op by op."""

    name = "counting"

    def __init__(self, offset: int = 0) -> None:
        super().__init__()
        self.offset = offset
        self.learned_with = []

    def train(self, run, seed):
        n, d = run.base.graph.n_ops, run.base.n_devices
        run.env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        while not run.done:
            run.env.step(rng.integers(0, d, n))
        self.learned_with.append((run.budget, seed))

    def predict(self, obs, deterministic=True):
        n = len(obs["placement"])
        return (np.arange(n) + self.offset) % 2

    def hyperparameters(self):
        return {"offset": self.offset}

    def save(self, path, overwrite=False):
        return write_json(path, self.hyperparameters(), overwrite=overwrite)

    @classmethod
    def load(cls, path):
        return cls(**json.loads(open(path).read()))


def test_records_follow_the_schema_for_a_users_agent(env):
    records = evaluate(CountingAgent, env, budget=3, seeds=[5, 7], name="mine")
    assert [r["seed"] for r in records] == [5, 7]
    for r in records:
        assert set(RECORD_KEYS) <= set(r)
        assert r["model"] == env.graph.name and r["agent"] == "mine" and r["backend"] == "openvino"
        assert r["placements_measured"] == 3 and r["budget"] == 3
        assert r["ok"] and r["latency_s"] > 0 and r["wall_s"] > 0
        assert r["speedup_vs_reference"] == pytest.approx(r["reference_latency_s"] / r["latency_s"])
        assert r["latency_reduction_pct"] == pytest.approx(100 * (1 - r["latency_s"] / r["reference_latency_s"]))
        assert r["placement_source"] == "best_placement" and len(r["placement"]) == env.graph.n_ops
        assert r["predict_placement"] == [i % 2 for i in range(env.graph.n_ops)] and r["predict_latency_s"] > 0
        assert 1 <= len(r["curve"]) <= 3 and r["curve"][0][0] == 1 and r["best_step"] == r["curve"][-1][0]
        assert set(r["placements_to_within"]) == {"5", "2", "1"} and r["agent_ms_per_placement"] >= 0
        assert sum(r["device_counts"]) == env.graph.n_ops
        assert r["devices"] == env.device_names and r["simulated"] is False
        assert r["backend_settings"]["repeats"] == 3
        assert r["extra"]["hyperparameters"] == {"offset": 0} and r["extra"]["run"]["steps"] == 3
    # Relative to the best of both runs: the run that found it got within 1% when it found it.
    best = min(records, key=lambda r: r["curve"][-1][1])
    assert best["placements_to_within"]["1"] == best["best_step"]
    data = records_to_json(records, command="test")
    text = json.dumps(data, allow_nan=False)  # strict JSON
    assert json.loads(text)["records"][0]["agent"] == "mine"
    assert {"versions", "machine", "created", "schema"} <= set(data) and data["command"] == "test"
    assert data["versions"]["openvino"]


def test_results_record_the_versions_of_packages_the_process_never_loaded_without_loading_them():
    """A ``compare --ray`` driver never loads torch (the workers do); its results still name torch's version, read
    from the installed package (importing torch and PyG to read it took seconds)."""
    script = ("import sys, importlib.metadata; from placement_gym.results import versions; found = versions(); "
              "assert 'torch' not in sys.modules and 'torch_geometric' not in sys.modules, 'imported'; "
              "assert found['torch'] == importlib.metadata.version('torch'), found; print(found['torch_geometric'])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == importlib.metadata.version("torch_geometric")


def test_agent_forms_instance_factory_and_class(env):
    instance = CountingAgent(offset=1)
    records = evaluate(instance, env, budget=1, seeds=2)
    assert instance.learned_with == []  # each seed trained a deep copy, the user's instance is untouched
    assert records[0]["predict_placement"][0] == 1
    built = []

    def factory():
        built.append(CountingAgent())
        return built[-1]

    evaluate(factory, env, budget=0, seeds=1)
    assert len(built) == 1 and built[0].learned_with == [(0, 0)]
    records = evaluate(CountingAgent, env, budget=0, seeds=1)
    assert records[0]["placements_measured"] == 0 and records[0]["agent"] == "counting"
    # Nothing measured: the agent's own placement is the result, measured once afresh.
    assert records[0]["placement_source"] == "predict" and records[0]["latency_s"] == records[0]["predict_latency_s"]
    assert records[0]["curve"] == [] and records[0]["placements_to_within"] == {"5": None, "2": None, "1": None}


def test_bad_input_is_explained(env):
    class NoPredict:
        def learn(self, env, budget, seed, callback=None):
            return self

    with pytest.raises(TypeError, match="lacks .*predict.*RunAgent"):
        evaluate(NoPredict(), env, budget=1)
    with pytest.raises(TypeError, match="not an agent"):
        evaluate(lambda: object(), env, budget=1)
    with pytest.raises(ValueError, match="budget"):
        evaluate(CountingAgent, env, budget=-1)
    with pytest.raises(ValueError, match="seeds"):
        evaluate(CountingAgent, env, budget=1, seeds=[])
    with pytest.raises(TypeError, match="DevicePlacementEnv"):
        evaluate(CountingAgent, object(), budget=1)

    class WrongShape(CountingAgent):
        def predict(self, obs, deterministic=True):
            return np.zeros(3, dtype=np.int64)

    with pytest.raises(ValueError, match="shape"):
        evaluate(WrongShape, env, budget=0)


def test_failed_final_placement_is_a_record_not_a_crash(env):
    from placement_gym.backends import Backend, Measurement

    class Broken(Backend):
        name = "broken"
        simulated = False
        device_names = env.device_names
        virtual_devices = [False, True]

        def measure(self, graph, placement, *, use_cache=True):
            return Measurement(latency_s=1e-3) if not placement.any() else Measurement.failure("boom")

        def describe(self):
            return {"backend": "broken"}

        def close(self):
            pass

    broken_env = DevicePlacementEnv(env.graph, backend=Broken())
    record = evaluate(CountingAgent(offset=1), broken_env, budget=0, seeds=1)[0]  # its own placement fails
    assert record["ok"] is False and record["error"] == "boom" and record["curve"] == []
    assert record["latency_s"] is None and record["speedup_vs_reference"] is None
    assert record["predict_ok"] is False and record["predict_latency_s"] is None
    json.dumps(records_to_json([record]), allow_nan=False)
    rows = summarize([record])
    assert rows[0]["n_failed"] == 1 and rows[0]["latency_mean_s"] is None
    assert "failed" in format_table(rows)


def test_model_files_are_named_by_their_stem(tmp_path):
    assert model_label("resnet") == ("resnet", None)
    assert model_label("/some/where/my_net.xml") == ("my_net", "/some/where/my_net.xml")
    assert model_label(tmp_path / "net.onnx") == ("net", str(tmp_path / "net.onnx"))


def test_placements_to_within_is_relative_to_the_best_known():
    records = [
        {"model": "m", "backend": "s", "devices": ["a"], "curve": [[1, 10.0], [5, 1.03], [9, 1.005]]},
        {"model": "m", "backend": "s", "devices": ["a"], "curve": [[2, 1.0]]},
        {"model": "other", "backend": "s", "devices": ["a"], "curve": [[3, 7.0]]},
        {"model": "m", "backend": "s", "devices": ["a"], "curve": []},
    ]
    add_placements_to_within(records)
    assert records[0]["placements_to_within"] == {"5": 5, "2": 9, "1": 9}
    assert records[1]["placements_to_within"] == {"5": 2, "2": 2, "1": 2}
    assert records[2]["placements_to_within"] == {"5": 3, "2": 3, "1": 3} and records[2]["best_known_latency_s"] == 7.0
    assert records[3]["placements_to_within"] == {"5": None, "2": None, "1": None}


def _record(model, agent, seed, latency, reference=10.0):
    return {"model": model, "agent": agent, "backend": "simulated", "seed": seed, "latency_s": latency,
            "speedup_vs_reference": reference / latency, "placements_measured": 1, "wall_s": 0.5, "ok": True,
            "reference_latency_s": reference, "simulated": True, "devices": ["CPU", "GPU"]}


def test_summary_table_marks_best_and_gap_to_optimum():
    records = [_record("m", "a", 0, 6.0), _record("m", "a", 1, 8.0), _record("m", "optimal", 0, 5.0),
               _record("m", "b", 0, 9.0), _record("n", "a", 0, 2.0), _record("n", "b", 0, 1.0)]
    rows = {(r["model"], r["agent"]): r for r in summarize(records)}
    a = rows["m", "a"]
    assert a["n_seeds"] == 2 and a["latency_mean_s"] == pytest.approx(7.0) and a["latency_std_s"] == pytest.approx(1.0)
    assert a["reduction_mean_pct"] == pytest.approx(30.0) and a["gap_to_optimal_pct"] == pytest.approx(40.0)
    assert rows["m", "optimal"]["best"] and not a["best"] and rows["n", "b"]["best"]
    assert rows["n", "a"]["gap_to_optimal_pct"] is None  # no optimum run on n
    table = format_table(list(rows.values()), reference_label="CPU-only")
    assert "% vs CPU-only" in table and "gap to opt %" in table
    line_a = next(l for l in table.splitlines() if l.startswith("a "))
    assert "7000.000±1000.000" in line_a and "+30.0±10.0" in line_a and "+40.0" in line_a
    assert "*5000.000" in table and "*1000.000" in table


def test_files_are_written_once_and_atomically(tmp_path):
    records = [_record("m", "a", 0, 6.0), _record("m", "b", 0, 4.0)]
    path = write_records(tmp_path / "r.json", records)
    assert json.loads(path.read_text())["records"][1]["agent"] == "b"
    with pytest.raises(FileExistsError):
        write_records(path, records)
    csv_path = write_csv(tmp_path / "r.csv", records)
    lines = csv_path.read_text().splitlines()
    assert lines[0].split(",") == list(CSV_KEYS) and len(lines) == 3 and "CPU GPU" in lines[1]
    for plot, data in ((plot_summary, summarize(records)), (plot_curves, records)):
        png = plot(tmp_path / f"{plot.__name__}.png", data)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with pytest.raises(FileExistsError):
            plot(png, data)
    with pytest.raises(ValueError, match="lacks 'backend'"):
        records_to_json([{"model": "m", "agent": "a"}])

    def fails(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(tmp_path / "never.txt", fails)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(  # nothing left behind, nothing replaced
        ["r.json", "r.csv", "plot_summary.png", "plot_curves.png"])
    write_json(path, {"x": 1}, overwrite=True)
    assert json.loads(path.read_text()) == {"x": 1}


def test_a_results_file_ending_in_gz_is_written_compressed_and_read_back_by_either_name(tmp_path):
    """Large result sets are stored as ``x.json.gz``: `write_json` compresses by the suffix (the same bytes for the
    same data), `load_json` and the checked readers read it as ``x.json.gz`` or as ``x.json`` when only the
    compressed file exists, a damaged one is one error naming it, and the CSV beside it is ``x.csv``."""
    import gzip

    from placement_gym.files import beside, load_json
    from placement_gym.schema import SchemaError

    data = {"records": [{"model": "m", "latency_s": 0.5}]}
    packed = write_json(tmp_path / "x.json.gz", data)
    assert gzip.decompress(packed.read_bytes()).decode().startswith("{")
    assert load_json(tmp_path / "x.json") == load_json(packed) == data
    assert write_json(tmp_path / "again.json.gz", data).read_bytes() == packed.read_bytes()
    assert beside(packed, ".csv") == tmp_path / "x.csv" and beside(tmp_path / "x.json", ".png") == tmp_path / "x.png"
    (tmp_path / "bad.json.gz").write_bytes(packed.read_bytes()[:20])  # cut short
    with pytest.raises(SchemaError, match=r"bad\.json\.gz is not a whole gzip file"):
        load_json(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError):
        load_json(tmp_path / "none.json")


def test_learning_table_shows_predict_and_placements_to_within():
    records = [dict(_record("m", "learner", s, 5.0), placements_measured=50, predict_latency_s=8.0,
                    agent_ms_per_placement=2.0, placements_to_within={"5": n, "2": n, "1": None})
               for s, n in ((0, 10), (1, None), (2, 30))]
    table = format_learning_table(summarize(records))
    line = table.splitlines()[-1]
    # median [range] over the seeds that got there, and how many did
    assert "learner" in line and "5000.000" in line and "8000.000" in line and "20 [10-30] (2/3)" in line
    assert "never" in line and "2.00" in line


def test_stable_baselines3_model_plugs_in(env):
    from stable_baselines3 import PPO

    from agents.ppo import SB3Agent

    model = PPO("MultiInputPolicy", env, n_steps=4, batch_size=4, n_epochs=1, seed=0, device="cpu")
    record = evaluate(SB3Agent(model), env, budget=4, seeds=1, name="ppo")[0]
    assert record["ok"] and record["placements_measured"] == 4  # the budget is exact, rollouts or not
    assert all(v in (0, 1) for v in record["predict_placement"])


def test_stock_sb3_policy_says_which_graph_it_was_built_for(env):
    # A stock MultiInputPolicy has the graph size in its weights: on another graph, one clear error.
    from stable_baselines3 import PPO

    from agents.ppo import SB3Agent

    agent = SB3Agent(PPO("MultiInputPolicy", env, n_steps=4, batch_size=4, n_epochs=1, seed=0, device="cpu"))
    agent.learn(env, budget=4, seed=0)
    other = DevicePlacementEnv("tiny_branch", backend=env.backend)
    with pytest.raises(ValueError, match=rf"built for .*\({env.graph.n_ops} ops\); the observation has "
                                         rf"{other.graph.n_ops} ops"):
        agent.predict(other.reset(seed=0)[0])


def test_compare_gives_agents_of_one_model_one_reference(env):
    class OtherFeatures(CountingAgent):
        feature_families = ("op_type", "degree")

    graph, made = env.graph, []

    def make_env(model, families):
        made.append(families)
        extra = {} if families is None else {"features": families}
        return DevicePlacementEnv(graph, backend=env.backend, **extra)

    records, skipped = compare(["tiny_chain"], {"plain": CountingAgent, "other": OtherFeatures}, make_env,
                               budget=1, seeds=2)
    assert made == [None, ("op_type", "degree")] and not skipped
    assert [r["agent"] for r in records] == ["plain", "plain", "other", "other"]
    assert len({r["reference_latency_s"] for r in records}) == 1
    assert len({r["best_known_latency_s"] for r in records}) == 1  # placements_to_within over all of them


def test_every_registered_agent_goes_through_the_run_loop(tiny_branch_graph):
    from agents.core.run import RunAgent
    from placement_gym import registry

    backend = DevicePlacementEnv(tiny_branch_graph, backend="simulated").backend
    envs = {}
    rows = registry.agent_factories(list(registry.AGENTS), backend.device_names)
    assert len(rows) == len(registry.AGENTS) + 2  # single-device and openvino stand for two rows each
    for label, factory in rows.items():
        agent = factory()
        assert isinstance(agent, RunAgent), label
        if agent.feature_families not in envs:
            features = {} if agent.feature_families is None else {"features": agent.feature_families}
            envs[agent.feature_families] = DevicePlacementEnv(tiny_branch_graph, backend=backend, **features)
        record = evaluate(agent, envs[agent.feature_families], budget=6, seeds=[0], name=label)[0]
        assert 1 <= record["placements_measured"] <= 6 and record["curve"], label
        assert record["predict_latency_s"] > 0 and record["placements_to_within"]["1"] is not None, label
        assert record["agent_ms_per_placement"] >= 0 and record["latency_s"] <= record["curve"][0][1], label


def test_gap_to_the_optimum_is_never_negative():
    # An `optimal` stopped by its time limit can return a placement slower than an agent found: gaps are then
    # measured against the agent's, not reported as negative.
    records = [_record("m", "optimal", 0, 10.0), _record("m", "agent", 0, 9.0), _record("m", "slow", 0, 18.0)]
    gaps = {r["agent"]: r["gap_to_optimal_pct"] for r in summarize(records)}
    assert gaps == {"optimal": pytest.approx(100 / 9), "agent": 0.0, "slow": pytest.approx(100.0)}
