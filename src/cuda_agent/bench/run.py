"""``bench run``: evaluate a folder of solutions, or run an agent, over a problem set.

Solutions mode: one solution per problem id in a folder (``<id>.py`` single file or ``<id>/``
workdir); a problem without one counts as failed. Agent mode: ``attempts`` episodes per problem,
each in its own run sub-folder, their evaluations going through the same pool. Every finished
attempt is appended to ``results.jsonl`` at once; a rerun with the same folder skips finished
attempts, so an interrupted bench resumes where it stopped.

Every attempt's start is recorded at once (``started.jsonl``: a job that takes its device, an
episode that begins). On a rerun, attempts never started come first, in problem order, and
those started before but never finished (the run was killed, or stopped at a deadline, while
they ran) last, fewest starts first: a job that stalls a run is not run ahead of the rest on
every resume. ``run.json`` lists them (``requeued_last``).
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.loop import AgentLimits
from cuda_agent.agent.models import ChatModel
from cuda_agent.bench.records import (
    AttemptRecord,
    append_record,
    append_started,
    read_records,
    read_run_info,
    read_started,
    write_run_info,
)
from cuda_agent.cluster.pool import EvalJob, EvalPool
from cuda_agent.core.errors import SolutionError
from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.problems.sets import problem_spec
from cuda_agent.rollout import EpisodeConfig, run_episode
from cuda_agent.solutions.loader import load_solution

Progress = Callable[[AttemptRecord, int, int], None]  # record, finished, total
Key = tuple[str, int]  # (problem id, attempt)


@dataclass
class AgentSpec:
    """How to make the model of each attempt (fresh per episode) and the episode's limits."""

    make_model: Callable[[], ChatModel]
    attempts: int = 1
    limits: AgentLimits = field(default_factory=AgentLimits)
    parallel: int = 1


def find_solution(folder: Path, problem_id: str) -> Path | None:
    for candidate in (folder / f"{problem_id}.py", folder / problem_id):
        if candidate.exists():
            return candidate
    return None


def run_solutions(
    problems: list[Problem],
    folder: Path,
    pool: EvalPool,
    options: EvalOptions,
    out_dir: Path,
    progress: Progress | None = None,
) -> list[AttemptRecord]:
    keys, requeued_last = _remaining(out_dir, [(p.id, 0) for p in problems])
    by_id = {p.id: p for p in problems}
    todo = [by_id[pid] for pid, _ in keys]
    write_run_info(
        out_dir,
        {
            **read_run_info(out_dir),  # the fingerprint, and the figures of an earlier run
            "mode": "solutions",
            "solutions": str(folder),
            "backend": options.backend,
            "problems": len(problems),
            "devices": pool.devices,
            "jobs_per_device": getattr(pool, "jobs_per_device", 1),
            "policy": options.policy,
            "requeued_last": requeued_last,
        },
    )
    records: list[AttemptRecord] = []
    futures: dict[Future[EvalResult], tuple[Problem, str | None, float]] = {}
    for problem in todo:
        path = find_solution(folder, problem.id)
        solution = _load(path)
        started = time.monotonic()
        if solution is None:
            future: Future[EvalResult] = Future()
            future.set_result(_missing(problem, options.backend, path))
        else:
            on_start = functools.partial(append_started, out_dir, problem.id, 0)
            future = pool.submit(EvalJob(problem, solution, options, on_start=on_start))
        futures[future] = (problem, str(path) if path else None, started)
    for future in as_completed(futures):
        problem, source, started = futures[future]
        record = AttemptRecord(
            problem.id,
            problem.level,
            0,
            "solutions",
            future.result(),
            solution=source,
            wall_s=round(time.monotonic() - started, 2),
        )
        _keep(out_dir, record, records, len(todo), progress)
    return records


def run_agent(
    problems: list[Problem],
    agent: AgentSpec,
    pool: EvalPool,
    options: EvalOptions,
    out_dir: Path,
    progress: Progress | None = None,
) -> list[AttemptRecord]:
    all_keys = [(p.id, k) for p in problems for k in range(agent.attempts)]
    keys, requeued_last = _remaining(out_dir, all_keys)
    by_id = {p.id: p for p in problems}
    todo = [(by_id[pid], k) for pid, k in keys]
    write_run_info(
        out_dir,
        {
            **read_run_info(out_dir),  # the fingerprint, and the figures of an earlier run
            "mode": "agent",
            "model": agent.make_model().name,
            "attempts": agent.attempts,
            "backend": options.backend,
            "problems": len(problems),
            "devices": pool.devices,
            "jobs_per_device": getattr(pool, "jobs_per_device", 1),
            "requeued_last": requeued_last,
        },
    )

    evaluator = pool.evaluate

    def episode(problem: Problem, attempt: int) -> AttemptRecord:
        folder = out_dir / "episodes" / f"{problem.id}-{attempt}"
        if folder.exists():  # an attempt interrupted mid-way starts again, cleanly
            import shutil

            shutil.rmtree(folder)
        append_started(out_dir, problem.id, attempt, "episode")
        started = time.monotonic()
        config = EpisodeConfig(
            backend=options.backend, limits=agent.limits, eval_options=options, evaluator=evaluator
        )
        result = run_episode(problem, problem_spec(problem), agent.make_model(), folder, config)
        chosen = result.best if result.best is not None else result.final
        return AttemptRecord(
            problem.id,
            problem.level,
            attempt,
            "agent",
            chosen,
            solution=str((folder / "best").relative_to(out_dir)) if result.best else None,
            trajectory=str((folder / "trajectory.jsonl").relative_to(out_dir)),
            wall_s=round(time.monotonic() - started, 2),
            extra={
                "exit_reason": result.exit_reason,
                "turns": result.turns,
                "episode_reward": result.reward,
            },
        )

    records: list[AttemptRecord] = []
    with ThreadPoolExecutor(max_workers=max(1, agent.parallel)) as executor:
        futures = [executor.submit(episode, p, k) for p, k in todo]
        for future in as_completed(futures):
            _keep(out_dir, future.result(), records, len(todo), progress)
    return records


def _keep(
    out_dir: Path,
    record: AttemptRecord,
    records: list[AttemptRecord],
    total: int,
    progress: Progress | None,
) -> None:
    """One finished attempt: counted (``records``, then ``progress``: the live counts and
    run.json's figures, ``bench.run_figures``), then written to results.jsonl.

    Counted first so that a run cut by a signal between the two has the attempt in its figures
    (its work was done; not on disk, the resumed run does it again). Written first, a record
    could be on disk while a run cut right after its first verdict wrote no figures at all
    (``tests/bench/test_resume_order.py`` under load: run.json without ``ended``)."""
    records.append(record)
    try:
        if progress:
            progress(record, len(records), total)
    finally:
        append_record(out_dir, record)


def _remaining(out_dir: Path, keys: list[Key]) -> tuple[list[Key], list[str]]:
    """The attempts of ``keys`` that ``out_dir`` (made here if missing) holds no record of, in
    ``resume_order``, and those of them queued last (``requeued``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = {(r.problem_id, r.attempt) for r in read_records(out_dir)}
    starts = read_started(out_dir)
    todo = resume_order([key for key in keys if key not in done], starts)
    return todo, requeued(todo, starts)


def resume_order(keys: list[Key], started: Counter[Key]) -> list[Key]:
    """``keys`` never started first (in their order), then those started before and never
    finished, fewest starts first (then in their order)."""
    return sorted(keys, key=lambda key: started[key])  # stable: ties keep their order


def requeued(keys: list[Key], started: Counter[Key]) -> list[str]:
    """The attempts queued last because they were started before (``id`` or ``id#attempt``)."""
    return [pid if k == 0 else f"{pid}#{k}" for pid, k in keys if started[(pid, k)]]


def _load(path: Path | None) -> Solution | None:
    if path is None:
        return None
    try:
        return load_solution(path)
    except SolutionError:
        return None


def _missing(problem: Problem, backend: str, path: Path | None) -> EvalResult:
    result = EvalResult(problem_id=problem.id, backend=backend)
    reason = "no solution for this problem" if path is None else f"{path}: unusable solution"
    result.error = StageError("static", reason)
    result.flags.append("no_solution")
    return result


def summary_counts(records: list[AttemptRecord]) -> dict[str, Any]:
    correct = [r for r in records if r.correct]
    return {
        "finished": len(records),
        "correct": len(correct),
        "faster_eager": sum(1 for r in correct if (r.result.speedup_eager or 0) > 1.0),
        "faster_compile": sum(1 for r in correct if (r.result.speedup_compile or 0) > 1.0),
    }
