"""A fresh virtual environment for installing exported packages (real pip, real builds).

The environment sees the system's site-packages (``--system-site-packages``) and, when torch
lives in another environment (the project's own ``.venv``), that environment's site-packages
through a ``.pth`` line, so torch, setuptools and pip are there without installing anything.
That line adds the folder to ``sys.path`` without running its ``.pth`` files, so an editable
install of cuda_agent stays out of reach: the exported package must work without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any


def make_venv(folder: Path) -> Path:
    """Create the environment; its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
        check=True,
    )
    python = folder / "bin" / "python"
    site = run_python(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site.strip()) / "parent_site.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(MAX_JOBS="2", **extra)
    return env


def pip_install(python: Path, project: Path, cwd: Path) -> None:
    """``pip install --no-build-isolation`` with nothing fetched (no index, no dependencies)."""
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            str(project),
        ],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def run_python(python: Path, code: str, cwd: Path | None = None, **env: str) -> str:
    proc = subprocess.run(
        [str(python), "-c", code],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def run_json(python: Path, code: str, cwd: Path, **env: str) -> dict[str, Any]:
    """Run ``code`` (which prints one JSON object as its last line) in the environment."""
    return dict(json.loads(run_python(python, code, cwd, **env).strip().splitlines()[-1]))
