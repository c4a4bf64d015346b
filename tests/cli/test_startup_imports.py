"""The command line starts without importing torch.

Importing torch costs 2-4 s; `cuda-agent eval` talking to a running `cuda-agent serve`, `--help`
and `--version` need none of it. Each check runs in a fresh interpreter, so what an earlier
test imported does not hide an import here.
"""

import subprocess
import sys

import pytest

MODULES = (
    "cuda_agent.cli.app",  # every command is registered here, so this covers their imports
    "cuda_agent.evaluator.pipeline",  # the parent side of an evaluation
    "cuda_agent.evaluator.service",  # the client of `cuda-agent serve`
)


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_without_torch(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "heavy = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print(len(heavy), heavy[:5])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("0 "), f"{module} imports torch: {proc.stdout.strip()}"
