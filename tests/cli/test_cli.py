"""The CLI contract, exercised through the real console entry point in a subprocess."""

import json
from pathlib import Path

import pytest

from cuda_agent.examples import examples_root
from tests.helpers import run_cli as cli

EVAL_KEYS = {
    "compiled",
    "correct",
    "reward",
    "runtime_us",
    "eager_us",
    "compile_us",
    "speedup_eager",
    "speedup_compile",
    "flags",
    "error",
}


def test_problems_list_json() -> None:
    out = cli("problems", "list", "--json")
    assert out.returncode == 0, out.stderr
    problems = json.loads(out.stdout)
    assert len(problems) >= 12
    assert {"id", "level", "path"} <= set(problems[0])
    assert all(Path(p["path"]).is_file() for p in problems)


def test_problems_list_of_a_missing_path_is_one_line() -> None:
    out = cli("problems", "list", "--set", "/nonexistent/kb")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr


@pytest.mark.slow
def test_problems_check_good_and_bad(tmp_path: Path) -> None:
    good = cli("problems", "check", "relu")
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("ok: relu (level 1)")
    cases = {
        "syntax.py": ("class Model(\n", "syntax error at line 1"),
        "nomodel.py": (
            "def get_inputs(): return []\ndef get_init_inputs(): return []\n",
            "no top-level `class Model`",
        ),
        "notensors.py": (
            "import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x): return x\n"
            "def get_inputs(): return 3\ndef get_init_inputs(): return []\n",
            "get_inputs() returned int, not a list of tensors",
        ),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        out = cli("problems", "check", str(path))
        assert out.returncode == 2, name
        assert message in out.stderr, (name, out.stderr)
        assert "Traceback" not in out.stderr
    assert cli("problems", "check", str(tmp_path / "missing.py")).returncode == 2


@pytest.mark.slow
def test_eval_json_contract() -> None:
    solution = examples_root() / "relu" / "cpu.py"
    out = cli(
        "eval",
        "relu",
        str(solution),
        "--backend",
        "cpu",
        "--baselines",
        "eager",
        "--seed",
        "7",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # exactly one JSON object on stdout
    assert set(data) >= EVAL_KEYS
    assert data["correct"] is True and data["error"] is None
    assert data["details"]["seed"] == 7
    assert isinstance(data["runtime_us"], float) and data["compile_us"] is None


def test_eval_with_unusable_arguments_exits_2(tmp_path: Path) -> None:
    missing = cli("eval", "relu", str(tmp_path / "none.py"), "--backend", "cpu", "--json")
    assert missing.returncode == 2 and missing.stdout == ""
    assert "no such file" in missing.stderr
    bad_backend = cli("eval", "relu", str(tmp_path), "--backend", "tpu")
    assert bad_backend.returncode == 2 and "unknown backend" in bad_backend.stderr


@pytest.mark.slow
def test_workspace_init_then_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    out = cli("workspace", "init", "bias_gelu_scale", str(ws), "--backend", "cpu")
    assert out.returncode == 0, out.stderr
    # the starting model_new.py is the reference: correct but forbidden under `strict`
    verify = cli("tool", "verify", "--baselines", "eager", cwd=ws)
    assert verify.returncode == 1
    assert "forbidden" in verify.stdout or "torch compute ops" in verify.stdout
    example = examples_root() / "bias_gelu_scale" / "cpu"
    (ws / "model_new.py").write_text((example / "model_new.py").read_text())
    for kernel in (example / "kernels").iterdir():
        (ws / "kernels" / kernel.name).write_text(kernel.read_text())
    compiled = cli("tool", "compile", cwd=ws)
    assert compiled.returncode == 0 and compiled.stdout.startswith("compile: ok"), compiled.stdout
    verify = cli("tool", "verify", "--baselines", "eager", cwd=ws)
    assert verify.returncode == 0, verify.stdout
    assert "correctness: PASS (5/5 trials" in verify.stdout and "reward:" in verify.stdout


@pytest.mark.slow
def test_problems_lint_flags_a_degenerate_problem(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    body = (
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return {}\n"
        "def get_inputs():\n    return [torch.randn(4, 256)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    (folder / "fine.py").write_text(body.format("torch.relu(x)"))
    (folder / "tiny.py").write_text(body.format("torch.softmax(x.repeat(1, 400), dim=-1)"))
    out = cli("problems", "lint", "--set", str(folder), "--backend", "cpu", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["fine"]["lint"] == []
    assert "zeros_pass" in report["tiny"]["lint"]


@pytest.mark.slow
def test_problems_lint_resumes_from_its_report(tmp_path: Path) -> None:
    """--resume keeps the findings already in --out and checks only the problems missing
    from it or lost to device memory (a planted earlier report tells them apart)."""
    folder = tmp_path / "set"
    folder.mkdir()
    body = (
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n"
        "def get_inputs():\n    return [torch.randn(4, 256)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    for name in ("kept", "oom", "missing"):
        (folder / f"{name}.py").write_text(body)
    report_file = tmp_path / "lint.json"
    planted = {"ok": True, "lint": ["planted"], "error": None, "forward_ms": 1.0, "path": "x"}
    oom = {"ok": False, "lint": [], "error": "CUDA out of memory", "forward_ms": None, "path": "y"}
    report_file.write_text(json.dumps({"kept": planted, "oom": oom, "stranger": planted}))
    args = ("problems", "lint", "--set", str(folder), "--backend", "cpu", "--out")
    out = cli(*args, str(report_file), "--resume", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert sorted(report) == ["kept", "missing", "oom"]
    assert report["kept"]["lint"] == ["planted"]  # not checked again
    assert report["oom"]["ok"] is True and report["oom"]["error"] is None
    assert report["missing"]["ok"] is True and report["missing"]["lint"] == []
    assert json.loads(report_file.read_text()) == report
    assert "needs --out" in cli("problems", "lint", "--resume", "--backend", "cpu").stderr


def test_bench_run_jobs_per_gpu_must_be_usable(tmp_path: Path) -> None:
    common = ("bench", "run", "--out", str(tmp_path / "run"), "--solutions", str(tmp_path))
    zero = cli(*common, "--backend", "cpu", "--jobs-per-gpu", "0")
    assert zero.returncode == 2 and "--jobs-per-gpu" in zero.stderr
    with_ray = cli(*common, "--backend", "cpu", "--ray", "local", "--jobs-per-gpu", "2")
    assert with_ray.returncode == 2 and "not with --ray" in with_ray.stderr
    assert "Traceback" not in zero.stderr + with_ray.stderr
    assert not (tmp_path / "run").exists()
