"""Sum of each row of a 2-D tensor (reduction over the last dimension, keepdim=False).

The output has one value per row. Standard GPU size: 16384 rows of 32768 floats (2 GiB in,
64 KiB out); memory bound.
"""

import torch
import torch.nn as nn

batch_size = 16384
dim = 32768


class Model(nn.Module):
    """Reduces the last dimension by summation."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
