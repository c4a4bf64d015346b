"""Compile one ``.cu`` file with nvcc's own steps, running its two front ends side by side.

``nvcc -c`` runs, one after the other: the host preprocessor, ``cudafe++`` (the host front
end), the device preprocessor, ``cicc`` (the device front end and optimiser), ``ptxas``,
``fatbinary``, and the host compiler. Both front ends parse the whole file, torch headers
included, and take about as long as each other; they are independent except for the module
id, a name ``cudafe++`` writes and ``cicc`` reads. So we ask nvcc for its steps
(``--dryrun``), write the module id ourselves (derived from the unit's cache key), and run
the host chain and the device chain at once, then the host compile. The commands are nvcc's,
verbatim; only their order changes, so what compiles and what each step prints are nvcc's.

Diagnostics come back as nvcc would print them: if the host chain fails, only its output
(nvcc stops there); otherwise the host chain's output, then the device chain's. Anything in
the step list we do not recognise (``-rdc``, several ``cudafe++`` runs, a new tool) makes us
run plain ``nvcc -c`` instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.evaluator.builder.compile_sandbox import confine_compiler
from cuda_agent.evaluator.builder.compiler_slots import compiler_slot

ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)=([^\"']*)$")
MODULE_ID = re.compile(r'--module_id_file_name\s+"([^"]+)"')
DISABLE_ENV = "CUDA_AGENT_PLAIN_NVCC"  # set to 1 to always run plain ``nvcc -c``


@dataclass
class Plan:
    """nvcc's steps for one file, split into the chains that can run at once."""

    env: dict[str, str] = field(default_factory=dict)
    host: list[str] = field(default_factory=list)  # host preprocessing, cudafe++
    device: list[str] = field(default_factory=list)  # device preprocessing, cicc, ptxas...
    final: list[str] = field(default_factory=list)  # the host compile
    module_id_file: str = ""


def compile_cu(
    command: list[str],
    source: str,
    output: str,
    cwd: Path,
    deadline: float,
    module_id: str,
    confined: bool = False,
) -> tuple[bool, str]:
    """``command -c source -o output`` in ``cwd``, front ends in parallel where possible.

    ``confined``: every step that reads the source runs in the compile sandbox
    (``compile_sandbox.py``); ``--dryrun`` only prints nvcc's steps and runs as it is.
    """
    plain = [*command, "-c", source, "-o", output]
    if os.environ.get(DISABLE_ENV) == "1":
        return run_steps([shlex.join(plain)], cwd, deadline, None, confined=confined)
    keep = cwd / f".nvcc-{module_id[-12:]}"
    keep.mkdir(parents=True, exist_ok=True)
    plan = _plan([*plain, "--dryrun", "--keep", "--keep-dir", str(keep)], cwd, deadline)
    if plan is None:
        return run_steps([shlex.join(plain)], cwd, deadline, None, confined=confined)
    Path(plan.module_id_file).write_text(module_id_text(module_id, source))  # no newline
    env = dict(plan.env)
    outcomes: dict[str, tuple[bool, str]] = {}
    cancel = threading.Event()

    def chain(name: str, steps: list[str]) -> None:
        outcomes[name] = run_steps(steps, cwd, deadline, env, cancel, confined)
        if not outcomes[name][0] and name == "host":
            cancel.set()  # nvcc would stop at the host front end's errors

    threads = [
        threading.Thread(target=chain, args=(name, steps))
        for name, steps in (("host", plan.host), ("device", plan.device))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    host_ok, host_log = outcomes["host"]
    if not host_ok:
        return False, host_log
    device_ok, device_log = outcomes["device"]
    if not device_ok:
        return False, host_log + device_log
    ok, final_log = run_steps(plan.final, cwd, deadline, env, confined=confined)
    return ok, host_log + device_log + final_log


def module_id_text(key: str, source: str) -> str:
    """A module id in nvcc's shape (``_<hex>_<len>_<file>_<hex>``), unique per unit."""
    stem = re.sub(r"\W", "_", Path(source).name)
    return f"_{key[:8]}_{len(stem)}_{stem}_{key[8:16]}"


def _plan(dryrun: list[str], cwd: Path, deadline: float) -> Plan | None:
    try:
        proc = subprocess.run(
            dryrun,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=max(1.0, min(60.0, deadline - time.monotonic())),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return parse_dryrun(proc.stderr)


def parse_dryrun(text: str) -> Plan | None:
    """nvcc's ``--dryrun`` listing as a ``Plan``; None unless it has the expected shape."""
    plan = Plan()
    seen_cudafe = 0
    for raw in text.splitlines():
        if not raw.startswith("#$ "):
            continue
        line = raw[3:].strip()
        assignment = ASSIGNMENT.match(line)
        if assignment:
            plan.env[assignment.group(1)] = assignment.group(2).strip()
            continue
        if "=" in line.split()[0]:
            continue  # an assignment with quoted words (INCLUDES=...): already expanded
        tool = Path(line.split()[0].strip('"')).name
        words = line.split()
        if tool == "rm":
            continue
        if tool == "cudafe++":
            seen_cudafe += 1
            if "--gen_module_id_file" not in words:
                return None
            match = MODULE_ID.search(line)
            if match is None:
                return None
            plan.module_id_file = match.group(1)
            plan.host.append(line.replace("--gen_module_id_file", "", 1))
        elif tool in ("cicc", "ptxas", "fatbinary") or _device_preprocessing(words):
            plan.device.append(line)
        elif "-E" in words:
            plan.host.append(line)
        elif "-c" in words and not plan.final:
            plan.final.append(line)
        else:
            return None
    if seen_cudafe != 1 or not plan.device or not plan.final or not plan.module_id_file:
        return None
    return plan


def _device_preprocessing(words: list[str]) -> bool:
    return "-E" in words and any(w.startswith("-D__CUDA_ARCH__=") for w in words)


def run_steps(
    steps: list[str],
    cwd: Path,
    deadline: float,
    env: dict[str, str] | None,
    cancel: threading.Event | None = None,
    confined: bool = False,
) -> tuple[bool, str]:
    """Run shell ``steps`` in order until one fails; kill the step at ``deadline``/``cancel``.

    ``env``: variables added to ours (nvcc's own, from its dry run)."""
    output: list[str] = []
    for step in steps:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False, "".join(output) + "build timed out before this step started\n"
        argv = ["/bin/sh", "-c", step]
        full_env = {**os.environ, **(env or {})}
        if confined:
            argv, full_env = confine_compiler(argv, cwd, env or {})
        with compiler_slot(deadline) as got:
            if not got:
                return False, "".join(output) + "build timed out waiting for a compiler slot\n"
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            out = _wait(proc, deadline, cancel)
        output.append(out)
        if proc.returncode != 0:
            if time.monotonic() >= deadline:
                output.append("\nbuild timed out (the compiler was killed)\n")
            return False, "".join(output)
    return True, "".join(output)


def _wait(proc: subprocess.Popen[bytes], deadline: float, cancel: threading.Event | None) -> str:
    chunks: list[bytes] = []

    def read() -> None:
        if proc.stdout is not None:
            chunks.append(proc.stdout.read())

    reader = threading.Thread(target=read)
    reader.start()
    while proc.poll() is None:
        if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    reader.join()
    return b"".join(chunks).decode("utf-8", "replace")
