"""How the memory check names a wrong checked output (``evaluator/checks/memory_safety.py``):
wrong on the check's own seed and right, filled, on verification's inputs and weights is a wrong
kernel (``output_mismatch:check_seed``, L2_58 in docs/compat.md); wrong on both is a read of
memory never written (``memory_error:uninitialized``). The worker's side runs in the M fixtures
(tests/adversarial, on the cpu backend) and on the GPU (tests/gpu/test_memory_check_gpu.py)."""

from __future__ import annotations

from cuda_agent.bench.agreement import our_reason
from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.checks.memory_safety import MemoryCheck

MISMATCH = "max abs diff 0.32 at [0, 0, 3]"


def test_wrong_only_on_the_checks_own_seed_is_a_wrong_kernel() -> None:
    check = MemoryCheck(ran=True, output_ok=False, output_message=MISMATCH, verified_inputs_ok=True)
    assert check.flag == "output_mismatch:check_seed"
    assert "not a read of memory it never wrote" in check.message()
    assert MISMATCH in check.message()


def test_wrong_on_verifications_inputs_too_is_an_uninitialised_read() -> None:
    for second_look in (False, None):  # wrong there too, or an older answer without the look
        check = MemoryCheck(ran=True, output_ok=False, verified_inputs_ok=second_look)
        assert check.flag == "memory_error:uninitialized"
        assert "reads memory it never wrote" in check.message()
    assert MemoryCheck(ran=True, output_ok=True).flag is None


def test_the_agreement_table_names_the_new_flags() -> None:
    def verdict(flag: str, stage: str = "memory") -> EvalResult:
        result = EvalResult(problem_id="p", backend="cpu", flags=[flag])
        result.error = StageError(stage, "")
        return result

    assert our_reason(verdict("output_mismatch:check_seed")) == (
        "wrong on the memory check's own seed"
    )
    assert our_reason(verdict("memory_cap", "verify")) == "host memory cap"
    assert our_reason(verdict("host_oom", "verify")) == "killed by the host's OOM killer"
    assert our_reason(verdict("device_memory_contention", "internal")) == (
        "GPU memory held by other processes"
    )
