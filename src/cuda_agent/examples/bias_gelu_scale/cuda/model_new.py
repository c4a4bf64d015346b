"""Example solution (cuda backend, workdir): bias + exact GELU + scale fused into one CUDA pass."""

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int, scale_factor: float):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(dim))
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bias_gelu_scale(x, self.bias, self.scale_factor)
