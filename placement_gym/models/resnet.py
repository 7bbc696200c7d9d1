"""ResNet-50 in plain PyTorch (torchvision's architecture, no torchvision import).

torchvision cannot be used here (its compiled ops are missing from the CPU wheel), so the
network is written out: a 7x7 stem, four stages of Bottleneck blocks ``[3, 4, 6, 3]`` with
the stride on the 3x3 conv (ResNet v1.5, as torchvision), global average pooling and a
1000-way classifier. Input ``(1, 3, 224, 224)`` float32, output logits ``(1, 1000)``.
"""

from __future__ import annotations

import torch
from torch import nn

INPUT_SHAPE = (1, 3, 224, 224)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (strided) -> 1x1 expand (x4), each with BN; residual add, ReLU.

    ``(B, in_ch, H, W) -> (B, 4 * width, H / stride, W / stride)``.
    """

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        # Projection shortcut where the shape changes (first block of every stage).
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50: ``(B, 3, 224, 224)`` float32 -> logits ``(B, num_classes)``."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        in_ch = 64
        stages = []
        for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            layers = []
            for i in range(blocks):
                layers.append(Bottleneck(in_ch, width, stride if i == 0 else 1))
                in_ch = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build() -> tuple[nn.Module, dict[str, torch.Tensor], tuple[str, ...]]:
    """Return the (untrained, eval-mode) module, example inputs ``{"x": (1, 3, 224, 224)}``
    and the output names."""
    return ResNet50().eval(), {"x": torch.randn(*INPUT_SHAPE)}, ("logits",)
