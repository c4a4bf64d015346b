"""Post-norm transformer feed-forward block: LayerNorm(x + W2 gelu(W1 x + b1) + b2).

The input is (batch, seq_len, d_model); both linear layers act on the last dimension, GELU is
the exact (erf) form, and the LayerNorm has randomised affine parameters. Standard GPU size:
batch 8, 2048 tokens each, d_model 1024, hidden size 4096 (about 275 GFLOP per call).
"""

import torch
import torch.nn as nn

batch_size = 8
seq_len = 2048
d_model = 1024
d_ff = 4096


class Model(nn.Module):
    """Linear -> GELU -> Linear, residual add, LayerNorm."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc_in = nn.Linear(d_model, d_ff)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(d_ff, d_model)
        self.norm = nn.LayerNorm(d_model)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc_out(self.act(self.fc_in(x)))
        return self.norm(x + hidden)


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_ff]
