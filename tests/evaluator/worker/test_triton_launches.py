"""The hook on Triton's launch path, in this process (Triton's interpreter on the CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

PROBE = textwrap.dedent(
    """
    import json, torch
    from cuda_agent.evaluator.worker import triton_launches
    from cuda_agent.evaluator.worker.guards import FunctionIdentities, OpRecorder, prime_recorder
    from cuda_agent.evaluator.worker.shim import ExtensionUsage

    prime_recorder()  # as the worker does, before any snapshot
    usage = ExtensionUsage()
    hook = triton_launches.install(usage, interpreted=True)
    identities = FunctionIdentities(extra=hook.watched())
    import triton, triton.language as tl  # as a candidate would, after the hook

    @triton.jit
    def relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

    x = torch.randn(2048)
    y = torch.full_like(x, 7.0)
    recorder = OpRecorder()
    with recorder:
        relu[lambda meta: (torch.add(torch.ones(1), 1).numel() * 2,)](x, y, 2048, BLOCK=1024)
    ran = bool(torch.equal(y, torch.relu(x)))
    z = torch.full_like(x, 7.0)
    with hook.skipping():
        relu[(2,)](x, z, 2048, BLOCK=1024)
    skipped = bool((z == 7.0).all())
    print(json.dumps({
        "calls": usage.calls, "by_function": usage.by_function, "launches": hook.launches,
        "ran": ran, "skipped": skipped, "ops": dict(recorder.ops),
        "patched": identities.changed(),
    }))
    """
)


def test_launches_are_counted_skippable_and_the_interpreters_copies_not_recorded() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["calls"] == 2 and out["launches"] == 2
    assert out["by_function"] == {"triton:relu": 2}
    assert out["ran"] and out["skipped"]
    assert out["patched"] == []
    # the grid function's own torch ops are kept; the interpreter's copies are not
    assert out["ops"].get("add") == 1 and "copy_" not in out["ops"] and "set_" not in out["ops"]
