"""Two tiny test models built directly with ``openvino.opset13`` (no torch, milliseconds to build).

Weights are random with a fixed seed, so every build gives the same model and it compiles and
runs on any device. Every op (Constants, Parameters and Results included) has a unique friendly
name, because placements are applied by name.

- ``tiny_chain``: input ``x`` ``(1, 64)`` float32 -> 3 x (MatMul, Add) with ReLU between, then
  Softmax -> ``probs`` ``(1, 10)``. A straight chain of 9 compute ops.
- ``tiny_branch``: input ``x`` ``(1, 3, 32, 32)`` float32 -> a conv stem that splits into three
  parallel branches of different cost (two 3x3 convs / max-pool + 1x1 conv / one 1x1 conv), a
  Concat, and a head (1x1 conv, global mean, dense, softmax) -> ``probs`` ``(1, 10)``.
  24 compute ops.
"""

from __future__ import annotations

import itertools

import numpy as np
import openvino as ov
import openvino.opset13 as ops

SEED = 0


def _parameter(shape: list[int], name: str) -> ov.Node:
    """A float32 input whose friendly name and tensor name are both ``name``."""
    param = ops.parameter(shape, ov.Type.f32, name=name)
    param.output(0).get_tensor().set_names({name})  # so infer() can be fed by name
    return param


def _result(node: ov.Node, name: str) -> ov.Node:
    node.output(0).get_tensor().set_names({name})
    return ops.result(node, name=f"{name}/result")


def build_tiny_chain() -> ov.Model:
    """``x (1, 64) -> probs (1, 10)``: Linear-ReLU-Linear-ReLU-Linear-Softmax."""
    rng = np.random.default_rng(SEED)
    x = _parameter([1, 64], "x")
    h = x
    sizes = [64, 64, 32, 10]
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        # Scaled so activations stay O(1) through the chain.
        w = ops.constant((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32), name=f"fc{i}/weight")
        b = ops.constant(rng.standard_normal((1, n_out)).astype(np.float32) * 0.1, name=f"fc{i}/bias_value")
        h = ops.add(ops.matmul(h, w, False, False, name=f"fc{i}/matmul"), b, name=f"fc{i}/bias")
        if i < len(sizes) - 2:
            h = ops.relu(h, name=f"fc{i}/relu")
    probs = ops.softmax(h, axis=-1, name="softmax")
    return ov.Model([_result(probs, "probs")], [x], "tiny_chain")


def build_tiny_branch() -> ov.Model:
    """``x (1, 3, 32, 32) -> probs (1, 10)``: stem, three parallel branches, concat, head."""
    rng = np.random.default_rng(SEED)

    def conv_relu(h: ov.Node, c_in: int, c_out: int, k: int, name: str) -> ov.Node:
        """k x k conv (same padding) + bias + ReLU: 3 compute ops, ``(1, c_in, H, W) -> (1, c_out, H, W)``."""
        w = (rng.standard_normal((c_out, c_in, k, k)) * np.sqrt(2.0 / (c_in * k * k))).astype(np.float32)
        b = (rng.standard_normal((1, c_out, 1, 1)) * 0.1).astype(np.float32)
        pad = [k // 2, k // 2]
        h = ops.convolution(h, ops.constant(w, name=f"{name}/weight"), [1, 1], pad, pad, [1, 1], name=f"{name}/conv")
        h = ops.add(h, ops.constant(b, name=f"{name}/bias_value"), name=f"{name}/bias")
        return ops.relu(h, name=f"{name}/relu")

    x = _parameter([1, 3, 32, 32], "x")
    stem = conv_relu(x, 3, 16, 3, "stem")  # (1, 16, 32, 32)

    # Three branches of clearly different cost, so placing them apart can pay off.
    deep = conv_relu(conv_relu(stem, 16, 24, 3, "deep1"), 24, 24, 3, "deep2")  # (1, 24, 32, 32)
    pooled = ops.max_pool(stem, [1, 1], [1, 1], [1, 1], [1, 1], [3, 3], name="pool/maxpool")
    pool = conv_relu(pooled.output(0), 16, 16, 1, "pool")  # (1, 16, 32, 32)
    cheap = conv_relu(stem, 16, 8, 1, "cheap")  # (1, 8, 32, 32)
    h = ops.concat([deep, pool, cheap], axis=1, name="concat")  # (1, 48, 32, 32)

    h = conv_relu(h, 48, 32, 1, "head")  # (1, 32, 32, 32)
    h = ops.reduce_mean(h, ops.constant(np.array([2, 3], np.int64), name="gap/axes"), False, name="gap")  # (1, 32)
    w = ops.constant((rng.standard_normal((32, 10)) / np.sqrt(32)).astype(np.float32), name="fc/weight")
    b = ops.constant((rng.standard_normal((1, 10)) * 0.1).astype(np.float32), name="fc/bias_value")
    h = ops.add(ops.matmul(h, w, False, False, name="fc/matmul"), b, name="fc/bias")
    probs = ops.softmax(h, axis=-1, name="softmax")
    return ov.Model([_result(probs, "probs")], [x], "tiny_branch")
