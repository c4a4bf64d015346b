"""Triton (GPU): launch the kernel on a side stream and return before it finishes, so the
timed stream measures nothing. Required: rejected (work outside the timed stream).

The side stream waits for the launch stream first, so the kernel reads finished inputs and
its output is right once the device is synchronized (as verification does): only the timing
is cheated. Without that wait the kernel can read an input still being copied, and the
verdict is an output mismatch instead, which would not show the stream check at work."""

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
        SIDE[0].wait_stream(torch.cuda.current_stream())  # inputs ready; no join afterwards
        with torch.cuda.stream(SIDE[0]):
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
