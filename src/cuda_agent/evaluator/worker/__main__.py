"""Worker entry point: ``python -m cuda_agent.evaluator.worker`` (reads one request on stdin).

torch is imported (and CUDA initialised) before the request is read, so a spare worker can
be started ahead of time and wait here at no cost to the next evaluation's latency. A worker
forked from a template (``template.py``) runs the same steps after the fork: the template has
done the imports, the child confines itself, then ``warm_device``, ``announce_ready`` and
``serve``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback

from cuda_agent.core.startup import collection_off, imports_done

# a worker process of its own: no collections while it imports (core/startup.py); main()
# freezes what the imports made and turns the collector back on
COLLECTOR_WAS_ON = collection_off() if __name__ == "__main__" else None

import torch  # noqa: E402  (imported before the request arrives: warm start)

from cuda_agent.core.records import EvaluationRecord, WorkerRecord, empty_record  # noqa: E402
from cuda_agent.evaluator.worker.device_memory import (  # noqa: E402
    CONTENTION_FLAG,
    contention_message,
    oom_census,
)
from cuda_agent.evaluator.worker.guards import prime_recorder  # noqa: E402
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest  # noqa: E402


def warm_imports() -> None:
    """The fixed costs that need no device: dynamo's import and the evaluation code itself
    (the most common mode). Starts no CUDA context (a template forks after this)."""
    prime_recorder()
    import cuda_agent.evaluator.worker.modes.evaluate  # noqa: F401


def warm_device(backend: str) -> None:
    """Create the CUDA context ahead of the request (nothing to do on the cpu backend)."""
    if backend == "cuda" and torch.cuda.is_available():
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()


def announce_ready(fd: int | None) -> None:
    """Tell the parent this worker has finished its warm start (a plain, non-JSON line)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, b"ready\n")


def serve() -> int:
    """Read one request on stdin, run its mode, send the result, and exit at once."""
    raw = sys.stdin.readline()
    sys.stdin.close()
    if not raw.strip():
        os._exit(0)  # a spare worker that was never used
    request = WorkerRequest.from_json(raw)
    channel = ResultChannel(request.result_fd, request.nonce)
    try:
        # every mode is the module of its name here, with ``run(request, channel)`` returning
        # the mode's record (core/records.py)
        mode = importlib.import_module(f"cuda_agent.evaluator.worker.modes.{request.mode}")
        record: WorkerRecord = mode.run(request, channel)
    except BaseException as err:
        record = empty_record(request.mode)
        record.fail("internal", f"{type(err).__name__}: {err}")
        count = oom_census(err)
        if count is not None and count.contended:
            record.fail("internal", contention_message(count, f"the {request.mode} mode"))
            if isinstance(record, EvaluationRecord):
                record.flags.append(CONTENTION_FLAG)
        elif count is not None:
            record.fail("internal", f"{type(err).__name__}: {err} ({count.text()})")
        record.traceback = traceback.format_exc(limit=4)[-1500:]
    channel.send("result", **record.to_dict())
    channel.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: candidate atexit hooks and destructors never run


def _option(argv: list[str], name: str) -> str | None:
    prefix = f"--{name}="
    return next((a[len(prefix) :] for a in argv if a.startswith(prefix)), None)


def main() -> int:
    argv = sys.argv[1:]
    backend = _option(argv, "backend") or "cpu"
    ready_fd = _option(argv, "ready-fd")
    warm_imports()
    if COLLECTOR_WAS_ON is not None:
        imports_done(COLLECTOR_WAS_ON)
    warm_device(backend)
    announce_ready(int(ready_fd) if ready_fd is not None else None)
    return serve()


if __name__ == "__main__":
    sys.exit(main())
