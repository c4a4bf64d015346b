"""The typed contract across the process boundary: settings, requests and the worker's record."""

from __future__ import annotations

import dataclasses

import pytest

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.records import EvaluationRecord
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.worker.protocol import (
    MAX_TIMED_ROUNDS,
    EvalSettings,
    TimingOptions,
    WorkerRequest,
)
from cuda_agent.problems.sets import resolve_problem


def test_the_options_settings_reach_the_request_unchanged() -> None:
    timing = TimingOptions(min_rounds=4, input_sets=2)
    opts = EvalOptions(
        policy="kernelbench", trials=3, precision="tf32", timing=timing, atol=0.5
    ).validate()
    problem = resolve_problem("relu", "small")
    request = worker_request("evaluate", opts, problem, seed=7, solution_entry="solution.py")
    # unchanged, but for the tolerance left open, which becomes the problem's
    assert request.settings == dataclasses.replace(opts.shared(), rtol=problem.tolerance.rtol)
    assert {f.name for f in dataclasses.fields(request.settings)} == {
        f.name for f in dataclasses.fields(EvalSettings)
    }  # only the shared fields travel; the parent's own (reward, baselines...) stay home
    assert request.problem_source == problem.source and request.seed == 7
    assert (request.atol, request.rtol) == (0.5, problem.tolerance.rtol)


def test_a_request_survives_its_json_line() -> None:
    opts = EvalOptions(trials=2, timing=TimingOptions(warmup_ms=1.0)).validate()
    request = worker_request(
        "shape_plan", opts, resolve_problem("relu", "small"), seed=3, batch=[{"id": "a"}]
    )
    again = WorkerRequest.from_json(request.to_json())
    assert again == request
    assert isinstance(again.settings, EvalSettings) and isinstance(
        again.settings.timing, TimingOptions
    )


def test_unknown_modes_are_refused_on_both_sides() -> None:
    with pytest.raises(ValueError, match="unknown worker mode"):
        worker_request("exfiltrate", EvalSettings(), None, seed=0)
    line = worker_request("synth_check", EvalSettings(), None, seed=0).to_json()
    with pytest.raises(ValueError, match="unknown worker mode"):
        WorkerRequest.from_json(line.replace('"synth_check"', '"exfiltrate"'))


def test_the_record_round_trips_and_ignores_line_keys() -> None:
    record = EvaluationRecord(compiled=True, runtime_us=12.5, verify={"trials": []})
    record.fail("verify", "output mismatch", ["output_mismatch:value", "output_mismatch:value"])
    record.note("cudnn_benchmark", "restored")
    record.note("cudnn_benchmark", "restored")
    line = {"nonce": "n", "type": "result", **record.to_dict()}
    again = EvaluationRecord.from_dict(line)
    assert again == record
    assert again.flags == ["output_mismatch:value"] and not again.correct
    assert again.notes == ["cudnn_benchmark"] and again.warnings == ["cudnn_benchmark: restored"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("policy", "lenient", "unknown policy"),
        ("precision", "fp8", "unknown precision"),
        ("trials", 0, "trials must be between"),
        ("atol", -1.0, "atol must be >= 0"),
        ("backend", "tpu", "unknown backend"),
        ("timing", TimingOptions(max_rounds=MAX_TIMED_ROUNDS + 1), "max_rounds must be between"),
    ],
)
def test_settings_are_validated_in_one_place(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EvalOptions(**{field: value}).validate()  # type: ignore[arg-type]


def test_validate_returns_the_checked_options_and_writes_nothing() -> None:
    original = EvalOptions(baselines=("eager",), reward_shapes=True)
    untimed = dataclasses.replace(original, baselines=())  # shares original.timing
    checked = untimed.validate()
    assert not checked.timing.enabled and checked.shapes
    assert original.timing.enabled and untimed.timing.enabled  # neither was written into
    assert not untimed.shapes and checked is not untimed
    assert original.validate().timing.enabled
