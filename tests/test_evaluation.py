"""The evaluation harness: any agent with learn/predict, records with the design.md schema, tables and files.

Real parts: the tiny zoo models measured on the real OpenVINO backend (CPU + a one-thread virtual CPU).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from placement_gym import DevicePlacementEnv
from placement_gym.evaluation import (
    CSV_KEYS, RECORD_KEYS, SB3Agent, as_agent, evaluate, format_table, make_record, plot_summary, records_to_json,
    summarize, write_csv, write_records,
)

from .conftest import TWO_DEVICES


@pytest.fixture(scope="module")
def env():
    env = DevicePlacementEnv("tiny_chain", devices=TWO_DEVICES, backend="openvino", warmup=1, repeats=3)
    yield env
    env.close()


class CountingAgent:
    """A user's agent, written against the documented interface only: it alternates devices op by op."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.learned_with = []

    def learn(self, env, budget, seed, callback=None):
        env.reset(seed=seed)
        n, d = env.unwrapped.graph.n_ops, env.unwrapped.n_devices
        rng = np.random.default_rng(seed)
        for _ in range(budget):
            env.step(rng.integers(0, d, n))
        self.learned_with.append((budget, seed))
        self.placement = (np.arange(n) + self.offset) % d
        return self

    def predict(self, obs, deterministic=True):
        return self.placement


def test_records_follow_the_schema_for_a_users_agent(env):
    records = evaluate(CountingAgent, env, budget=3, seeds=[5, 7], name="mine")
    assert [r["seed"] for r in records] == [5, 7]
    for r in records:
        assert set(RECORD_KEYS) <= set(r)
        assert r["model"] == env.graph.name and r["agent"] == "mine" and r["backend"] == "openvino"
        assert r["placements_measured"] == 3 and r["budget"] == 3
        assert r["ok"] and r["latency_s"] > 0 and r["wall_s"] >= r["learn_s"] > 0
        assert r["speedup_vs_reference"] == pytest.approx(r["reference_latency_s"] / r["latency_s"])
        assert r["latency_reduction_pct"] == pytest.approx(100 * (1 - r["latency_s"] / r["reference_latency_s"]))
        assert r["placement_source"] == "predict"  # CountingAgent has no best_placement
        assert r["placement"] == [i % 2 for i in range(env.graph.n_ops)]
        assert sum(r["device_counts"]) == env.graph.n_ops
        assert r["devices"] == env.device_names and r["simulated"] is False
        assert r["backend_settings"]["repeats"] == 3
    data = records_to_json(records, command="test")
    text = json.dumps(data, allow_nan=False)  # strict JSON
    assert json.loads(text)["records"][0]["agent"] == "mine"
    assert {"versions", "machine", "created", "schema"} <= set(data) and data["command"] == "test"
    assert data["versions"]["openvino"]


def test_agent_forms_instance_factory_and_class(env):
    instance = CountingAgent(offset=1)
    records = evaluate(instance, env, budget=1, seeds=2)
    assert instance.learned_with == []  # each seed trained a deep copy, the user's instance is untouched
    assert records[0]["placement"][0] == 1
    built_with = []

    def factory(env_):
        built_with.append(env_)
        return CountingAgent()

    evaluate(factory, env, budget=0, seeds=1)
    assert built_with == [env]
    records = evaluate(CountingAgent, env, budget=0, seeds=1)
    assert records[0]["placements_measured"] == 0 and records[0]["agent"] == "CountingAgent"


def test_best_placement_is_remeasured_and_preferred(env):
    class Best(CountingAgent):
        def learn(self, env, budget, seed, callback=None):
            super().learn(env, budget, seed)
            self.best_placement = np.zeros(env.unwrapped.graph.n_ops, dtype=np.int64)
            self.best_latency_s = 123.0  # a stale number: the harness must measure afresh
            return self

    record = evaluate(Best, env, budget=1, seeds=1)[0]
    assert record["placement_source"] == "best_placement" and record["placement"] == [0] * env.graph.n_ops
    assert record["agent_best_latency_s"] == 123.0 and record["latency_s"] < 1.0
    record = evaluate(Best, env, budget=1, seeds=1, use="predict")[0]
    assert record["placement_source"] == "predict"


def test_untrained_evaluation_and_bad_input(env):
    agent = CountingAgent().learn(env, 0, 0)
    record = evaluate(agent, env, budget=10, seeds=1, train=False)[0]
    assert record["placements_measured"] == 0 and record["budget"] == 0
    assert agent.learned_with == [(0, 0)]

    class NoPredict:
        def learn(self, env, budget, seed, callback=None):
            return self

    with pytest.raises(TypeError, match="lacks predict"):
        evaluate(NoPredict(), env, budget=1)
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
    class Broken:
        name = "broken"
        simulated = False
        device_names = env.device_names
        virtual_devices = [False, True]

        def measure(self, graph, placement):
            from placement_gym.backends import Measurement

            return Measurement(latency_s=1e-3) if not placement.any() else Measurement.failure("boom")

        def describe(self):
            return {"backend": "broken"}

        def close(self):
            pass

    broken_env = DevicePlacementEnv(env.graph, backend=Broken())
    record = make_record(broken_env, agent="x", seed=0, placement=np.ones(env.graph.n_ops, dtype=np.int64),
                         placements_measured=0, wall_s=0.0)
    assert record["ok"] is False and record["error"] == "boom"
    assert record["latency_s"] is None and record["speedup_vs_reference"] is None
    json.dumps(records_to_json([record]), allow_nan=False)
    rows = summarize([record])
    assert rows[0]["n_failed"] == 1 and rows[0]["latency_mean_s"] is None
    assert "failed" in format_table(rows)


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


def test_files_are_written_once(tmp_path):
    records = [_record("m", "a", 0, 6.0), _record("m", "b", 0, 4.0)]
    path = write_records(tmp_path / "r.json", records)
    assert json.loads(path.read_text())["records"][1]["agent"] == "b"
    with pytest.raises(FileExistsError):
        write_records(path, records)
    csv_path = write_csv(tmp_path / "r.csv", records)
    lines = csv_path.read_text().splitlines()
    assert lines[0].split(",") == list(CSV_KEYS) and len(lines) == 3 and "CPU GPU" in lines[1]
    png = plot_summary(tmp_path / "r.png", summarize(records))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(FileExistsError):
        plot_summary(png, summarize(records))
    with pytest.raises(ValueError, match="lacks 'backend'"):
        records_to_json([{"model": "m", "agent": "a"}])


def test_stable_baselines3_model_plugs_in(env):
    sb3 = pytest.importorskip("stable_baselines3")
    model = sb3.PPO("MultiInputPolicy", env, n_steps=4, batch_size=4, n_epochs=1, seed=0, device="cpu")
    agent = as_agent(model)
    assert isinstance(agent, SB3Agent)
    record = evaluate(model, env, budget=4, seeds=1, name="ppo", use="predict")[0]
    assert record["ok"] and record["placements_measured"] >= 4
    assert all(v in (0, 1) for v in record["placement"])


def test_compare_gives_agents_of_one_model_one_reference(env):
    from placement_gym.evaluation import compare

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
