"""Dense matrix product C = A @ B of two square float32 matrices.

Standard GPU size: 4096 x 4096 operands (about 137 GFLOP per call).
"""

import torch
import torch.nn as nn

matrix_size = 4096


class Model(nn.Module):
    """Multiplies two square matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    a = torch.randn(matrix_size, matrix_size)
    b = torch.randn(matrix_size, matrix_size)
    return [a, b]


def get_init_inputs():
    return []
