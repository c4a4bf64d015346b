"""A synthesis run: compose candidates, filter them, keep every verdict, export the dataset.

Candidate ``i`` of a run is composed from seed ``seed + i``. The parent composes and applies
the static filters (``filters.py``) in seed order, then sends the survivors in batches to the
evaluation pool (``EvalPool.submit_worker``, mode ``synth_check``), which runs the execution
filters on a device. Every candidate's verdict (accepted, or the first filter that rejected it
and why) is appended to ``verdicts.jsonl`` as soon as it is known, so a crash loses nothing
and a rerun with the same configuration resumes where it stopped. At the end the run folder
is exported (``export.py``): ``dataset.jsonl``, ``dataset.parquet``, ``rejected.jsonl`` and
``stats.json``.

A batch whose worker dies keeps the verdicts it had sent; its other candidates are checked
again one by one, and a candidate that kills its worker alone is rejected (``runs_eager``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent.cluster.pool import EvalPool, WorkerTaskResult
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.jsonl import append_line, read_lines
from cuda_agent.core.records import SynthCheckRecord
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.worker.protocol import EvalSettings
from cuda_agent.synth.filters import STATIC_FILTERS, StaticFilters

if TYPE_CHECKING:  # compose imports torch: the command line must start without it
    from cuda_agent.synth.compose import Candidate

VERDICTS_FILE = "verdicts.jsonl"
CONFIG_FILE = "config.json"
SESSIONS_FILE = "sessions.jsonl"
DEFAULT_WINDOWS = {"cuda": (1.0, 100.0), "cpu": (0.01, 50.0)}

Composer = Callable[[int], "Candidate"]
Progress = Callable[[dict[str, Any], int, int], None]  # verdict, finished, total


class SynthConfigError(CudaAgentError):
    """The run folder holds a run with another configuration."""


@dataclass
class SynthConfig:
    n: int
    composer: str = "programmatic"
    seed: int = 0
    max_ops: int = 5
    backend: str = "cpu"
    runtime_ms: tuple[float, float] | None = None
    decontaminate_against: str | None = None
    threshold: float = 0.9
    batch_size: int = 8
    model: str | None = None
    transformers_share: float = 0.0118

    def window(self) -> tuple[float, float]:
        return tuple(self.runtime_ms or DEFAULT_WINDOWS[self.backend])  # type: ignore[return-value]

    def identity(self) -> dict[str, Any]:
        """What must match for a rerun to resume this run (``n`` may grow)."""
        data = asdict(self)
        data.pop("n")
        data.pop("batch_size")
        data["runtime_ms"] = list(self.window())
        return data


@dataclass
class SynthRun:
    config: SynthConfig
    out: Path
    pool: EvalPool
    composer: Composer
    filters: StaticFilters = field(default_factory=StaticFilters)
    progress: Progress | None = None
    batch_timeout_s: float = 120.0
    per_candidate_timeout_s: float = 90.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._finished = 0
        self._pending: list[Future[None]] = []

    def run(self) -> dict[str, Any]:
        """Run to completion (resuming if the folder has verdicts); returns the session info."""
        self.out.mkdir(parents=True, exist_ok=True)
        self._check_config()
        done = self._resume()
        self._finished = len(done)
        todo = [i for i in range(self.config.n) if self.config.seed + i not in done]
        start = time.monotonic()
        batch: list[dict[str, Any]] = []
        for index in todo:
            candidate_seed = self.config.seed + index
            row = self._compose_and_filter(candidate_seed)
            if row is None:
                continue  # rejected statically: recorded already
            batch.append(row)
            if len(batch) >= self.config.batch_size:
                self._submit(batch)
                batch = []
        if batch:
            self._submit(batch)
        self._wait_all()
        session = {
            "started_with": len(done),
            "checked": len(todo),
            "wall_s": round(time.monotonic() - start, 2),
            "devices": self.pool.devices,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        append_line(self.out / SESSIONS_FILE, session)
        return session

    def _wait_all(self) -> None:
        """Until every batch, and every re-check a dead worker caused, has its verdicts."""
        while True:
            with self._lock:
                waiting = [f for f in self._pending if not f.done()]
            if not waiting:
                return
            for future in waiting:
                future.result()

    # --- composing and the static filters -------------------------------------------------

    def _compose_and_filter(self, seed: int) -> dict[str, Any] | None:
        try:
            candidate = self.composer(seed)
        except Exception as err:  # no valid composition for this seed
            self._record({"seed": seed, "id": f"seed_{seed}"}, False, "composes", str(err))
            return None
        row = candidate_row(candidate)
        verdict = self.filters.check(candidate.id, candidate.source)
        row["similarity"], row["closest"] = verdict.similarity, verdict.closest
        if not verdict.passed:
            self._record(row, False, verdict.filter, verdict.reason)
            return None
        return row

    # --- the execution filters, on the pool -----------------------------------------------

    def _submit(self, rows: list[dict[str, Any]]) -> None:
        request = worker_request(
            "synth_check",
            EvalSettings(backend=self.config.backend),
            None,
            self.config.seed,
            problem_id=rows[0]["id"],
            batch=[{"id": r["id"], "source": r["source"]} for r in rows],
            window_ms=list(self.config.window()),
        )
        timeout = self.batch_timeout_s + self.per_candidate_timeout_s * len(rows)
        task = self.pool.submit_worker(request, timeout)
        done: Future[None] = Future()
        task.add_done_callback(lambda f: self._absorb(rows, f, done))
        with self._lock:
            self._pending.append(done)

    def _absorb(
        self, rows: list[dict[str, Any]], task: Future[WorkerTaskResult], done: Future[None]
    ) -> None:
        try:
            result = task.result()
            verdicts = {e["id"]: e for e in result.events if e.get("type") == "verdict"}
            record = result.record
            if isinstance(record, SynthCheckRecord):
                verdicts.update({v["id"]: v for v in record.verdicts})
            error = result.error or (record.message if record is not None else "")
        except Exception as err:  # the pool itself failed
            verdicts, error = {}, f"the evaluation pool failed: {type(err).__name__}: {err}"
        missing = [r for r in rows if r["id"] not in verdicts]
        for row in rows:
            if row["id"] in verdicts:
                verdict = verdicts[row["id"]]
                extra = {k: v for k, v in verdict.items() if k not in ("nonce", "type", "id")}
                accepted = bool(extra.pop("accepted"))
                name, reason = str(extra.pop("filter")), str(extra.pop("reason"))
                self._record({**row, **extra}, accepted, name, reason)
        if missing and len(rows) > 1:
            for row in missing:  # find the one that killed the worker: check alone
                self._submit([row])
        elif missing:
            self._record(missing[0], False, "runs_eager", error or "the worker gave no verdict")
        done.set_result(None)

    # --- records --------------------------------------------------------------------------

    def _record(self, row: dict[str, Any], accepted: bool, name: str, reason: str) -> None:
        verdict = {**row, "accepted": accepted, "filter": name, "reason": reason}
        with self._lock:
            append_line(self.out / VERDICTS_FILE, verdict)
            self._finished += 1
            finished = self._finished
        if self.progress is not None:
            self.progress(verdict, finished, self.config.n)

    def _check_config(self) -> None:
        path = self.out / CONFIG_FILE
        identity = self.config.identity()
        if path.exists():
            stored = json.loads(path.read_text(encoding="utf-8"))
            if stored != json.loads(json.dumps(identity)):
                changed = sorted(k for k in identity if stored.get(k) != identity[k])
                raise SynthConfigError(
                    f"{self.out} holds a run with other settings ({', '.join(changed)}); "
                    "use another --out or the same settings to resume it"
                )
        else:
            path.write_text(json.dumps(identity, indent=1), encoding="utf-8")

    def _resume(self) -> set[int]:
        """Seeds already judged; the static filters relearn what they had let through."""
        done: set[int] = set()
        for row in read_lines(self.out / VERDICTS_FILE):
            done.add(int(row["seed"]))
            if row.get("filter") not in ("composes", *STATIC_FILTERS) and "source" in row:
                self.filters.remember(str(row["id"]), str(row["source"]))
        return done


def candidate_row(candidate: Candidate) -> dict[str, Any]:
    return {
        "seed": candidate.seed,
        "id": candidate.id,
        "composer": candidate.composer,
        "ops": list(candidate.ops),
        "data_source": candidate.data_source,
        "input_shape": list(candidate.input_shape),
        "output_shape": list(candidate.output_shape),
        "extra": candidate.extra,
        "source": candidate.source,
    }


def read_verdicts(out: Path) -> list[dict[str, Any]]:
    """The run's verdicts, one per seed (the last one written wins)."""
    latest: dict[int, dict[str, Any]] = {}
    for row in read_lines(out / VERDICTS_FILE):
        latest[int(row["seed"])] = row
    return [latest[s] for s in sorted(latest)]
