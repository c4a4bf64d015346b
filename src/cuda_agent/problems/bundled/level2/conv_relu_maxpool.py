"""2-D convolution (3x3, same padding) followed by ReLU and 2x2 max pooling with stride 2.

Input and output are NCHW; the output has half the spatial size of the input. Standard GPU
size: batch 32, 64 -> 128 channels, 128 x 128 images (about 77 GFLOP for the convolution).
"""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    """Conv2d, ReLU, MaxPool2d(2)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
