"""``train rft --task`` and the stable GRPO path on the cpu backend, through the real CLI, with
the tiny local model and the real evaluator.

* A sample of replies scored by the real evaluator (the curriculum's own reference answers,
  which pass, and a wrong one) is fine-tuned on for one real step: the examples are the
  passing replies, the weights move, the model is saved and loads.
* Sampling the tiny model itself (real generation, real scoring) finds nothing that passes:
  the command says so in one line and keeps the sample on disk.
* GRPO with the stable settings, the collapse guard and the graded reward takes a step on the
  learnable problems only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.rl.curriculum.problem_set import (
    CurriculumSpec,
    problem_set_folder,
    read_split,
    row_spec,
)
from cuda_agent.rl.curriculum.rewards import GRADED
from cuda_agent.rl.curriculum.sampling import Sample, write_samples
from cuda_agent.rl.curriculum.verdicts import score_replies
from tests.helpers import fast_options
from tests.rl.models.test_path import cli

pytest.importorskip("trl")
SET = ("curriculum.families=[elementwise]", "curriculum.n_train=4", "curriculum.n_heldout=2")
SPEC = CurriculumSpec(n_train=4, n_heldout=2, size="small")


def scored_sample(folder: Path, replies: list[tuple[dict[str, object], str]]) -> list[Sample]:
    """The replies (row, text) to the fill-in task, scored by the real evaluator."""
    specs = [row_spec(folder, row) for row, _ in replies]
    texts = [text for _, text in replies]
    verdicts = score_replies(
        ["fill-in"] * len(texts), specs, texts, "cpu", fast_options(), evaluate
    )
    return [
        Sample(spec, "fill-in", "elementwise", tuple(row["ops"]), text, 12, False,  # type: ignore[arg-type]
               v.answer, v.reward, v.outcome, v.error_stage, v.flags, v.cached)
        for (row, text), spec, v in zip(replies, specs, verdicts, strict=True)
    ]  # fmt: skip


@pytest.mark.slow  # evaluations (builds), two fine-tuning/GRPO runs of the tiny model
def test_rft_fine_tunes_on_passing_replies_and_grpo_trains_on_the_learnable_ones(
    tmp_path: Path,
) -> None:
    folder = problem_set_folder(SPEC)
    first, second = read_split(folder, "train")[:2]
    samples = scored_sample(
        folder,
        [
            (first, str(first["answer"])),  # right
            (first, "0.0f"),  # wrong: the problem is learnable (1 of 2)
            (second, str(second["answer"])),  # right, twice: one example
            (second, f"{second['answer']}  "),
        ],
    )
    assert [s.outcome for s in samples] == ["pass", "wrong", "pass", "pass"]
    samples_file = tmp_path / "samples.jsonl"
    write_samples(samples_file, samples)

    out = tmp_path / "rft"
    done = cli(
        "train", "rft", "--model", "tiny", "--task", "fill-in", "--backend", "cpu", *SET,
        f"curriculum.samples_file={samples_file}", f"curriculum.out={out}",
        "curriculum.sft.max_steps=1", "curriculum.sft.batch=2", "curriculum.sft.warmup=0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["examples"] == 2 and summary["learnable"] == 1 and summary["steps"] == 1
    record = json.loads((out / "summary.json").read_text())
    assert record["sft"]["changed_params"] is True
    examples = [json.loads(line) for line in (out / "rft.jsonl").read_text().splitlines()]
    assert [e["completion"][0]["content"] for e in examples] == [first["answer"], second["answer"]]
    learnable = json.loads((out / "learnable.json").read_text())
    assert learnable["pairs"] == [["fill-in", row_spec(folder, first)]]
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(out / "model")  # saved whole

    grpo = tmp_path / "grpo"
    done = cli(
        "train", "grpo", "--model", str(out / "model"), "--task", "fill-in", "--steps", "1",
        "--backend", "cpu", *SET, f"out={grpo}", f"curriculum.learnable={out / 'learnable.json'}",
        "curriculum.stable={num_generations: 2, rollouts: 4, micro_batch: 2}",
        "curriculum.guard={}", "curriculum.reward=graded", "curriculum.max_completion_length=8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line) for line in (grpo / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 1 and len(steps[0]["rewards"]) == 4  # 2 groups of 2 in one step
    rows = [json.loads(line) for line in (grpo / "completions.jsonl").read_text().splitlines()]
    assert {r["problem"] for r in rows} == {row_spec(folder, first)}  # the learnable one only
    graded = {*GRADED.values(), -1.0}
    for row in rows:
        expected = graded if row["outcome"] != "pass" else {row["reward"]}
        assert row["training_reward"] in expected, row


@pytest.mark.slow  # the tiny model sampled and its replies scored
def test_rft_of_a_model_that_never_passes_says_so_and_keeps_its_sample(tmp_path: Path) -> None:
    out = tmp_path / "rft"
    done = cli(
        "train", "rft", "--model", "tiny", "--task", "fill-in", "--backend", "cpu", *SET,
        "curriculum.limit=2", "curriculum.samples=2", "curriculum.max_new_tokens=8",
        "curriculum.jobs=1", f"curriculum.out={out}",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr  # a refusal: one line, exit 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "nothing to fine-tune on" in errors[0], done.stderr
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 4  # 2 problems x 2 replies, every one kept
    assert all(json.loads(line)["outcome"] != "pass" for line in lines)
    # the replies were kept before scoring: a second run (as after a cut) generates none
    (out / "samples.jsonl").unlink()
    again = cli(
        "train", "rft", "--model", "tiny", "--task", "fill-in", "--backend", "cpu", *SET,
        "curriculum.limit=2", "curriculum.samples=2", "curriculum.max_new_tokens=8",
        "curriculum.jobs=1", f"curriculum.out={out}",
    )  # fmt: skip
    assert again.returncode == 2, again.stdout + again.stderr
    said = " ".join((again.stdout + again.stderr).split())  # the console wraps long lines
    assert "read from" in said and "(generated before)" in said, said
    replies = [json.loads(line)["reply"] for line in lines]
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [row["reply"] for row in rows] == replies and all(row["cached"] for row in rows)
