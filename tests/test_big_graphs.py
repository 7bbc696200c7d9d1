"""Big graphs: ``synthetic:N[:SEED]`` graphs, the estimated structure features, and envs on both."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import spearmanr

from placement_gym import DevicePlacementEnv, load_graph
from placement_gym.features import (
    EXACT_STRUCTURE_MAX_OPS, FEATURE_FAMILIES, OP_TYPE_VOCAB, centrality, fractal_dimension, structure_estimate,
)
from placement_gym.models import load_model, synthetic_graph
from placement_gym.models.synthetic import ITEMSIZE

#: What the estimated structure features must reach against the exact ones on graphs of 1,500 ops: Spearman
#: correlation per column (fractal dimension, closeness, ancestors, descendants), and mean absolute error.
MIN_SPEARMAN = 0.95
MAX_MEAN_ABS_ERROR = {"fractal_dimension": 0.05, "closeness": 0.01, "ancestors": 0.01, "descendants": 0.01}


def predecessors(graph) -> list[list[int]]:
    preds: list[list[int]] = [[] for _ in range(graph.n_ops)]
    for s, d in graph.edge_index.T.tolist():
        preds[d].append(s)
    return preds


# ------------------------------------------------------------------------------------------ synthetic graphs
@pytest.mark.parametrize("n_ops", [1, 2, 5, 6, 7, 20, 137, 3000])
def test_synthetic_graph_has_exactly_n_ops_and_is_one_connected_dag(n_ops):
    g = load_graph(f"synthetic:{n_ops}")
    assert g.n_ops == n_ops and g.name == f"synthetic:{n_ops}:0"
    src, dst = g.edge_index
    assert np.all(src < dst)  # every edge goes forward in topological order: a DAG
    assert len(set(zip(src.tolist(), dst.tolist()))) == g.n_edges
    adjacency = csr_matrix((np.ones(g.n_edges), (src, dst)), shape=(n_ops, n_ops))
    assert connected_components(adjacency, directed=False)[0] == 1
    # One input op (the stem) and, from 6 ops on, one output op (the classifier's softmax).
    assert np.flatnonzero(g.in_degree() == 0).tolist() == [0]
    if n_ops >= 6:
        assert np.flatnonzero(g.out_degree() == 0).tolist() == [n_ops - 1]
        assert g.op_types[-3:] == ("ReduceMean", "MatMul", "Softmax")


def test_synthetic_graph_is_deterministic_per_seed():
    a, b, other = synthetic_graph(2500, seed=3), load_graph("synthetic:2500:3"), synthetic_graph(2500, seed=4)
    assert a.op_names == b.op_names and a.op_types == b.op_types and a.output_shapes == b.output_shapes
    for field in ("edge_index", "edge_bytes", "bytes_out", "flops"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.op_types != other.op_types or not np.array_equal(a.flops, other.flops)
    assert load_graph("synthetic:2500").name == "synthetic:2500:0"
    assert load_graph("synthetic:300:2", name="mine").name == "mine"


def test_synthetic_graph_looks_like_a_dnn():
    g = synthetic_graph(4000, seed=1)
    types = set(g.op_types)
    assert types <= set(OP_TYPE_VOCAB)  # no op falls into the "other" one-hot slot
    assert {"Convolution", "MatMul", "Add", "Relu", "Concat", "ScaledDotProductAttention", "Interpolate"} <= types
    src, dst = g.edge_index
    assert (g.out_degree() >= 2).sum() > 0.05 * g.n_ops  # branches: residual skips, inception fan-out
    assert (g.in_degree() >= 4).any()  # inception fan-in
    assert (dst - src > 50).sum() >= 5  # a few long skips (hourglass decoders, residuals around stacks)


def test_synthetic_sizes_bytes_and_flops_are_consistent():
    g = synthetic_graph(3000, seed=2)
    shapes = [s[0] for s in g.output_shapes]
    elements = np.array([np.prod(s) for s in shapes], dtype=np.float64)
    assert all(len(s) in (2, 3, 4) and min(s) >= 1 for s in shapes)  # static shapes
    np.testing.assert_array_equal(g.bytes_out, elements.astype(np.int64) * ITEMSIZE)
    np.testing.assert_array_equal(g.edge_bytes, g.bytes_out[g.edge_index[0]])  # an edge carries its producer's output
    preds = predecessors(g)
    for i, (op_type, shape) in enumerate(zip(g.op_types, shapes)):
        inputs = [shapes[p] for p in preds[i]]
        if op_type == "Add" and len(inputs) == 2:
            assert inputs[0] == inputs[1] == shape, (i, inputs, shape)
        elif op_type == "Concat":
            assert sum(s[1] for s in inputs) == shape[1] and all(s[2:] == shape[2:] for s in inputs)
        elif op_type == "MatMul":
            assert g.flops[i] == 2.0 * elements[i] * inputs[0][-1]  # 2 x outputs x K
        elif op_type == "Convolution" and inputs:
            per_output = g.flops[i] / (2.0 * elements[i])  # input channels x kernel window
            assert per_output % inputs[0][1] == 0 and per_output // inputs[0][1] in (1, 9, 16, 49)
        elif op_type in ("Relu", "Gelu", "MVN", "Softmax"):
            assert inputs[0] == shape and g.flops[i] == elements[i]  # one per element
    assert np.all(g.flops > 0)


@pytest.mark.parametrize("bad", ["synthetic:abc", "synthetic:0", "synthetic:12:x", "synthetic:-3", "synthetic:",
                                 "synthetic:1:2:3"])
def test_bad_synthetic_names_say_what_is_accepted(bad):
    with pytest.raises(ValueError, match=r"synthetic:N' or 'synthetic:N:SEED"):
        load_graph(bad)
    with pytest.raises(ValueError, match=r"synthetic:N"):
        DevicePlacementEnv(model=bad, backend="simulated")


def test_unknown_model_error_mentions_synthetic_graphs():
    with pytest.raises(ValueError, match=r"synthetic:N"):
        load_graph("no_such_model")


# ---------------------------------------------------------------------------------- structure features
def exact_and_estimated(graph, **params) -> tuple[dict, dict]:
    exact_centrality = centrality(graph, exact_max_ops=graph.n_ops)
    exact = {"fractal_dimension": fractal_dimension(graph, exact_max_ops=graph.n_ops)[:, 0],
             "closeness": exact_centrality[:, 0], "ancestors": exact_centrality[:, 1],
             "descendants": exact_centrality[:, 2]}
    estimate = structure_estimate(graph, **params)
    return exact, {name: getattr(estimate, name) for name in exact}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("params", [{}, {"ball_budget": 32, "n_pivots": 32}], ids=["default", "small-budget"])
def test_estimated_structure_features_agree_with_exact_ones(seed, params):
    exact, estimated = exact_and_estimated(synthetic_graph(1500, seed), **params)
    for name in exact:
        assert spearmanr(exact[name], estimated[name])[0] >= MIN_SPEARMAN, name
        assert np.abs(exact[name] - estimated[name]).mean() <= MAX_MEAN_ABS_ERROR[name], name


@pytest.mark.parametrize("model", ["tiny_branch", "synthetic:200", "synthetic:600:1"])
def test_estimate_is_exact_when_ball_and_pivots_cover_the_graph(model):
    g = load_graph(model)
    exact, estimated = exact_and_estimated(g, ball_budget=g.n_ops, n_pivots=g.n_ops)
    for name in exact:
        np.testing.assert_allclose(estimated[name], exact[name], atol=1e-6, err_msg=name)


def test_structure_families_take_the_estimate_above_the_threshold_only():
    g = synthetic_graph(800)
    assert g.n_ops <= EXACT_STRUCTURE_MAX_OPS
    np.testing.assert_array_equal(fractal_dimension(g), fractal_dimension(g, exact_max_ops=g.n_ops))
    forced = centrality(g, exact_max_ops=100)  # forced onto the estimate
    estimate = structure_estimate(g)
    np.testing.assert_array_equal(
        forced, np.stack([estimate.closeness, estimate.ancestors, estimate.descendants], axis=1).astype(np.float32))
    assert fractal_dimension(g, exact_max_ops=100).dtype == np.float32


def test_structure_estimate_refuses_empty_budgets():
    with pytest.raises(ValueError, match="ball_budget"):
        structure_estimate(synthetic_graph(50), ball_budget=0)


# ------------------------------------------------------------------------------------------------- envs
def test_synthetic_env_steps_on_the_simulated_backend():
    env = DevicePlacementEnv(model="synthetic:2000", backend="simulated", features=tuple(FEATURE_FAMILIES))
    obs, info = env.reset(seed=0)
    assert obs["node_features"].shape[0] == 2000 and np.isfinite(obs["node_features"]).all()
    assert env.observation_space.contains(obs)
    placement = np.random.default_rng(0).integers(0, env.n_devices, 2000)
    obs, reward, terminated, _, info = env.step(placement)
    assert info["ok"] and info["simulated"] and np.isfinite(reward) and terminated
    assert info["latency_s"] > 0 and info["n_submodels"] > 1


def test_real_backend_refuses_a_synthetic_graph_clearly():
    from placement_gym.backends.openvino import OpenVINOBackend

    with pytest.raises(ValueError, match="no OpenVINO model"):
        DevicePlacementEnv(model="synthetic:50", backend="openvino", devices=["CPU"])
    backend = OpenVINOBackend(["CPU"])
    with pytest.raises(ValueError, match="backend='simulated'"):
        backend.measure(synthetic_graph(50), np.zeros(50, dtype=np.int64))
    with pytest.raises(ValueError, match="no OpenVINO model to load"):
        load_model("synthetic:50")


def test_cli_info_accepts_a_synthetic_model(capsys):
    from placement_gym.cli import main

    assert main(["info", "--model", "synthetic:500:1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["graph"]["model"] == "synthetic:500:1" and report["graph"]["compute"]["nodes"] == 500


@pytest.mark.slow
def test_env_on_80k_synthetic_ops_builds_with_every_feature_family_and_steps():
    env = DevicePlacementEnv(model="synthetic:80000", backend="simulated", features=tuple(FEATURE_FAMILIES))
    obs, _ = env.reset(seed=0)
    assert obs["node_features"].shape[0] == 80_000 and np.isfinite(obs["node_features"]).all()
    _, _, _, _, info = env.step(np.random.default_rng(0).integers(0, env.n_devices, 80_000))
    assert info["ok"]
