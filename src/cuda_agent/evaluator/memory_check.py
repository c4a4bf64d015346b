"""Memory safety of a correct candidate: one forward under a memory checker, in its own process.

A kernel that reads a few elements past the end of its input usually gives the right output
(the bytes past a tensor's end belong to the caching allocator's block, or to another tensor),
so verification alone credits it; on another allocation pattern it reads garbage or faults
("an illegal memory access"), and an RL policy will find such kernels. So every candidate that
verification and timing found correct runs once more, in a ``memory_check`` worker
(``worker/memory_check.py``) started under a checker:

* cuda: ``compute-sanitizer --tool memcheck`` (out-of-bounds and misaligned accesses to global,
  shared and local memory, invalid frees, device-side hardware exceptions), with torch's
  caching allocator turned off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``) so that each tensor is an
  allocation of its own and memcheck knows its exact end;
* cpu: AddressSanitizer (the candidate's extensions built again with ``-fsanitize=address``,
  the runtime preloaded into the worker): reads and writes past a heap buffer (a tensor's
  storage: torch allocates it with ``posix_memalign``, which ASan intercepts), use after
  free. Only the candidate's own C++ code is instrumented.

Both runs also fill what ``empty``-family allocations return (NaN) and compare the output with
the reference's: a kernel that reads memory it never wrote fails there (``memory_error:
uninitialized``). What is not seen: an access that lands inside another live allocation (past
the redzone), uninitialised reads of memory the candidate allocates outside torch
(``cudaMalloc``, ``malloc``), data races, and a kernel that behaves differently when it
detects the checker. The check costs one more worker start and one slow forward; its seconds
are in ``details.memory_check``.

A finding is a failing verdict at stage ``memory`` with flag ``memory_error:access`` or
``memory_error:uninitialized``; a checker that is missing, a run that does not finish in its
time or cannot start is a note (``memory_check_incomplete``), never a rejection.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.core.records import MemoryCheckRecord
from cuda_agent.core.types import Problem, Solution, SolutionKind
from cuda_agent.evaluator.builder.builder import build_extension
from cuda_agent.evaluator.builder.inline import inline_spec, workdir_spec
from cuda_agent.evaluator.builder.spec import FlagError, with_address_sanitizer
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.requests import worker_request
from cuda_agent.evaluator.worker_process import WorkerOutcome, run_worker
from cuda_agent.solutions.static import analyse
from cuda_agent.workspace.template_files import harness_binding_files

FLAG_ACCESS = "memory_error:access"
FLAG_UNINITIALIZED = "memory_error:uninitialized"
NOTE_INCOMPLETE = "memory_check_incomplete"
MAX_FINDINGS = 3
MEMCHECK_PADDING_BYTES = 4096  # an access up to this far past an allocation is seen
ASAN_HEAP_MB = 16 * 1024  # the checked cpu worker's heap (its address space is not limited)
SANITIZER_CANDIDATES = (
    "/usr/local/cuda/bin/compute-sanitizer",
    "/opt/nvidia/compute-sanitizer/compute-sanitizer",
)
_SANITIZER_RECORD = re.compile(r"^=+ (?! )(.*)$")
_PATH = re.compile(r"/(?:[^\s/()]+/)+([^\s/()]+)")  # a path: its last part is enough
_SANITIZER_SUMMARY = re.compile(r"ERROR SUMMARY: ([\d,]+) error")
_SANITIZER_NOISE = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "Saved host backtrace",
    "Target application returned",
    "This application",
    "Note:",
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
    incomplete: str | None = None  # why the check could not give an answer

    @property
    def flag(self) -> str | None:
        if self.errors:
            return FLAG_ACCESS
        if self.output_ok is False:
            return FLAG_UNINITIALIZED
        return None

    def message(self) -> str:
        if self.errors:
            found = "; ".join(self.findings) or "no details"
            return (
                f"{self.tool} found {self.errors} invalid memory access(es) in one forward of "
                f"ModelNew (its output was right, but a kernel reads or writes outside its "
                f"buffers): {found}"
            )
        return (
            "in the checked run (the memory that allocations return uninitialised filled with "
            "NaN, each tensor an allocation of its own), ModelNew's output no longer matches "
            f"({self.output_message}): a kernel reads memory it never wrote (an output buffer "
            "from empty/empty_like accumulated into, say), or its result depends on where its "
            "buffers lie"
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


def check_memory(
    problem: Problem,
    solution: Solution,
    opts: EvalOptions,
    seed: int,
    scratch: Path,
    env: dict[str, str],
    device_lock: str = "",
    language: str | None = None,
    prebuilt: str | None = None,
) -> MemoryCheck:
    """Run one forward of the candidate under the backend's memory checker."""
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if opts.backend == "cuda":
        tool = find_compute_sanitizer()
        check = MemoryCheck(tool="compute-sanitizer memcheck")
        if tool is None:
            check.incomplete = "compute-sanitizer not found"
            return check
        log = scratch / "memcheck.log"
        prefix = [
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
        extra = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
        sanitizer = ""
    else:
        runtime = find_asan_runtime()
        check = MemoryCheck(tool="AddressSanitizer")
        if runtime is None:
            check.incomplete = "the compiler's AddressSanitizer runtime (libasan) not found"
            return check
        log = scratch / "asan"
        prefix = [shutil.which("env") or "/usr/bin/env", f"LD_PRELOAD={runtime}"]
        # ASan reserves terabytes of shadow address space, so the worker's address-space
        # limit is lifted; ASan's own allocator limit bounds the heap instead
        options = f"detect_leaks=0:halt_on_error=1:malloc_limit_mb={ASAN_HEAP_MB}"
        extra = {"ASAN_OPTIONS": f"{options}:log_path={log}"}
        sanitizer = "address"
        prebuilt, failure = _sanitized_builds(solution, opts, prebuilt)
        if failure:
            check.incomplete = f"the AddressSanitizer build failed: {failure}"
            return check
    request = worker_request(
        "memory_check",
        opts,
        problem,
        seed,
        solution_kind=solution.kind.value,
        solution_entry=solution.entry_file,
        prebuilt_module=prebuilt,
        lock_path=device_lock,
        uses_triton="triton" in (language or ""),
        sanitizer=sanitizer,
    )
    outcome = run_worker(
        request,
        timeout_s=opts.memory_check_timeout_s,
        scratch=scratch,  # the worker's own folder: the checker's log is written there
        env={**env, **extra},
        prefix=prefix,
        files=solution.files,
        sandboxed=opts.sandbox,
        allow_unsandboxed=opts.allow_unsandboxed,
        address_space_limit=opts.backend == "cuda",
    )
    check.seconds = round(time.monotonic() - started, 3)
    report = _read_reports(log, opts.backend)
    if opts.backend == "cuda":
        check.errors, check.findings = parse_memcheck(report)
    else:
        check.errors, check.findings = parse_asan(report)
    check.ran = True
    _absorb(check, outcome)
    return check


def _absorb(check: MemoryCheck, outcome: WorkerOutcome) -> None:
    """The worker's answer (or how it ended) into ``check``."""
    if check.errors:
        return  # the checker's report is the answer, however the worker ended
    record = outcome.record_of(MemoryCheckRecord)
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


def _read_reports(log: Path, backend: str) -> str:
    """The checker's report: memcheck's log file, or every ``asan.<pid>`` file ASan wrote."""
    if backend == "cuda":
        return log.read_text(errors="replace") if log.exists() else ""
    parts = sorted(log.parent.glob(f"{log.name}.*"))
    return "\n".join(p.read_text(errors="replace") for p in parts)


def parse_memcheck(text: str) -> tuple[int, list[str]]:
    """(errors, findings) from compute-sanitizer's memcheck log."""
    findings: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        match = _SANITIZER_RECORD.match(line)
        if match:
            head = match.group(1).strip()
            if current:
                findings.append(_one_line(current))
            current = [] if head.startswith(_SANITIZER_NOISE) or not head else [head]
            continue
        detail = line.lstrip("= ").strip()
        if current and detail.startswith(("at ", "Address ", "and is ")):
            current.append(detail)
    if current:
        findings.append(_one_line(current))
    summary = _SANITIZER_SUMMARY.search(text)
    errors = int(summary.group(1).replace(",", "")) if summary else len(findings)
    unique = list(dict.fromkeys(findings))
    return errors, unique[:MAX_FINDINGS]


def parse_asan(text: str) -> tuple[int, list[str]]:
    """(errors, findings) from AddressSanitizer's report files."""
    findings: list[str] = []
    errors = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "ERROR: AddressSanitizer:" not in line:
            continue
        errors += 1
        kind = line.split("ERROR: AddressSanitizer:", 1)[1].split(" on ", 1)[0].strip()
        parts = [kind]
        for follow in lines[i + 1 : i + 12]:
            text_line = follow.strip()
            if text_line.startswith(("READ of size", "WRITE of size")):
                parts.append(text_line.split(" at ", 1)[0])
            elif text_line.startswith("#0 ") and " in " in text_line:
                parts.append("in " + text_line.split(" in ", 1)[1])
            elif "is located" in text_line:
                parts.append(text_line.split(" is ", 1)[1])
        findings.append(_one_line(parts))
    return errors, list(dict.fromkeys(findings))[:MAX_FINDINGS]


def _one_line(parts: list[str]) -> str:
    text = _PATH.sub(lambda m: m.group(1), " ".join(" ".join(parts).split()))
    return text[:300]
