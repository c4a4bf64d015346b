"""Multi-head self-attention (no mask) built from linear projections, matmuls and softmax.

For x of shape (batch, seq_len, d_model): q, k, v = x Wq, x Wk, x Wv (with biases) split into
num_heads heads; each head computes softmax(q k^T / sqrt(head_dim)) v; the heads are
concatenated and passed through an output projection. The query/key weights are initialised
with a larger spread so the attention weights are sharp rather than nearly uniform. Standard
GPU size: batch 16, 1024 tokens, d_model 1024, 16 heads of 64 (about 140 GFLOP per call, with
a 1 GiB score tensor if materialised).
"""

import math

import torch
import torch.nn as nn

batch_size = 16
seq_len = 1024
d_model = 1024
num_heads = 16


class Model(nn.Module):
    """Q/K/V projections, scaled dot-product attention per head, output projection."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        with torch.no_grad():
            std = 1.0 / math.sqrt(d_model)
            nn.init.normal_(self.q_proj.weight, std=1.75 * std)
            nn.init.normal_(self.k_proj.weight, std=1.75 * std)
            nn.init.normal_(self.v_proj.weight, std=std)
            nn.init.normal_(self.out_proj.weight, std=std)

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = t.shape
        return t.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        q = self._split_heads(self.q_proj(x))
        k = self._split_heads(self.k_proj(x))
        v = self._split_heads(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        weights = torch.softmax(scores, dim=-1)
        context = torch.matmul(weights, v)
        context = context.transpose(1, 2).reshape(batch, seq, d_model)
        return self.out_proj(context)


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, num_heads]
