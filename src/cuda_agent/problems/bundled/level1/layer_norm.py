"""Layer normalisation over the last dimension with a learned elementwise affine transform.

y = (x - mean) / sqrt(var + eps) * weight + bias, statistics per row. The affine parameters are
randomised at construction so the output depends on them. Standard GPU size: 32768 rows of
8192 features (256M floats, 1 GiB in and 1 GiB out).
"""

import torch
import torch.nn as nn

batch_size = 32768
hidden_size = 8192


class Model(nn.Module):
    """nn.LayerNorm over the feature dimension."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, hidden_size)]


def get_init_inputs():
    return [hidden_size]
