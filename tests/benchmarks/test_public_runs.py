"""``from-runs`` on a tiny runs folder and KernelBench checkout of our own (never corpus code):
the rows it writes (with and without recorded verdicts), its one-line errors, the chain into
``prepare``, and the ``backend`` that the ``kernelbench`` runner hands its worker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmarks.compat import kb_runner
from benchmarks.compat.__main__ import main
from benchmarks.compat.corpus import prepare
from benchmarks.compat.public_runs import convert, write_rows
from benchmarks.kb_peer.kb_import import kb_layout

from benchmarks import triton_agreement
from cuda_agent.core.errors import CudaAgentError

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * {k}

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
"""

SOLUTION = """
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x * {k}
"""


def make_kb(root: Path, level: int = 1, problems: tuple[int, ...] = (1, 2, 10)) -> Path:
    folder = root / "KernelBench" / f"level{level}"
    folder.mkdir(parents=True)
    for n in problems:
        (folder / f"{n}_Times_{n}.py").write_text(PROBLEM.format(k=n))
    (root / "KernelBench" / "test.py").write_text("# not a level folder\n")
    return root


def make_runs(root: Path, level: int = 1, problems: tuple[int, ...] = (1, 2, 10)) -> Path:
    root.mkdir(parents=True)
    for n in problems:
        name = f"level_{level}_problem_{n}_sample_0_kernel.py"
        (root / name).write_text(SOLUTION.format(k=n))
    (root / "generation_config.yaml").write_text("model: none\n")
    return root


def test_rows_carry_reference_solution_and_recorded_verdict(tmp_path: Path) -> None:
    kb, runs = make_kb(tmp_path / "kb"), make_runs(tmp_path / "runs")
    results = {
        "1": {"sample_id": 0, "compiled": True, "correctness": True, "runtime": 2.5,
              "metadata": {"hardware": "GPU X", "correctness_trials": "(5 / 5)"}},
        "2": {"sample_id": 0, "compiled": False, "correctness": False, "runtime": -1.0,
              "metadata": {"compilation_error": "boom"}},
    }  # fmt: skip
    (runs / "eval_results.json").write_text(json.dumps(results))
    rows = convert(runs, kb)
    assert [(r["level_id"], r["task_id"], r["sample_id"]) for r in rows] == [
        (1, 1, 0),
        (1, 2, 0),
        (1, 10, 0),
    ]
    assert rows[2]["ref_code"] == PROBLEM.format(k=10)
    assert rows[2]["custom_code"] == SOLUTION.format(k=10)
    assert rows[0]["source"] == "level_1_problem_1_sample_0_kernel.py"
    assert rows[0]["kb_recorded"] == {
        "compiled": True,
        "correctness": True,
        "runtime": 2.5,
        "hardware": "GPU X",
        "correctness_trials": "(5 / 5)",
    }
    assert rows[1]["kb_recorded"]["compiled"] is False
    assert rows[1]["kb_recorded"]["error_keys"] == ["compilation_error"]
    assert rows[2]["kb_recorded"] is None  # no record of problem 10
    assert rows[0]["kb_recorded_file"] == "eval_results.json"
    summary = write_rows(rows, tmp_path / "out" / "c.jsonl")
    assert summary == {
        "out": str(tmp_path / "out" / "c.jsonl"),
        "rows": 3,
        "recorded": 2,
        "recorded_correct": 1,
    }


def test_without_results_file_no_recorded_keys_and_prepare_reads_it(tmp_path: Path) -> None:
    kb, runs = make_kb(tmp_path / "kb", 2), make_runs(tmp_path / "runs", 2)
    rows = convert(runs, kb)
    assert all("kb_recorded" not in r for r in rows)
    corpus = tmp_path / "set" / "c.jsonl"
    write_rows(rows, corpus)
    manifest = prepare(corpus, tmp_path / "set", kb)
    assert manifest["counts"] == {"solutions": 3, "no_solution": 0, "problem_rejected": 0}
    assert (tmp_path / "set" / "problems" / "level2" / "10_Times_10.py").is_file()
    assert (tmp_path / "set" / "solutions" / "L2_10_Times_10.py").read_text() == SOLUTION.format(
        k=10
    )


def test_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", problems=(1,))
    out = str(tmp_path / "c.jsonl")
    assert main(["from-runs", str(tmp_path / "nope"), "--kb", str(kb), "--out", out]) == 2
    assert "no such runs folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["from-runs", str(tmp_path / "empty"), "--kb", str(kb), "--out", out]) == 2
    assert "no kernel files" in capsys.readouterr().err
    runs = make_runs(tmp_path / "runs", problems=(1, 7))
    assert main(["from-runs", str(runs), "--kb", str(kb), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no problem 7 in" in err and "level1" in err
    assert main(["from-runs", str(runs), "--kb", str(tmp_path), "--out", out]) == 2
    assert "not a KernelBench checkout" in capsys.readouterr().err
    (runs / "eval_results.json").write_text("[1, 2]")
    with pytest.raises(CudaAgentError, match="not a KernelBench results file"):
        convert(runs, make_kb(tmp_path / "kb2", problems=(1, 7)))
    assert not Path(out).exists()


def test_cli_writes_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb, runs = make_kb(tmp_path / "kb"), make_runs(tmp_path / "runs")
    out = tmp_path / "c.jsonl"
    assert main(["from-runs", str(runs), "--kb", str(kb), "--out", str(out), "--level", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 3
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_worker_payload_carries_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    set_dir = tmp_path / "set"
    kb, runs = make_kb(tmp_path / "kb", problems=(1,)), make_runs(tmp_path / "runs", problems=(1,))
    write_rows(convert(runs, kb), set_dir / "c.jsonl")
    prepare(set_dir / "c.jsonl", set_dir, kb)
    seen: dict[str, Any] = {}

    def fake_worker(work: Path, config: kb_runner.KbConfig, left: float | None) -> str:
        seen["payload"] = json.loads((work / "payload.json").read_text())
        seen["env"] = kb_runner._env(work / "build", config.backend)
        return "ok"  # no result.json: recorded as a crash

    monkeypatch.setattr(kb_runner, "_run_worker", fake_worker)
    config = kb_runner.KbConfig(kb=kb, work_dir=tmp_path / "work", backend=backend)
    row = kb_runner._evaluate(set_dir, "L1_1_Times_1", 1, 1, config)
    assert row is not None and row["kind"] == "crash" and row["backend"] == backend
    assert seen["payload"]["backend"] == backend
    assert seen["payload"]["cand_src"] == SOLUTION.format(k=1)
    triton_dirs = "TRITON_CACHE_DIR" in seen["env"]
    assert triton_dirs == (backend == "triton")


def test_flat_kernelbench_tree_is_recognised(tmp_path: Path) -> None:
    assert kb_layout(tmp_path) is None
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "eval.py").write_text("")
    (tmp_path / "src" / "__init__.py").write_text("")
    assert kb_layout(tmp_path) == "flat"
    (tmp_path / "src" / "kernelbench").mkdir()
    (tmp_path / "src" / "kernelbench" / "eval.py").write_text("")
    assert kb_layout(tmp_path) == "package"


def test_triton_agreement_reads_the_kernelbench_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    results = [
        {"problem_id": "L2_1_A", "result": {"correct": True, "speedup_eager": 1.5}},
        {"problem_id": "L2_2_B", "result": {"correct": False, "error": {"stage": "compile"}}},
    ]
    (ours / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    set_dir = tmp_path / "set"
    set_dir.mkdir()
    peer = [
        {"id": "L2_1_A", "compiled": True, "correctness": False, "kind": "runtime"},
        {"id": "L2_1_A", "compiled": True, "correctness": True, "kind": "correct"},
        {"id": "L2_2_B", "compiled": True, "correctness": True, "kind": "correct"},
    ]
    (set_dir / "kernelbench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in peer))
    assert triton_agreement.main([str(ours), str(set_dir)]) == 0
    text = capsys.readouterr().out
    assert "judged by both: 2" in text
    assert "1  both accept" in text
    assert "ours rejects, KernelBench accepts: compile / correct" in text
    assert "speed-up L2_1_A: ours 1.5" in text
