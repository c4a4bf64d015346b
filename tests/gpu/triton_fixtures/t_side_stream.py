"""Triton (GPU): launch the kernel on a side stream and return before it finishes, so the
timed stream measures nothing. Required: rejected (work outside the timed stream)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SIDE = []


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if not SIDE:
            SIDE.append(torch.cuda.Stream())
        y = torch.empty_like(x)
        with torch.cuda.stream(SIDE[0]):
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
