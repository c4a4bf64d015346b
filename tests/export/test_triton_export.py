"""Triton solutions exported as packages: a single file and a Triton workdir, installed with pip
into a fresh virtual environment and run there without cuda_agent, eagerly and under
``torch.compile(fullgraph=True)``, on the cpu backend (Triton's interpreter).

Each run counts the Triton launches the interpreter made, so a package whose forward fell back
to anything but the exported kernels fails; the workdir's ``kernels`` modules must resolve to
the package's copy and leave no ``kernels`` name behind in ``sys.modules``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.problems.sets import resolve_problem
from cuda_agent.workspace.init import init_workspace
from tests.export.fresh_venv import make_venv, pip_install, run_json
from tests.helpers import run_cli
from tests.workspace.test_triton_workspace import KERNEL, MODEL_NEW

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
pytest.importorskip("triton")

HONEST = Path(__file__).parents[1] / "adversarial" / "fixtures" / "t_honest_relu.py"

CHECK = """
import importlib, json, os, sys
import torch
from triton.runtime.interpreter import InterpretedFunction

launches = []
original_run = InterpretedFunction.run

def counted_run(self, *args, **kwargs):
    launches.append(self.fn.__name__)
    return original_run(self, *args, **kwargs)

InterpretedFunction.run = counted_run
report = {"standalone": importlib.util.find_spec("cuda_agent") is None}
for name in NAMES:
    mod = importlib.import_module(name)
    ref, verified = mod.reference, mod.VERIFIED
    tol = verified["tolerance"]
    torch.manual_seed(0)
    model = mod.ModelNew(*ref.get_init_inputs())
    inputs = ref.get_inputs()
    expected = ref.Model(*ref.get_init_inputs())(*inputs)
    close = lambda out: bool(torch.allclose(out, expected, atol=tol["atol"], rtol=tol["rtol"]))
    before = len(launches)
    eager = close(model(*inputs))
    eager_launches = len(launches) - before
    compiled = close(torch.compile(model, fullgraph=True)(*inputs))  # a graph break raises
    report[name] = {
        "eager": eager,
        "compiled": compiled,
        "eager_launches": eager_launches,
        "compiled_launches": len(launches) - before - eager_launches,
        "kernels": sorted(set(launches)),
        "language": verified["language"],
        "interpret": os.environ.get("TRITON_INTERPRET"),
        "kernels_left": sorted(k for k in sys.modules if k.split(".")[0] == "kernels"),
    }
print(json.dumps(report))
"""


def export(solution: Path, out: Path, name: str, cwd: Path) -> str:
    options = ["--problem", "relu", "--out", str(out), "--name", name, "--backend", "cpu"]
    # no timing: what is checked is the package, not a speed, and the default timing of a
    # kernel under Triton's interpreter spent about 9 s of a core on each export
    options += ["--baselines", ""]
    done = run_cli("export", str(solution), *options, cwd=cwd, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_triton_solutions_export_install_and_run_eagerly_and_compiled(tmp_path: Path) -> None:
    single = export(HONEST, tmp_path / "single", "relu_triton", tmp_path)
    assert "relu_triton (problem relu): 7 size(s) verified" in single
    work = init_workspace(
        resolve_problem("relu", "small"), tmp_path / "w", "cpu", "relu", language="triton"
    )
    (work / "kernels" / "relu.py").write_text(KERNEL)
    (work / "model_new.py").write_text(MODEL_NEW)
    export(work, tmp_path / "workdir", "relu_triton_wd", tmp_path)

    pyproject = (tmp_path / "single" / "pyproject.toml").read_text()
    assert 'dependencies = ["torch", "triton"]' in pyproject
    assert "ext_modules" in (tmp_path / "single" / "setup.py").read_text()
    assert (tmp_path / "workdir" / "relu_triton_wd" / "kernels" / "relu.py").read_text() == KERNEL

    python = make_venv(tmp_path / "venv")
    pip_install(python, tmp_path / "single", cwd=tmp_path)
    pip_install(python, tmp_path / "workdir", cwd=tmp_path)
    names = ["relu_triton", "relu_triton_wd"]
    report = run_json(python, CHECK.replace("NAMES", json.dumps(names)), tmp_path)
    assert report["standalone"]  # cuda_agent is not importable there
    for name in names:
        got = report[name]
        assert got["eager"] and got["compiled"], got
        assert got["eager_launches"] == 1 and got["compiled_launches"] >= 1, got
        assert got["kernels"] == ["relu_kernel"] and got["language"] == "triton", got
        assert got["interpret"] == "1" and got["kernels_left"] == [], got
