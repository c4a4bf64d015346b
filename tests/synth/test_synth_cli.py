"""``cuda-agent synth`` through the real console entry point, end to end on the cpu backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import cli


@pytest.mark.slow  # a synthesis run
def test_synth_cli_runs_resumes_and_exports(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    # A window no problem fits: every candidate is judged on the device and rejected there
    # before torch.compile (which is slow on the cpu backend), so the test stays quick.
    args = ["synth", "--n", "3", "--backend", "cpu", "--runtime-ms", "0,0.00001", "--out", str(out)]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert "0 of 3 candidates accepted" in first.stdout
    args[2] = "5"
    again = cli(*args)  # resumes: two more seeds
    assert again.returncode == 0, again.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["candidates"] == 5
    window = {row["filter"]: row for row in stats["filters"]}["runtime_window"]
    assert (
        window["reached"]
        + sum(row["rejected"] for row in stats["filters"][: stats["filters"].index(window)])
        == 5
    )
    assert (out / "dataset.jsonl").read_text() == ""
    export = cli("synth", "--out", str(out), "--export-only")
    assert export.returncode == 0 and "0 of 5" in export.stdout


def test_synth_cli_rejects_bad_input_with_one_line(tmp_path: Path) -> None:
    for args, message in [
        (["--runtime-ms", "5"], "LO,HI"),
        (["--composer", "llm"], "--model"),
        (["--max-ops", "7"], "--max-ops"),
    ]:
        result = cli("synth", "--n", "1", "--backend", "cpu", "--out", str(tmp_path), *args)
        assert result.returncode != 0
        assert message in result.stderr and "Traceback" not in result.stderr
