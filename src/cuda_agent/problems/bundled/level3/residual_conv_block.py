"""Basic residual convolution block (ResNet style) in NCHW with an identity shortcut.

y = relu(bn2(conv2(relu(bn1(conv1(x))))) + x), where both convolutions are 3x3, stride 1,
same padding, no bias, and keep the channel count. BatchNorm runs in inference mode (the
constructor ends with ``self.eval()``: evaluators run a module in the mode its constructor
leaves it, as KernelBench does); its affine parameters and running statistics are randomised
at construction so they matter.
Standard GPU size: batch 32, 64 channels, 128 x 128 images (about 77 GFLOP per call).
"""

import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 128
width = 128


def _randomise_batch_norm(bn: nn.BatchNorm2d) -> None:
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)


class Model(nn.Module):
    """Conv-BN-ReLU-Conv-BN, identity residual, ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        _randomise_batch_norm(self.bn1)
        _randomise_batch_norm(self.bn2)
        self.eval()  # inference: BatchNorm normalises with its running statistics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
