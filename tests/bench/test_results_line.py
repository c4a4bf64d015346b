"""A results.jsonl line keeps its form: the record's fields, and the verdict as ``to_dict``
gives it (``eval --json``'s form); reading it back parses the verdict once, whole."""

from __future__ import annotations

import json
from pathlib import Path

from cuda_agent.bench.records import RESULTS_FILE, AttemptRecord, append_record, read_records
from cuda_agent.core.details import EvalDetails
from cuda_agent.core.records import EvaluationRecord, StageError
from cuda_agent.core.types import EvalResult

LINE_KEYS = {"problem_id", "level", "attempt", "source", "result", "solution", "trajectory"}


def _verdict() -> EvalResult:
    result = EvalResult(
        problem_id="L1_relu",
        backend="cpu",
        compiled=True,
        flags=["output_mismatch"],
        error=StageError("verify", "trial 1 of 5: output differs"),
        details=EvalDetails(seed=7, timings_s={"build": 1.5}, isolation="bwrap"),
        record=EvaluationRecord(compiled=True, verify={"trials": []}, notes=["cudnn"]),
    )
    result.details.ncu_profile = {"kernels": []}
    return result


def test_a_line_holds_the_json_verdict_and_reads_back_whole(tmp_path: Path) -> None:
    record = AttemptRecord("L1_relu", 1, 0, "solutions", _verdict(), solution="s.py", wall_s=2.0)
    append_record(tmp_path, record)
    line = json.loads((tmp_path / RESULTS_FILE).read_text())
    assert LINE_KEYS | {"wall_s", "extra"} == set(line)
    assert line["result"] == _verdict().to_dict()
    assert line["result"]["details"]["seed"] == 7 and "verify" in line["result"]["details"]
    (again,) = read_records(tmp_path)
    assert again.to_dict() == line
    assert again.result.details.isolation == "bwrap" and again.result.record is not None
    assert again.result.record.verify == {"trials": []}


def test_a_line_that_is_not_a_verdict_is_skipped(tmp_path: Path) -> None:
    good = AttemptRecord("a", 1, 0, "solutions", _verdict())
    append_record(tmp_path, good)
    with (tmp_path / RESULTS_FILE).open("a") as out:
        out.write(json.dumps({"problem_id": "b", "level": 1, "attempt": 0, "source": "x"}) + "\n")
        out.write(json.dumps({**good.to_dict(), "problem_id": "c", "result": "text"}) + "\n")
    assert [r.problem_id for r in read_records(tmp_path)] == ["a"]
