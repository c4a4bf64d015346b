"""The HTML benchmark report: numbers in its tables, escaping, links, robustness, and a real
rendering in headless Chromium (skipped where Chromium is not installed)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.bench.paper import paper_metrics
from cuda_agent.bench.records import AttemptRecord, append_record, write_run_info
from cuda_agent.bench.report import render_html, trajectory_anchor, write_html
from tests.helpers import verdict

MALICIOUS = "<script>alert(1)</script>"
COMPILER_ERROR = 'kernel.cu(12): error: identifier "undefined_thing" is undefined'
TRAJ = "episodes/L1_matmul/trajectory.jsonl"


def _result(problem: str, correct: bool, **fields: Any) -> dict[str, Any]:
    error = fields.pop("error", None)
    stage_error = {"stage": error[0], "message": error[1]} if error else None
    return verdict(problem, correct=correct, error=stage_error, **fields).to_dict()


def _record(problem: str, level: int | None, attempt: int, result: dict[str, Any], **kw: Any):
    source = kw.pop("source", "solutions")
    return AttemptRecord(problem, level, attempt, source, verdict(problem, **result), **kw)


def _events() -> list[dict[str, Any]]:
    write_args = {"path": "kernel.cu", "content": "__global__ void k(float* x) {\n  x[0] = 1;\n}"}
    return [
        {"kind": "start", "problem": "L1_matmul", "model": "replay", "backend": "cpu"},
        {"kind": "message", "message": {"role": "system", "content": "You write kernels."}},
        {"kind": "message", "message": {"role": "user", "content": "Make L1_matmul faster."}},
        {
            "kind": "message",
            "turn": 1,
            "message": {
                "role": "assistant",
                "content": "I will write a tiled kernel first.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": json.dumps(write_args)},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": "make"})},
                    },
                ],
            },
        },
        {"kind": "usage", "prompt": 900, "completion": 120, "estimated": False},
        {
            "kind": "tool_result",
            "name": "write_file",
            "is_error": False,
            "seconds": 0.01,
            "message": {"role": "tool", "tool_call_id": "c1", "content": "wrote 40 bytes"},
        },
        {
            "kind": "tool_result",
            "name": "bash",
            "is_error": True,
            "seconds": 3.2,
            "message": {
                "role": "tool",
                "tool_call_id": "c2",
                "content": f"nvcc -O3 kernel.cu\n{COMPILER_ERROR}\n{MALICIOUS}\n",
            },
        },
        {
            "kind": "evaluation",
            "source": "tool verify",
            "exit_code": 1,
            "result": _result("L1_matmul", False, error=("build", COMPILER_ERROR)),
        },
        {
            "kind": "message",
            "turn": 2,
            "message": {"role": "assistant", "content": "Fixed the typo; submitting."},
        },
        {"kind": "usage", "prompt": 1500, "completion": 40, "estimated": False},
        {"kind": "exit", "reason": "submitted", "turns": 2, "detail": ""},
        {
            "kind": "evaluation",
            "source": "final",
            "result": _result(
                "L1_matmul",
                True,
                compiled=True,
                reward=1.0,
                speedup_eager=1.2,
                speedup_compile=0.8,
                details={"verify": {"max_abs_err": 1e-6}},
            ),
        },
        {"kind": "end", "reward": 1.0},
    ]


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    """Five problems over two levels: three correct (one with no compile speed-up), one build
    failure, one wrong answer; one agent attempt with a trajectory."""
    run = tmp_path / "run"
    run.mkdir()
    write_run_info(
        run,
        {
            "problem_set": "kernelbench-mini",
            "backend": "cpu",
            "model": "replay-model",
            "started": "2025-01-02T03:04:05",
        },
    )
    records = [
        _record(
            "L1_relu",
            1,
            1,
            _result(
                "L1_relu",
                True,
                compiled=True,
                reward=1.0,
                runtime_us=50.0,
                eager_us=100.0,
                compile_us=75.0,
                speedup_eager=2.0,
                speedup_compile=1.5,
            ),
        ),
        _record(
            "L1_matmul",
            1,
            1,
            _result("L1_matmul", False, compiled=True, error=("verify", "max error 3.1 > 0.01")),
            source="agent",
        ),
        _record(
            "L1_matmul",
            1,
            2,
            _result(
                "L1_matmul",
                True,
                compiled=True,
                reward=0.5,
                runtime_us=250.0,
                eager_us=300.0,
                compile_us=200.0,
                speedup_eager=1.2,
                speedup_compile=0.8,
                flags=["fallback_suspect"],
            ),
            source="agent",
            trajectory=TRAJ,
        ),
        _record(
            "L1_softmax",
            1,
            1,
            _result(
                "L1_softmax", False, compiled=False, error=("build", COMPILER_ERROR + "\n<b>x</b>")
            ),
        ),
        _record(
            "L2_conv",
            2,
            1,
            _result(
                "L2_conv",
                True,
                compiled=True,
                reward=0.1,
                runtime_us=2000.0,
                eager_us=1000.0,
                speedup_eager=0.5,
                speedup_compile=None,
            ),
        ),
        _record(
            "L2_gemm_bias",
            2,
            1,
            _result("L2_gemm_bias", False, compiled=True, error=("verify", "outputs differ")),
        ),
    ]
    for record in records:
        append_record(run, record)
    traj = run / TRAJ
    traj.parent.mkdir(parents=True)
    traj.write_text("".join(json.dumps(e) + "\n" for e in _events()), encoding="utf-8")
    return run


def _row_cells(page: str, label: str) -> list[str]:
    """The cell texts of the paper table's row whose header is ``label``."""
    table = re.search(r'<table class="paper".*?</table>', page, re.S)
    assert table, "paper table missing"
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(0), re.S):
        head = re.search(r'<th scope="row">(.*?)</th>', row, re.S)
        if head and html.unescape(head.group(1)) == label:
            return [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    raise AssertionError(f"no row {label!r}")


def test_paper_table_percentages_and_speedups(run_dir: Path) -> None:
    page = render_html(run_dir, [("CUDA Agent", paper_metrics("CUDA Agent"))])
    # Five problems: correct L1_relu (2.0x / 1.5x), L1_matmul (1.2x / 0.8x), L2_conv (0.5x /
    # no compile baseline); failed L1_softmax (build) and L2_gemm_bias (verify).
    overall = ["60.0%", "40.0%", "20.0%", "1.06x", "1.10x"]  # 3/5, 2/5, 1/5, (1.2)^(1/3), √1.2
    level_1 = ["66.7%", "66.7%", "33.3%", "1.55x", "1.10x"]  # 2/3, 2/3, 1/3, √2.4, √1.2
    level_2 = ["50.0%", "0.0%", "0.0%", "0.50x", "-"]  # 1/2, 0/2, 0/2, 0.5, none
    assert _row_cells(page, "run") == overall + level_1 + level_2
    paper = _row_cells(page, "CUDA Agent")
    assert paper[:5] == ["98.8%", "98.4%", "96.8%", "2.60x", "2.11x"]
    assert paper[5:10] == ["100.0%", "99.0%", "97.0%", "2.48x", "1.87x"]
    for header in (
        "Overall (n=5)",
        "Level 1 (n=3)",
        "Level 2 (n=2)",
        "Faster vs compile",
        "Speed-up vs eager",
    ):
        assert header in page
    assert "Level 3" not in page  # only the levels this run has


def test_fast_p_table(run_dir: Path) -> None:
    page = render_html(run_dir)
    table = re.search(r'<table class="fastp">.*?</table>', page, re.S)
    assert table
    overall = re.search(r'<th scope="row">Overall</th>(.*?)</tr>', table.group(0), re.S)
    assert overall
    cells = re.findall(r"<td[^>]*>(.*?)</td>", overall.group(1))
    # n, fast_0 (= pass), fast_0.8, fast_1, fast_1.5, fast_2, mean reward
    # rewards: 1.0, 0.5, -1, 0.1, -1 -> -0.4 / 5 = -0.08
    assert cells == ["5", "60.0%", "40.0%", "40.0%", "20.0%", "0.0%", "-0.080"]


def test_tool_output_is_escaped(run_dir: Path) -> None:
    page = render_html(run_dir)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page  # error message in a row
    # the page's only script is its own inline one, with no JSON data in it
    assert page.count("<script") == 1
    assert 'type="application/json"' not in page


def test_anchor_link_and_trajectory_viewer(run_dir: Path) -> None:
    page = render_html(run_dir)
    anchor = trajectory_anchor("L1_matmul")
    assert anchor == "traj-L1_matmul"
    assert f'href="#{anchor}"' in page
    section = re.search(
        rf'<details id="{anchor}" class="traj">(.*?)</details>\s*(?:</section>)', page, re.S
    )
    assert section, "trajectory section missing"
    text = section.group(1)
    assert "exit: submitted after 2 turns" in text
    assert "Turn 1" in text and "Turn 2" in text
    assert "I will write a tiled kernel first." in text
    assert "Tool call: <code>write_file</code>" in text
    assert "__global__ void k(float* x) {\n  x[0] = 1;\n}" in text  # argument shown as code
    assert '<span class="errline">' in text and "identifier &quot;undefined_thing&quot;" in text
    assert "Evaluation (tool verify): failed at build" in text
    assert "Evaluation (final): correct, reward 1.00, 1.20x vs eager, 0.80x vs compile" in text
    assert "Exit: submitted after 2 turns" in text
    assert "2 model calls, 160 completion tokens" in text
    # problems without a trajectory get no link
    assert 'href="#traj-L1_relu"' not in page


def test_problem_rows(run_dir: Path) -> None:
    page = render_html(run_dir)
    table = re.search(r'<table class="problems sortable".*?</table>', page, re.S)
    assert table
    rows = re.findall(r"<tbody>(.*)</tbody>", table.group(0), re.S)[0]
    assert rows.count("<tr") == 5
    assert "failed at build" in rows and "failed at verify" in rows
    assert "agent #2 of 2" in rows  # the chosen attempt of L1_matmul is its second
    assert '<span class="flag">fallback_suspect</span>' in rows
    assert "2.00x" in rows and "1.50x" in rows and "100.0" in rows


def test_long_tool_output_is_truncated(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    append_record(
        run, _record("p", None, 1, _result("p", False), source="agent", trajectory="t.jsonl")
    )
    body = "x" * 50_000 + "\nfinal error: the end is visible\n"
    event = {
        "kind": "tool_result",
        "name": "bash",
        "is_error": True,
        "message": {"role": "tool", "tool_call_id": "a", "content": body},
    }
    (run / "t.jsonl").write_text(json.dumps(event) + "\n", encoding="utf-8")
    page = render_html(run)
    assert "characters not shown]" in page
    assert "final error: the end is visible" in page  # the tail (compiler errors) is kept
    assert len(page) < 40_000


def test_robust_to_empty_failed_and_odd_runs(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    page = render_html(empty, [("CUDA Agent", paper_metrics("CUDA Agent"))])
    assert "No attempts recorded" in page and "<svg" in page
    assert _row_cells(page, "empty")[:5] == ["-"] * 5

    odd = tmp_path / "odd"
    odd.mkdir()
    evil_id = 'evil"<img src=x onerror=alert(2)>'
    records = [
        _record(evil_id, None, 1, {"correct": False}, source="agent", trajectory="missing.jsonl"),
        _record(
            "nolevel",
            None,
            1,
            _result("nolevel", False, error=("build", "boom")),
            source="agent",
            trajectory="corrupt.jsonl",
        ),
        _record(
            "weird",
            3,
            1,
            {"correct": False, "error": None, "flags": None},
            source="agent",
            trajectory="../outside.jsonl",
        ),
    ]
    for record in records:
        append_record(odd, record)
    (odd / "corrupt.jsonl").write_text('{"kind": "start"}\nnot json\n[1, 2]\n', encoding="utf-8")
    page = render_html(odd)
    assert "<img src=x" not in page
    assert "trajectory file unreadable" in page
    assert "2 unreadable line(s) skipped" in page
    assert "No level" in page and "0.0%" in page
    assert page.count('class="traj"') == 3
    assert f'id="{trajectory_anchor(evil_id)}"' in page
    assert re.fullmatch(r"traj-[A-Za-z0-9_-]+", trajectory_anchor(evil_id))


def test_write_html(run_dir: Path, tmp_path: Path) -> None:
    out = write_html(run_dir, tmp_path / "out" / "report.html", [])
    assert out.exists() and out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def _chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def _run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=2000",
    ]
    return subprocess.run(
        [binary, *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_renders_in_headless_chromium(run_dir: Path, tmp_path: Path) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip("chromium not installed")
    report = write_html(
        run_dir, tmp_path / "report.html", [("CUDA Agent", paper_metrics("CUDA Agent"))]
    )
    url = report.resolve().as_uri()

    dump = _run_chromium(binary, tmp_path / "profile1", "--dump-dom", url)
    dom = dump.stdout
    assert dump.returncode == 0, dump.stderr[-2000:]
    assert 'data-ready="1"' in dom  # the inline script ran
    assert "Faster vs compile" in dom and "Speed-up vs compile" in dom
    assert "<svg" in dom and "Speed-up vs eager (log2 scale)" in dom
    assert 'id="traj-L1_matmul"' in dom and "Exit: submitted after 2 turns" in dom
    assert "<script>alert" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom

    # following the row's anchor opens the trajectory section
    opened = _run_chromium(binary, tmp_path / "profile2", "--dump-dom", url + "#traj-L1_matmul")
    assert re.search(r'<details id="traj-L1_matmul" class="traj" open', opened.stdout)

    shot = tmp_path / "report.png"
    result = _run_chromium(
        binary,
        tmp_path / "profile3",
        f"--screenshot={shot}",
        "--window-size=1400,2000",
        "--hide-scrollbars",
        url,
    )
    assert shot.exists(), result.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("CUDA_AGENT_REPORT_SCREENSHOT")
    if keep:  # a copy for a person to look at
        shutil.copyfile(shot, keep)
