"""The curriculum's kernel rung: the model writes the whole kernel and its launch, the harness
owns the binding and ``ModelNew``; what became of each reply (format, build, wrong, pass) is
counted apart.

The fast tests check the prompt, the answer parsing, the mixed-task plan and the outcome
classes; the slow ones evaluate kernels for real on the cpu backend: a right one earns 1 or
more, one that reads past its input is rejected by the memory check (AddressSanitizer) though
its output is right, a wrong one is rejected at verify, a broken one at build, and a
``train grpo --task fill-in+kernel`` step logs the outcomes of its rollouts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.curriculum import POLICIES
from cuda_agent.rl.curriculum.problem_set import (
    CurriculumSpec,
    build_problem_set,
    read_split,
    row_spec,
)
from cuda_agent.rl.curriculum.scaffold import LAUNCH_SIGNATURES
from cuda_agent.rl.curriculum.tasks import (
    KERNEL_EXAMPLE_TORCH,
    OUTCOMES,
    Score,
    extract_kernel,
    messages,
    outcome,
    score_reply,
)
from cuda_agent.rl.recipe import RecipeError, load_config, plan
from tests.helpers import fast_options

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("curriculum") / "set"
    build_problem_set(folder, CurriculumSpec())
    return folder


def cpu_kernel(answer: str, bound: str = "i < n") -> str:
    """A reply with a C++ kernel computing ``answer`` (a C expression of ``x``)."""
    return (
        "Here it is:\n```cpp\n"
        'extern "C" void elementwise_launch(const float* in, float* y, int64_t n) {\n'
        f"  for (int64_t i = 0; {bound}; ++i) {{\n"
        f"    float x = in[i];\n    y[i] = {answer};\n  }}\n}}\n```\n"
    )


def test_the_kernel_prompt_states_the_contract_and_shows_another_op(curriculum: Path) -> None:
    row = read_split(curriculum, "train")[0]
    problem = resolve_problem(row_spec(curriculum, row))
    for backend in ("cpu", "cuda"):
        prompt = messages("kernel", problem, backend)
        assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
        assert LAUNCH_SIGNATURES[backend] in prompt[0]["content"]
        assert prompt[1]["content"] == f"y = {KERNEL_EXAMPLE_TORCH}"
        assert "elementwise_launch" in prompt[2]["content"]
        assert prompt[-1]["content"] == f"y = {row['torch_expr']}"
        assert row["answer"] not in json.dumps(prompt)
    assert "__global__" in messages("kernel", problem, "cuda")[2]["content"]
    assert POLICIES["kernel"] == "strict"


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        (cpu_kernel("x"), True),
        ("```cpp\nvoid f() {}\n```", False),  # no elementwise_launch
        ('extern "C" void elementwise_launch() {}', False),  # not in a fenced block
        ("", False),
        ("```cpp\n" + "// x\n" * 3000 + "elementwise_launch\n```", False),  # too long
    ],
)
def test_a_kernel_answer_is_the_last_fenced_block_defining_the_launch(
    reply: str, found: bool
) -> None:
    answer = extract_kernel(reply)
    assert (answer is not None) == found
    if answer is not None:
        assert answer.startswith('extern "C"') and answer.endswith("}\n")


def test_rungs_train_together_only_under_one_policy() -> None:
    both = plan("grpo", load_config("grpo", overrides=("curriculum.task=fill-in+kernel",)))
    assert both.engine_options["task"] == "fill-in+kernel"
    assert both.config["evaluation"]["policy"] == "strict"
    with pytest.raises(RecipeError, match="different policies"):
        plan("grpo", load_config("grpo", overrides=("curriculum.task=model-new+kernel",)))
    with pytest.raises(RecipeError, match="choose from"):
        plan("grpo", load_config("grpo", overrides=("curriculum.task=fill-in+nope",)))


def test_outcomes_name_what_became_of_a_reply() -> None:
    assert outcome(Score(-1.0, None, None)) == "format"
    assert OUTCOMES == ("format", "build", "wrong", "pass")


@pytest.mark.slow  # evaluations: builds, workers and AddressSanitizer
def test_kernels_are_scored_and_an_out_of_bounds_read_is_rejected(curriculum: Path) -> None:
    row = read_split(curriculum, "heldout")[0]
    spec = row_spec(curriculum, row)
    # the tests' short timing: what is checked is the reward's scale and the verdicts, not a
    # speed (the default timing spends up to 10 s of a core on each correct kernel here)
    options = fast_options(memory_check=True)
    right = score_reply("kernel", spec, cpu_kernel(row["answer"]), "cpu", options)
    assert right.reward >= 1.0 and outcome(right) == "pass"
    assert right.result is not None and right.result.flags == []
    past_the_end = score_reply("kernel", spec, cpu_kernel(row["answer"], "i <= n"), "cpu", options)
    assert past_the_end.reward == -1.0 and outcome(past_the_end) == "wrong"
    assert past_the_end.result is not None
    assert "memory_error:access" in past_the_end.result.flags
    fast = fast_options()
    wrong = score_reply("kernel", spec, cpu_kernel(f"({row['answer']}) + 0.5f"), "cpu", fast)
    assert wrong.reward == -1.0 and outcome(wrong) == "wrong"
    assert wrong.result is not None and wrong.result.error is not None
    assert wrong.result.error.stage == "verify"
    broken = score_reply("kernel", spec, cpu_kernel("x +"), "cpu", fast)
    assert broken.reward == -1.0 and outcome(broken) == "build"
    assert outcome(score_reply("kernel", spec, "I cannot.", "cpu", fast)) == "format"


@pytest.mark.slow  # one GRPO step of the tiny model with real evaluations
def test_train_grpo_on_two_rungs_logs_the_outcomes_of_its_rollouts(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "cuda_agent", "train", "grpo", "--model", "tiny",
        "--task", "fill-in+kernel", "--steps", "1", "--backend", "cpu",
        f"out={out}", "curriculum.num_generations=2", "curriculum.max_completion_length=16",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env=os.environ, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (step,) = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert sum(step["outcomes"].values()) == len(step["rewards"]) == 2
    assert set(step["outcomes"]) <= set(OUTCOMES)
    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert {r["task"] for r in rows} <= {"fill-in", "kernel"} and len(rows) == 2
    assert all(r["outcome"] in OUTCOMES for r in rows)
