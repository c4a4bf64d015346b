"""The evaluation pipeline: static -> build -> verify + time (worker) -> memory check ->
baselines -> reward.

A correct candidate runs once more under a memory checker (``checks/memory_safety.py``) and gets its
torch.compile baseline; both start as soon as its worker says verification passed and run
beside its timing (``follow_ups.py``). With ``shapes``, it is also verified at other sizes
(``checks/shapes.py``).

``evaluate(problem, solution, options)`` always returns an ``EvalResult``; a candidate's failure
at any stage is a verdict (``error.stage`` says where), never an exception. Builds run in this
process (they need no GPU); candidate code runs only in a fresh worker process, on a private
snapshot of the solution, with a hard timeout. The same path serves the cpu and cuda backends.
Where no isolation is available and unsandboxed runs were not allowed, ``IsolationUnavailable``
is raised first, before anything is built. ``execute``'s ``cancel`` event stops an evaluation
its caller no longer wants (the reward service's cancelled job): its candidate's worker and
memory check are killed within about a second, and the result is the verdict ``cancelled``
(a torch.compile baseline already started runs to its end, as when the verdict no longer
needs it).
"""

from __future__ import annotations

import ast
import functools
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.core.cache_usage import keep_under_cap_once
from cuda_agent.core.cancel import requested
from cuda_agent.core.details import EvalDetails
from cuda_agent.core.paths import cache_root, ensure_dir, scratch_dir
from cuda_agent.core.records import EvaluationRecord, StageError
from cuda_agent.core.types import EvalResult, Problem, Solution, SolutionKind
from cuda_agent.evaluator.builder.builder import BuildResult, build_extension
from cuda_agent.evaluator.builder.inline import inline_spec, workdir_spec
from cuda_agent.evaluator.builder.spec import ExtensionSpec, FlagError
from cuda_agent.evaluator.checks import task_lint
from cuda_agent.evaluator.checks.compile_ratio import CompileBaseline
from cuda_agent.evaluator.checks.memory_safety import NOTE_INCOMPLETE, MemoryCheck
from cuda_agent.evaluator.checks.ncu_metrics import ncu_metrics
from cuda_agent.evaluator.checks.shapes import verify_shapes
from cuda_agent.evaluator.device_budget import BudgetRule
from cuda_agent.evaluator.follow_ups import FollowUps, prebuilt_module
from cuda_agent.evaluator.launch.host_memory import HOST_OOM_FLAG, host_oom_message
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.launch.spare_workers import SpareWorkers
from cuda_agent.evaluator.launch.worker_process import WorkerOutcome, run_worker
from cuda_agent.evaluator.launch.worker_spawn import worker_env
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.prepared import Prepared
from cuda_agent.evaluator.reward import compute_reward
from cuda_agent.evaluator.worker.memory_flags import FLAG_DEVICE_FAULT
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.evaluator.worker.shim import failure_key
from cuda_agent.solutions.language import detect_language, written_in
from cuda_agent.solutions.static import analyse, python_trees
from cuda_agent.workspace.memory_cap import FLAG as MEMORY_CAP_FLAG
from cuda_agent.workspace.memory_cap import (
    cap_exceeded,
    cap_message,
    host_cap_bytes,
    watched_cap_message,
    worker_memory_cap_bytes,
)
from cuda_agent.workspace.sandbox import worker_isolation
from cuda_agent.workspace.template_files import harness_binding_files

Progress = Callable[[str, str], None]
CATCHING = (ast.Try, getattr(ast, "TryStar", ast.Try), ast.With, ast.AsyncWith)


def evaluate(
    problem: Problem, solution: Solution, options: EvalOptions, progress: Progress | None = None
) -> EvalResult:
    """Evaluate ``solution`` against ``problem``; see the module docstring."""
    return execute(prepare(problem, solution, options, progress), progress)


def prepare(
    problem: Problem, solution: Solution, options: EvalOptions, progress: Progress | None = None
) -> Prepared:
    """The CPU stages: static analysis and the build (no GPU needed)."""
    opts = options.validate()
    if opts.sandbox:  # refused before anything is built, not after (raises IsolationUnavailable)
        worker_isolation(opts.backend == "cuda", opts.allow_unsandboxed)
    notify = progress or _silent
    keep_under_cap_once(cache_root())  # the cache's cap, once per process (cache_usage.py)
    seed = opts.seed if opts.seed is not None else secrets.randbits(63)
    result = EvalResult(problem_id=problem.id, backend=opts.backend)
    stage_times: dict[str, float] = {}
    result.details = EvalDetails(
        problem_hash=problem.content_hash,
        solution_hash=solution.content_hash,
        solution_kind=solution.kind.value,
        seed=seed,
        policy=opts.policy,
        size=problem.size,
        timings_s=stage_times,
    )
    prepared = Prepared(problem, solution, opts, seed, result)
    started = time.monotonic()
    notify("static", "checking the solution")
    report = analyse(solution.files[solution.entry_file], solution.entry_file)
    result.details.static_findings = report.findings
    result.language = detect_language(solution)
    stage_times["static"] = round(time.monotonic() - started, 3)
    if report.error:
        prepared.error = StageError("static", report.error)
        return prepared
    if opts.language is not None and not written_in(result.language, opts.language):
        prepared.error = StageError(
            "static",
            f"the solution is written in {result.language}, not {opts.language} "
            f"(--language {opts.language})",
        )
        result.flags.append("wrong_language")
        return prepared
    started = time.monotonic()
    notify("build", "compiling")
    prepared.builds, build_error, failed = _prebuild(solution, report.inline_calls, opts)
    builds = result.details.builds = [b.to_dict() for b in prepared.builds]
    stage_times["build"] = round(time.monotonic() - started, 3)
    if build_error and _may_catch(solution):
        # the solution may catch the error and fall back: its worker decides (a fallback
        # verdict, or stage build with this same text); the shim does not compile it again
        if failed is not None:
            prepared.known_build_failures[failure_key(failed)] = build_error
    elif build_error:
        prepared.error = StageError("build", build_error)
    if prepared.error is None and report.local_inline_calls:
        ahead = _build_ahead(report.local_inline_calls, opts, prepared.known_build_failures)
        builds += [{**b.to_dict(), "ahead": True} for b in ahead]
        stage_times["build"] = round(time.monotonic() - started, 3)
    return prepared


def execute(
    prepared: Prepared,
    progress: Progress | None = None,
    env_extra: dict[str, str] | None = None,
    device_lock: str = "",
    cancel: threading.Event | None = None,
) -> EvalResult:
    """The device stages: the candidate's worker, the compile baseline, the reward.

    ``env_extra`` is added to the workers' environment (a pool pins a GPU with it).
    ``device_lock``: the GPU's lock file when the pool runs several jobs on it; each worker
    then holds it for its device work (``worker/device_turn.py``). ``cancel``: once set, the
    evaluation stops (see the module docstring).
    """
    result, opts = prepared.result, prepared.opts
    if prepared.error is not None:
        task_lint.attach(result, prepared.problem, opts, None)  # a cached lint, if any
        return _finish(result, opts, prepared.error)
    if requested(cancel):
        return _cancelled(result, opts)
    notify = _one_at_a_time(progress or _silent)  # the follow-ups report from their threads
    stage_times = result.details.timings_s
    assert stage_times is not None  # prepare set it
    scratch = ensure_dir(scratch_dir()) / f"eval-{secrets.token_hex(6)}"
    env = worker_env(env_extra)
    follow = FollowUps(prepared, scratch, env, env_extra, device_lock, notify, cancel)
    try:
        started = time.monotonic()
        outcome = _run_candidate(prepared, scratch, notify, env, device_lock, follow, cancel)
        if outcome.cancelled:
            follow.cancel()
            return _cancelled(result, opts)
        record = outcome.record_of(EvaluationRecord)
        if opts.profile and opts.backend == "cuda" and record is not None and record.correct:
            _add_ncu_metrics(prepared, result, scratch, notify, device_lock)
        stage_times["worker"] = round(time.monotonic() - started, 3)
        error = _name_memory_cap(result, outcome, _absorb_worker(result, outcome, record), opts)
        task_lint.attach(result, prepared.problem, opts, record)
        if error is not None and FLAG_DEVICE_FAULT in result.flags and opts.memory_check:
            error = _name_device_fault(result, follow, record, error)
        if error is None and result.correct and record is not None:
            # started when the worker said verification passed; here if it never said so
            follow.start(record.device, record.kernel_symbols)
            check = follow.memory()
            if check is not None:
                error = _memory_verdict(result, check)
            baseline = follow.baseline()
            if error is None and baseline is not None:
                _add_compile_baseline(result, baseline, opts)
            stage_times.update(follow.seconds)
        else:
            follow.cancel()
        if error is None and opts.shapes and result.correct:
            started = time.monotonic()
            verify_shapes(
                prepared.problem,
                opts,
                prepared.seed,
                result,
                lambda problem, o: execute(
                    prepare(problem, prepared.solution, o), None, env_extra, device_lock, cancel
                ),
                notify,
                env_extra,
            )
            stage_times["shapes"] = round(time.monotonic() - started, 3)
        if requested(cancel):  # stopped in a follow-up or a shape
            return _cancelled(result, opts)
        return _finish(result, opts, error)
    finally:
        follow.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _silent(stage: str, text: str) -> None:
    pass


def _one_at_a_time(progress: Progress) -> Progress:
    """``progress`` called by one thread at a time (its lines are never interleaved)."""
    lock = threading.Lock()

    def report(stage: str, text: str) -> None:
        with lock:
            progress(stage, text)

    return report


def _prebuild(
    solution: Solution, inline_calls: list[dict[str, Any]], opts: EvalOptions
) -> tuple[list[BuildResult], str | None, ExtensionSpec | None]:
    """Build what the static pass found; (builds, first error, the spec that failed to build)."""
    specs: list[ExtensionSpec] = []
    try:
        if solution.kind is SolutionKind.WORKDIR:
            kernels = {k: v for k, v in solution.files.items() if k.startswith("kernels/")}
            if any(not k.endswith(".py") for k in kernels):  # Triton modules build nothing
                specs.append(workdir_spec(opts.backend, kernels, harness_binding_files()))
        else:
            specs.extend(inline_spec(opts.backend, **kw) for kw in inline_calls)
    except (FlagError, TypeError) as err:
        return [], str(err), None
    builds = []
    for spec in specs:
        build = build_extension(spec, timeout_s=opts.build_timeout_s)
        builds.append(build)
        if not build.ok:
            failed = spec if spec.origin != "workdir" else None
            return builds, build.error or "build failed", failed
    return builds, None, None


def _build_ahead(
    calls: list[dict[str, Any]], opts: EvalOptions, known_failures: dict[str, str]
) -> list[BuildResult]:
    """Build the ``load_inline`` calls the static pass resolved inside functions, here, where
    builds run in parallel, instead of in the worker, which holds a device while it compiles.
    Such a call may never run, so nothing here decides the verdict: a success is a cache
    entry the worker's own call then finds, a failure is handed to the worker, which reports
    it only if the solution makes that call (with this same text, not compiling again)."""
    builds = []
    for kwargs in calls:
        try:
            spec = inline_spec(opts.backend, **kwargs)
        except (FlagError, TypeError):
            continue  # the call itself will say what is wrong with it
        build = build_extension(spec, timeout_s=opts.build_timeout_s)
        builds.append(build)
        if not build.ok:
            known_failures[failure_key(spec)] = build.error or "build failed"
    return builds


def _may_catch(solution: Solution) -> bool:
    """Whether a single-file solution's code could catch a failed build (a ``try`` or ``with``
    statement anywhere in its Python files): only then is its worker needed to tell a
    fallback from a plain build failure."""
    if solution.kind is not SolutionKind.SINGLE_FILE:
        return False
    for _name, tree in python_trees(solution.files):
        if any(isinstance(n, CATCHING) for n in ast.walk(tree)):
            return True
    return False


def _memory_verdict(result: EvalResult, check: MemoryCheck) -> StageError | None:
    """The memory check's finding as a failing verdict (stage ``memory``), or None; a check
    that gave no answer is a note."""
    result.details.memory_check = check.to_dict()
    if check.incomplete is not None:
        result.details.notes = [NOTE_INCOMPLETE]
        result.warnings.append(f"{NOTE_INCOMPLETE}: {check.incomplete}")
        return None
    flag = check.flag
    if flag is None:
        return None
    result.correct = False
    result.flags.append(flag)
    return StageError("memory", check.message())


def _name_device_fault(
    result: EvalResult, follow: FollowUps, record: EvaluationRecord | None, error: StageError
) -> StageError:
    """A kernel of the candidate faulted on a bad address (``device_fault``): the worker's
    CUDA context is lost with it, so the memory check runs the forward once more under its
    checker, which names the access (which kernel, how far outside which buffer). A finding
    replaces the fault's verdict (stage ``memory``); a check that finds nothing or gives no
    answer leaves it, with the check's record beside it. Where the same out-of-bounds access
    lands in mapped memory instead (the blocks lie otherwise), the check names it the same
    way after a verified run: the verdict does not depend on the layout."""
    follow.start(record.device if record is not None else None, None)
    check = follow.memory()
    if check is None:
        return error
    if check.flag is None or check.incomplete is not None:
        result.details.memory_check = check.to_dict()
        return error
    return _memory_verdict(result, check) or error


def _candidate_request(prepared: Prepared, device_lock: str) -> WorkerRequest:
    """The ``evaluate`` request of a prepared evaluation (its worker sets the solution's
    folder: the files go to the worker's own)."""
    solution, opts = prepared.solution, prepared.opts
    return worker_request(
        "evaluate",
        opts,
        prepared.problem,
        prepared.seed,
        solution_kind=solution.kind.value,
        solution_root="",
        solution_entry=solution.entry_file,
        prebuilt_module=prebuilt_module(solution, prepared.builds),
        known_build_failures=dict(prepared.known_build_failures),
        problem_lint=task_lint.lint_wanted(prepared.problem, opts),
        lock_path=device_lock,
        uses_triton="triton" in (prepared.result.language or ""),
    )


def _run_candidate(
    prepared: Prepared,
    scratch: Path,
    notify: Progress,
    env: dict[str, str],
    device_lock: str,
    follow: FollowUps,
    cancel: threading.Event | None,
) -> WorkerOutcome:
    opts = prepared.opts
    request = _candidate_request(prepared, device_lock)
    labels = {"load": "loading", "verify": "verifying", "time": "timing", "profile": "profiling"}

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "turn":  # a device shared with other jobs (device_turn.py)
            waiting = event.get("state") == "waiting"
            notify("wait", "waiting for the device's turn" if waiting else "the device's turn")
            return
        if event.get("type") != "stage":
            follow.on_worker_event(event)
            return
        stage = str(event.get("stage", ""))
        notify(stage, labels.get(stage, stage))

    return run_worker(
        request,
        timeout_s=opts.worker_timeout_s,
        scratch=scratch / "worker",
        env=env,
        on_event=on_event,
        spares=spare_workers() if opts.keep_spare_worker else None,
        spare_depth=opts.spare_depth,
        files=prepared.solution.files,
        sandboxed=opts.sandbox,
        allow_unsandboxed=opts.allow_unsandboxed,
        budget=functools.partial(BudgetRule.parse(opts.device_budget).seconds, settings=opts),
        host_memory_cap=host_cap_bytes(opts.backend) if opts.sandbox else None,
        cancel=cancel,
    )


def _add_ncu_metrics(
    prepared: Prepared, result: EvalResult, scratch: Path, notify: Progress, device_lock: str
) -> None:
    """Nsight Compute's metrics of a correct candidate, beside the worker's profile."""
    notify("profile", "Nsight Compute metrics")
    request = _candidate_request(prepared, device_lock)
    ncu = ncu_metrics(request, scratch / "ncu", prepared.solution.files, prepared.opts.sandbox)
    result.details.ncu_profile = ncu


_SPARES: SpareWorkers | None = None


def spare_workers() -> SpareWorkers:
    """One process-wide set of spare workers (started lazily, killed at exit)."""
    global _SPARES
    if _SPARES is None:
        _SPARES = SpareWorkers(ensure_dir(scratch_dir()) / "spares")
    return _SPARES


def _absorb_worker(
    result: EvalResult, outcome: WorkerOutcome, record: EvaluationRecord | None
) -> StageError | None:
    """Fill ``result`` from the worker's record (or from how the worker died, without one)."""
    result.details.isolation = outcome.isolation
    # how much of the worker's seconds was its own start-up: a spare that had finished its
    # warm start reads 0.0, one still warming (or a fresh worker) the seconds it took
    result.details.worker_start = {
        "source": outcome.source,
        "ready_after_s": outcome.ready_after_s,
    }
    if outcome.device_budget_s is not None:
        result.details.device_budget_s = outcome.device_budget_s
        result.details.reference_call_s = outcome.reference_call_s
    if outcome.turn_wait_s > 0:  # the budget's clock stood meanwhile (a device shared by jobs)
        result.details.turn_wait_s = round(outcome.turn_wait_s, 3)
    if record is None:
        stage = outcome.last_stage or "load"
        tail = _last_lines(outcome.stderr_tail, 6)
        message = f"the evaluation process {outcome.death_reason()} during {stage}"
        if outcome.over_budget:
            message = _over_budget_message(outcome, stage)
            result.flags.append("device_budget_exceeded")
        elif outcome.memory_capped and outcome.host_memory_cap is not None:
            cap, peak = outcome.host_memory_cap, outcome.host_memory_peak
            message = f"the evaluation process's {watched_cap_message(cap, peak)} during {stage}"
            result.flags.append(MEMORY_CAP_FLAG)
        elif outcome.oom_killed:
            message = host_oom_message(stage)
            result.flags.append(HOST_OOM_FLAG)
        elif outcome.timed_out:
            message += f" (limit {outcome.seconds:.0f} s)"
            result.flags.append("timeout")
        else:
            result.flags.append("crashed")
        if tail:
            message += f"; last output:\n{tail}"
        return StageError(stage, message)
    result.record = record
    result.compiled = record.compiled
    result.correct = record.correct
    result.flags.extend(record.flags)
    result.warnings.extend(record.warnings)
    result.runtime_us = record.runtime_us
    result.eager_us = record.eager_us
    if outcome.stdout_tail.strip():
        result.details.candidate_stdout_tail = _last_lines(outcome.stdout_tail, 20)
    if record.error is not None:
        if record.error.stage in ("load", "verify") and outcome.stderr_tail.strip():
            result.details.candidate_stderr_tail = _last_lines(outcome.stderr_tail, 20)
        return record.error
    return None


def _name_memory_cap(
    result: EvalResult, outcome: WorkerOutcome, error: StageError | None, opts: EvalOptions
) -> StageError | None:
    """A worker whose allocation its memory cap refused: the verdict names the cap (flag
    ``memory_cap``) instead of blaming the candidate's process (``crashed``)."""
    cap = worker_memory_cap_bytes(opts.backend) if opts.sandbox else None
    if error is None or cap is None:
        return error
    if not cap_exceeded(f"{error.message}\n{outcome.stderr_tail}"):
        return error
    result.flags[:] = [*(f for f in result.flags if f != "crashed"), MEMORY_CAP_FLAG]
    return StageError(error.stage, f"{cap_message(cap)}: {error.message}")


def _over_budget_message(outcome: WorkerOutcome, stage: str) -> str:
    """Why a worker stopped by its device budget was stopped: the budget, the reference's call
    time it was derived from, and the stage the candidate was in."""
    call = outcome.reference_call_s
    basis = (
        f"the reference's call takes {1000 * call:.3g} ms" if call is not None else "a fixed budget"
    )
    return (
        f"the candidate held the device past its budget of {outcome.device_budget_s:.4g} s "
        f"({basis}; see docs/evaluation.md, Device budget) and was stopped during {stage}"
    )


def _add_compile_baseline(result: EvalResult, baseline: CompileBaseline, opts: EvalOptions) -> None:
    result.details.compile_baseline = {
        "cached": baseline.cached,
        "ratio": baseline.ratio,
        "error": baseline.error.message if baseline.error is not None else None,
    }
    if baseline.rejected_entry:
        result.warnings.append(
            "the cached torch.compile baseline failed its integrity check (forged or "
            "corrupted): it was measured again"
        )
    if opts.profile and baseline.record is not None and baseline.record.profile:
        result.details.compile_profile = baseline.record.profile
    if not baseline.ok or baseline.ratio is None or result.eager_us is None:
        result.warnings.append(f"torch.compile baseline unavailable: {baseline.message or None}")
        return
    result.compile_us = result.eager_us * baseline.ratio


def _cancelled(result: EvalResult, opts: EvalOptions) -> EvalResult:
    """The verdict of an evaluation stopped by its caller's ``cancel`` (flag ``cancelled``)."""
    result.flags.append("cancelled")
    return _finish(result, opts, StageError("cancelled", "the evaluation was cancelled"))


def _finish(result: EvalResult, opts: EvalOptions, error: StageError | None) -> EvalResult:
    result.error = error
    if error is not None:
        result.correct = False
        if not result.flags:  # every failed evaluation names what failed
            result.flags.append(f"{error.stage}_failed")
    if result.correct and result.runtime_us:
        if result.eager_us:
            result.speedup_eager = result.eager_us / result.runtime_us
        if result.compile_us:
            result.speedup_compile = result.compile_us / result.runtime_us
    rewarded = result.correct and not (opts.reward_shapes and result.generalizes is False)
    result.reward = compute_reward(
        opts.reward, rewarded, result.speedup_eager, result.speedup_compile, opts.margin
    )
    return result


def _last_lines(text: str, n: int) -> str:
    return "\n".join(text.strip().splitlines()[-n:])
