"""Run-time builds end to end (cpu backend, real worker processes).

``load_inline`` / ``load`` called in ``__init__`` or ``forward`` with sources the static pass
cannot resolve go through the worker's shim: the same builder and cache, and a failure anywhere
gives stage ``build`` with the same text a build before the worker gives.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import cuda_agent
from cuda_agent.core import secret
from cuda_agent.core.paths import baselines_dir, builds_dir, ensure_dir
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.confine import landlock_abi
from cuda_agent.workspace.isolation import ISOLATION_ENV, bwrap_usable
from tests.helpers import TEST_OPS_CPP, TEST_OPS_FUNCTIONS, fast_options

pytestmark = pytest.mark.slow

HEADER = """
import os
import tempfile
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load, load_inline

BROKEN = "float twice(float x) {\\n  return x * missing_factor;\\n}\\n"
PARTS = (BROKEN,)  # a subscript: the static pass cannot resolve PARTS[0]
"""


def solution(tmp_path: Path, name: str, body: str, prelude: str = "") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + prelude + textwrap.dedent(body))
    return path


TEST_OPS = f"SOURCE = r'''{TEST_OPS_CPP}'''\nFUNCTIONS = {tuple(TEST_OPS_FUNCTIONS)!r}\n"


def run(path: Path, **options: object) -> EvalResult:
    return evaluate(resolve_problem("relu", "small"), load_solution(path), fast_options(**options))


def test_a_failed_build_reads_the_same_at_import_in_init_and_in_forward(tmp_path: Path) -> None:
    at_import = solution(
        tmp_path,
        "at_import",
        """
        ext = load_inline("ca_rt_broken", BROKEN, functions=["twice"], no_implicit_headers=True)

        class ModelNew(nn.Module):
            def forward(self, x):
                return ext.twice(x)
        """,
    )
    in_init = solution(
        tmp_path,
        "in_init",
        """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.ext = load_inline(
                    "ca_rt_broken", PARTS[0], functions=["twice"], no_implicit_headers=True
                )

            def forward(self, x):
                return self.ext.twice(x)
        """,
    )
    in_forward = solution(
        tmp_path,
        "in_forward",
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                ext = load_inline(
                    "ca_rt_broken", PARTS[0], functions=["twice"], no_implicit_headers=True
                )
                return ext.twice(x)
        """,
    )
    results = [run(p) for p in (at_import, in_init, in_forward)]
    for result in results:
        assert result.error is not None and result.error.stage == "build", result.error
        assert (result.compiled, result.reward, result.flags) == (False, -1.0, ["build_failed"])
    first = results[0].error
    assert first is not None
    assert "cpp_sources:2:" in first.message and "missing_factor" in first.message
    assert "CandidateBuildFailed" not in first.message and "ModelNew(" not in first.message
    assert {r.error.message for r in results if r.error} == {first.message}
    assert results[0].record is None  # no try: no worker was needed
    assert results[1].record is not None


def test_a_prebuilt_failure_the_solution_may_catch_is_not_compiled_twice(tmp_path: Path) -> None:
    path = solution(
        tmp_path,
        "reraise",
        """
        try:
            ext = load_inline("ca_rt_broken", BROKEN, functions=["twice"], no_implicit_headers=True)
        except RuntimeError as err:
            raise ImportError("no kernel") from err

        class ModelNew(nn.Module):
            def forward(self, x):
                return ext.twice(x)
        """,
    )
    result = run(path)
    assert result.error is not None and result.error.stage == "build"
    assert "missing_factor" in result.error.message
    assert result.record is not None  # the worker ran (the code has a try)
    assert len(result.builds) == 1  # and the shim did not compile it again


def test_a_lazy_build_in_forward_runs_and_counts_as_custom_code(tmp_path: Path) -> None:
    path = solution(
        tmp_path,
        "lazy",
        """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.ext = None

            def forward(self, x):
                if self.ext is None:
                    self.ext = load_inline("ca_test_ops", [SOURCE][0], functions=list(FUNCTIONS))
                return self.ext.relu_ok(x)
        """,
        prelude=TEST_OPS,
    )
    result = run(path)
    assert result.correct and result.flags == [], (result.error, result.flags)
    assert result.record.custom_calls_per_forward >= 1
    assert any(b["module"] == "ca_test_ops" for b in result.builds)


@pytest.fixture
def cold_shared_builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache of this test's own under the system's temporary folder, whose ``builds/``
    exists and is empty (the worker sees it read-only, so it builds into its private folder,
    precompiled headers included) and whose baselines and signing key are the session's.
    Under bubblewrap the compile sandbox replaces ``/tmp``: a header built in the worker's
    private folder there must still be visible to the compiler that includes it."""
    secret.key()  # the session's key exists before it is linked to
    shared = {"baselines": ensure_dir(baselines_dir()), "secret": secret.secret_dir()}
    root = ensure_dir(Path(tempfile.mkdtemp(prefix="ca-cold-builds-", dir="/tmp")))
    for name, target in shared.items():
        (root / name).symlink_to(target, target_is_directory=True)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(root))
    ensure_dir(builds_dir())
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("mode", ["bwrap", "confine"])
def test_load_builds_sources_written_to_the_private_temporary_folder(
    mode: str, tmp_path: Path, cold_shared_builds: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under each isolation, since the worker's view of the caches differs: bubblewrap replaces
    ``/tmp`` for the worker and again for its compiler."""
    if mode == "bwrap" and not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    if mode == "confine" and landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel")
    monkeypatch.setenv(ISOLATION_ENV, mode)
    path = solution(
        tmp_path,
        "tmp_load",
        """
        SOURCE = (
            "#include <pybind11/pybind11.h>\\n"
            "static int answer() { return 42; }\\n"
            "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\\"answer\\", &answer); }\\n"
        )

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                folder = tempfile.mkdtemp()
                with open(os.path.join(folder, "answer.cpp"), "w") as handle:
                    handle.write(SOURCE)
                self.ext = load("ca_tmp_answer", [os.path.join(folder, "answer.cpp")])

            def forward(self, x):
                assert self.ext.answer() == 42
                return torch.relu(x)
        """,
    )
    # torch's relu is fine under off (the point is the build); a cold compile in the worker
    result = run(path, policy="off", worker_timeout_s=600.0)
    assert result.correct and result.flags == [], (result.error, result.flags)
    assert any(b["module"] == "ca_tmp_answer" and b["ok"] for b in result.builds)
    assert result.record.custom_calls_per_forward >= 1


def test_load_refuses_sources_outside_the_solution_and_its_temporary_folder(
    tmp_path: Path,
) -> None:
    outside = Path(cuda_agent.__file__).parent / "workspace" / "template" / "binding.cpp"
    assert outside.is_file()  # visible to the worker, sandboxed or not
    path = solution(
        tmp_path,
        "outside",
        f"""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.ext = load("ca_outside", [{str(outside)!r}])

            def forward(self, x):
                return self.ext.f(x)
        """,
    )
    result = run(path)
    assert result.error is not None and result.error.stage == "build"
    assert "outside the solution folder or its temporary folder" in result.error.message


@pytest.mark.parametrize("mode", ["bwrap", "confine"])
def test_a_run_time_build_works_under_each_isolation(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is confined, and its run-time build confines the compiler again. On the H200
    (Landlock, no bubblewrap) the nested layer once granted nothing: every compiler failed with
    EACCES and every run-time-building solution fell back to PyTorch."""
    if mode == "bwrap" and not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    if mode == "confine" and landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel")
    monkeypatch.setenv(ISOLATION_ENV, mode)
    path = solution(
        tmp_path,
        "in_init",
        """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.ext = load_inline("ca_test_ops", [SOURCE][0], functions=list(FUNCTIONS))

            def forward(self, x):
                return self.ext.relu_ok(x)
        """,
        prelude=TEST_OPS + f"SOURCE += '// {secrets.token_hex(8)}\\n'\n",  # compiled now
    )
    result = run(path)
    assert result.details.isolation != "none"
    assert result.correct and result.flags == [], (result.error, result.flags)
    assert any(b["module"] == "ca_test_ops" for b in result.builds)


def test_sources_local_to_init_are_built_ahead_and_the_worker_finds_them(tmp_path: Path) -> None:
    """A source string kept inside ``__init__`` is built before the worker starts (where builds
    run in parallel); the worker's own call then finds it in the cache. A local call that fails
    to build and never runs does not reject the solution."""
    token = secrets.token_hex(8)
    path = solution(
        tmp_path,
        "local_sources",
        f"""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                source = SOURCE + "// {token}\\n"
                self.ext = load_inline("ca_test_ops", source, functions=FUNCTIONS)

            def never_called(self):
                text = "int broken( {{ }}\\n"
                return load_inline("ca_never", text, functions=["broken"])

            def forward(self, x):
                return self.ext.relu_ok(x)
        """,
        prelude=TEST_OPS,
    )
    result = run(path)
    assert result.correct and result.flags == [], (result.error, result.flags)
    ahead = [b for b in result.builds if b.get("ahead")]
    assert {b["module"]: b["ok"] for b in ahead} == {"ca_test_ops": True, "ca_never": False}
    in_worker = [b for b in result.builds if not b.get("ahead")]
    assert in_worker and all(b["cached"] for b in in_worker if b["module"] == "ca_test_ops")
