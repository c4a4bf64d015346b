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


NAMES_PROBE = textwrap.dedent(
    """
    import json, torch
    from cuda_agent.evaluator.worker import triton_launches
    from cuda_agent.evaluator.worker.shim import ExtensionUsage

    usage = ExtensionUsage()
    hook = triton_launches.install(usage, interpreted=True)
    import triton, triton.language as tl  # as a candidate would, after the hook

    @triton.jit
    def plain_relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

    # two configs, benchmarked by a stand-in (the interpreter has no device to time on)
    @triton.autotune(
        configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})],
        key=["n"],
        do_bench=lambda call, quantiles: (call(), [1.0, 1.0, 1.0])[1],
    )
    @triton.jit
    def tuned_relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

    @triton.jit
    def only_warmed_up(x_ptr):
        pass

    x = torch.randn(2048)
    y, z = torch.empty_like(x), torch.empty_like(x)
    plain_relu[(2,)](x, y, 2048, BLOCK=1024)
    tuned_relu[lambda meta: (triton.cdiv(2048, meta["BLOCK"]),)](x, z, 2048)
    only_warmed_up.warmup(x, grid=(1,))  # compiled, never launched
    print(json.dumps({
        "names": sorted(triton_launches.kernel_names(hook)),
        "right": bool(torch.equal(y, torch.relu(x)) and torch.equal(z, torch.relu(x))),
    }))
    """
)


def test_the_hook_names_the_kernels_it_launched_autotuned_ones_included() -> None:
    """The names the GPU kernel record counts as the candidate's (on the interpreter, the
    functions' names: it compiles nothing; on a GPU, the compiled kernel's symbol)."""
    done = subprocess.run(
        [sys.executable, "-c", NAMES_PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["right"]
    assert out["names"] == ["plain_relu", "tuned_relu"]
