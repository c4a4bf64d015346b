"""GELU with the tanh approximation, applied elementwise.

gelu(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))). Standard GPU size: a
16384 x 16384 input (256M floats, 1 GiB in and 1 GiB out).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 16384


class Model(nn.Module):
    """Tanh-approximated GELU activation."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
