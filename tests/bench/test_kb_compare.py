"""KernelBench results beside a run: reading both of its file formats, the join, the reason
classes of disagreements, and ``bench report --compare`` in text, JSON and HTML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.bench.agreement import (
    FALSE_BUILD_FAILURE,
    REFERENCE_FAILS,
    THEIR_OUT_OF_MEMORY,
    TOLERANCE_TODAY,
    UNCLASSIFIED,
    compare_verdicts,
    kernelbench_comparison,
    our_reason,
    their_reason,
    tolerance_reason,
)
from cuda_agent.bench.kb_results import (
    TheirVerdict,
    compat_verdict,
    problem_number,
    their_verdicts,
    tolerance_key,
)
from cuda_agent.bench.records import AttemptRecord, append_record, chosen_attempts
from cuda_agent.core.details import EvalDetails
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult


def _result(correct: bool, flags: list[str] = (), error: tuple[str, str] | None = None, **kw: Any):
    result = EvalResult(problem_id="p", backend="cpu", correct=correct, compiled=True, **kw)
    result.flags = list(flags)
    result.error = StageError(*error) if error else None
    return result


def _kb_sample(compiled: bool, correct: bool, **metadata: Any) -> dict[str, Any]:
    """A sample as KernelBench's eval_from_generations.py writes it."""
    return {
        "sample_id": 0,
        "compiled": compiled,
        "correctness": correct,
        "metadata": {"hardware": "NVIDIA H200", "device": "cuda:0", **metadata},
        "runtime": -1.0,
        "runtime_stats": {},
    }


FALLBACK = "policy kernelbench: no custom kernel ran; the solution caught its build error: " + (
    "main.cu:3:1: error: expected ';'"
)
# our id -> (our result, KernelBench's samples for problem number N of level 1)
CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "L1_1_Matmul": (_result(True, reward=2.0), [_kb_sample(True, True)]),
    "L1_2_Fallback": (
        _result(False, ["no_custom_kernel"], ("verify", FALLBACK)),
        [_kb_sample(True, True)],
    ),
    "L1_3_InPlace": (
        _result(False, ["input_mutated"], ("verify", "trial 1: ModelNew modified its inputs")),
        [_kb_sample(True, True)],
    ),
    "L1_4_Builds": (
        _result(True),
        [_kb_sample(False, False, compilation_error="ninja: build stopped")],
    ),
    "L1_5_Tolerance": (
        _result(True),
        [_kb_sample(True, False, correctness_issue="Output mismatch", max_difference=["0.0031"])],
    ),
    "L1_6_OurBuild": (
        _result(False, ["build_failed"], ("build", "kernel.cu:1: error: x")),
        [_kb_sample(True, True)],
    ),
    "L1_7_Strange": (
        _result(False, ["something_new"], ("verify", "?")),
        [_kb_sample(True, True)],
    ),
    "L1_8_BothWrong": (
        _result(False, ["output_mismatch:value"], ("verify", "trial 1 of 5: differs")),
        [_kb_sample(True, False, correctness_issue="Output mismatch")],
    ),
    "L1_9_OnlyOurs": (_result(True), []),  # no KernelBench entry
    "L1_10_Timing": (
        _result(False, ["timed_output_mismatch"], ("time", "a timed call returned NaN")),
        [_kb_sample(True, False, runtime_error="CUDA error"), _kb_sample(True, True)],
    ),
}


def _run(tmp_path: Path, problem_flags: dict[str, list[str] | None] | None = None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for pid, (result, _) in CASES.items():
        flags = (problem_flags or {}).get(pid, [])
        append_record(
            run, AttemptRecord(pid, 1, 0, "solutions", replace(result, problem_flags=flags))
        )
    return run


def _kb_file(tmp_path: Path, older_format: bool = False) -> Path:
    data: dict[str, Any] = {}
    for pid, (_, samples) in CASES.items():
        if samples:
            number = str(problem_number(pid)[1])
            data[number] = samples[0] if older_format else samples
    path = tmp_path / "eval_results.json"
    path.write_text(json.dumps(data, indent=4))
    return path


def _records(run: Path) -> list[AttemptRecord]:
    from cuda_agent.bench.records import read_records

    return read_records(run)


def test_problem_numbers_of_our_ids() -> None:
    assert problem_number("L1_19_ReLU") == (1, 19)
    assert problem_number("L3_4_LeNet5") == (3, 4)
    assert problem_number("19_ReLU") == (None, 19)
    assert problem_number("relu") == (None, None)


@pytest.mark.parametrize("older_format", [False, True])
def test_kernelbench_results_are_keyed_by_our_ids(tmp_path: Path, older_format: bool) -> None:
    ours = {pid: 1 for pid in CASES}
    theirs = their_verdicts(_kb_file(tmp_path, older_format), ours)
    assert set(theirs) == set(CASES) - {"L1_9_OnlyOurs"}
    assert theirs["L1_1_Matmul"].correct
    assert theirs["L1_4_Builds"].kind == "build" and not theirs["L1_4_Builds"].compiled
    assert theirs["L1_5_Tolerance"].max_difference == pytest.approx(0.0031)
    # the best sample counts: one of problem 10's samples is correct
    assert theirs["L1_10_Timing"].correct is (not older_format)


def test_a_level_must_be_known_for_kernelbench_results(tmp_path: Path) -> None:
    path = _kb_file(tmp_path)
    with pytest.raises(CudaAgentError, match="give --kb-level N"):
        their_verdicts(path, {"L1_1_Matmul": 1, "L2_1_Conv": 2})
    level2 = their_verdicts(path, {"L1_1_Matmul": 1, "L2_1_Conv": 2}, level=2)
    assert "L2_1_Conv" in level2 and "L1_1_Matmul" not in level2
    with pytest.raises(CudaAgentError, match="not a KernelBench"):
        (tmp_path / "other.json").write_text('{"a": 1}')
        their_verdicts(tmp_path / "other.json", {"x": 1})


def test_disagreements_get_named_reason_classes(tmp_path: Path) -> None:
    run = _run(tmp_path)
    chosen = chosen_attempts(_records(run))
    rows, counts = compare_verdicts(
        chosen, their_verdicts(_kb_file(tmp_path), {p: 1 for p in CASES})
    )
    by_id = {r.problem_id: r for r in rows}
    assert [r.problem_id for r in rows][:3] == ["L1_1_Matmul", "L1_2_Fallback", "L1_3_InPlace"]
    assert rows[-1].problem_id == "L1_10_Timing"  # numeric order
    assert by_id["L1_1_Matmul"].outcome == "agree_correct"
    assert by_id["L1_8_BothWrong"].outcome == "agree_rejected"
    assert by_id["L1_2_Fallback"].reason == "fallback to PyTorch after a failed build"
    assert by_id["L1_3_InPlace"].reason == "in-place input mutation"
    assert by_id["L1_4_Builds"].reason == "KernelBench build failure (ours built)"
    assert by_id["L1_5_Tolerance"].reason == "KernelBench output mismatch"
    assert "0.0031" in by_id["L1_5_Tolerance"].detail
    # eval_results.json does not say whether stock torch built it
    assert by_id["L1_6_OurBuild"].reason == "build failure (stock build not known)"
    assert by_id["L1_7_Strange"].reason == UNCLASSIFIED
    assert by_id["L1_10_Timing"].reason == "wrong output in a checked timing call"
    assert by_id["L1_9_OnlyOurs"].outcome == "missing_theirs"
    assert counts["agree"] == 2 and counts["disagree"] == 7 and counts["compared"] == 9
    assert counts["unclassified"] == 1 and counts["false_build_failures"] == 0
    assert counts["ours_correct"] == 3 and counts["theirs_correct"] == 6


def test_plain_pytorch_and_fallback_are_told_apart() -> None:
    plain = _result(False, ["no_custom_kernel"], ("verify", "ModelNew.forward called no custom"))
    assert our_reason(plain) == "no custom kernel ran"
    failed = replace(plain, details=EvalDetails(builds=[{"ok": False, "error": "x"}]))
    assert our_reason(failed) == "fallback to PyTorch after a failed build"
    stock_failed = TheirVerdict(True, True, stock_build="failed")
    assert our_reason(plain, stock_failed) == "fallback to PyTorch after a failed build"


def test_our_build_failures_are_judged_by_what_stock_torch_built() -> None:
    built = _result(False, ["build_failed"], ("build", "kernel.cu:1: error: x"))
    assert our_reason(built, TheirVerdict(True, True, stock_build="ok")) == FALSE_BUILD_FAILURE
    too = our_reason(built, TheirVerdict(True, True, stock_build="failed"))
    assert too.startswith("fails to build with stock torch too")
    never = our_reason(built, TheirVerdict(True, True, stock_build="none"))
    assert never.startswith("build failure of an extension the solution never built")
    assert our_reason(built) == "build failure (stock build not known)"


def test_compat_jsonl_is_read_by_id(tmp_path: Path) -> None:
    rows = [
        {"id": "L1_1_Matmul", "compiled": True, "correctness": True},
        {
            "id": "L1_3_InPlace",
            "compiled": True,
            "correctness": False,
            "kind": "runtime",
            "error": "RuntimeError: boom",
        },
    ]
    path = tmp_path / "kernelbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    comparison = kernelbench_comparison(path, _records(_run(tmp_path)))
    assert comparison.counts["compared"] == 2
    assert comparison.metrics["overall"]["pass_rate"] == pytest.approx(1 / len(CASES))


def test_compat_rows_with_verdicts_at_each_tolerance(tmp_path: Path) -> None:
    """Recorded rows of the compat suite, new and old: the join at the primary tolerance and
    at the stricter one, where a disagreement found only there is the tolerance class."""
    assert [tolerance_key(t) for t in (1e-2, 1e-4, None, "native", 1e-5)] == [
        "0.01",
        "0.0001",
        "native",
        "native",
        "1e-05",
    ]
    assert tolerance_reason("0.0001") == tolerance_reason("native") == TOLERANCE_TODAY
    assert tolerance_reason("1e-05") == "tolerance (KernelBench at 1e-05)"
    at_both = {"tolerance": 0.01, "tolerances": [0.01, 0.0001]}
    rows = [
        {"id": "L1_1_Matmul", "compiled": True, "correctness": True, **at_both}
        | {"correct_at": {"0.01": True, "0.0001": False}, "max_difference_at": {"0.0001": 2e-3}},
        {"id": "L1_4_Builds", "compiled": True, "correctness": True},  # an older row
        {"id": "L1_5_Tolerance", "compiled": True, "correctness": False, "kind": "runtime"}
        | at_both
        | {"correct_at": {"0.01": False, "0.0001": False}, "implied_at": ["0.0001"]}
        | {"reference_error": "Model.forward raised RuntimeError: expected target dtype"},
    ]
    path = tmp_path / "kernelbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    old = compat_verdict(rows[1])
    assert old.correct_at is None and old.tolerance is None and old.reference_error == ""
    assert old.correct_at_key("0.0001") is None
    assert compat_verdict(rows[0]).correct_at_key("0.0001") is False

    comparison = kernelbench_comparison(path, _records(_run(tmp_path)))
    by_id = {r.problem_id: r for r in comparison.rows}
    assert comparison.tolerance == "0.01" and [a.key for a in comparison.at] == ["0.0001"]
    assert by_id["L1_1_Matmul"].outcome == "agree_correct"
    assert by_id["L1_5_Tolerance"].reason == REFERENCE_FAILS
    assert by_id["L1_5_Tolerance"].detail.startswith("Model.forward raised RuntimeError")
    (strict,) = comparison.at
    at = {r.problem_id: r for r in strict.rows}
    assert at["L1_1_Matmul"].outcome == "ours_only" and at["L1_1_Matmul"].reason == TOLERANCE_TODAY
    assert "max difference 0.002" in at["L1_1_Matmul"].detail
    assert at["L1_4_Builds"].outcome == "missing_theirs"  # no verdict at 1e-4 in an older row
    assert at["L1_5_Tolerance"].reason == REFERENCE_FAILS  # the same disagreement as at 1e-2
    assert strict.counts["compared"] == 2 and strict.counts["theirs_correct"] == 0
    assert strict.counts["reasons"] == {TOLERANCE_TODAY: 1, REFERENCE_FAILS: 1}
    data = comparison.to_dict()
    assert data["tolerance"] == "0.01" and data["at"]["0.0001"]["counts"]["disagree"] == 2
    assert their_reason(TheirVerdict(True, False, "runtime")) == "KernelBench runtime error"
    oom = "CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 79.18 GiB"
    assert their_reason(TheirVerdict(True, False, "runtime", oom)) == THEIR_OUT_OF_MEMORY


def test_bench_report_compare_text_json_html(tmp_path: Path) -> None:
    run = _run(tmp_path, {"L1_1_Matmul": ["constant_pass", "independent_of_inputs"]})
    kb = _kb_file(tmp_path)
    html = tmp_path / "report.html"
    base = [sys.executable, "-m", "cuda_agent", "bench", "report", str(run), "--compare", str(kb)]
    out = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    table = data["kernelbench"]["KernelBench (eval_results.json)"]
    assert table["counts"]["disagree"] == 7
    first = table["rows"][0]
    assert first["problem_id"] == "L1_1_Matmul" and first["problem_flags"][0] == "constant_pass"
    assert data["no_lint_flag"]["overall"]["n"] == len(CASES) - 1
    assert data["problem_lint"]["flagged_problems"] == {
        "L1_1_Matmul": ["constant_pass", "independent_of_inputs"]
    }

    text = subprocess.run([*base, "--html", str(html)], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "this run, no lint flag" in text.stdout
    assert "degenerate: L1_1_Matmul: constant_pass" in text.stdout
    assert "agree 2 (1 correct, 1 rejected), disagree 7" in text.stdout
    assert "false build failures 0" in text.stdout
    page = html.read_text()
    assert 'href="#kernelbench"' in page and "KernelBench output mismatch" in page
    assert "problems with no lint flag" in page and 'class="flag lint"' in page

    bad = subprocess.run(
        [*base[:-1], str(tmp_path / "missing.json")], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "not a run folder" in bad.stderr


def test_bench_report_tables_fit_80_columns_one_metric_a_cell(tmp_path: Path) -> None:
    """Not a terminal (80 columns): every line of the tables fits, with each metric in a cell
    of its own (five metrics in one cell wrapped, issue 50)."""
    run = _run(tmp_path)
    argv = [sys.executable, "-m", "cuda_agent", "bench", "report", str(run)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=os.environ)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    header = next(i for i, line in enumerate(lines) if "Pass" in line and "set" in line)
    overall = next(line for line in lines[header:] if "Overall" in line)
    cells = [c.strip() for c in overall.replace("│", "|").split("|") if c.strip()]
    assert cells[0] == "Overall" and len(cells) == 6, overall  # the set and five metrics
    assert "this run, no lint flag" in out.stdout and "Level 1" in out.stdout
