"""The device budget: the rule, the option, the parent's deadline, and real verdicts.

The rule and the option are plain functions; the deadline is the parent's own object fed the
lines a worker sends; the verdicts come from real workers on the cpu backend (the shared test
extension, built once per cache). The 20-s-per-call fixture under the default budget is in the
red-team catalogue (``f_slow_correct_kernel``).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.locks import TurnLock, ensure_lock_files
from cuda_agent.core.paths import locks_dir
from cuda_agent.evaluator.device_budget import (
    BASE_S,
    BudgetRule,
    planned_calls,
)
from cuda_agent.evaluator.launch.worker_process import Deadline, WorkerOutcome
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate, execute, prepare
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options, relu_solution

DEFAULTS = EvalOptions().validate()


def auto(call_s: float | None, options: EvalOptions = DEFAULTS) -> float | None:
    return BudgetRule.parse("auto").seconds(call_s, options)


def test_a_tiny_reference_gets_about_a_minute() -> None:
    budget = auto(0.0001)
    assert budget is not None and 55 <= budget <= 65
    # a correct candidate at 20 s per call is stopped around its third trial, not after 600 s
    assert 2 * 20 < budget < DEFAULTS.worker_timeout_s / 5


def test_a_large_reference_leaves_room_for_a_slower_honest_candidate() -> None:
    calls = planned_calls(DEFAULTS)
    for call_s in (0.1, 0.5, 1.0):
        budget = auto(call_s)
        assert budget is not None
        # five times slower on every planned call, plus a minute of JIT and the time cap
        assert budget > 5 * call_s * calls + 10 * 2
    one_second = auto(1.0)
    assert one_second is not None and one_second < DEFAULTS.worker_timeout_s


def test_without_timing_the_timing_terms_drop() -> None:
    untimed = EvalOptions(baselines=()).validate()
    assert planned_calls(untimed) < planned_calls(DEFAULTS)
    assert auto(0.0, untimed) == BASE_S


def test_off_fixed_and_scaled_rules() -> None:
    assert BudgetRule.parse("off").seconds(1.0, DEFAULTS) is None
    assert BudgetRule.parse("90").seconds(None, DEFAULTS) == 90.0  # the reference not needed
    single = auto(0.001)
    assert single is not None
    assert BudgetRule.parse("x2").seconds(0.001, DEFAULTS) == pytest.approx(2 * single, rel=0.01)
    assert auto(None) is None  # auto without a measured reference call: no budget


@pytest.mark.parametrize("text", ["", "soon", "-5", "0", "x0", "x-1", "nan", "inf", "xauto"])
def test_unusable_values_are_one_line_errors(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        EvalOptions(device_budget=text).validate()
    assert "device budget" in str(caught.value) and "\n" not in str(caught.value)


def test_the_deadline_trusts_the_first_reference_line_and_arms_once() -> None:
    outcome = WorkerOutcome(record=None)
    asked: list[float | None] = []

    def budget(call_s: float | None) -> float | None:
        asked.append(call_s)
        return 30.0

    timeout_at = time.monotonic() + 10_000.0  # the timeout's end, far after the budget's
    deadline = Deadline(timeout_at=timeout_at, budget=budget)
    deadline.reference({"call_s": 0.002}, outcome)
    deadline.reference({"call_s": 500.0}, outcome)  # a later line (candidate code may forge it)
    assert outcome.reference_call_s == 0.002
    assert deadline.at == timeout_at and not deadline.budget_ends_first  # not armed before verify
    deadline.arm(outcome)
    armed_at = deadline.at
    deadline.arm(outcome)  # a second verify line changes nothing
    assert asked == [0.002] and deadline.at == armed_at
    assert outcome.device_budget_s == 30.0 and deadline.budget_ends_first


def test_the_budget_never_extends_the_timeout() -> None:
    outcome = WorkerOutcome(record=None)
    deadline = Deadline(timeout_at=0.0, budget=lambda _call: 1e9)
    deadline.reference({"call_s": "fast"}, outcome)  # not a number: no reference time
    deadline.arm(outcome)
    assert outcome.reference_call_s is None
    assert deadline.at == 0.0 and not deadline.budget_ends_first


def run(tmp_path: Path, body: str, **options: object):
    return evaluate(
        resolve_problem("relu", "small"),
        load_solution(relu_solution(tmp_path, body)),
        fast_options(**options),
    )


def test_a_candidate_past_its_budget_is_stopped_and_named(tmp_path: Path) -> None:
    result = run(tmp_path, "return ops.spin(x)", device_budget="3")
    assert result.reward == -1.0 and not result.correct
    assert "device_budget_exceeded" in result.flags and "timeout" not in result.flags
    assert result.error is not None and result.error.stage == "verify"
    message = result.error.message
    assert "budget of 3 s" in message and "stopped during verify" in message, message
    assert "reference's call takes" in message
    assert result.details.device_budget_s == 3.0
    assert result.details.reference_call_s > 0


def test_an_honest_candidate_records_its_armed_budget(tmp_path: Path) -> None:
    result = run(tmp_path, "return ops.relu_ok(x)")
    assert result.correct and result.flags == [], (result.error, result.flags)
    assert BASE_S <= result.details.device_budget_s < 120
    assert result.details.reference_call_s > 0


def test_with_the_budget_off_none_is_armed(tmp_path: Path) -> None:
    result = run(tmp_path, "return ops.relu_ok(x)", device_budget="off")
    assert result.correct
    assert result.details.device_budget_s is None


@pytest.mark.parametrize("command", [["eval", "relu", "nowhere.py"], ["bench", "run"]])
def test_the_command_line_refuses_a_bad_budget(command: list[str], tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "cuda_agent", *command, "--device-budget", "soon"]
    if command[0] == "bench":
        argv += ["--out", str(tmp_path / "run"), "--solutions", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "device budget 'soon'" in lines[0], done.stderr


def test_the_budget_clock_stands_while_the_worker_waits_for_its_turn() -> None:
    outcome = WorkerOutcome(record=None)
    timeout_at = time.monotonic() + 10_000.0
    deadline = Deadline(timeout_at=timeout_at, budget=lambda _call: 30.0)
    deadline.reference({"call_s": 0.001}, outcome)
    deadline.arm(outcome)
    armed_at = deadline.at
    deadline.turn({"state": "waiting"}, outcome)
    # waiting behind another job: only the timeout applies, and its end is a timeout
    assert deadline.at == timeout_at and not deadline.budget_ends_first
    deadline.turn({"state": "waiting"}, outcome)  # a repeated line does not restart the wait
    deadline.turn({"state": "held"}, outcome)
    assert outcome.turn_wait_s > 0
    assert deadline.at == pytest.approx(armed_at + outcome.turn_wait_s)
    before = deadline.at
    deadline.turn({"state": "held"}, outcome)  # a held line without a wait moves nothing
    deadline.turn({"state": "soon"}, outcome)  # nor does an unknown state
    assert deadline.at == before and deadline.budget_ends_first


WAIT_BUDGET_S = 4.0


@pytest.mark.slow  # holds the device longer than a whole budget
def test_a_wait_for_the_device_turn_spends_none_of_the_budget(tmp_path: Path) -> None:
    """The job verifies beside another job's shared turn, then waits for the device alone
    (to time) longer than its whole budget: the budget's clock stands while it waits, so it
    is not stopped (a budget that counted the wait would end it: device_budget_exceeded)."""
    lock = ensure_lock_files(locks_dir() / f"test-turn-{secrets.token_hex(6)}.lock")
    other_job = TurnLock(lock)
    other_job.take(exclusive=False)  # another job's device work, which measures nothing
    waiting = threading.Event()

    def progress(stage: str, text: str) -> None:
        if stage == "wait" and text.startswith("waiting"):
            waiting.set()

    options = fast_options(device_budget=f"{WAIT_BUDGET_S:g}")
    solution = load_solution(relu_solution(tmp_path, "return ops.relu_ok(x)"))
    prepared = prepare(resolve_problem("relu", "small"), solution, options)
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(execute, prepared, progress, None, str(lock))
        try:
            assert waiting.wait(timeout=300), "the worker never waited for the device alone"
            threading.Event().wait(WAIT_BUDGET_S + 2)  # the device held past the whole budget
        finally:
            other_job.close()
        result = future.result(timeout=300)
    assert result.correct and result.flags == [], (result.error, result.flags)
    assert result.details.device_budget_s == WAIT_BUDGET_S
    assert result.details.turn_wait_s > WAIT_BUDGET_S
