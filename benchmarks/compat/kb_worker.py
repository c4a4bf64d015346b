"""One KernelBench evaluation in its own process: ``python -m benchmarks.compat.kb_worker
PAYLOAD.json RESULT.json``.

KernelBench is imported from its checkout by ``benchmarks/kernelbench_peer.import_kb`` (its
``src`` on ``sys.path``, inert stand-ins for the LLM clients it imports); nothing of it is
copied here. The evaluation is the call its scripts make: ``eval_kernel_against_ref`` with
seed 42 (the same seed set before ``Model()`` and before ``ModelNew()``), its correctness
trials, fp32, no timing (``measure_performance=False``), in the build folder of the payload,
with the payload's ``backend`` (``cuda`` by default; ``triton`` for a KernelBench tree with
that backend, e.g. hzeng2000's fork, in the older ``src/eval.py`` layout).
``tolerance`` (a number) replaces KernelBench's precision-derived tolerance for this process
(KernelBench v0/v0.1 used atol = rtol = 1e-2 for fp32, today 1e-4); ``null`` keeps its own.
KernelBench returns None when its build hit a lock; that is retried once. The result file
holds KernelBench's result (its metadata made JSON-safe) or the error that stopped the call.

Stock ``torch.utils.cpp_extension.load_inline`` / ``load`` are wrapped (not changed) to record
whether each build the solution asked for succeeded, with the first compiler error line: a
solution that catches its failed build and falls back to PyTorch is "compiled" for KernelBench,
and this record is how the suite tells that apart (and tells a false build failure of ours from
a source that fails with stock torch too).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

_ERROR_LINE = re.compile(r"(?m)^.*\berror\b.*$")


def watch_builds(record: list[dict[str, Any]]) -> None:
    """Wrap stock ``load_inline`` and ``load`` so each call's outcome lands in ``record``."""
    import torch.utils.cpp_extension as ext

    for name in ("load_inline", "load"):
        original = getattr(ext, name)

        def wrapper(*args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            try:
                module = _original(*args, **kw)
            except BaseException as err:
                record.append({"call": _name, "ok": False, "error": first_error(str(err))})
                raise
            record.append({"call": _name, "ok": True})
            return module

        setattr(ext, name, wrapper)


def first_error(text: str) -> str:
    """The first compiler diagnostic line of a build error (else its first line), trimmed."""
    found = _ERROR_LINE.search(text)
    line = found.group(0) if found else (text.strip().splitlines() or [""])[0]
    return " ".join(line.split())[:300]


def evaluate(payload: dict[str, Any]) -> dict[str, Any]:
    import torch
    from benchmarks.kernelbench_peer import exec_result, import_kb, set_arch

    mods = import_kb(Path(payload["kb"]))
    set_arch(mods, payload.get("gpu_arch") or "none")
    builds: list[dict[str, Any]] = []
    watch_builds(builds)
    kb_eval = mods["eval"]
    tolerance = payload.get("tolerance")
    if tolerance is not None:
        kb_eval.get_tolerance_for_precision = lambda precision: float(tolerance)
    result = None
    for _ in range(2):  # None: KernelBench's build lock error, "please retry"
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=payload["ref_src"],
            custom_model_src=payload["cand_src"],
            seed_num=payload.get("seed", 42),
            num_correct_trials=payload["trials"],
            measure_performance=False,
            verbose=False,
            build_dir=payload["build_dir"],
            device=torch.device(payload.get("device", "cuda:0")),
            backend=payload.get("backend", "cuda"),
            precision=torch.float32,
        )
        if result is not None:
            break
    return {"kb_result": exec_result(result), "stock_builds": builds}


def main(argv: list[str]) -> int:
    payload_path, result_path = Path(argv[0]), Path(argv[1])
    payload = json.loads(payload_path.read_text(encoding="utf-8"))
    started = time.perf_counter()
    out: dict[str, Any]
    try:
        out = evaluate(payload)
    except BaseException as exc:  # KernelBench raised outside its own handlers
        out = {"exception": f"{type(exc).__name__}: {exc}"[:2000]}
    out["seconds"] = round(time.perf_counter() - started, 2)
    result_path.write_text(json.dumps(out, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
