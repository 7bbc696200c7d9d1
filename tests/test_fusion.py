"""The kernel fusion rule (`placement_gym.backends.fusion`) against OpenVINO's real CPU plugin: nothing mocked, every
expectation read from a compiled model's runtime model."""
import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from placement_gym import ComputationGraph, load_graph
from placement_gym.backends.fusion import (
    compare_with_runtime, fusion_parent, kernel_count, kernel_roots, runtime_kernels, runtime_kernels_of, view_ops,
)
from placement_gym.backends.openvino import OpenVINOBackend
from placement_gym.models import zoo_names

from .conftest import TWO_DEVICES


def _check_tree(graph):
    """A parent is a direct producer (so it precedes its child); the arrays are read-only and cached."""
    parent = fusion_parent(graph)
    assert parent.shape == (graph.n_ops,) and parent.dtype == np.int64
    assert fusion_parent(graph) is parent and not parent.flags.writeable
    edges = set(map(tuple, graph.edge_index.T.tolist()))
    for i, p in enumerate(parent.tolist()):
        assert p == -1 or (p, i) in edges, (i, p)


@pytest.mark.parametrize("name", ["tiny_branch", "tiny_chain", "synthetic:300:0"])
def test_parents_are_direct_producers(name):
    graph = load_graph(name)
    _check_tree(graph)
    assert kernel_count(graph) == int(np.count_nonzero((fusion_parent(graph) < 0) & ~view_ops(graph)))
    assert 0 < kernel_count(graph) < graph.n_ops
    everywhere = np.zeros(graph.n_ops, dtype=np.int64)
    assert kernel_count(graph, everywhere) == kernel_count(graph)  # one device: no boundary
    with pytest.raises(ValueError, match="entries"):
        kernel_count(graph, everywhere[1:])


def test_low_precision_leaves_attention_output_transposes_out_of_the_attention_kernel():
    graph = load_graph("synthetic:300:0")  # has attention ops, each followed by a Transpose
    f32, bf16 = fusion_parent(graph), fusion_parent(graph, "bf16")
    assert fusion_parent(graph, "bf16") is bf16 and not bf16.flags.writeable
    changed = np.flatnonzero(f32 != bf16)
    assert changed.size > 0 and (bf16[changed] == -1).all()
    assert all(graph.op_types[i] == "Transpose" and graph.op_types[f32[i]] == "ScaledDotProductAttention"
               for i in changed)
    assert kernel_count(graph, precision="bf16") == kernel_count(graph) + changed.size
    # A precision per device, indexed by the placement: only the bf16 device's Transposes leave.
    placement = np.zeros(graph.n_ops, dtype=np.int64)
    placement[changed[0]] = 1
    placement[f32[changed[0]]] = 1  # with its attention op: no boundary between them
    assert kernel_count(graph, placement, ["f32", "bf16"]) == kernel_count(graph, placement) + 1
    assert kernel_count(graph, placement, ["f32", "f32"]) == kernel_count(graph, placement)


@pytest.mark.parametrize("name", ["tiny_branch", "tiny_chain"])
def test_tiny_models_group_ops_exactly_as_the_cpu_plugin(name):
    graph = load_graph(name)
    real = runtime_kernels(graph, "CPU")
    assert kernel_count(graph) == real["n_kernels"]
    np.testing.assert_array_equal(kernel_roots(graph), real["kernel_root"])  # op for op
    # Convolutions (and MatMuls) absorbed their bias Add and Relu: no Add or Relu starts a kernel.
    parent = fusion_parent(graph)
    for i, op_type in enumerate(graph.op_types):
        if op_type in ("Add", "Relu"):
            assert parent[i] >= 0, graph.op_names[i]
    assert "Reorder" not in real["kernels_by_type"] and "Const" not in real["kernels_by_type"]


def _residual_block(case: str, swap: bool) -> ov.Model:
    """Two conv + bias branches summed, then a Relu: ResNet's downsampling block (`case` "independent"). With
    "short_reads_main" the short branch convolves Relu(main) instead of the input, so main's output has a second
    reader that runs before the sum; with "main_read_later" main's output is also read by a Sigmoid that may run
    after it. `swap`: the Add's inputs the other way round (main on port 1)."""
    rng = np.random.default_rng(0)
    x = ops.parameter([1, 8, 16, 16], np.float32, name="x")

    def branch(name: str, source):
        w = ops.constant(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.1, name=f"{name}/w")
        conv = ops.convolution(source, w, [1, 1], [1, 1], [1, 1], [1, 1], name=f"{name}/conv")
        bias = ops.constant(rng.standard_normal((1, 8, 1, 1)).astype(np.float32), name=f"{name}/b")
        return ops.add(conv, bias, name=f"{name}/bias")

    main = branch("main", x)
    short = branch("short", ops.relu(main, name="between") if case == "short_reads_main" else x)
    total = ops.add(short, main, name="sum") if swap else ops.add(main, short, name="sum")
    results = [ops.relu(total, name="relu")]
    if case == "main_read_later":
        results.append(ops.sigmoid(main, name="later"))
    return ov.Model(results, [x], "residual")


@pytest.mark.parametrize("case, swap, absorbs", [
    ("independent", False, "main/bias"),  # both convolutions could: the one on port 0
    ("independent", True, "short/bias"),
    ("short_reads_main", False, "short/bias"),  # port 0's output has another reader: port 1's
    ("short_reads_main", True, "short/bias"),
    ("main_read_later", False, None),  # the sum would overwrite main's output in place before the Sigmoid reads it
    ("main_read_later", True, None),
])
def test_residual_sum_joins_the_convolution_the_plugin_picks(case, swap, absorbs):
    graph = ComputationGraph.from_model(_residual_block(case, swap))
    _check_tree(graph)
    real = runtime_kernels(graph, "CPU")
    np.testing.assert_array_equal(kernel_roots(graph), real["kernel_root"])  # op for op, as the plugin
    assert kernel_count(graph) == real["n_kernels"]
    index = {name: i for i, name in enumerate(graph.op_names)}
    parent = fusion_parent(graph)
    assert parent[index["sum"]] == (-1 if absorbs is None else index[absorbs])
    assert parent[index["relu"]] == index["sum"]  # the activation after the sum joins it either way


def test_boundary_between_convolution_and_relu_costs_one_kernel_and_hetero_agrees():
    graph = load_graph("tiny_branch")
    index = {name: i for i, name in enumerate(graph.op_names)}
    relu, conv = index["stem/relu"], index["stem/conv"]
    assert graph.op_types[relu] == "Relu" and graph.op_types[conv] == "Convolution"
    assert kernel_roots(graph)[relu] == conv  # one device: the stem's Relu runs in its convolution's kernel
    placement = np.zeros(graph.n_ops, dtype=np.int64)
    placement[relu] = 1
    assert kernel_count(graph, placement) == kernel_count(graph) + 1
    assert kernel_roots(graph, placement)[relu] == relu

    backend = OpenVINOBackend(TWO_DEVICES, warmup=0, repeats=1, cache=False)
    try:
        compiled, n_submodels = backend.compile_placement(graph, placement)
        runtime = compiled.get_runtime_model()
        assert n_submodels == 3
        names = {}
        for node in runtime.get_ordered_ops():
            info = node.get_rt_info()
            names[node.get_friendly_name()] = (info["layerType"].astype(str),
                                               info["originalLayersNames"].astype(str).split(","))
        relu_nodes = [(kind, layers) for kind, layers in names.values() if "stem/relu" in layers]
        assert relu_nodes == [(relu_nodes[0][0], ["stem/relu"])]  # the Relu alone in a node of its own
        assert relu_nodes[0][0] != "Convolution"
        conv_layers = next(layers for kind, layers in names.values() if kind == "Convolution" and "stem/conv" in layers)
        assert "stem/relu" not in conv_layers
        real = runtime_kernels_of(runtime, graph)
        assert real["n_kernels"] == kernel_count(graph, placement)
        np.testing.assert_array_equal(kernel_roots(graph, placement), real["kernel_root"])
    finally:
        backend.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in ("resnet", "inception", "bert", "mobilenet") if m in zoo_names()])
def test_zoo_kernel_count_within_5_percent_of_the_runtime_model(name):
    graph = load_graph(name)
    _check_tree(graph)
    row = compare_with_runtime(graph, "CPU")  # predicted for the precision the CPU infers in (bf16 where native)
    assert row["runtime_kernels"] > 50
    assert abs(row["predicted_kernels"] - row["runtime_kernels"]) <= 0.05 * row["runtime_kernels"], row
    assert row["op_agreement"] >= 0.95, row["disagreements"][:5]
