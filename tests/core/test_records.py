"""One record class per worker mode: its result line, the one error shape, ``EvalResult``'s JSON."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import get_type_hints

import pytest

from cuda_agent.core.details import EvalDetails
from cuda_agent.core.records import (
    RECORDS,
    EvaluationRecord,
    ProblemCheckRecord,
    StageError,
    WorkerRecord,
    empty_record,
    parse_record,
)
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.checks.problem_runtime import check_problem_runtime, report_json
from cuda_agent.evaluator.worker.protocol import MODES


def test_every_worker_mode_answers_its_own_record_class() -> None:
    assert tuple(RECORDS) == MODES
    for mode, kind in RECORDS.items():
        assert mode == kind.MODE and issubclass(kind, WorkerRecord)
        run = importlib.import_module(f"cuda_agent.evaluator.worker.modes.{mode}").run
        assert get_type_hints(run)["return"] is kind, mode


@pytest.mark.parametrize("mode", list(RECORDS))
def test_a_record_survives_its_result_line(mode: str) -> None:
    record = empty_record(mode)
    record.fail("problem", "get_inputs() raised ValueError")
    line = json.loads(json.dumps({"nonce": "n", "type": "result", **record.to_dict()}))
    again = parse_record(mode, line)
    assert again == record and type(again) is RECORDS[mode]
    assert again.error == StageError("problem", "get_inputs() raised ValueError")
    assert not again.ok and again.message == "get_inputs() raised ValueError"


def test_an_error_has_one_shape_whatever_the_line_carries() -> None:
    assert parse_record("shape_plan", {"error": "plain text"}).error == StageError(
        "internal", "plain text"
    )
    assert parse_record("shape_plan", {"error": None}).error is None


def test_a_broken_problem_is_a_record_with_a_stage_error() -> None:
    broken = Problem(
        id="broken",
        path=Path("broken.py"),
        content_hash="0" * 64,
        source="import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    raise ValueError('no inputs')\n"
        "def get_init_inputs():\n    return []\n",
    )
    record = check_problem_runtime(broken)
    assert isinstance(record, ProblemCheckRecord) and not record.ok
    assert record.error is not None and record.error.stage == "problem"
    assert "no inputs" in record.message
    assert report_json(record) == {"ok": False, "error": record.message}


def test_the_result_json_shows_the_parents_details_beside_the_record() -> None:
    record = EvaluationRecord(
        ok=True,
        compiled=True,
        correct=True,
        notes=["cudnn_benchmark"],
        builds=[{"module": "in_worker"}],
        timing={"rounds": 10},
        profile={"candidate": {"kernels": 1}},
        problem_lint={"lint": []},  # the worker's, not shown
    )
    result = EvalResult(
        problem_id="relu",
        backend="cpu",
        record=record,
        details=EvalDetails(
            seed=3,
            builds=[{"module": "in_parent"}],
            notes=["memory_check_incomplete"],
            ncu_profile={"kernels": []},
        ),
    )
    shown = result.to_dict()
    assert "record" not in shown
    assert shown["details"] == {
        "seed": 3,
        "builds": [{"module": "in_parent"}, {"module": "in_worker"}],
        "notes": ["cudnn_benchmark", "memory_check_incomplete"],
        "profile": {"candidate": {"kernels": 1}, "ncu": {"kernels": []}},
        "timing": {"rounds": 10},
        "worker_phases_s": {},
    }
    again = EvalResult.from_dict(json.loads(json.dumps(shown)))
    assert again.to_dict() == shown
    assert again.record is not None and again.record.timing == {"rounds": 10}
    assert "timing" not in again.details.to_dict()  # the record's part lives in the record only
    assert again.details.ncu_profile == {"kernels": []}
    assert again.record.profile == {"candidate": {"kernels": 1}}  # the parent's part apart
