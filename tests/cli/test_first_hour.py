"""Issue 36 ("no surprises in the first hour"): what a new user's first commands must do on
the cpu backend, run through the real console entry point in a subprocess."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import bundled_root
from tests.helpers import assert_one_line_exit_2
from tests.helpers import run_cli as cli

RELU_CPU = str(examples_root() / "relu" / "cpu.py")
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")


@no_gpu
@pytest.mark.parametrize(
    "args",
    [
        ("eval", "relu", RELU_CPU, "--backend", "cuda", "--no-service"),
        ("eval", "relu", RELU_CPU, "--backend", "cuda", "--profile", "--no-service"),
        ("demo", "--backend", "cuda"),
        ("bench", "run", "--out", "{tmp}/bench", "--backend", "cuda"),
        ("solve", "relu", "--out", "{tmp}/solve", "--backend", "cuda", "--model", "m"),
        ("serve", "--backend", "cuda"),
    ],
    ids=["eval", "eval-profile", "demo", "bench-run", "solve", "serve"],
)
def test_cuda_backend_without_a_gpu_is_refused_at_once(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    out = cli(*(a.format(tmp=tmp_path) for a in args))
    assert_one_line_exit_2(out, "--backend cuda: no CUDA GPU is visible")
    assert not (tmp_path / "bench").exists()


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf"])
def test_eval_refuses_a_timeout_that_is_not_positive(value: str) -> None:
    out = cli("eval", "relu", RELU_CPU, "--backend", "cpu", "--timeout", value, "--no-service")
    assert_one_line_exit_2(out, "--timeout must be a number of seconds > 0")


RELU_FILE = str(bundled_root() / "level1" / "relu.py")


@pytest.mark.slow
def test_eval_of_a_bundled_problem_file_honours_size_small() -> None:
    out = cli(
        "eval", RELU_FILE, RELU_CPU, "--backend", "cpu", "--size", "small",
        "--baselines", "eager", "--no-memory-check", "--no-service", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["correct"] is True, result["error"]
    assert result["details"]["size"] == "small"
    assert result["problem_id"] == "relu"


@pytest.mark.slow
def test_a_worker_over_its_memory_cap_is_named_not_blamed_on_the_candidate() -> None:
    out = cli(
        "eval", "relu", RELU_CPU, "--backend", "cpu", "--size", "standard",
        "--baselines", "eager", "--no-memory-check", "--no-service", "--json",
        env={"CUDA_AGENT_WORKER_MEMORY_GB": "3"},
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert "memory_cap" in result["flags"] and "crashed" not in result["flags"]
    assert "worker exceeded its memory cap of 3 GiB" in result["error"]["message"]


@pytest.mark.slow
def test_eval_in_a_log_prints_its_stages() -> None:
    out = cli(
        "eval", "relu", RELU_CPU, "--backend", "cpu", "--baselines", "eager",
        "--no-memory-check", "--no-service",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == "eval: evaluating cpu.py on relu (cpu)"
    assert any(line.startswith("[eval ") and "verify" in line for line in lines), lines


BROKEN_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    raise ValueError("no inputs today")


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_text_report_of_a_failed_problem_says_what_is_known(tmp_path: Path) -> None:
    problem = tmp_path / "broken.py"
    problem.write_text(BROKEN_PROBLEM)
    out = cli(
        "eval", str(problem), RELU_CPU, "--backend", "cpu", "--baselines", "eager",
        "--no-memory-check", "--no-service",
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    rows = {line.strip("│ ").split("  ")[0]: line for line in out.stdout.splitlines()}
    assert "(?)" not in rows["backend"] and "cpu" in rows["backend"]
    assert "C++" in rows["language"] and "cuda" not in rows["language"]
    assert "- (stopped at problem)" in rows["compiled"]


def test_compile_in_a_fresh_cpp_workspace_does_not_mention_triton(tmp_path: Path) -> None:
    work = tmp_path / "w"
    assert cli("workspace", "init", "relu", str(work), "--backend", "cpu").returncode == 0
    out = cli("tool", "compile", cwd=work)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("compile: ok") and "Triton" not in out.stdout


@pytest.mark.slow
def test_demo_leaves_no_temporary_folder_behind(tmp_path: Path) -> None:
    out = cli("demo", "--backend", "cpu", env={"TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "files not kept" in out.stdout
    assert not list(tmp_path.glob("cuda-agent-demo-*"))
    # the panel shows a tool's runtime line whole, torch.compile figure included (it cut the
    # line at a fixed length, mid-word: "| torch.comp"); wrapped rows are joined back here
    text = " ".join(out.stdout.replace("│", " ").split())
    assert re.search(r"torch\.compile [\d.]+ us \([\d.]+x\)", text), out.stdout
    # which figure is the reward's is said, and that each figure is one measurement (the
    # final and best-verified speed-ups differed with nothing saying why)
    assert re.search(
        r"episode reward \(harness\): 1, from the (final|best verified) evaluation", text
    )
    assert "each figure is one measurement" in text
    # in a log, a line per turn as the agent works (there were only "still running" lines)
    turns = re.findall(r"^\[demo \d+m\d+s\] turn (\d+): (.+)$", out.stderr, re.M)
    assert ("1", "read_file SKILL.md") in turns, out.stderr
    assert any(call == "bash: cuda-agent tool verify" for _, call in turns), out.stderr


def test_problems_check_of_a_bundled_file_honours_size_small() -> None:
    out = cli("problems", "check", RELU_FILE, "--size", "small", "--backend", "cpu")
    assert out.returncode == 0, out.stderr
    assert "inputs [16, 1024] float32" in " ".join(out.stdout.split())


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("bench", "run", "--out", "{tmp}/b", "--backend", "cpu", "--workers", "0"), "--workers"),
        (("solve", "relu", "--out", "{tmp}/s", "--max-turns", "0"), "--max-turns"),
        (("solve", "relu", "--out", "{tmp}/s", "--wall-clock", "-5"), "--wall-clock"),
        (("serve", "--backend", "cpu", "--workers", "0"), "--workers"),
        (("problems", "lint", "--backend", "cpu", "--timeout", "-1"), "--timeout"),
    ],
    ids=["bench-workers", "solve-turns", "solve-wall-clock", "serve-workers", "lint-timeout"],
)
def test_numeric_options_must_be_positive(
    args: tuple[str, ...], option: str, tmp_path: Path
) -> None:
    out = cli(*(a.format(tmp=tmp_path) for a in args))
    assert_one_line_exit_2(out, f"{option} must be a number > 0")
    assert not list(tmp_path.iterdir())
