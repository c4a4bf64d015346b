"""Worker entry point: ``python -m cuda_agent.evaluator.worker`` (reads one request on stdin).

torch is imported (and CUDA initialised) before the request is read, so a spare worker can
be started ahead of time and wait here at no cost to the next evaluation's latency.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback

import torch  # imported before the request arrives (warm start)

from cuda_agent.evaluator.worker.guards import prime_recorder
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest


def warm_start(argv: list[str]) -> None:
    """Pay the fixed costs before the request arrives: dynamo's import, CUDA's context, and
    the evaluation code itself (the most common mode)."""
    prime_recorder()
    import cuda_agent.evaluator.worker.evaluate  # noqa: F401

    if "--backend=cuda" in argv and torch.cuda.is_available():
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()


def announce_ready(argv: list[str]) -> None:
    """Tell the parent this worker has finished its warm start (a plain, non-JSON line)."""
    for arg in argv:
        if arg.startswith("--ready-fd="):
            with contextlib.suppress(OSError):
                os.write(int(arg.split("=", 1)[1]), b"ready\n")


def main() -> int:
    warm_start(sys.argv[1:])
    announce_ready(sys.argv[1:])
    raw = sys.stdin.readline()
    sys.stdin.close()
    if not raw.strip():
        return 0  # a spare worker that was never used
    request = WorkerRequest.from_json(raw)
    channel = ResultChannel(request.result_fd, request.nonce)
    try:
        # every mode is the module of its name here, with ``run(request, channel)``
        mode = importlib.import_module(f"cuda_agent.evaluator.worker.{request.mode}")
        result = mode.run(request, channel)
    except BaseException as err:
        tail = traceback.format_exc(limit=4)[-1500:]
        result = {
            "error": {"stage": "internal", "message": f"{type(err).__name__}: {err}"},
            "traceback": tail,
        }
    channel.send("result", **result)
    channel.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: candidate atexit hooks and destructors never run


if __name__ == "__main__":
    sys.exit(main())
