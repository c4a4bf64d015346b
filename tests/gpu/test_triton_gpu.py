"""Triton candidates on the GPU: honest kernels (plain and autotuned) scored with speed-ups and
credited as the candidate's own in the kernel record under both policies that require one,
and the exploit families the interpreter cannot run (a side stream, the autotuner's
pre-hooks), with their verdicts under both policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
pytest.importorskip("triton")

FIXTURES = Path(__file__).parent / "triton_fixtures"
HONEST = Path(__file__).parents[1] / "adversarial" / "fixtures" / "t_honest_relu.py"
HONEST_AUTOTUNED = FIXTURES / "t_honest_autotuned_relu.py"
POLICIES = ("strict", "kernelbench")


def run(path: Path, **options: object):
    opts = EvalOptions(backend="cuda", **options).validate()  # type: ignore[arg-type]
    return evaluate(resolve_problem("relu", "standard"), load_solution(path), opts)


def test_an_honest_triton_kernel_is_scored_with_speed_ups() -> None:
    result = run(HONEST)
    assert result.correct and result.flags == [] and result.language == "triton", result.error
    assert result.reward >= 1 and result.speedup_eager and result.speedup_compile


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("path", [HONEST, HONEST_AUTOTUNED], ids=["plain", "autotuned"])
def test_an_honest_triton_kernel_is_credited_as_the_candidates(policy: str, path: Path) -> None:
    """Triton kernels live in no module of the candidate's that nm could read: the kernel
    record takes their names from the harness's launch hook. Before, every honest Triton
    solution was rejected under kernelbench as custom_kernels_idle (0 launches)."""
    result = run(path, baselines=("eager",), policy=policy)
    assert result.correct and result.flags == [], (result.flags, result.error)
    assert result.language == "triton" and result.reward >= 1 and result.speedup_eager
    kernels = result.record.kernels
    assert kernels["custom_kernels"] > 0 and kernels["coverage"] > 0.5, kernels
    assert any(row["custom"] and "relu_kernel" in row["name"] for row in kernels["table"])


def test_the_profile_table_marks_the_triton_kernel_as_the_candidates() -> None:
    result = run(HONEST_AUTOTUNED, baselines=("eager",), policy="kernelbench", profile=True)
    assert result.correct, (result.flags, result.error)
    table = result.shown_details()["profile"]["candidate"]["table"]
    assert any(row["custom"] and "relu_kernel" in row["name"] for row in table), table


@pytest.mark.parametrize("policy", POLICIES)
def test_a_kernel_on_a_side_stream_is_rejected(policy: str) -> None:
    result = run(FIXTURES / "t_side_stream.py", baselines=("eager",), policy=policy)
    assert not result.correct and "work_outside_timed_stream" in result.flags, result.flags


@pytest.mark.parametrize(
    ("policy", "flag"), [("strict", "forbidden_op:relu"), ("kernelbench", "custom_kernel_unused")]
)
def test_work_hidden_in_the_autotuners_pre_hook_is_rejected(policy: str, flag: str) -> None:
    result = run(FIXTURES / "t_autotune_hides_work.py", baselines=("eager",), policy=policy)
    assert not result.correct and flag in result.flags, (result.flags, result.error)


ADVERSARIAL = Path(__file__).parents[1] / "adversarial" / "fixtures"
MISMATCH = frozenset({"output_mismatch:value", "no_custom_kernel"})
# the red-team fixtures the cpu suite runs under Triton's interpreter, compiled here: the
# flags either policy must give (one of each set); crediting Triton kernels in the kernel
# record must not let any of them through
RED_TEAM: dict[str, dict[str, frozenset[str]]] = {
    "t_decoy_launch": {
        "strict": frozenset({"forbidden_op:relu"}),
        "kernelbench": frozenset({"custom_kernel_unused"}),
    },
    "t_cache_across_calls": dict.fromkeys(POLICIES, MISMATCH),
    "t_reads_outside_inputs": dict.fromkeys(POLICIES, MISMATCH),
    "t_patch_launch": dict.fromkeys(POLICIES, frozenset({"harness_patched:JITFunction.run"})),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", sorted(RED_TEAM))
def test_the_triton_red_team_keeps_its_verdicts(name: str, policy: str) -> None:
    result = run(ADVERSARIAL / f"{name}.py", baselines=("eager",), policy=policy)
    assert not result.correct and result.reward == -1.0
    assert RED_TEAM[name][policy] & set(result.flags), (result.flags, result.error)
