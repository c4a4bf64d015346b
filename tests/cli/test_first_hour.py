"""Issue 36 ("no surprises in the first hour"): what a new user's first commands must do on
the cpu backend, run through the real console entry point in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuda_agent.examples import examples_root

RELU_CPU = str(examples_root() / "relu" / "cpu.py")
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")


def cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_exit_2(out: subprocess.CompletedProcess[str], needle: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert needle in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr


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
