"""Graph extraction: compute ops, attachments, directed edges, topological order, statistics, features."""
import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from placement_gym import ComputationGraph, load_graph
from placement_gym.features import DEFAULT_FAMILIES, FEATURE_FAMILIES, node_features


def _diamond() -> ov.Model:
    """x -> mm1 -> (relu, mm2 shares mm1's weight) -> add; a Constant shared by two consumers."""
    x = ops.parameter([1, 16], np.float32, name="x")
    w = ops.constant(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32), name="w")
    a = ops.matmul(x, w, False, False, name="mm1")
    b = ops.relu(a, name="relu")
    c = ops.matmul(b, w, False, False, name="mm2")
    d = ops.add(c, a, name="add")
    return ov.Model([d], [x], "diamond")


def test_diamond_ops_edges_and_attachments():
    g = ComputationGraph.from_model(_diamond())
    assert g.op_names == ("mm1", "relu", "mm2", "add")
    assert g.op_types == ("MatMul", "Relu", "MatMul", "Add")
    assert g.edge_index.tolist() == [[0, 0, 1, 2], [1, 3, 2, 3]]
    assert g.edge_bytes.tolist() == [64, 64, 64, 64]  # 16 float32 per tensor
    assert g.attached["x"] == 0 and g.attached["w"] == 0  # first consumer
    result = next(n for n in g.attached if n not in ("x", "w"))
    assert g.attached[result] == 3  # Result follows its producer
    assert g.flops[0] == 2 * 16 * 16  # MatMul: 2 * M * N * K
    assert g.in_degree().tolist() == [0, 1, 1, 2] and g.out_degree().tolist() == [2, 1, 1, 0]


def test_graph_is_immutable():
    g = ComputationGraph.from_model(_diamond())
    with pytest.raises(ValueError):
        g.edge_index[0, 0] = 3
    with pytest.raises(AttributeError):
        g.op_names = ()


def test_stats_count_compute_ops_and_all_layers():
    s = ComputationGraph.from_model(_diamond()).stats()
    assert s["compute"]["nodes"] == 4 and s["compute"]["edges"] == 4
    assert s["compute"]["average_degree"] == 2.0
    assert s["all_layers"]["nodes"] == 7  # + Parameter, Constant, Result
    assert s["all_layers"]["edges"] == 8
    assert s["all_layers"]["op_types"]["Constant"] == 1


def test_constant_folding_removes_shape_subgraphs():
    x = ops.parameter([2, 3, 4], np.float32, name="x")
    shape = ops.shape_of(ops.constant(np.zeros((6, 4), np.float32), name="c"), name="shape")
    y = ops.reshape(x, shape, special_zero=False, name="reshape")
    g = ComputationGraph.from_model(ov.Model([ops.relu(y, name="relu")], [x], "fold"))
    assert "ShapeOf" not in g.op_types
    assert g.op_names == ("reshape", "relu")


def test_synthetic_graph_validation():
    with pytest.raises(ValueError, match="no compute ops"):
        ComputationGraph("empty", (), (), (), [], [], np.zeros((2, 0)), [])
    with pytest.raises(ValueError, match="earlier to a later"):
        ComputationGraph("back", ("a", "b"), ("Relu", "Relu"), (((1,),), ((1,),)), [4, 4], [1, 1], [[1], [0]], [4])


@pytest.mark.parametrize("name", ["tiny_chain", "tiny_branch"])
def test_tiny_zoo_graphs_are_topological_dags(name):
    g = load_graph(name)
    assert g.n_ops >= 5
    src, dst = g.edge_index
    assert np.all(src < dst)  # topological order
    assert len(set(map(tuple, g.edge_index.T.tolist()))) == g.n_edges  # no duplicate edges
    assert set(g.attached.values()) <= set(range(g.n_ops))
    # every IR op is either placeable or attached to a placeable one
    names = {op.get_friendly_name() for op in g.model.get_ordered_ops()}
    assert names == set(g.op_names) | set(g.attached)


def test_tiny_branch_has_parallel_branches(tiny_branch_graph):
    assert (tiny_branch_graph.out_degree() >= 2).any()
    assert (tiny_branch_graph.in_degree() >= 2).any()


def test_node_features_shapes_and_switches(tiny_branch_graph):
    g = tiny_branch_graph
    full = node_features(g)
    assert full.dtype == np.float32 and full.shape[0] == g.n_ops and np.isfinite(full).all()
    widths = {f: node_features(g, [f]).shape[1] for f in DEFAULT_FAMILIES}
    assert full.shape[1] == sum(widths.values())
    without_shape = node_features(g, [f for f in DEFAULT_FAMILIES if f != "output_shape"])
    assert without_shape.shape[1] == full.shape[1] - widths["output_shape"]
    onehot = node_features(g, ["op_type"])
    assert np.all(onehot.sum(axis=1) == 1)
    with pytest.raises(ValueError, match="unknown feature families"):
        node_features(g, ["nope"])
    assert set(DEFAULT_FAMILIES) <= set(FEATURE_FAMILIES)


@pytest.mark.slow
@pytest.mark.parametrize("name, compute_ops", [("resnet", 176), ("inception", 310), ("bert", 376)])
def test_zoo_graph_sizes(name, compute_ops):
    """Sizes of the benchmark graphs: random weights keep the real topology (no BN/LN/bias op is folded away).
    ResNet and Inception match reference.md exactly; our static-shape BERT has no HF mask-building subgraph."""
    g = load_graph(name)
    assert g.n_ops == compute_ops
    src, dst = g.edge_index
    assert np.all(src < dst)
    assert g.stats()["all_layers"]["nodes"] > g.n_ops
