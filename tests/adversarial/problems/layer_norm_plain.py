"""A red-team problem: nn.LayerNorm with its default initial weights (ones) and bias (zeros).

As in KernelBench's LayerNorm problems, the affine parameters keep their initial values, so a
solution that ignores them matches the reference at construction. Small sizes (cpu tests).
"""

import torch
import torch.nn as nn

batch_size = 8
features = 256


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
