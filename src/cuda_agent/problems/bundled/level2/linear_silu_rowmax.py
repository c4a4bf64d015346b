"""Fully connected layer, SiLU activation, then the maximum over the output features.

y[i] = max_j silu(x @ W^T + b)[i, j]; the output has one value per row. A fused kernel can
reduce in the GEMM epilogue instead of writing the activations out. Standard GPU size: 8192
rows, 4096 input features, 4096 output features (about 275 GFLOP per call).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """nn.Linear, SiLU, row-wise max."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.linear(x)).amax(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
