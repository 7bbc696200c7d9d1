"""``synthetic:N[:SEED]``: seeded, DNN-like computation graphs of exactly N compute ops, built without OpenVINO.

What the paper's zoo cannot give: graphs the size of those the peers place (GO, the hierarchical planner: up to
80k ops), built in seconds. A synthetic graph is a stem (7x7 convolution, ReLU, max-pool), then *units* drawn at
random until the op budget is nearly spent, then a classifier head (global mean, dense layer, softmax):

* an **hourglass** of ResNet bottleneck blocks: down through 1-3 resolutions (stride-2 blocks with a projection
  on the skip), back up with nearest-neighbour upsampling, a 1x1 convolution and an ``Add`` of the encoder
  feature of the same resolution (the long skips of U-Net / stacked hourglass networks);
* an **Inception** stack: blocks of four branches (1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3; avg-pool -> 1x1) joined
  by a ``Concat``, with a residual ``Add`` around the stack;
* a **Transformer** stack on patch tokens: a stride-4 patch convolution, BERT-style encoder layers (Q/K/V dense
  layers, ``ScaledDotProductAttention``, output projection, residual ``Add`` + layer norm (``MVN``, scale,
  shift), a GELU feed-forward block), then back to feature maps, upsampled and added to the unit's input.

Every unit maps the trunk's feature map (1, C, H, W) to a map of the same shape, so units chain; each op's
output shape follows from its inputs and attributes. Tensors are f32, so ``bytes_out`` is 4 x the output's
elements, each edge carries its producer's output, and FLOPs are estimated by the rule graphs from OpenVINO models
get (`placement_gym.graph`: 2 x outputs x (input channels x kernel window) for convolutions, 2 x outputs x K for
matmuls, one per element of the largest tensor otherwise), so the simulator prices synthetic and zoo graphs alike.
Constants and Parameters are not part of the graph (a synthetic graph has no ``ov.Model``, so weights count in
no memory check); the real backend refuses such a graph.

The op budget is met exactly: units are added while a whole one fits, the rest is filled with bottleneck blocks
and then 1x1 convolution / ReLU pairs, and graphs of fewer than 6 ops are a prefix of stem + head.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..graph import ComputationGraph

PREFIX = "synthetic:"
#: What `parse_synthetic` accepts, for error messages.
SYNTAX = "'synthetic:N' or 'synthetic:N:SEED' (N >= 1 compute ops, SEED >= 0, both integers; e.g. 'synthetic:80000:3')"
_PATTERN = re.compile(r"synthetic:(\d+)(?::(\d+))?")
#: Bytes per element: synthetic tensors are f32.
ITEMSIZE = 4

Shape = tuple[int, ...]


def is_synthetic(name: str) -> bool:
    """Whether `name` asks for a synthetic graph (``synthetic:...``, case-insensitive), well-formed or not."""
    return name.strip().lower().startswith(PREFIX)


def parse_synthetic(name: str) -> tuple[int, int]:
    """``(n_ops, seed)`` of ``"synthetic:N"`` / ``"synthetic:N:SEED"``, or ``ValueError`` saying what is accepted."""
    match = _PATTERN.fullmatch(name.strip().lower())
    if match is None:
        raise ValueError(f"bad synthetic model name {name!r}: expected {SYNTAX}")
    n_ops, seed = int(match.group(1)), int(match.group(2) or 0)
    if n_ops < 1:
        raise ValueError(f"bad synthetic model name {name!r}: N must be >= 1; expected {SYNTAX}")
    return n_ops, seed


def synthetic_graph(n_ops: int, seed: int = 0) -> ComputationGraph:
    """A DNN-like DAG of exactly `n_ops` compute ops (see the module docstring), the same for the same seed.

    Named ``synthetic:N:SEED``; op names are ``<OpType>_<index>`` in topological order.
    """
    if n_ops < 1 or seed < 0:
        raise ValueError(f"synthetic_graph needs n_ops >= 1 and seed >= 0, got n_ops={n_ops}, seed={seed}")
    rng = np.random.default_rng(seed)
    b = _Builder()
    channels = int(rng.choice([64, 128, 256]))
    size = int(rng.choice([28, 56]))  # the trunk's resolution: an input of 4 x size, 7x7 stride-2 stem, pool
    if n_ops < 6:
        _tiny(b, n_ops, channels, size)
        return b.build(n_ops, seed)
    head_ops = 3
    x = b.conv((1, 3, 4 * size, 4 * size), [], channels, kernel=7, stride=2)
    x = b.relu(x)
    x = b.pool("MaxPool", x, stride=2)
    units = (_hourglass, _inception_stack, _transformer_stack)
    while True:
        mark = b.mark()
        unit = units[int(rng.choice(len(units), p=[0.5, 0.3, 0.2]))]
        y = unit(b, x, rng)
        if b.n_ops + head_ops > n_ops:  # the unit does not fit: drop it and fill the rest
            b.rollback(mark)
            break
        x = y
    while b.n_ops + head_ops + _BOTTLENECK_OPS <= n_ops:
        x = _bottleneck(b, x, channels=b.channels(x), stride=1)
    while b.n_ops + head_ops + 2 <= n_ops:
        x = b.relu(b.conv1x1(x, b.channels(x)))
    if b.n_ops + head_ops < n_ops:
        x = b.relu(x)
    _head(b, x)
    return b.build(n_ops, seed)


# ----------------------------------------------------------------------------------------------- units
_BOTTLENECK_OPS = 7  # conv-relu-conv-relu-conv-add-relu; 8 with a projection on the skip


def _bottleneck(b: "_Builder", x: int, channels: int, stride: int) -> int:
    """ResNet bottleneck (BatchNorm folded into the convolutions, as OpenVINO does): 1x1 -> 3x3 (stride) -> 1x1
    to `channels`, plus the skip (a strided 1x1 projection when the shape changes)."""
    mid = max(channels // 4, 16)
    y = b.relu(b.conv1x1(x, mid))
    y = b.relu(b.conv(b.shape(y), [y], mid, kernel=3, stride=stride))
    y = b.conv1x1(y, channels)
    same_shape = stride == 1 and b.channels(x) == channels
    skip = x if same_shape else b.conv(b.shape(x), [x], channels, kernel=1, stride=stride)
    return b.relu(b.add(y, skip))


def _hourglass(b: "_Builder", x: int, rng: np.random.Generator) -> int:
    """Encoder of bottleneck blocks down 1-3 resolutions, decoder back up with long skips from the encoder."""
    _, _, h, _ = b.shape(x)
    # Down only while the resolution halves exactly (and stays >= 7), so the decoder's upsampling lands on it.
    depth_max = next(k for k in range(3, -1, -1) if h % 2 ** k == 0 and h // 2 ** k >= 7)
    depth = int(rng.integers(1, depth_max + 1))
    blocks = int(rng.integers(1, 4))
    saved = []
    for _ in range(depth):
        for _ in range(blocks):
            x = _bottleneck(b, x, b.channels(x), stride=1)
        saved.append(x)
        x = _bottleneck(b, x, 2 * b.channels(x), stride=2)
    for _ in range(blocks):
        x = _bottleneck(b, x, b.channels(x), stride=1)
    for skip in reversed(saved):
        x = b.add(b.conv1x1(b.upsample(x, 2), b.channels(skip)), skip)
        x = b.relu(x)
    return x


def _inception_block(b: "_Builder", x: int, rng: np.random.Generator) -> int:
    c = b.channels(x)
    widths = rng.multinomial(c - 4 * 16, [0.25] * 4) + 16  # four branch widths summing to c
    one = b.relu(b.conv1x1(x, int(widths[0])))
    three = b.relu(b.conv1x1(x, int(widths[1]) // 2 + 8))
    three = b.relu(b.conv(b.shape(three), [three], int(widths[1]), kernel=3, stride=1))
    double = b.relu(b.conv1x1(x, int(widths[2]) // 2 + 8))
    double = b.relu(b.conv(b.shape(double), [double], int(widths[2]), kernel=3, stride=1))
    double = b.relu(b.conv(b.shape(double), [double], int(widths[2]), kernel=3, stride=1))
    pooled = b.relu(b.conv1x1(b.pool("AvgPool", x, stride=1), int(widths[3])))
    return b.concat([one, three, double, pooled])


def _inception_stack(b: "_Builder", x: int, rng: np.random.Generator) -> int:
    start = x
    for _ in range(int(rng.integers(2, 6))):
        x = _inception_block(b, x, rng)
    return b.relu(b.add(x, start))


def _encoder_layer(b: "_Builder", x: int, heads: int) -> int:
    """One BERT-style encoder layer on tokens (1, S, D)."""
    _, s, d = b.shape(x)
    per_head = []
    for _ in range(3):  # Q, K, V
        y = b.add_bias(b.matmul(x, d))
        y = b.op("Reshape", [y], (1, s, heads, d // heads))
        per_head.append(b.op("Transpose", [y], (1, heads, s, d // heads)))
    attention = b.op("ScaledDotProductAttention", per_head, (1, heads, s, d // heads))
    y = b.op("Transpose", [attention], (1, s, heads, d // heads))
    y = b.op("Reshape", [y], (1, s, d))
    y = b.add_bias(b.matmul(y, d))
    x = b.layer_norm(b.add(y, x))
    y = b.op("Gelu", [b.add_bias(b.matmul(x, 4 * d))], (1, s, 4 * d))
    y = b.add_bias(b.matmul(y, d))
    return b.layer_norm(b.add(y, x))


def _transformer_stack(b: "_Builder", x: int, rng: np.random.Generator) -> int:
    """Patch tokens (4x4 patches) through 1-4 encoder layers, back to the trunk's resolution, added to it."""
    _, c, h, w = b.shape(x)
    d, heads = (256, 4) if c <= 128 else (512, 8)
    patches = b.conv(b.shape(x), [x], d, kernel=4, stride=4)
    _, _, ph, pw = b.shape(patches)
    tokens = b.op("Transpose", [b.op("Reshape", [patches], (1, d, ph * pw))], (1, ph * pw, d))
    for _ in range(int(rng.integers(1, 5))):
        tokens = _encoder_layer(b, tokens, heads)
    y = b.op("Reshape", [b.op("Transpose", [tokens], (1, d, ph * pw))], (1, d, ph, pw))
    y = b.conv1x1(b.upsample(y, h // ph), c)
    return b.relu(b.add(y, x))


def _head(b: "_Builder", x: int) -> int:
    pooled = b.op("ReduceMean", [x], (1, b.channels(x)))
    return b.op("Softmax", [b.matmul(pooled, 1000)], (1, 1000))


def _tiny(b: "_Builder", n_ops: int, channels: int, size: int) -> None:
    """Fewer than 6 ops: a prefix of stem (conv, relu, pool) + head (mean, dense, softmax)."""
    steps = [lambda x: b.conv((1, 3, 4 * size, 4 * size), [], channels, kernel=7, stride=2), b.relu,
             lambda x: b.pool("MaxPool", x, stride=2), lambda x: b.op("ReduceMean", [x], (1, b.channels(x))),
             lambda x: b.matmul(x, 1000)]
    x = -1
    for step in steps[:n_ops]:
        x = step(x)


# --------------------------------------------------------------------------------------------- builder
@dataclass
class _Builder:
    """Appends ops in topological order; every helper returns the new op's index."""

    types: list[str] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    flops: list[float] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)

    @property
    def n_ops(self) -> int:
        return len(self.types)

    def mark(self) -> tuple[int, int]:
        return len(self.types), len(self.src)

    def rollback(self, mark: tuple[int, int]) -> None:
        n, e = mark
        del self.types[n:], self.shapes[n:], self.flops[n:], self.src[e:], self.dst[e:]

    def shape(self, x: int) -> Shape:
        return self.shapes[x]

    def channels(self, x: int) -> int:
        return self.shapes[x][1]

    def op(self, op_type: str, inputs: list[int], shape: Shape, flops: float | None = None,
           input_shapes: list[Shape] | None = None) -> int:
        """Append an op. FLOPs default to the graph module's rule for non-matmul ops: one per element of the
        largest tensor in or out (`input_shapes` adds inputs that are not compute ops, e.g. the network input)."""
        if flops is None:
            sizes = [_elements(shape)] + [_elements(self.shapes[i]) for i in inputs]
            sizes += [_elements(s) for s in input_shapes or []]
            flops = max(sizes)
        index = len(self.types)
        self.types.append(op_type)
        self.shapes.append(shape)
        self.flops.append(float(flops))
        for i in dict.fromkeys(inputs):  # one edge per producer, as graphs from OpenVINO models have
            self.src.append(i)
            self.dst.append(index)
        return index

    def conv(self, in_shape: Shape, inputs: list[int], out_channels: int, kernel: int, stride: int) -> int:
        """Convolution with 'same' padding: (1, C, H, W) -> (1, out_channels, ceil(H / stride), ceil(W / stride))."""
        _, c, h, w = in_shape
        shape = (1, out_channels, -(-h // stride), -(-w // stride))
        return self.op("Convolution", inputs, shape, flops=2.0 * _elements(shape) * c * kernel * kernel)

    def conv1x1(self, x: int, out_channels: int) -> int:
        return self.conv(self.shapes[x], [x], out_channels, kernel=1, stride=1)

    def matmul(self, x: int, out_features: int) -> int:
        """Dense layer on the last axis: (..., K) -> (..., out_features)."""
        shape = (*self.shapes[x][:-1], out_features)
        return self.op("MatMul", [x], shape, flops=2.0 * _elements(shape) * self.shapes[x][-1])

    def relu(self, x: int) -> int:
        return self.op("Relu", [x], self.shapes[x])

    def add(self, x: int, y: int) -> int:
        return self.op("Add", [x, y], self.shapes[x])

    def add_bias(self, x: int) -> int:
        return self.op("Add", [x], self.shapes[x])

    def layer_norm(self, x: int) -> int:
        """MVN, then the learned scale and shift (how LayerNorm reaches OpenVINO)."""
        return self.add_bias(self.op("Multiply", [self.op("MVN", [x], self.shapes[x])], self.shapes[x]))

    def pool(self, op_type: str, x: int, stride: int) -> int:
        _, c, h, w = self.shapes[x]
        return self.op(op_type, [x], (1, c, -(-h // stride), -(-w // stride)))

    def upsample(self, x: int, factor: int) -> int:
        _, c, h, w = self.shapes[x]
        return self.op("Interpolate", [x], (1, c, h * factor, w * factor))

    def concat(self, inputs: list[int]) -> int:
        _, _, h, w = self.shapes[inputs[0]]
        return self.op("Concat", inputs, (1, sum(self.channels(i) for i in inputs), h, w))

    def build(self, n_ops: int, seed: int) -> ComputationGraph:
        if self.n_ops != n_ops:
            raise AssertionError(f"synthetic builder made {self.n_ops} ops, not {n_ops}")  # a bug here, not bad input
        bytes_out = np.array([_elements(s) for s in self.shapes], dtype=np.int64) * ITEMSIZE
        src, dst = np.array(self.src, dtype=np.int64), np.array(self.dst, dtype=np.int64)
        order = np.lexsort((dst, src))  # sorted like graphs from OpenVINO models
        src, dst = src[order], dst[order]
        return ComputationGraph(
            name=f"{PREFIX}{n_ops}:{seed}",
            op_names=tuple(f"{t}_{i}" for i, t in enumerate(self.types)),
            op_types=tuple(self.types),
            output_shapes=tuple((s,) for s in self.shapes),
            bytes_out=bytes_out,
            flops=np.array(self.flops, dtype=np.float64),
            edge_index=np.stack([src, dst]),
            edge_bytes=bytes_out[src],
        )


def _elements(shape: Shape) -> float:
    return float(np.prod(shape, dtype=np.float64))
