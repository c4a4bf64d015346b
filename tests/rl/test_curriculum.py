"""The curriculum: elementwise problems in disjoint, decontaminated train and held-out splits,
two single-turn tasks, and the evaluator's reward for their answers (cpu backend).

The fast tests build the problem set (nothing is run) and check the splits, the prompts and
the answer parsing; the slow ones evaluate answers for real (a correct one earns 1 or more, a
wrong one -1, for both tasks, through ``score_reply`` and through verl's single-turn reward)
and compile every reference answer of the set into one extension to compare it with PyTorch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import load_problem_set, resolve_problem
from cuda_agent.rl.curriculum import POLICIES, TASKS
from cuda_agent.rl.curriculum.ops import OPS, apply_steps, atomic, compose
from cuda_agent.rl.curriculum.problem_set import (
    SPLITS,
    CurriculumError,
    CurriculumSpec,
    build_problem_set,
    problem_set_folder,
    read_split,
    row_spec,
)
from cuda_agent.rl.curriculum.scaffold import HOLE, element_source, kernel_source
from cuda_agent.rl.curriculum.scoring import pooled_evaluator, score_batch
from cuda_agent.rl.curriculum.tasks import (
    FILL_IN_EXAMPLES,
    MODEL_NEW_EXAMPLE,
    Score,
    extract_expression,
    messages,
    model_class_source,
    score_reply,
    torch_expression,
)
from cuda_agent.rl.recipe import RecipeError, load_config, plan
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.filters import exact_key, structure_key
from tests.helpers import fast_options, inline_module


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("curriculum") / "set"
    build_problem_set(folder, CurriculumSpec())
    return folder


def rows(folder: Path, split: str) -> list[dict[str, Any]]:
    return read_split(folder, split)


def test_compositions_are_deterministic_and_parenthesised() -> None:
    assert [compose(s) for s in range(50)] == [compose(s) for s in range(50)]
    assert {len(compose(s).steps) for s in range(200)} == {1, 2, 3}
    both = apply_steps((("shift", 1.0), ("square", None), ("scale", -1.5)))
    assert both.torch_expr == "torch.square(x + 1.0) * -1.5"
    assert both.c_expr == "((x + 1.0f) * (x + 1.0f)) * -1.5f"
    nested = apply_steps((("sigmoid", None), ("neg", None)))
    assert nested.c_expr == "-(1.0f / (1.0f + expf(-x)))"
    assert atomic("x") and atomic("fmaxf(x, 0.0f)") and atomic("(x + 1.0f)")
    assert not atomic("x + 1.0f") and not atomic("fmaxf(x, 0.0f) * 2.0f")
    assert not atomic("(x + 1.0f) * (x + 1.0f)")


def test_the_splits_are_disjoint_decontaminated_and_load_as_problem_sets(
    curriculum: Path,
) -> None:
    spec = CurriculumSpec()
    train, heldout = rows(curriculum, "train"), rows(curriculum, "heldout")
    assert (len(train), len(heldout)) == (spec.n_train, spec.n_heldout)
    assert all(r["split"] == "train" for r in train) and all(
        r["split"] == "heldout" for r in heldout
    )
    # no shared id, code, structure (the same ops at other constants) or expression
    for key in ("id", "torch_expr"):
        assert not {r[key] for r in train} & {r[key] for r in heldout}, key
    for keyer in (exact_key, structure_key):
        assert not {keyer(r["code"]) for r in train} & {keyer(r["code"]) for r in heldout}
    # within a split too
    for split in (train, heldout):
        assert len({structure_key(r["code"]) for r in split}) == len(split)
    # no train problem is closer than the threshold to a held-out or bundled problem
    benchmark = {p.id: p.source for p in load_problem_set("bundled")}
    against = Decontaminator({**benchmark, **{r["id"]: r["code"] for r in heldout}})
    for row in train:
        match = against.best_match(row["code"])
        assert match.score <= spec.threshold, (row["id"], match)
        assert row["similarity"] == round(match.score, 4)
    for row in heldout:
        assert Decontaminator(benchmark).best_match(row["code"]).score <= spec.threshold
    # what the filters dropped is on record, with the reason
    rejected = [
        json.loads(line) for line in (curriculum / "rejected.jsonl").read_text().splitlines()
    ]
    assert {r["filter"] for r in rejected} <= {"unique", "decontaminated"} and rejected
    stats = json.loads((curriculum / "stats.json").read_text())
    assert stats["splits"]["train"]["problems"] == spec.n_train
    # every row is a problem anywhere a problem spec is taken
    for split in SPLITS:
        problems = load_problem_set(str(curriculum / f"{split}.jsonl"))
        assert [p.id for p in problems] == [r["id"] for r in rows(curriculum, split)]
    row = train[0]
    problem = resolve_problem(row_spec(curriculum, row))
    assert problem.id == row["id"] and torch_expression(problem) == row["torch_expr"]


def test_the_problem_set_is_deterministic_and_built_once_into_the_cache(
    curriculum: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    again = tmp_path / "again"
    build_problem_set(again, CurriculumSpec())
    for name in ("train.jsonl", "heldout.jsonl", "rejected.jsonl", "stats.json"):
        assert (again / name).read_bytes() == (curriculum / name).read_bytes(), name
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    folder = problem_set_folder()
    assert folder.parent == tmp_path / "cache" / "curriculum"
    stamp = (folder / "train.jsonl").stat().st_mtime_ns
    assert problem_set_folder() == folder and (folder / "train.jsonl").stat().st_mtime_ns == stamp
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no staging left
    other = problem_set_folder(CurriculumSpec(seed=1, n_train=8, n_heldout=4))
    assert other != folder and len(rows(other, "train")) == 8
    with pytest.raises(CurriculumError, match="size"):
        CurriculumSpec(size="huge").check()


def test_prompts_hold_the_problem_and_examples_that_are_no_problem(curriculum: Path) -> None:
    every = rows(curriculum, "train") + rows(curriculum, "heldout")
    examples = {MODEL_NEW_EXAMPLE, *(q for q, _ in FILL_IN_EXAMPLES)}
    assert not examples & {r["torch_expr"] for r in every}
    assert not {"exp", "log1p"} & {op.name for op in OPS}
    row = every[0]
    problem = resolve_problem(row_spec(curriculum, row))
    model_new = messages("model-new", problem, "cpu")
    assert [m["role"] for m in model_new] == ["system", "user", "assistant", "user"]
    assert model_class_source(problem.source) in model_new[-1]["content"]
    assert "get_inputs" not in model_new[-1]["content"]
    for backend, signature in (("cpu", "static inline float"), ("cuda", "__device__")):
        fill_in = messages("fill-in", problem, backend)
        assert signature in fill_in[0]["content"]
        assert fill_in[-1] == {"role": "user", "content": f"y = {row['torch_expr']}"}
        assert row["answer"] not in json.dumps(fill_in)
    assert HOLE in element_source("cuda") and "return x * 2.0f;" in kernel_source("cpu", "x * 2.0f")


@pytest.mark.parametrize(
    ("reply", "expression"),
    [
        ("fmaxf(x, 0.0f)", "fmaxf(x, 0.0f)"),
        ("```c\nreturn tanhf(x) * 2.0f;\n```", "tanhf(x) * 2.0f"),
        ("y = -x;\nbecause it negates", "-x"),
        ("Sure:\n```cpp\nfloat y = x * x;\n```", "x * x"),
        ("", None),
        ('x; system("ls")', None),
        ("{ return x; }", None),
        ("x // comment", None),
    ],
)
def test_fill_in_answers_are_one_expression(reply: str, expression: str | None) -> None:
    assert extract_expression(reply) == expression


def test_train_grpo_and_single_turn_take_a_curriculum_task(tmp_path: Path) -> None:
    for task in TASKS:
        config = load_config("grpo", overrides=(f"curriculum.task={task}", "size=small"))
        grpo = plan("grpo", config)
        assert grpo.engine == "trl" and grpo.engine_options["task"] == task
        assert grpo.config["evaluation"]["policy"] == POLICIES[task]
        assert "run_curriculum" in grpo.command_line()
        assert grpo.engine_options["num_generations"] == config["curriculum"]["num_generations"]
        single = plan(
            "single-turn", load_config("single-turn", overrides=(f"curriculum.task={task}",))
        )
        (source,) = single.datasets.values()
        assert source["curriculum"]["task"] == task and source["agentic"] is False
        assert f"+reward.custom_reward_function.reward_kwargs.policy={POLICIES[task]}" in (
            single.command
        )
    agentic = load_config("grpo")
    assert "task" not in plan("grpo", agentic).engine_options  # agent episodes by default
    with pytest.raises(RecipeError, match="choose from"):
        plan("grpo", load_config("grpo", overrides=("curriculum.task=nope",)))
    with pytest.raises(RecipeError, match="single-turn"):
        plan("agentic-ppo", load_config("agentic-ppo", overrides=("curriculum.task=fill-in",)))


@pytest.mark.slow  # evaluations: builds and workers
@pytest.mark.parametrize("split", SPLITS)
def test_a_correct_answer_earns_at_least_one_and_a_wrong_one_minus_one(
    curriculum: Path, split: str
) -> None:
    row = rows(curriculum, split)[0]
    spec = row_spec(curriculum, row)
    problem = resolve_problem(spec)
    options = fast_options()
    right = score_reply("fill-in", spec, f"```c\n{row['answer']}\n```", "cpu", options)
    assert right.reward >= 1.0 and right.correct and right.answer == row["answer"]
    assert right.result is not None and right.result.error is None
    wrong = score_reply("fill-in", spec, f"({row['answer']}) + 0.5f", "cpu", options)
    assert wrong.reward == -1.0 and wrong.result is not None
    assert wrong.result.error is not None and wrong.result.error.stage == "verify"
    broken = score_reply("fill-in", spec, "fmaxf(x,", "cpu", options)
    assert broken.reward == -1.0 and broken.result is not None
    assert broken.result.error is not None and broken.result.error.stage == "build"
    assert score_reply("fill-in", spec, "", "cpu", options).result is None  # no answer: -1
    model_class = model_class_source(problem.source).replace("class Model(", "class ModelNew(")
    copy = score_reply("model-new", spec, f"```python\n{model_class}```", "cpu", options)
    assert copy.reward >= 1.0 and copy.correct  # just torch, under the off policy
    changed = model_class.replace(row["torch_expr"], f"({row['torch_expr']}) * 2.0")
    assert changed != model_class
    assert score_reply("model-new", spec, f"```python\n{changed}```", "cpu", options).reward == -1.0
    # the same torch ModelNew under strict is refused: the fill-in task is where kernels start
    assert right.result.flags == [] and POLICIES["fill-in"] == "strict"


def verdict(score: Score) -> tuple[bool, bool, str | None, tuple[str, ...]]:
    """What a scored reply's evaluation decided, apart from how fast it ran."""
    result = score.result
    if result is None:
        return (score.correct, score.reward > 0, None, ())
    stage = result.error.stage if result.error is not None else None
    return (score.correct, score.reward > 0, stage, tuple(result.flags))


@pytest.mark.slow  # evaluations through a LocalPool of two jobs
def test_replies_scored_several_at_once_get_the_verdicts_they_get_one_by_one(
    curriculum: Path,
) -> None:
    row = rows(curriculum, "train")[0]
    spec = row_spec(curriculum, row)
    model_class = model_class_source(resolve_problem(spec).source)
    right = model_class.replace("class Model(", "class ModelNew(")
    wrong = right.replace(row["torch_expr"], f"({row['torch_expr']}) * 2.0")
    replies = [f"```python\n{right}```", f"```python\n{wrong}```", "no code at all"]
    specs = [spec] * len(replies)
    options = fast_options()
    alone = score_batch("model-new", specs, replies, "cpu", options, evaluate, jobs=1)
    with pooled_evaluator("cpu", 2, evaluate) as scorer:
        assert scorer is not evaluate  # the pool's, not the in-process evaluator
        pooled = score_batch("model-new", specs, replies, "cpu", options, scorer, jobs=2)
    # the verdicts, not the rewards: a correct reply's reward (1, 2 or 3) depends on its
    # measured speed-up, which differs between two timings of the same copy of the reference
    assert [verdict(s) for s in alone] == [verdict(s) for s in pooled]
    assert [s.correct for s in pooled] == [True, False, False]
    assert pooled[0].reward >= 1.0 and pooled[1].reward == -1.0 and pooled[2].result is None
    with pooled_evaluator("cpu", 1, evaluate) as scorer:
        assert scorer is evaluate  # one job: nothing pooled


@pytest.mark.slow  # an evaluation through verl's single-turn reward
def test_verl_single_turn_rows_of_the_curriculum_are_scored_as_their_task(
    curriculum: Path, tmp_path: Path
) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from cuda_agent.rl.verl.data import write_curriculum_dataset
    from cuda_agent.rl.verl.reward import compute_score

    out = tmp_path / "train.parquet"
    assert write_curriculum_dataset("fill-in", str(curriculum), "train", out, "cpu") == 48
    row = pq.read_table(out).to_pylist()[0]
    assert row["extra_info"]["task"] == "fill-in" and row["prompt"][-1]["content"].startswith("y =")
    answer = next(
        r
        for r in rows(curriculum, "train")
        if row_spec(curriculum, r) == row["reward_model"]["ground_truth"]
    )["answer"]
    scored = compute_score(
        row["data_source"],
        answer,
        row["reward_model"]["ground_truth"],
        row["extra_info"],
        eval_options=fast_options(),
    )
    assert scored["score"] >= 1.0 and scored["correct"] == 1.0 and scored["no_solution"] == 0.0
    missing = compute_score(
        row["data_source"], "", row["reward_model"]["ground_truth"], row["extra_info"],
        eval_options=fast_options(),
    )  # fmt: skip
    assert missing["score"] == -1.0 and missing["no_solution"] == 1.0


@pytest.mark.slow  # compiles one extension with every reference answer
def test_every_reference_answer_computes_its_torch_expression(curriculum: Path) -> None:
    import torch
    import torch.nn.functional as F

    every = rows(curriculum, "train") + rows(curriculum, "heldout")
    functions = "\n".join(
        f"static inline float e{i}(float x) {{ return {r['answer']}; }}\n"
        f"torch::Tensor f{i}(torch::Tensor t) {{ auto y = torch::empty_like(t); "
        f"auto a = t.data_ptr<float>(); auto b = y.data_ptr<float>(); "
        f"for (int64_t k = 0; k < t.numel(); ++k) b[k] = e{i}(a[k]); return y; }}"
        for i, r in enumerate(every)
    )
    module = inline_module(
        "ca_curriculum_answers",
        "#include <torch/extension.h>\n#include <math.h>\n" + functions,
        [f"f{i}" for i in range(len(every))],
    )
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    for i, row in enumerate(every):
        expected = eval(row["torch_expr"], {"torch": torch, "F": F, "x": x})  # our own text
        assert torch.allclose(getattr(module, f"f{i}")(x), expected, atol=1e-4, rtol=1e-4), row
