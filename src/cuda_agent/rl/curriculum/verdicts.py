"""Verdicts of curriculum replies, each distinct answer evaluated once.

``score_replies(tasks, specs, replies, backend, options, evaluator, jobs, cache)`` reads the
answer of every reply (``tasks.extract_answer``); a reply with none gets the ``format``
verdict (reward -1) without an evaluation. The others are keyed by what decides their verdict:
the task, the problem spec, the answer's text, the backend and the evaluation options (the
task's policy is set from the task, so it is part of the key through the task). Each key not
in ``cache`` is evaluated once, through ``scoring.score_batch`` (``jobs`` at a time), however
many replies share it; a small model repeats itself a lot at low temperature, so a batch of
samples often costs a fraction of its size.

``VerdictCache(path)`` keeps verdicts in memory and, with a path, in a JSON-lines file that
survives the process (one line per new verdict, appended as it is made; a torn last line from
a crash is skipped on reading). A verdict depends on timing where the reward counts speed-ups:
a cached verdict repeats the first measurement rather than drawing a new one.

What it does not do: choose the reward used for training (``rewards``), or judge anything the
evaluator did not run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.rl.curriculum.families import spec_family
from cuda_agent.rl.curriculum.scoring import score_batch
from cuda_agent.rl.curriculum.tasks import NO_ANSWER_REWARD, Score, extract_answer, outcome


@dataclass(frozen=True)
class Verdict:
    reward: float
    outcome: str  # tasks.OUTCOMES: format, build, wrong, pass
    error_stage: str | None = None
    flags: tuple[str, ...] = ()
    answer: str | None = None
    cached: bool = False  # answered from the cache (or by an earlier reply of this batch)

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"


NO_ANSWER = Verdict(NO_ANSWER_REWARD, "format")


def verdict_of(score: Score) -> Verdict:
    error = score.result.error if score.result is not None else None
    return Verdict(
        reward=float(score.reward),
        outcome=outcome(score),
        error_stage=error.stage if error is not None else None,
        flags=tuple(score.result.flags) if score.result is not None else (),
        answer=score.answer,
    )


@dataclass
class VerdictCache:
    path: Path | None = None
    _entries: dict[str, Verdict] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.path is None or not self.path.is_file():
            return
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                verdict = Verdict(**{**row["verdict"], "flags": tuple(row["verdict"]["flags"])})
            except (ValueError, KeyError, TypeError):
                continue  # a torn line (a crash mid-write) or one of another version
            self._entries[str(row["key"])] = verdict

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Verdict | None:
        return self._entries.get(key)

    def put(self, key: str, verdict: Verdict) -> None:
        """Keep ``verdict`` (thread-safe: scoring threads call this as verdicts come)."""
        line = json.dumps({"key": key, "verdict": asdict(verdict)}, sort_keys=True)
        with self._lock:
            self._entries[key] = verdict
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line + "\n")


def verdict_key(task: str, spec: str, answer: str, backend: str, options: EvalOptions) -> str:
    """What decides a verdict, hashed."""
    settings = json.dumps(asdict(options), sort_keys=True, default=str)
    text = json.dumps([task, spec, answer, backend, settings])
    return hashlib.sha256(text.encode()).hexdigest()


def score_replies(
    tasks: list[str],
    specs: list[str],
    replies: list[str],
    backend: str,
    options: EvalOptions,
    evaluator: Evaluator,
    jobs: int = 1,
    cache: VerdictCache | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Verdict]:
    """One verdict per reply, in order (see the module docstring). Each new verdict goes into
    ``cache`` as it is made, so a run cut short keeps what it evaluated; ``log`` gets a line
    at most every ``PROGRESS_S`` seconds while evaluations come in."""
    if not len(tasks) == len(specs) == len(replies):
        raise ValueError(
            f"score_replies: {len(tasks)} tasks, {len(specs)} problems, {len(replies)} replies"
        )
    store = cache if cache is not None else VerdictCache()
    keys: list[str | None] = []
    pending: dict[str, int] = {}  # key -> the first reply that carries it
    for index, (task, spec, reply) in enumerate(zip(tasks, specs, replies, strict=True)):
        answer = extract_answer(task, reply, spec_family(spec))
        if answer is None:
            keys.append(None)
            continue
        key = verdict_key(task, spec, answer, backend, options)
        keys.append(key)
        if store.get(key) is None and key not in pending:
            pending[key] = index
    firsts = list(pending.values())
    order = list(pending)
    progress = _Progress(len(firsts), log)

    def keep(position: int, score: Score) -> None:
        verdict = verdict_of(score)
        store.put(order[position], verdict)
        progress.add(verdict.passed)

    with progress.ticking():
        score_batch(
            [tasks[i] for i in firsts],
            [specs[i] for i in firsts],
            [replies[i] for i in firsts],
            backend,
            options,
            evaluator,
            jobs,
            keep,
        )
    out: list[Verdict] = []
    for index, known in enumerate(keys):
        found = store.get(known) if known is not None else None
        if known is None or found is None:  # no answer (every key was scored above)
            out.append(NO_ANSWER)
            continue
        out.append(found if pending.get(known) == index else _as_cached(found))
    return out


PROGRESS_S = 15.0


class _Progress:
    """A line every ``PROGRESS_S`` seconds: how many evaluations are done, how many passed;
    also while none comes in (``ticking``: a long evaluation, or a device held by another)."""

    def __init__(self, total: int, log: Callable[[str], None] | None) -> None:
        self.total, self.log = total, log
        self.done = self.passed = 0
        self.began = self.last = time.monotonic()
        self.lock = threading.Lock()

    def add(self, passed: bool) -> None:
        with self.lock:
            self.done += 1
            self.passed += passed
            if time.monotonic() - self.last >= PROGRESS_S or self.done == self.total:
                self._say()

    def _say(self) -> None:
        now = time.monotonic()
        self.last = now
        if self.log is not None:
            self.log(
                f"evaluated {self.done}/{self.total} distinct answers ({self.passed} passed) "
                f"in {now - self.began:.0f} s"
            )

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """While the block runs, a line at least every ``PROGRESS_S`` seconds."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(PROGRESS_S / 3):
                with self.lock:
                    if time.monotonic() - self.last >= PROGRESS_S:
                        self._say()

        thread = threading.Thread(target=tick, name="verdict-progress", daemon=True)
        if self.log is not None and self.total:
            thread.start()
        try:
            yield
        finally:
            stop.set()
            if thread.is_alive():
                thread.join()


def _as_cached(verdict: Verdict) -> Verdict:
    data: dict[str, Any] = asdict(verdict)
    data.update(cached=True, flags=tuple(verdict.flags))
    return Verdict(**data)
