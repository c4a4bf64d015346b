"""Named precision policies: the numeric switches pinned for reference, baselines and candidate.

The same policy is applied at the start of every worker process (candidate evaluation and the
torch.compile baseline alike), and ``guards.GlobalState`` flags a candidate that changes any
of these switches. The policy name is part of the baselines cache key.

* ``ieee`` (default): true fp32 everywhere; TF32 off for matmul and cuDNN, matmul precision
  ``highest``. A candidate may still use TF32 or fp16 *inside its own kernels* if results stay
  within tolerance, but it competes against a true-fp32 baseline on equal switches.
* ``tf32``: TF32 allowed for matmul and cuDNN in the baselines (matmul precision ``high``).
* ``torch-default``: torch's defaults (matmul TF32 off, cuDNN TF32 on), as the CUDA Agent
  release ran its baselines.
"""

from __future__ import annotations

import torch

from cuda_agent.evaluator.worker.policies import PRECISIONS


def apply_precision(name: str) -> None:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision policy {name!r} (choose from {', '.join(PRECISIONS)})")
    tf32 = name == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32 or name == "torch-default"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = False
    torch.use_deterministic_algorithms(False)
