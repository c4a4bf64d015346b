"""Memory safety of a correct candidate: one forward under a memory checker, in its own process.

A kernel that reads a few elements past the end of its input usually gives the right output
(the bytes past a tensor's end belong to the caching allocator's block, or to another tensor),
so verification alone credits it; on another allocation pattern it reads garbage or faults
("an illegal memory access"), and an RL policy will find such kernels. So every candidate that
verification found correct runs once more, in a ``memory_check`` worker
(``worker/modes/memory_check.py``) started under a checker:

* cuda: ``compute-sanitizer --tool memcheck`` (out-of-bounds and misaligned accesses to global,
  shared and local memory, invalid frees, device-side hardware exceptions), with torch's
  caching allocator turned off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``) so that each tensor is an
  allocation of its own, followed by 4 KiB of padding that no access may touch. Only the
  candidate's own kernels are instrumented: the checker's kernel filter names the device names
  of the kernels its compiled modules register (``worker/kernel_symbols.py``, read here from
  the modules the parent built and by the worker from those it built at run time) and of the
  Triton kernels the harness launched for it. The vendor libraries' kernels (cuDNN's
  convolutions, cuBLAS's GEMMs) and the reference's run at full speed: instrumented, they took
  20-190 s per check. Without the names (no ``nm``, an unreadable module) every kernel is
  checked, as before;
* cpu: AddressSanitizer (the candidate's extensions built again with ``-O1 -fsanitize=address``,
  the runtime preloaded into the worker): reads and writes past a heap buffer (a tensor's
  storage: torch allocates it with ``posix_memalign``, which ASan intercepts), use after
  free. Only the candidate's own C++ code is instrumented. Where workers are forked from a
  template (``confine``, ``none``), the worker is forked from one started under ASan, which
  has imported torch once (``launch/asan.py``); its reports go to its own folder all the same.

Both runs also fill what ``empty``-family allocations return (NaN) and compare the output with
the reference's: a kernel that reads memory it never wrote fails there (``memory_error:
uninitialized``). What is not seen here: an access that lands inside another live allocation
(past the padding), uninitialised reads of memory the candidate allocates outside torch
(``cudaMalloc``, ``malloc``), kernels loaded at run time by other means than a compiled module
or Triton (the driver API, NVRTC), a torch kernel the candidate hands a tensor over memory it
does not own, data races, and a kernel that behaves differently when it detects the checker.
The evaluation's guarded trial (``worker/red_zones.py``) sees some of these where they reach
the output. docs/evaluation.md ("Memory check") has the table of what each layer catches.

A complete check's answer is cached by solution, problem and device
(``memory_check_cache.py``): a repeated answer costs nothing. Its seconds, and the checked
worker's own phases, are in ``details.memory_check``.

A finding is a failing verdict at stage ``memory`` with flag ``memory_error:access`` or
``memory_error:uninitialized``, or ``output_mismatch:check_seed`` when the checked output was
wrong on the check's own seed but right (filled) on verification's; a checker that is
missing, a run that does not finish in its time or cannot start is a note
(``memory_check_incomplete``), never a rejection.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.core.records import MemoryCheckRecord
from cuda_agent.core.types import Problem, Solution, SolutionKind
from cuda_agent.evaluator.builder.builder import build_extension
from cuda_agent.evaluator.builder.inline import inline_spec, workdir_spec
from cuda_agent.evaluator.builder.spec import FlagError, with_address_sanitizer
from cuda_agent.evaluator.checks.memory_check_cache import CheckKey, cached_answer, keep_answer
from cuda_agent.evaluator.checks.memory_reports import parse_asan, parse_memcheck, read_reports
from cuda_agent.evaluator.launch.asan import AsanRun
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.launch.worker_process import WorkerOutcome, run_worker
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.worker.memory_flags import (
    FLAG_ACCESS,
    FLAG_UNINITIALIZED,
    FLAG_WRONG_ON_CHECK_SEED,
)
from cuda_agent.solutions.static import analyse
from cuda_agent.workspace.template_files import harness_binding_files

NOTE_INCOMPLETE = "memory_check_incomplete"
MEMCHECK_PADDING_BYTES = 4096  # an access up to this far past an allocation is seen
ASAN_HEAP_MB = 16 * 1024  # the checked cpu worker's heap (its address space is not limited)
SANITIZER_CANDIDATES = (
    "/usr/local/cuda/bin/compute-sanitizer",
    "/opt/nvidia/compute-sanitizer/compute-sanitizer",
)
EVERY_KERNEL = "every kernel"
CANDIDATE_CODE = "the candidate's C++ code"
_ANSWER_FIELDS = (
    "tool",
    "scope",
    "errors",
    "findings",
    "output_ok",
    "output_message",
    "verified_inputs_ok",
)


@dataclass
class MemoryCheck:
    """What the memory check found (``details.memory_check``)."""

    tool: str = ""
    ran: bool = False
    seconds: float = 0.0
    errors: int = 0  # access errors the checker reported
    findings: list[str] = field(default_factory=list)  # the first few, one line each
    output_ok: bool | None = None  # the output with uninitialised memory filled
    output_message: str = ""
    # a wrong output's second look: the fill on, on verification's inputs and weights (None:
    # not looked); True: the check's own seed found a wrong kernel, not an uninitialised read
    verified_inputs_ok: bool | None = None
    incomplete: str | None = None  # why the check could not give an answer
    scope: str = ""  # what was instrumented: "own kernels (N names)", every kernel, C++ code
    cached: bool = False  # the answer of an earlier check of the same solution and problem
    phases_s: dict[str, float] = field(default_factory=dict)  # the checked worker's phases
    # how the checked worker started: "template" (forked from one), "process" (a process of
    # its own); "" where no worker ran
    started: str = ""

    @property
    def flag(self) -> str | None:
        if self.errors:
            return FLAG_ACCESS
        if self.output_ok is False:
            return FLAG_WRONG_ON_CHECK_SEED if self.verified_inputs_ok else FLAG_UNINITIALIZED
        return None

    def message(self) -> str:
        if self.errors:
            found = "; ".join(self.findings) or "no details"
            return (
                f"{self.tool} found {self.errors} invalid memory access(es) in one forward of "
                f"ModelNew (its output was right, but a kernel reads or writes outside its "
                f"buffers): {found}"
            )
        if self.verified_inputs_ok:
            return (
                "on the memory check's own weights and inputs (a seed verification never used) "
                f"ModelNew's output is wrong ({self.output_message}), while on verification's "
                "it is still right with uninitialised memory filled: the kernel computes the "
                "wrong thing for these values (its output matched only where verification's "
                "values hid the difference), not a read of memory it never wrote"
            )
        return (
            "in the checked run (the memory that allocations return uninitialised filled with "
            "NaN, each tensor an allocation of its own), ModelNew's output no longer matches "
            f"({self.output_message}), also on the inputs and weights verification used: a "
            "kernel reads memory it never wrote (an output buffer from empty/empty_like "
            "accumulated into, say), or its result depends on where its buffers lie"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_compute_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    return next((c for c in SANITIZER_CANDIDATES if Path(c).exists()), None)


@functools.cache
def find_asan_runtime() -> str | None:
    """The AddressSanitizer runtime of the C++ compiler extensions are built with (asked of
    the compiler once per process)."""
    for compiler in (os.environ.get("CXX"), "g++", "c++"):
        if not compiler or shutil.which(compiler) is None:
            continue
        done = subprocess.run(
            [compiler, "-print-file-name=libasan.so"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        path = done.stdout.strip()
        if done.returncode == 0 and os.path.isabs(path) and Path(path).exists():
            return path
    return None


def sanitizer_command(tool: str, log: Path, kernel_names: list[str] | None) -> list[str]:
    """compute-sanitizer's memcheck command line; ``kernel_names``: the device names of the
    only kernels to instrument (None or empty: every kernel)."""
    command = [
        tool,
        "--tool",
        "memcheck",
        "--leak-check",
        "no",
        "--report-api-errors",
        "no",
        "--print-limit",
        "20",
        # guard bytes after every allocation: the driver packs small cudaMallocs next to
        # each other, so a read just past one tensor would land in the next one unseen
        "--padding",
        str(MEMCHECK_PADDING_BYTES),
        "--target-processes",
        "all",
        "--log-file",
        str(log),
    ]
    for name in kernel_names or ():
        command += ["--kernel-name", f"kne={name}"]
    return command


@dataclass(frozen=True)
class CheckInputs:
    """What one memory check runs (``check_memory``): the candidate, its problem, options and
    seed, the worker's folder, environment and device lock, and the candidate's build.

    ``kernel_names``: on cuda, the device names of the candidate's own kernels, the only ones
    instrumented (None: every kernel). ``cancel``: set it to stop the check (its worker is
    killed; the check is then incomplete).
    """

    problem: Problem
    solution: Solution
    opts: EvalOptions
    seed: int
    scratch: Path
    env: dict[str, str]
    device_lock: str = ""
    language: str | None = None
    prebuilt: str | None = None
    kernel_names: list[str] | None = None
    cancel: threading.Event | None = None


def check_memory(inputs: CheckInputs, device: dict[str, Any] | None = None) -> MemoryCheck:
    """Run one forward of the candidate under the backend's memory checker.

    ``device``: the device's identity (the worker's ``device`` record), which keys the cached
    answer (None: no cache).
    """
    started = time.monotonic()
    opts = inputs.opts
    tool = find_compute_sanitizer() if opts.backend == "cuda" else find_asan_runtime()
    key = None
    if tool is not None and device is not None and opts.use_memory_check_cache:
        key = CheckKey(
            inputs.problem,
            inputs.solution,
            opts.backend,
            device,
            opts.policy,
            opts.precision,
            opts.atol,
            opts.rtol,
            tool,
        )
        answer = cached_answer(key)
        if answer is not None:
            fields = {k: answer[k] for k in _ANSWER_FIELDS if k in answer}
            return MemoryCheck(**fields, ran=True, cached=True)
    check = _run_check(inputs, tool)
    check.seconds = round(time.monotonic() - started, 3)
    if key is not None and check.ran and check.incomplete is None:
        keep_answer(key, {k: getattr(check, k) for k in _ANSWER_FIELDS})
    return check


def _run_check(inputs: CheckInputs, tool: str | None) -> MemoryCheck:
    """The check itself; ``tool``: compute-sanitizer on cuda, the ASan runtime on cpu (None:
    not found here)."""
    opts, solution, scratch = inputs.opts, inputs.solution, inputs.scratch
    prebuilt, kernel_names = inputs.prebuilt, inputs.kernel_names
    scratch.mkdir(parents=True, exist_ok=True)
    if opts.backend == "cuda":
        scope = f"own kernels ({len(kernel_names)} names)" if kernel_names else EVERY_KERNEL
        check = MemoryCheck(tool="compute-sanitizer memcheck", scope=scope)
        if tool is None:
            check.incomplete = "compute-sanitizer not found"
            return check
        log = scratch / "memcheck.log"
        prefix: list[str] | None = sanitizer_command(tool, log, kernel_names)
        extra = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
        sanitizer, asan = "", None
    else:
        check = MemoryCheck(tool="AddressSanitizer", scope=CANDIDATE_CODE)
        if tool is None:
            check.incomplete = "the compiler's AddressSanitizer runtime (libasan) not found"
            return check
        log = scratch / "asan"
        # ASan reserves terabytes of shadow address space, so the worker's address-space
        # limit is lifted; ASan's own allocator limit bounds the heap instead
        options = f"detect_leaks=0:halt_on_error=1:malloc_limit_mb={ASAN_HEAP_MB}"
        asan = AsanRun(tool, options, log)  # the runtime, the options, ``log.<pid>`` reports
        prefix, extra, sanitizer = None, {}, "address"
        began = time.monotonic()
        prebuilt, failure = _sanitized_builds(solution, opts, prebuilt)
        check.phases_s["asan_build"] = round(time.monotonic() - began, 3)
        if failure:
            check.incomplete = f"the AddressSanitizer build failed: {failure}"
            return check
    request = worker_request(
        "memory_check",
        opts,
        inputs.problem,
        inputs.seed,
        solution_kind=solution.kind.value,
        solution_entry=solution.entry_file,
        prebuilt_module=prebuilt,
        lock_path=inputs.device_lock,
        uses_triton="triton" in (inputs.language or ""),
        sanitizer=sanitizer,
    )
    began = time.monotonic()
    outcome = run_worker(
        request,
        timeout_s=opts.memory_check_timeout_s,
        scratch=scratch,  # the worker's own folder: the checker's log is written there
        env={**inputs.env, **extra},
        prefix=prefix,
        files=solution.files,
        sandboxed=opts.sandbox,
        allow_unsandboxed=opts.allow_unsandboxed,
        address_space_limit=opts.backend == "cuda",
        cancel=inputs.cancel,
        asan=asan,
    )
    check.started = "template" if outcome.forked else "process"
    report = read_reports(log, opts.backend)
    if opts.backend == "cuda":
        check.errors, check.findings = parse_memcheck(report)
    else:
        check.errors, check.findings = parse_asan(report)
    check.ran = True
    _absorb(check, outcome)
    # the worker's start (under the checker: imports, the CUDA context) is what its own
    # phases do not cover
    ran = round(time.monotonic() - began, 3)
    check.phases_s["start"] = round(max(0.0, ran - sum(_outcome_phases(outcome).values())), 3)
    return check


def _outcome_phases(outcome: WorkerOutcome) -> dict[str, float]:
    record = outcome.record_of(MemoryCheckRecord)
    return dict(record.phases_s) if record is not None else {}


def _absorb(check: MemoryCheck, outcome: WorkerOutcome) -> None:
    """The worker's answer (or how it ended) into ``check``."""
    record = outcome.record_of(MemoryCheckRecord)
    check.phases_s.update(_outcome_phases(outcome))
    if check.errors:
        return  # the checker's report is the answer, however the worker ended
    if outcome.cancelled:
        check.incomplete = "stopped: the verdict no longer needed it"
        return
    if record is None:
        reason = outcome.death_reason()
        if outcome.timed_out:
            reason += f" (limit {outcome.seconds:.0f} s)"
        tail = " | ".join(outcome.stderr_tail.strip().splitlines()[-3:])
        check.incomplete = f"the checked run {reason}" + (f": {tail}" if tail else "")
        return
    if record.error is not None or not record.ok:
        stage = record.error.stage if record.error is not None else "memory"
        check.incomplete = f"the checked run stopped at {stage}: " + record.message[:500]
        return
    check.output_ok = bool(record.output_ok)
    check.output_message = record.output_message
    check.verified_inputs_ok = record.verified_inputs_ok


def _sanitized_builds(
    solution: Solution, opts: EvalOptions, prebuilt: str | None
) -> tuple[str | None, str]:
    """Build the AddressSanitizer variants here, into the shared cache (a sandboxed worker
    could only build them into its own folder, again for every check): the workdir's
    extension (its path replaces ``prebuilt``; an error stops the check), or the ``load_inline``
    calls the static pass resolved (the worker's shim then finds them built; a failure here is
    left to the worker's own build, which reports it). (module path, error)."""
    if solution.kind is SolutionKind.WORKDIR:
        if not prebuilt:
            return None, ""
        kernels = {k: v for k, v in solution.files.items() if k.startswith("kernels/")}
        spec = with_address_sanitizer(workdir_spec(opts.backend, kernels, harness_binding_files()))
        build = build_extension(spec, timeout_s=opts.build_timeout_s)
        if not build.ok or build.module_path is None:
            return None, (build.error or "build failed")[:500]
        return str(build.module_path), ""
    report = analyse(solution.files[solution.entry_file], solution.entry_file)
    for kwargs in [*report.inline_calls, *report.local_inline_calls]:
        try:
            spec = with_address_sanitizer(inline_spec(opts.backend, **kwargs))
        except (FlagError, TypeError):
            continue
        build_extension(spec, timeout_s=opts.build_timeout_s)
    return prebuilt, ""
