"""Each filter rejects a planted bad problem; a good one passes; runs resume and export.

The candidates go through the real pipeline: the static filters in this process, the
execution filters in a sandboxed worker process on the cpu backend (``LocalPool``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.cluster.local import LocalPool
from cuda_agent.problems.dataset import read_dataset
from cuda_agent.problems.sets import bundled_root, load_problem_set
from cuda_agent.synth.compose import Candidate
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.export import export_run
from cuda_agent.synth.filters import StaticFilters
from cuda_agent.synth.run import SynthConfig, SynthConfigError, SynthRun, read_verdicts

pytestmark = pytest.mark.slow  # synthesis runs: many workers

HEAD = "import torch\nimport torch.nn as nn\n\n"
INPUTS = (
    "\n\ndef get_inputs():\n    return [torch.randn({shape})]\n"
    "\n\ndef get_init_inputs():\n    return []\n"
)
ONES = "        self.w = nn.Parameter(torch.ones(32))"


def problem(forward: str, shape: str = "64, 32", init: str = "") -> str:
    body = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return (
        HEAD
        + "class Model(nn.Module):\n"
        + body
        + f"    def forward(self, x):\n        return {forward}\n"
        + INPUTS.format(shape=shape)
    )


GOOD = problem("torch.tanh(x) * 2.0")
# a renamed, reformatted copy of the bundled bias_gelu_scale problem
COPY = (bundled_root() / "level2" / "bias_gelu_scale.py").read_text()
COPY = COPY.replace("scale_factor", "alpha").replace("dim", "width").replace('"""', "'''")
COPY = COPY.replace("batch_size = 16384", "batch_size = 64").replace("width = 8192", "width = 32")

PLANTED = {
    0: ("accepted", GOOD),
    1: ("well_formed", "import torch\n\nclass Model:\n    pass\n"),
    2: ("unique", GOOD.replace("* 2.0", "*   2.0")),  # the same code, another layout
    3: ("unique", GOOD.replace("64, 32", "128, 32")),  # the same structure, other sizes
    4: ("decontaminated", COPY),
    5: ("runs_eager", problem("x.view(7, -1, 3)")),
    6: ("deterministic", problem("x + torch.rand_like(x)")),  # stochastic
    7: ("depends_on_inputs", problem("torch.ones_like(x) * 3.0")),
    8: (
        "depends_on_weights",
        problem("x * self.w", init=ONES),
    ),
    9: ("non_degenerate", problem("torch.sign(x) * 0.009")),  # near zero: zeros would pass
    10: ("runtime_window", problem("torch.cumsum(x, 0)", shape="1500, 1500")),  # too slow
    11: ("runs_eager", problem("__import__('os')._exit(3) or x")),  # kills its worker
}


def planted(seed: int) -> Candidate:
    if seed == 12:
        raise RuntimeError("no valid operator stack")
    source = PLANTED[seed][1]
    return Candidate(
        f"planted_{seed}", seed, source, ["tanh"], "test", (64, 32), (64, 32), "torch#1"
    )


def make_run(out: Path, pool: LocalPool, n: int, window: tuple[float, float]) -> SynthRun:
    decontaminator = Decontaminator.from_problem_set("bundled")
    config = SynthConfig(n=n, backend="cpu", runtime_ms=window, batch_size=6, composer="test")
    return SynthRun(config, out, pool, planted, StaticFilters(decontaminator))


def test_each_filter_rejects_its_planted_problem_and_runs_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    window = (0.0, 2.0)  # cumsum over 1500x1500 on one thread takes longer
    with LocalPool("cpu", worker_slots=2) as pool:
        make_run(out, pool, 6, window).run()
        assert len(read_verdicts(out)) == 6
        make_run(out, pool, 13, window).run()  # resumes: only seeds 6..12 are new
    verdicts = {v["seed"]: v for v in read_verdicts(out)}
    assert sorted(verdicts) == list(range(13))
    for seed, (expected, _) in PLANTED.items():
        verdict = verdicts[seed]
        got = "accepted" if verdict["accepted"] else verdict["filter"]
        assert got == expected, (seed, verdict["filter"], verdict["reason"])
        assert verdict["accepted"] or verdict["reason"]
    assert verdicts[12]["filter"] == "composes"
    assert "bias_gelu_scale" in verdicts[4]["closest"] and verdicts[4]["similarity"] > 0.9
    assert verdicts[0]["eager_ms"] is not None and verdicts[0]["compile_ms"] is not None
    assert "died" in verdicts[11]["reason"] or "exited" in verdicts[11]["reason"]
    sessions = (out / "sessions.jsonl").read_text().splitlines()
    assert [json.loads(s)["checked"] for s in sessions] == [6, 7]

    stats = export_run(out)
    assert stats["candidates"] == 13 and stats["accepted"] == 1
    table = {row["filter"]: row for row in stats["filters"]}
    assert table["unique"]["rejected"] == 2 and table["composes"]["reached"] == 13
    assert stats["similarity"]["above_threshold"] == 1
    rejected = (out / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == 12

    with pytest.raises(SynthConfigError, match="runtime_ms"), LocalPool("cpu") as pool:
        make_run(out, pool, 13, (0.0, 5.0)).run()


def test_export_round_trip_loads_as_a_problem_set(tmp_path: Path) -> None:
    from cuda_agent.synth.compose import ScaleProfile, compose

    out = tmp_path / "run"
    with LocalPool("cpu", worker_slots=2) as pool:
        config = SynthConfig(n=3, backend="cpu", batch_size=3)
        SynthRun(config, out, pool, lambda s: compose(s, scale=ScaleProfile.named("cpu"))).run()
    stats = export_run(out)
    accepted = [v for v in read_verdicts(out) if v["accepted"]]
    assert stats["accepted"] == len(accepted) >= 1
    jsonl, parquet = read_dataset(out / "dataset.jsonl"), read_dataset(out / "dataset.parquet")
    assert jsonl == parquet
    assert {"ops", "data_source", "code", "eager_ms", "compile_ms", "seed"} <= set(jsonl[0])
    for spec in (out, out / "dataset.jsonl", out / "dataset.parquet"):
        problems = load_problem_set(str(spec))
        assert [p.id for p in problems] == [v["id"] for v in accepted]
        assert [p.source for p in problems] == [v["source"] for v in accepted]
        assert problems[0].tags == (accepted[0]["data_source"],)


def test_synthesis_runs_on_a_ray_pool(tmp_path: Path) -> None:
    """The execution filters through RayPool (a local Ray), a worker-killing candidate too."""
    pytest.importorskip("ray")
    from cuda_agent.cluster.ray_pool import RayPool

    pool = RayPool("cpu", workers=1, local_cpus=2, worker_slots=2)
    try:
        config = SynthConfig(n=3, seed=9, backend="cpu", runtime_ms=(0.0, 2.0), batch_size=3)
        SynthRun(config, tmp_path / "run", pool, planted).run()
    finally:
        pool.close()
        import ray

        ray.shutdown()
    verdicts = {v["seed"]: v["filter"] for v in read_verdicts(tmp_path / "run")}
    assert verdicts == {9: "non_degenerate", 10: "runtime_window", 11: "runs_eager"}
