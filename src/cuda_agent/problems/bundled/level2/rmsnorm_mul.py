"""RMS normalisation over the last dimension with a learned weight, then a product with a gate.

y = x / sqrt(mean(x^2, dim=-1) + eps) * weight * gate, where weight has shape (dim,) and gate
is a second input of the same shape as x. Standard GPU size: two 8192 x 8192 inputs (64M
floats each; 512 MiB in, 256 MiB out).
"""

import torch
import torch.nn as nn

batch_size = 8192
dim = 8192


class Model(nn.Module):
    """RMSNorm with learned scale, multiplied elementwise by a second tensor."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim).uniform_(0.5, 1.5))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * inv_rms * self.weight * gate


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
