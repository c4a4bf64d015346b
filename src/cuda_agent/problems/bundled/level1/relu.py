"""Elementwise ReLU, max(x, 0), over a 2-D float32 tensor.

Standard GPU size: a 16384 x 16384 input (256M floats, 1 GiB in and 1 GiB out); the op is
purely memory bound.
"""

import torch
import torch.nn as nn

batch_size = 16384
dim = 16384


class Model(nn.Module):
    """Applies ReLU to every element."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
