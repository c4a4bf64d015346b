"""One KernelBench evaluation in its own process: ``python -m benchmarks.compat.kb_worker
PAYLOAD.json RESULT.json``.

KernelBench is imported from its checkout by ``benchmarks/kb_peer/kb_import.import_kb`` (its
``src`` on ``sys.path``, inert stand-ins for the LLM clients it imports); nothing of it is
copied here. The evaluation is the call its scripts make: ``eval_kernel_against_ref`` with
seed 42 (the same seed set before ``Model()`` and before ``ModelNew()``), its correctness
trials, fp32, no timing (``measure_performance=False``), in the build folder of the payload,
with the payload's ``backend`` (``cuda`` by default; ``triton`` for a KernelBench tree with
that backend, e.g. hzeng2000's fork, in the older ``src/eval.py`` layout).
``tolerances`` (numbers, or ``null`` for KernelBench's own precision-derived one; the first is
the primary; the older payload's single ``tolerance`` still works) replace KernelBench's
tolerance function in this process (KernelBench v0/v0.1 used atol = rtol = 1e-2 for fp32, today
1e-4). One evaluation gives the verdict at every tolerance without rebuilding: it runs at the
loosest first and, while correct, again at each stricter one in the same process. The second
call is cheap: KernelBench re-executes the solution's source, whose ``load_inline`` finds the
same sources under the same version, skips the build step and imports the module it built (a
build that failed, caught by the solution, would not be rebuilt either, but torch would then
fail to load the missing module with another error: ``watch_builds`` raises the first error
again); a Triton solution's kernels come from Triton's cache
(its autotuner benchmarks its configurations again). Inputs and weights are
the same (seed 42), so only the tolerance differs. A solution wrong at one tolerance is wrong
at every stricter one: those are not run (``implied``). KernelBench returns None when its build
hit a lock; that is retried once. The result file holds KernelBench's result at each tolerance
(``kb_results``, keyed by ``tolerance_key``; its metadata made JSON-safe; ``kb_result`` the
primary's) or the error that stopped the call; it is written again after each evaluation, so a
run killed during a stricter one keeps what it had (``partial``).

KernelBench's reference model is watched too (wrapped, not changed: the instance Model()
returns gets a ``forward`` that records an exception and raises it again; its constructor's
exception is recorded the same way): ``reference_errors`` says when KernelBench's *own*
reference raised on the inputs it made for it (it casts every input tensor to the float
precision, so integer class targets and boolean masks break). KernelBench's metadata cannot
tell that apart: a raise in the reference's forward lands in ``runtime_error`` without
``runtime_error_traceback``, as a ``RuntimeError`` from ``ModelNew(...)`` does, and a raise in
``Model(...)`` escapes ``eval_kernel_against_ref`` altogether.

Stock ``torch.utils.cpp_extension.load_inline`` / ``load`` are wrapped (not changed) to record
whether each build the solution asked for succeeded, with the first compiler error line: a
solution that catches its failed build and falls back to PyTorch is "compiled" for KernelBench,
and this record is how the suite tells that apart (and tells a false build failure of ours from
a source that fails with stock torch too).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ERROR_LINE = re.compile(r"(?m)^.*\berror\b.*$")


def watch_builds(record: list[dict[str, Any]]) -> None:
    """Wrap stock ``load_inline`` and ``load`` so each call's outcome lands in ``record``.

    When a call that failed comes back the same (the stricter tolerance's evaluation
    re-executes the solution), its exception is raised again at once: stock torch would skip
    the build (same sources, same version) and fail to load the module it never built, with
    another error (a successful build needs no such help: torch loads what it built)."""
    import torch.utils.cpp_extension as ext

    failed: dict[str, BaseException] = {}
    for name in ("load_inline", "load"):
        original = getattr(ext, name)

        def wrapper(*args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            key = hashlib.sha256(repr((_name, args, sorted(kw.items()))).encode()).hexdigest()
            if key in failed:
                raise failed[key]
            try:
                module = _original(*args, **kw)
            except BaseException as err:
                record.append({"call": _name, "ok": False, "error": first_error(str(err))})
                failed[key] = err
                raise
            record.append({"call": _name, "ok": True})
            return module

        setattr(ext, name, wrapper)


def first_error(text: str) -> str:
    """The first compiler diagnostic line of a build error (else its first line), trimmed."""
    found = _ERROR_LINE.search(text)
    line = found.group(0) if found else (text.strip().splitlines() or [""])[0]
    return " ".join(line.split())[:300]


def watch_reference(kb_eval: Any, record: list[str]) -> None:
    """Wrap KernelBench's ``load_original_model_and_inputs`` so that an exception raised by
    its reference model (constructing it, or its forward) lands in ``record``; the model
    itself is KernelBench's, unchanged (an instance of the problem's own ``Model``)."""
    original = getattr(kb_eval, "load_original_model_and_inputs", None)
    if original is None:  # a tree that loads its reference otherwise: nothing is recorded
        return

    def loader(*args: Any, **kw: Any) -> Any:
        loaded = original(*args, **kw)
        if not loaded or loaded[0] is None:
            return loaded
        model_cls, init_inputs, get_inputs = loaded

        def build(*a: Any, **k: Any) -> Any:
            try:
                model = model_cls(*a, **k)
            except BaseException as err:
                record.append(f"Model(...) raised {_named(err)}")
                raise
            forward = model.forward

            def watched(*fa: Any, **fk: Any) -> Any:
                try:
                    return forward(*fa, **fk)
                except BaseException as err:
                    record.append(f"Model.forward raised {_named(err)}")
                    raise

            model.forward = watched  # an instance attribute: nn.Module's __call__ finds it
            return model

        return build, init_inputs, get_inputs

    kb_eval.load_original_model_and_inputs = loader


def _named(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:1000]


def tolerance_plan(asked: list[float | None], native: float) -> list[float]:
    """The distinct tolerances to evaluate at, loosest first (None: ``native``)."""
    return sorted({native if t is None else float(t) for t in asked}, reverse=True)


def evaluate(
    payload: dict[str, Any], out: dict[str, Any], save: Callable[[], None] = lambda: None
) -> None:
    """Fill ``out`` (see the module's docstring); ``save`` after each evaluation."""
    import torch
    from benchmarks.kb_peer.kb_calls import exec_result, set_arch
    from benchmarks.kb_peer.kb_import import import_kb

    from cuda_agent.bench.kb_results import tolerance_key

    mods = import_kb(Path(payload["kb"]))
    set_arch(mods, payload.get("gpu_arch") or "none")
    watch_builds(out["stock_builds"])
    kb_eval = mods["eval"]
    watch_reference(kb_eval, out["reference_errors"])
    asked = payload["tolerances"] if "tolerances" in payload else [payload.get("tolerance")]
    native = float(kb_eval.get_tolerance_for_precision(torch.float32))
    effective = {tolerance_key(t): native if t is None else float(t) for t in asked}
    by_value: dict[float, dict[str, Any]] = {}
    out["kb_results"], out["partial"] = {}, True
    for value in tolerance_plan(asked, native):
        kb_eval.get_tolerance_for_precision = lambda precision, _v=value: _v
        first = not by_value
        try:
            result = exec_result(_eval_once(kb_eval, payload, torch))
        except BaseException as exc:
            if first:
                raise  # as before: the call's error is the verdict
            result = {"exception": _named(exc)}
        if first:  # later calls load the same builds again: the first call's record is it
            out["stock_builds"] = list(out["stock_builds"])
            out["reference_errors"] = list(out["reference_errors"])
        by_value[value] = result
        for key, v in effective.items():
            if v == value:
                out["kb_results"][key] = result
        save()
        if not result.get("correctness"):
            break
    failed = by_value[min(by_value)]  # the strictest evaluated; wrong there if anything is
    out["implied"] = [k for k in effective if k not in out["kb_results"]]
    for key in out["implied"]:  # stricter than a tolerance it already failed at
        out["kb_results"][key] = failed
    out["kb_result"] = out["kb_results"][tolerance_key(asked[0])]
    out["partial"] = False


def _eval_once(kb_eval: Any, payload: dict[str, Any], torch: Any) -> Any:
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
    return result


def main(argv: list[str]) -> int:
    payload_path, result_path = Path(argv[0]), Path(argv[1])
    payload = json.loads(payload_path.read_text(encoding="utf-8"))
    started = time.perf_counter()
    out: dict[str, Any] = {"stock_builds": [], "reference_errors": []}

    def save() -> None:
        out["seconds"] = round(time.perf_counter() - started, 2)
        partial = result_path.with_name(result_path.name + ".tmp")
        partial.write_text(json.dumps(out, default=str), encoding="utf-8")
        partial.replace(result_path)

    try:
        evaluate(payload, out, save)
    except BaseException as exc:  # KernelBench raised outside its own handlers
        out["exception"] = _named(exc)[:2000]
        out.pop("partial", None)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
