"""Fully connected layer followed by ReLU: relu(x @ W^T + b).

The bias add and ReLU are a natural epilogue of the matrix product. Standard GPU size: 8192 rows,
4096 input features, 4096 output features (about 275 GFLOP per call).
"""

import torch
import torch.nn as nn

batch_size = 8192
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """nn.Linear then ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
