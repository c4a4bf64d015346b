"""``--shapes``: verify a correct candidate again at other sizes of its problem.

The sizes are the problem's own size constants, each halved, doubled and set to an odd size
(``problems/variants.py``). One ``shape_plan`` worker describes the reference at every size
(inputs, state, output, bytes) on the meta device, which also tells which sizes the reference
itself rejects and which would not fit in memory: those are *skipped*, never failed. Every other
size is a full evaluation of its own (a fresh worker, fresh inputs from a seed derived from the
evaluation's secret one, the same tolerances, policy and integrity checks), without timing.

The result gains ``details.shapes`` (per size: its sizes, verdict ``pass`` / ``fail`` /
``skipped``, the error, and what the plan found: init arguments, inputs, state, output) and
``generalizes`` (true when every size that ran passed; None when none ran). The reward is
unchanged unless ``reward_shapes`` is set (the pipeline applies it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import shutil
from collections.abc import Callable
from typing import Any

from cuda_agent.core.hashing import text_hash
from cuda_agent.core.paths import ensure_dir, scratch_dir
from cuda_agent.core.records import ShapePlanRecord
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.launch.worker_process import run_worker
from cuda_agent.evaluator.launch.worker_spawn import worker_env
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.problems.variants import SizeVariant, size_variants, used_size_constants

MEMORY_SHARE = 0.5  # of the plan's memory budget, for one size's evaluation
PLAN_FIELDS = ("init_args", "inputs", "state", "output")
RunVariant = Callable[[Problem, EvalOptions], EvalResult]
Notify = Callable[[str, str], None]


def verify_shapes(
    problem: Problem,
    opts: EvalOptions,
    seed: int,
    result: EvalResult,
    run_variant: RunVariant,
    notify: Notify,
    env_extra: dict[str, str] | None = None,
) -> None:
    """Fill ``result.details.shapes`` and ``result.generalizes`` (see the module docstring)."""
    variants, left_out = size_variants(problem.source, problem.id)
    sizes = used_size_constants(problem.source, problem.id)
    notify("shapes", f"describing {len(variants) + 1} sizes")
    plans, budget, plan_error = plan_shapes(problem, variants, opts, seed, env_extra)
    if plan_error:
        result.warnings.append(f"shapes: the sizes could not be described: {plan_error}")
    base = {"label": "base", "kind": "base", "sizes": sizes, "verdict": "pass", "error": None}
    entries = [{**base, **_plan_facts(plans[0])}]
    for k, (variant, plan) in enumerate(zip(variants, plans[1:], strict=True)):
        entry: dict[str, Any] = {
            "label": variant.label,
            "kind": variant.kind,
            "sizes": {**sizes, variant.name: variant.value},
            **_plan_facts(plan),
        }
        skip = skip_reason(plan, budget, opts.trials)
        if skip:
            entry.update(verdict="skipped", error=skip)
        else:
            notify("shapes", f"size {k + 1} of {len(variants)}: {variant.label}")
            sub = run_variant(
                _variant_problem(problem, variant), variant_options(opts, seed, variant)
            )
            entry.update(_verdict(sub))
        entries.append(entry)
    result.details.shapes = entries
    ran = [e for e in entries[1:] if e["verdict"] != "skipped"]
    result.generalizes = all(e["verdict"] == "pass" for e in ran) if ran else None
    if not variants:
        result.warnings.append(
            "shapes: get_inputs/get_init_inputs use no integer size constant; no other size "
            "was tried"
        )
    if left_out:
        result.warnings.append(f"shapes: {left_out} more size(s) were not tried (limit)")


def plan_shapes(
    problem: Problem,
    variants: list[SizeVariant],
    opts: EvalOptions,
    seed: int,
    env_extra: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], int | None, str | None]:
    """One ``shape_plan`` worker over the problem and its variants: (plans, budget, error).

    ``plans`` has one entry per source (the problem first); when the worker fails, each is
    ``{"ok": None}`` (unknown) and ``error`` says why.
    """
    batch = [{"id": "base", "source": problem.source}]
    batch += [{"id": v.label, "source": v.source} for v in variants]
    request = worker_request("shape_plan", opts, problem, seed, batch=batch)
    scratch = ensure_dir(scratch_dir()) / f"plan-{secrets.token_hex(6)}"
    try:
        outcome = run_worker(
            request, timeout_s=opts.worker_timeout_s, scratch=scratch, env=worker_env(env_extra)
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record = outcome.record_of(ShapePlanRecord)
    unknown: list[dict[str, Any]] = [{"ok": None} for _ in batch]
    if record is None:
        return unknown, None, f"the plan process {outcome.death_reason()}"
    if not record.ok:
        return unknown, None, record.message
    if len(record.plans) != len(batch):
        return unknown, None, "the plan process described the wrong number of sizes"
    return list(record.plans), record.memory_bytes or None, None


def variant_options(opts: EvalOptions, seed: int, variant: SizeVariant) -> EvalOptions:
    """The options of one size's evaluation: the same checks, no timing, a derived seed."""
    derived = hashlib.sha256(f"{seed}:shape:{variant.label}".encode()).digest()
    return dataclasses.replace(
        opts,
        baselines=(),
        seed=int.from_bytes(derived[:8], "little") >> 1,
        profile=False,
        shapes=False,
        reward_shapes=False,
    ).validate()


def needed_bytes(plan: dict[str, Any], trials: int) -> int:
    """What one size's evaluation holds at once: every trial's inputs plus the two clones in
    use, both models' state, and the two outputs being compared."""
    sizes = plan.get("bytes", {})
    inputs, state, outputs = (int(sizes.get(k, 0)) for k in ("inputs", "state", "outputs"))
    return (trials + 2) * inputs + 2 * state + 2 * outputs


def skip_reason(plan: dict[str, Any], budget: int | None, trials: int) -> str | None:
    if plan.get("ok") is False:
        return f"the reference does not run at this size: {plan.get('error')}"
    if plan.get("ok") and budget:
        needed = needed_bytes(plan, trials)
        if needed > MEMORY_SHARE * budget:
            return (
                f"needs about {needed / 2**30:.2f} GiB, over the bound of "
                f"{MEMORY_SHARE * budget / 2**30:.2f} GiB ({MEMORY_SHARE:.0%} of the free memory)"
            )
    return None


def _variant_problem(problem: Problem, variant: SizeVariant) -> Problem:
    return dataclasses.replace(
        problem,
        id=f"{problem.id}[{variant.label}]",
        source=variant.source,
        content_hash=text_hash(variant.source),
    )


def _verdict(sub: EvalResult) -> dict[str, Any]:
    if sub.correct:
        return {"verdict": "pass", "error": None}
    error = sub.error
    message = error.message.strip().splitlines()[0][:400] if error else "incorrect"
    if error is not None and error.stage == "problem":
        return {"verdict": "skipped", "error": f"the reference fails at this size: {message}"}
    stage = error.stage if error else "verify"
    return {"verdict": "fail", "error": f"{stage}: {message}", "flags": list(sub.flags)}


def _plan_facts(plan: dict[str, Any]) -> dict[str, Any]:
    return {key: plan[key] for key in PLAN_FIELDS if key in plan}
