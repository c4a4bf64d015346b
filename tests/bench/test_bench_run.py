"""A cpu-backend bench of bundled problems through LocalPool and RayPool, with a resumed run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.bench.records import RESULTS_FILE, read_records
from cuda_agent.bench.run import run_solutions
from cuda_agent.cluster.local import LocalPool
from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import resolve_problem
from tests.helpers import fast_options

# one worker runs the three in turn (an xdist group: tests/conftest.py): they build the same
# examples, whose precompiled headers (the workdir's binding prelude, the -ffast-math base
# header) one of them compiles while, side by side, the other waited on its lock with a core
# idle (about 30 s of a minute in the 2026-12-07 runs)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bench_examples")]
IDS = ["relu", "bias_gelu_scale", "scale_residual_tanh", "row_sum"]  # row_sum: no solution


@pytest.fixture
def solutions(tmp_path: Path) -> Path:
    folder = tmp_path / "solutions"
    folder.mkdir()
    shutil.copy(examples_root() / "relu" / "cpu.py", folder / "relu.py")
    shutil.copy(
        examples_root() / "scale_residual_tanh" / "cpu.py", folder / "scale_residual_tanh.py"
    )
    shutil.copytree(examples_root() / "bias_gelu_scale" / "cpu", folder / "bias_gelu_scale")
    return folder


def problems() -> list:
    return [resolve_problem(pid, "small") for pid in IDS]


def test_local_pool_bench_and_resume(solutions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with LocalPool("cpu", devices=["cpu0", "cpu1"]) as pool:
        records = run_solutions(problems(), solutions, pool, fast_options(), out)
        assert {r.problem_id for r in records} == set(IDS)
        assert max(pool.busy.values()) == 1  # never two jobs on one device
    by_id = {r.problem_id: r for r in read_records(out)}
    assert all(by_id[pid].correct for pid in IDS[:3])
    assert by_id["row_sum"].result.error.message == "no solution for this problem"
    assert {by_id[pid].result.details.pool_device for pid in IDS[:3]} <= {"cpu0", "cpu1"}
    assert json.loads((out / "run.json").read_text())["jobs_per_device"] == 1

    lines = (out / RESULTS_FILE).read_text().splitlines()
    (out / RESULTS_FILE).write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # torn write
    with LocalPool("cpu") as pool:
        again = run_solutions(problems(), solutions, pool, fast_options(), out)
    assert len(again) == 2  # only the two attempts that were lost
    assert len(read_records(out)) == 4


def test_ray_pool_bench(solutions: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from cuda_agent.cluster.ray_pool import RayPool

    out = tmp_path / "ray-run"
    pool = RayPool("cpu", workers=1, local_cpus=2)
    try:
        records = run_solutions(problems()[:3], solutions, pool, fast_options(), out)
    finally:
        pool.close()
        import ray

        ray.shutdown()
    assert len(records) == 3 and all(r.correct for r in records)
    assert all(":cpu" in str(r.result.details.pool_device) for r in records)


def test_cli_bench_run_and_report(solutions: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli-run"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent",
            "bench",
            "run",
            "--problems",
            "bundled",
            "--levels",
            "1",
            "--solutions",
            str(solutions),
            "--out",
            str(out),
            "--backend",
            "cpu",
            "--baselines",
            "eager",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    use = json.loads((out / "run.json").read_text())["utilization"]
    assert use["devices"] == 1 and 0 < use["device_held_fraction"] <= 1
    assert 0 < use["device_work_s"] <= use["device_held_s"] <= use["wall_s"]
    assert use["queue_wait_s"]["jobs"] >= 1 and use["phases_s"]["worker"] > 0
    assert "devices held " in run.stdout and "queue wait mean" in run.stdout
    # the terms of that line explained beside it (issue 50 item 8)
    legend = " ".join(run.stdout.split())
    assert "device work: the share" in legend and "held alone to measure: the share" in legend
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent",
            "bench",
            "report",
            str(out),
            "--json",
            "--compare",
            "paper:CUDA Agent",
            "--html",
            str(tmp_path / "report.html"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    level1 = data["levels"]["1"]
    assert set(level1) >= {
        "pass_rate",
        "faster_rate_eager",
        "faster_rate_compile",
        "geomean_speedup_eager",
        "geomean_speedup_compile",
        "fast_p",
        "n",
    }
    assert level1["n"] == 6 and level1["pass_rate"] == pytest.approx(1 / 6)  # only relu solved
    assert data["compare"]["CUDA Agent (paper)"]["overall"]["pass_rate"] == pytest.approx(0.988)
    assert "<svg" in (tmp_path / "report.html").read_text()
