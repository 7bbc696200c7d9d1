"""MobileNet-V2 in plain PyTorch (torchvision's architecture, no torchvision import).

torchvision cannot be used here (its compiled ops are missing from the CPU wheel), so the
network is written out as ``torchvision.models.mobilenet_v2`` (width multiplier 1.0, same
module names): a strided 3x3 stem (32 channels), 17 inverted residual blocks from the
``[t, c, n, s]`` table (1x1 expand by ``t`` -> 3x3 depthwise, strided -> 1x1 linear projection,
BatchNorm after each conv, ReLU6 after the first two; a residual add where the block keeps the
shape: 10 of the 17), a 1x1 conv to 1280 channels, global average pooling, dropout (0.2, a no-op
in eval mode) and a 1000-way classifier. Input ``(1, 3, 224, 224)`` float32, output logits ``(1, 1000)``.
"""

from __future__ import annotations

import torch
from torch import nn

INPUT_SHAPE = (1, 3, 224, 224)

#: torchvision's inverted residual settings: expansion t, output channels c, repeats n, first stride s.
INVERTED_RESIDUAL_SETTING = [
    [1, 16, 1, 1],
    [6, 24, 2, 2],
    [6, 32, 3, 2],
    [6, 64, 4, 2],
    [6, 96, 3, 1],
    [6, 160, 3, 2],
    [6, 320, 1, 1],
]


class ConvBNReLU6(nn.Sequential):
    """Conv (no bias, "same" padding) -> BatchNorm -> ReLU6 (torchvision's ``Conv2dNormActivation``).

    ``(B, in_ch, H, W) -> (B, out_ch, H / stride, W / stride)``.
    """

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int = 3, stride: int = 1, groups: int = 1) -> None:
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    """1x1 expand (x ``expand_ratio``, skipped when it is 1) -> 3x3 depthwise (strided) -> 1x1 linear
    projection with BN; plus the input where stride is 1 and the channels are kept.

    ``(B, in_ch, H, W) -> (B, out_ch, H / stride, W / stride)``.
    """

    def __init__(self, in_ch: int, out_ch: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = int(round(in_ch * expand_ratio))
        self.use_res_connect = stride == 1 and in_ch == out_ch
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU6(in_ch, hidden, kernel_size=1))
        layers += [
            ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),  # depthwise
            nn.Conv2d(hidden, out_ch, 1, bias=False),  # linear bottleneck: no activation
            nn.BatchNorm2d(out_ch),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = out_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNet-V2 (width 1.0): ``(B, 3, 224, 224)`` float32 -> logits ``(B, num_classes)``."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        in_ch, last_ch = 32, 1280  # at width 1.0 every channel count is already a multiple of 8
        features: list[nn.Module] = [ConvBNReLU6(3, in_ch, stride=2)]
        for t, c, n, s in INVERTED_RESIDUAL_SETTING:
            for i in range(n):
                features.append(InvertedResidual(in_ch, c, s if i == 0 else 1, t))
                in_ch = c
        features.append(ConvBNReLU6(in_ch, last_ch, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(last_ch, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def build() -> tuple[nn.Module, dict[str, torch.Tensor], tuple[str, ...]]:
    """Return the (untrained, eval-mode) module, example inputs ``{"x": (1, 3, 224, 224)}``
    and the output names."""
    return MobileNetV2().eval(), {"x": torch.randn(*INPUT_SHAPE)}, ("logits",)
