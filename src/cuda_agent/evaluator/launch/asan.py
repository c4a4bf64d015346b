"""A worker run under AddressSanitizer: its runtime, its options and where its reports go.

The memory check on the cpu backend (``checks/memory_safety.py``) runs its worker with the
compiler's ASan runtime preloaded (``LD_PRELOAD``). ASan reads ``ASAN_OPTIONS`` once, when the
process starts, so a worker forked from a template (``worker_template.py``) has the template's
options: halt-on-error and the heap limit are the same for every check and are part of the
template's environment (``template_env``), while the reports' path, which is each check's
own, is not: the forked worker sets it itself, after the fork and its confinement
(``__sanitizer_set_report_path``, ``worker/template.py``), from the order its parent wrote
(``forked_env``). A worker started as a process of its own gets the path in ``ASAN_OPTIONS``
as before (``process_env`` and ``prefix``). Either way ASan writes ``<log>.<pid>`` for each
process that reports, in the worker's own folder, where no other check's worker can write.

What it does not do: build the instrumented extensions or read the reports (the memory check
does), or decide whether a worker is forked (``worker_spawn.py``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AsanRun:
    """``runtime``: the ASan runtime (``libasan.so``) preloaded into the worker; ``options``:
    its ``ASAN_OPTIONS`` without ``log_path`` (read once, at a process's start); ``log``: the
    reports' path (ASan appends ``.<pid>``), in the worker's own folder."""

    runtime: str
    options: str
    log: Path

    def template_env(self, env: dict[str, str]) -> dict[str, str]:
        """A template's environment: the runtime and the options every check shares."""
        return {**env, "LD_PRELOAD": self.runtime, "ASAN_OPTIONS": self.options}

    def forked_env(self, env: dict[str, str]) -> dict[str, str]:
        """A forked worker's environment (its children's too): what a worker started as a
        process of its own has, the reports' path included."""
        return {**self.template_env(env), "ASAN_OPTIONS": self._with_log()}

    def process_env(self, env: dict[str, str]) -> dict[str, str]:
        """A worker started as a process of its own: the environment of its command, which
        ``prefix`` runs (the runtime is preloaded by the prefix, not into the sandbox's
        launcher)."""
        return {**env, "ASAN_OPTIONS": self._with_log()}

    def prefix(self) -> list[str]:
        """The prefix to a worker started as a process of its own."""
        return [shutil.which("env") or "/usr/bin/env", f"LD_PRELOAD={self.runtime}"]

    def _with_log(self) -> str:
        return f"{self.options}:log_path={self.log}"
