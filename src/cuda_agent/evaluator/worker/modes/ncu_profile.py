"""The ``ncu_profile`` mode: run the candidate's forward a few times inside an NVTX range.

Started by the parent under Nsight Compute (``ncu --nvtx --nvtx-include candidate/``), so that
only the candidate's kernels are measured. No verification and no timing happen here; the
verdict always comes from a separate ``evaluate`` process.
"""

from __future__ import annotations

from pathlib import Path

import torch

from cuda_agent.core.records import NcuProfileRecord
from cuda_agent.evaluator.worker.candidate import CandidateFailure, built_candidate
from cuda_agent.evaluator.worker.device import make_device
from cuda_agent.evaluator.worker.policies import rules
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import ProblemFailure, build_reference
from cuda_agent.evaluator.worker.shim import BuildShim
from cuda_agent.evaluator.worker.tensors import clone_nested

NVTX_RANGE = "candidate"
PROFILED_CALLS = 2


def run(req: WorkerRequest, channel: ResultChannel) -> NcuProfileRecord:
    torch.set_grad_enabled(False)
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    try:
        ref = build_reference(req.problem_source, req.seed, device, 1, 0)
        root = Path(req.solution_root)
        shim = BuildShim(req.settings.backend, root, req.settings.build_timeout_s)
        shim.install()
        cand = built_candidate(req, ref, device, shim, rules(req.settings.policy))
        inputs = ref.verify_sets[0]
        cand(*clone_nested(inputs))  # warm-up outside the range
        device.synchronize()
        for _ in range(PROFILED_CALLS):
            args = clone_nested(inputs)
            torch.cuda.nvtx.range_push(NVTX_RANGE)
            cand(*args)
            device.synchronize()
            torch.cuda.nvtx.range_pop()
    except (ProblemFailure, CandidateFailure) as err:
        failed = NcuProfileRecord()
        failed.fail(getattr(err, "stage", "problem"), str(err))
        return failed
    return NcuProfileRecord(ok=True)
