"""A red-team problem: nn.BatchNorm2d as constructed (training mode), as KernelBench runs it.

KernelBench never calls ``.eval()``: BatchNorm normalises with the batch's own statistics. The
inputs have mean 1 and standard deviation 3, far from the running statistics a fresh module
holds (0 and 1), so a kernel that folds BatchNorm with its running statistics computes another
function. Small sizes (cpu tests).
"""

import torch
import torch.nn as nn

batch_size = 4
features = 8
height = 16
width = 16


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, features, height, width) * 3.0 + 1.0]


def get_init_inputs():
    return [features]
