"""Triton: an autotuned kernel whose config pre-hook computes the output with torch, the
kernel itself doing nothing. Required: rejected (strict: the torch op in the hook; kernelbench:
with the launches skipped the hook's output is still right)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def fill(args):
    args["y_ptr"].copy_(torch.relu(args["x_ptr"]))


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, pre_hook=fill),
        triton.Config({"BLOCK": 512}, pre_hook=fill),
    ],
    key=["n"],
)
@triton.jit
def idle_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        idle_kernel[(1,)](x, y, x.numel())
        return y
