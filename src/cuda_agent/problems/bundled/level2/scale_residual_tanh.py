"""Scaled residual add followed by tanh: tanh(x * scale + y), with two same-shaped inputs.

scale is a learned per-feature parameter of shape (dim,) broadcast over rows. Standard GPU
size: two 16384 x 8192 inputs (128M floats each; 1 GiB in, 512 MiB out).
"""

import torch
import torch.nn as nn

batch_size = 16384
dim = 8192


class Model(nn.Module):
    """Per-feature scale of x, add y, tanh."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim).uniform_(0.25, 2.0))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * self.scale + y)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
