"""The graph dataset: computation graphs of many network families, split by family, for placement that transfers.

Every entry is a small-to-moderate network written in plain PyTorch (no torchvision or transformers), given
seeded random weights and converted to OpenVINO IR exactly like the zoo's torch models (`zoo._convert_torch`),
and cached in the zoo's cache (`zoo.model_cache_dir`, same lock, manifest and atomic write) as
``<name>-<DATASET_VERSION>.xml``. An entry's name is accepted wherever a model is (``load_model``,
``load_graph``, ``gym.make("DevicePlacement-v0", model="unet-s")``); ``model="dataset:train"`` (``val``,
``test``, ``all``) makes a multi-graph env over a split (`placement_gym.env`).

Families and the split (by family, so no test family is seen in training):

    split  family      what                                                       members
    train  vgg         classic CNN, 3x3 conv stacks and max-pooling (VGG)         vgg-11, vgg-13, vgg-16, vgg-19bn
    train  resnet      residual CNN, basic blocks                                 resnet-10, resnet-18, resnet-26, resnet-34
    train  mobilenet   inverted residuals, depthwise convs (MobileNetV2)          mobilenet-s, -m, -l
    train  encoder     transformer encoder (BERT-like, post-LN)                   encoder-xs, -s, -m, -l
    train  gpt         decoder-only causal LM (GPT-like, pre-LN)                  gpt-xs, -s, -m, -l
    train  rnn         LSTM / GRU cells unrolled over T steps                     lstm-t8, lstm-t16x2, gru-t16, gru-t24x2
    val    inception   inception-style CNN, four-branch blocks                    inception-2, -4, -6
    val    vit         vision transformer and MLP-mixer on patches               vit-s, vit-m, mixer-s, mixer-m
    test   unet        U-Net segmentation (encoder, decoder, skip concats)       unet-s, unet-m, unet-l
    test   tcn         dilated causal 1-D convs with gated units (WaveNet)       wavenet-s, wavenet-m, wavenet-l
    test   seq2seq     encoder-decoder transformer (cross-attention)              seq2seq-xs, -s, -m

Loading (`zoo.load_model`) and the cache live in `placement_gym.models.zoo`, which imports this module (this one
imports nothing of the package). `dataset_entries(split)` lists the entries, `dataset_names(split)` their names;
``placement-gym info --dataset`` prints each with its graph size. Building one takes seconds (once; later loads
read the cached IR).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

DATASET_PREFIX = "dataset:"
SPLITS = ("train", "val", "test")
#: Bump when a dataset model definition changes, so stale cached IRs are not reused (the zoo's stay valid).
DATASET_VERSION = "d1"

Built = tuple[Any, dict[str, Any], tuple[str, ...]]  # (torch module, example inputs by name, output names)


@dataclass(frozen=True)
class DatasetEntry:
    """One dataset graph. ``build()`` returns ``(torch module, example inputs, output names)`` for
    `zoo._convert_torch`; ``inputs`` describes the example inputs."""

    name: str
    family: str
    split: str
    description: str
    inputs: str
    build: Callable[[], Built]


# --------------------------------------------------------------------------- the networks (torch imported lazily)


def _nn():
    import torch
    import torch.nn.functional as F
    from torch import nn

    return torch, F, nn


def _conv_bn(nn, cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, act: Any = None):
    """Conv2d (no bias) + BatchNorm2d + activation (ReLU unless `act` is given; False for none)."""
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not False:
        layers.append(act or nn.ReLU())
    return nn.Sequential(*layers)


def _sequential(*layers):
    """``nn.Sequential`` whose forward argument is named ``x`` (the example input's name: converted as keywords)."""
    _, _, nn = _nn()

    class Net(nn.Sequential):
        def forward(self, x):
            return super().forward(x)

    return Net(*layers)


def _image(hw: int, channels: int = 3) -> dict[str, Any]:
    import torch

    return {"x": torch.randn(1, channels, hw, hw)}


def _tokens(length: int, vocab: int) -> Any:
    import torch

    return torch.randint(0, vocab, (1, length))


def build_vgg(cfg: tuple, hw: int, bn: bool) -> Built:
    """VGG: ``cfg`` lists conv widths and "M" (2x2 max-pool); then a two-layer classifier. ``(1, 3, hw, hw)``."""
    torch, F, nn = _nn()
    layers, cin = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), *([nn.BatchNorm2d(v)] if bn else []), nn.ReLU()]
            cin = v
    side = hw // 2 ** cfg.count("M")
    net = _sequential(*layers, nn.Flatten(), nn.Linear(cin * side * side, 256), nn.ReLU(), nn.Linear(256, 100))
    return net, _image(hw), ("logits",)


def build_resnet(blocks: tuple[int, ...], width: int, hw: int) -> Built:
    """ResNet with basic blocks (two 3x3 convs + identity/projection shortcut), four stages ``blocks``."""
    torch, F, nn = _nn()

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.a, self.b = _conv_bn(nn, cin, cout, 3, stride), _conv_bn(nn, cout, cout, 3, act=False)
            self.short = None if stride == 1 and cin == cout else _conv_bn(nn, cin, cout, 1, stride, act=False)

        def forward(self, x):
            return F.relu(self.b(self.a(x)) + (x if self.short is None else self.short(x)))

    layers, cin = [_conv_bn(nn, 3, width, 3)], width
    for stage, n in enumerate(blocks):
        cout = width * 2 ** stage
        for i in range(n):
            layers.append(Block(cin, cout, 2 if i == 0 and stage else 1))
            cin = cout
    net = _sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 100))
    return net, _image(hw), ("logits",)


def build_mobilenet(settings: tuple, width: int, hw: int) -> Built:
    """MobileNetV2: inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project; ReLU6; residual where the shape
    is kept). ``settings``: (expansion, channels, repeats, stride) per stage."""
    torch, F, nn = _nn()

    class Inverted(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
            super().__init__()
            hidden = cin * t
            self.body = nn.Sequential(
                *([_conv_bn(nn, cin, hidden, 1, act=nn.ReLU6())] if t != 1 else []),
                _conv_bn(nn, hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6()),
                _conv_bn(nn, hidden, cout, 1, act=False))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    layers, cin = [_conv_bn(nn, 3, width, 3, 2, act=nn.ReLU6())], width
    for t, c, n, s in settings:
        for i in range(n):
            layers.append(Inverted(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += [_conv_bn(nn, cin, 4 * cin, 1, act=nn.ReLU6()), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(4 * cin, 100)]
    return _sequential(*layers), _image(hw), ("logits",)


def build_inception(n_blocks: int, width: int, hw: int) -> Built:
    """Inception-style CNN: a stem, then blocks of four parallel branches (1x1; 1x1-3x3; 1x1-3x3-3x3; pool-1x1)
    concatenated, a strided max-pool after every second block."""
    torch, F, nn = _nn()

    class Block(nn.Module):
        def __init__(self, cin: int, c: int) -> None:
            super().__init__()
            self.b1 = _conv_bn(nn, cin, c, 1)
            self.b2 = nn.Sequential(_conv_bn(nn, cin, c, 1), _conv_bn(nn, c, c, 3))
            self.b3 = nn.Sequential(_conv_bn(nn, cin, c // 2, 1), _conv_bn(nn, c // 2, c, 3), _conv_bn(nn, c, c, 3))
            self.b4 = nn.Sequential(nn.AvgPool2d(3, 1, 1), _conv_bn(nn, cin, c, 1))

        def forward(self, x):
            return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)

    layers, cin = [_conv_bn(nn, 3, 2 * width, 3, 2), _conv_bn(nn, 2 * width, 2 * width, 3)], 2 * width
    for i in range(n_blocks):
        c = width * (1 + i // 2)
        layers.append(Block(cin, c))
        cin = 4 * c
        if i % 2 == 1:
            layers.append(nn.MaxPool2d(3, 2, 1))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 100)]
    return _sequential(*layers), _image(hw), ("logits",)


def _attention_block(nn, F, d: int, heads: int, ffn: int, *, causal: bool = False, cross: bool = False,
                     pre_norm: bool = False):
    """A transformer layer: self-attention (causal if asked), optional cross-attention over a memory, GELU FFN;
    post-LN (BERT) or pre-LN (GPT). ``(1, T, d)`` [+ memory ``(1, S, d)``] -> ``(1, T, d)``."""

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.out, self.norm1 = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d)
            if cross:
                self.q2, self.kv2, self.out2, self.norm2 = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d), \
                    nn.LayerNorm(d)
            self.ffn = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))
            self.norm3 = nn.LayerNorm(d)

        def _heads(self, x):
            b, t, _ = x.shape
            return x.view(b, t, heads, d // heads).transpose(1, 2)

        def _attend(self, q, k, v, is_causal: bool):
            ctx = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), is_causal=is_causal)
            return ctx.transpose(1, 2).reshape(q.shape)

        def _sublayer(self, x, norm, f):
            return x + f(norm(x)) if pre_norm else norm(x + f(x))

        def forward(self, x, memory=None):
            x = self._sublayer(x, self.norm1, lambda h: self.out(self._attend(*self.qkv(h).chunk(3, -1), causal)))
            if cross:
                x = self._sublayer(x, self.norm2,
                                   lambda h: self.out2(self._attend(self.q2(h), *self.kv2(memory).chunk(2, -1), False)))
            return self._sublayer(x, self.norm3, self.ffn)

    return Layer()


def _embedding(nn, vocab: int, length: int, d: int):
    import torch

    class Embed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos, self.norm = nn.Embedding(vocab, d), nn.Embedding(length, d), nn.LayerNorm(d)
            self.register_buffer("positions", torch.arange(length).unsqueeze(0), persistent=False)

        def forward(self, ids):
            return self.norm(self.tok(ids) + self.pos(self.positions))

    return Embed()


VOCAB = 1000


def build_transformer(layers: int, d: int, length: int, *, causal: bool) -> Built:
    """Encoder (``causal=False``: post-LN layers, then a tanh pooler on the first token) or decoder-only LM
    (``causal=True``: pre-LN causal layers, final LN, LM head over the vocabulary). ``input_ids (1, length)``."""
    torch, F, nn = _nn()

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = _embedding(nn, VOCAB, length, d)
            self.layers = nn.ModuleList(_attention_block(nn, F, d, max(d // 64, 2), 4 * d, causal=causal,
                                                         pre_norm=causal) for _ in range(layers))
            self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, VOCAB)) if causal else nn.Linear(d, d)

        def forward(self, input_ids):
            x = self.embed(input_ids)
            for layer in self.layers:
                x = layer(x)
            return self.head(x) if causal else torch.tanh(self.head(x[:, 0]))

    return Net(), {"input_ids": _tokens(length, VOCAB)}, ("logits" if causal else "pooled",)


def build_seq2seq(layers: int, d: int, src: int, tgt: int) -> Built:
    """Encoder-decoder transformer: `layers` encoder layers over ``src_ids (1, src)``, `layers` decoder layers
    (causal self-attention + cross-attention to the encoder output) over ``tgt_ids (1, tgt)``, LM head."""
    torch, F, nn = _nn()

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            heads = max(d // 64, 2)
            self.src_embed, self.tgt_embed = _embedding(nn, VOCAB, src, d), _embedding(nn, VOCAB, tgt, d)
            self.encoder = nn.ModuleList(_attention_block(nn, F, d, heads, 4 * d) for _ in range(layers))
            self.decoder = nn.ModuleList(_attention_block(nn, F, d, heads, 4 * d, causal=True, cross=True)
                                         for _ in range(layers))
            self.head = nn.Linear(d, VOCAB)

        def forward(self, src_ids, tgt_ids):
            memory = self.src_embed(src_ids)
            for layer in self.encoder:
                memory = layer(memory)
            x = self.tgt_embed(tgt_ids)
            for layer in self.decoder:
                x = layer(x, memory)
            return self.head(x)

    example = {"src_ids": _tokens(src, VOCAB), "tgt_ids": _tokens(tgt, VOCAB)}
    return Net(), example, ("logits",)


def build_rnn(cell: str, steps: int, layers: int, hidden: int, features: int = 32) -> Built:
    """A stacked LSTM or GRU unrolled over `steps` time steps, each cell written out (gate matmuls, sigmoid,
    tanh), then a linear head on the last hidden state. ``x (1, steps, features)``."""
    torch, F, nn = _nn()

    class Cell(nn.Module):
        def __init__(self, cin: int) -> None:
            super().__init__()
            gates = 4 if cell == "lstm" else 3
            self.wx, self.wh = nn.Linear(cin, gates * hidden), nn.Linear(hidden, gates * hidden)

        def forward(self, x, h, c):
            if cell == "lstm":
                i, f, g, o = (self.wx(x) + self.wh(h)).chunk(4, -1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                return torch.sigmoid(o) * torch.tanh(c), c
            xr, xz, xn = self.wx(x).chunk(3, -1)
            hr, hz, hn = self.wh(h).chunk(3, -1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            return (1 - z) * torch.tanh(xn + r * hn) + z * h, c

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cells = nn.ModuleList(Cell(features if i == 0 else hidden) for i in range(layers))
            self.head = nn.Linear(hidden, 10)

        def forward(self, x):
            state = [(x.new_zeros(1, hidden), x.new_zeros(1, hidden)) for _ in self.cells]
            for t in range(steps):
                h = x[:, t]
                for k, cell_k in enumerate(self.cells):
                    state[k] = cell_k(h, *state[k])
                    h = state[k][0]
            return self.head(h)

    import torch as _torch

    return Net(), {"x": _torch.randn(1, steps, features)}, ("logits",)


def build_vit(layers: int, d: int, patch: int, hw: int, mixer: bool) -> Built:
    """Patch embedding (strided conv), then `layers` transformer layers with a class token (ViT) or MLP-mixer
    layers (token-mixing and channel-mixing MLPs), mean/cls pooling and a linear head. ``(1, 3, hw, hw)``."""
    torch, F, nn = _nn()
    tokens = (hw // patch) ** 2

    class MixerLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.tok = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
            self.ch = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ch(self.n2(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(torch.randn(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, tokens + (0 if mixer else 1), d) * 0.1)
            self.layers = nn.ModuleList(
                MixerLayer() if mixer else _attention_block(nn, F, d, max(d // 64, 2), 4 * d, pre_norm=True)
                for _ in range(layers))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 100)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            if not mixer:
                x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
            x = x + self.pos
            for layer in self.layers:
                x = layer(x)
            x = self.norm(x)
            return self.head(x.mean(1) if mixer else x[:, 0])

    return Net(), _image(hw), ("logits",)


def build_unet(depth: int, width: int, hw: int) -> Built:
    """U-Net: `depth` down steps (double 3x3 conv + BN + ReLU, max-pool), a bottleneck, `depth` up steps
    (transposed conv, concat with the skip, double conv), a 1x1 conv to 4 classes. ``(1, 3, hw, hw)``."""
    torch, F, nn = _nn()

    def double(cin: int, cout: int):
        return nn.Sequential(_conv_bn(nn, cin, cout), _conv_bn(nn, cout, cout))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            widths = [width * 2 ** i for i in range(depth + 1)]
            self.down = nn.ModuleList(double(3 if i == 0 else widths[i - 1], widths[i]) for i in range(depth))
            self.bottom = double(widths[depth - 1], widths[depth])
            self.up = nn.ModuleList(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, 2) for i in reversed(range(depth)))
            self.merge = nn.ModuleList(double(2 * widths[i], widths[i]) for i in reversed(range(depth)))
            self.out = nn.Conv2d(width, 4, 1)

        def forward(self, x):
            skips = []
            for block in self.down:
                x = block(x)
                skips.append(x)
                x = F.max_pool2d(x, 2)
            x = self.bottom(x)
            for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
                x = merge(torch.cat([up(x), skip], 1))
            return self.out(x)

    return Net(), _image(hw), ("mask_logits",)


def build_wavenet(stacks: int, layers: int, channels: int, length: int) -> Built:
    """WaveNet-style TCN: an input 1x1 conv, then `stacks` x `layers` residual blocks of dilated (1, 2, 4, ...)
    causal convs with gated units (tanh x sigmoid), residual and skip 1x1 convs; the skips summed, ReLU, 1x1
    convs to 256 classes. ``x (1, 1, length)``."""
    torch, F, nn = _nn()

    class Block(nn.Module):
        def __init__(self, dilation: int) -> None:
            super().__init__()
            self.dilation = dilation
            self.filter, self.gate = nn.Conv1d(channels, channels, 2, dilation=dilation), \
                nn.Conv1d(channels, channels, 2, dilation=dilation)
            self.res, self.skip = nn.Conv1d(channels, channels, 1), nn.Conv1d(channels, channels, 1)

        def forward(self, x):
            h = F.pad(x, (self.dilation, 0))  # causal: only the past
            h = torch.tanh(self.filter(h)) * torch.sigmoid(self.gate(h))
            return x + self.res(h), self.skip(h)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Conv1d(1, channels, 1)
            self.blocks = nn.ModuleList(Block(2 ** i) for _ in range(stacks) for i in range(layers))
            self.post = nn.Sequential(nn.ReLU(), nn.Conv1d(channels, channels, 1), nn.ReLU(),
                                      nn.Conv1d(channels, 256, 1))

        def forward(self, x):
            x, total = self.inp(x), 0
            for block in self.blocks:
                x, skip = block(x)
                total = total + skip
            return self.post(total)

    import torch as _torch

    return Net(), {"x": _torch.randn(1, 1, length)}, ("logits",)


# --------------------------------------------------------------------------- the entries

_VGG = {
    11: (16, "M", 32, "M", 64, 64, "M", 128, 128, "M", 128, 128, "M"),
    13: (16, 16, "M", 32, 32, "M", 64, 64, "M", 128, 128, "M", 128, 128, "M"),
    16: (16, 16, "M", 32, 32, "M", 64, 64, 64, "M", 128, 128, 128, "M", 128, 128, 128, "M"),
    19: (16, 16, "M", 32, 32, "M", 64, 64, 64, 64, "M", 128, 128, 128, 128, "M", 128, 128, 128, 128, "M"),
}
_MOBILE = {
    "s": ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2)),
    "m": ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 3, 2), (6, 96, 2, 1)),
    "l": ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
          (6, 320, 1, 1)),
}


def _entries() -> list[DatasetEntry]:
    p = functools.partial
    e: list[DatasetEntry] = []

    def add(name: str, family: str, split: str, description: str, inputs: str, build: Callable[[], Built]):
        e.append(DatasetEntry(name, family, split, description, inputs, build))

    for depth, bn in ((11, False), (13, False), (16, False), (19, True)):
        add(f"vgg-{depth}{'bn' if bn else ''}", "vgg", "train", f"VGG-{depth}{' with BatchNorm' if bn else ''}, "
            "widths / 4", "x: (1, 3, 64, 64) f32", p(build_vgg, _VGG[depth], 64, bn))
    for name, blocks in (("10", (1, 1, 1, 1)), ("18", (2, 2, 2, 2)), ("26", (3, 3, 3, 3)), ("34", (3, 4, 6, 3))):
        add(f"resnet-{name}", "resnet", "train", f"ResNet-{name} (basic blocks {list(blocks)}), width 16",
            "x: (1, 3, 64, 64) f32", p(build_resnet, blocks, 16, 64))
    for size, hw in (("s", 96), ("m", 112), ("l", 128)):
        add(f"mobilenet-{size}", "mobilenet", "train", f"MobileNetV2-style, {len(_MOBILE[size])} stages",
            f"x: (1, 3, {hw}, {hw}) f32", p(build_mobilenet, _MOBILE[size], 16, hw))
    for name, (layers, d, t) in {"xs": (2, 128, 32), "s": (4, 256, 64), "m": (6, 256, 128),
                                 "l": (8, 384, 128)}.items():
        add(f"encoder-{name}", "encoder", "train", f"transformer encoder, {layers} layers, d={d}",
            f"input_ids: (1, {t}) i64", p(build_transformer, layers, d, t, causal=False))
    for name, (layers, d, t) in {"xs": (2, 128, 32), "s": (4, 256, 64), "m": (6, 384, 64),
                                 "l": (8, 256, 128)}.items():
        add(f"gpt-{name}", "gpt", "train", f"decoder-only causal LM, {layers} layers, d={d}",
            f"input_ids: (1, {t}) i64", p(build_transformer, layers, d, t, causal=True))
    for name, (cell, steps, layers, hidden) in {"lstm-t8": ("lstm", 8, 1, 128), "lstm-t16x2": ("lstm", 16, 2, 128),
                                                "gru-t16": ("gru", 16, 1, 128), "gru-t24x2": ("gru", 24, 2, 96)}.items():
        add(name, "rnn", "train", f"{cell.upper()} unrolled over {steps} steps, {layers} layer(s), hidden {hidden}",
            f"x: (1, {steps}, 32) f32", p(build_rnn, cell, steps, layers, hidden))
    for blocks in (2, 4, 6):
        add(f"inception-{blocks}", "inception", "val", f"inception-style CNN, {blocks} four-branch blocks",
            "x: (1, 3, 64, 64) f32", p(build_inception, blocks, 16, 64))
    for name, (layers, d, mixer) in {"vit-s": (4, 128, False), "vit-m": (8, 192, False), "mixer-s": (4, 128, True),
                                     "mixer-m": (8, 192, True)}.items():
        add(name, "vit", "val", f"{'MLP-mixer' if mixer else 'ViT'}, {layers} layers, d={d}, 8x8 patches",
            "x: (1, 3, 64, 64) f32", p(build_vit, layers, d, 8, 64, mixer))
    for name, (depth, width, hw) in {"s": (2, 16, 64), "m": (3, 16, 96), "l": (4, 16, 128)}.items():
        add(f"unet-{name}", "unet", "test", f"U-Net, depth {depth}, width {width}", f"x: (1, 3, {hw}, {hw}) f32",
            p(build_unet, depth, width, hw))
    for name, (stacks, layers, ch) in {"s": (1, 6, 32), "m": (2, 8, 32), "l": (3, 10, 48)}.items():
        add(f"wavenet-{name}", "tcn", "test", f"WaveNet-style TCN, {stacks} x {layers} dilated gated blocks, "
            f"{ch} channels", "x: (1, 1, 1024) f32", p(build_wavenet, stacks, layers, ch, 1024))
    for name, (layers, d) in {"xs": (2, 128), "s": (3, 256), "m": (4, 256)}.items():
        add(f"seq2seq-{name}", "seq2seq", "test", f"encoder-decoder transformer, {layers}+{layers} layers, d={d}",
            "src_ids: (1, 64) i64, tgt_ids: (1, 32) i64", p(build_seq2seq, layers, d, 64, 32))
    return e


DATASET: dict[str, DatasetEntry] = {entry.name: entry for entry in _entries()}


# --------------------------------------------------------------------------- public API


def dataset_entries(split: str | None = None) -> list[DatasetEntry]:
    """The dataset's entries in table order; only those of `split` (``train``, ``val``, ``test``; None or
    ``all``: every one)."""
    if split is None or split == "all":
        return list(DATASET.values())
    if split not in SPLITS:
        raise ValueError(f"unknown dataset split {split!r}; choose one of {SPLITS} or 'all'")
    return [entry for entry in DATASET.values() if entry.split == split]


def dataset_names(split: str | None = None) -> list[str]:
    """The names of `split`'s entries (see `dataset_entries`)."""
    return [entry.name for entry in dataset_entries(split)]


def dataset_entry(name: str) -> DatasetEntry | None:
    """The entry called `name` (case-insensitive), or None."""
    return DATASET.get(name.strip().lower())
