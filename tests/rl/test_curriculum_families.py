"""The curriculum's problem families: elementwise, chain, row-wise and reduction problems in one
set, each family's kernel contract, prompt and reference kernel.

The fast tests build a four-family set (nothing is compiled; the row families' screen runs
PyTorch on one small input per draw) and check the split per family, the decontamination, the
prompts, the answer parsing per family and that the fill-in task refuses the row families.
The slow ones compile every reference kernel of a small four-family set into one extension
and compare it with PyTorch (cpu), compile the cuda ones with nvcc (not run: no GPU here),
and score right, wrong and out-of-bounds kernels of a row-wise and a reduction problem through
the evaluator (cpu backend).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.problems.sets import load_problem_set, resolve_problem
from cuda_agent.rl.curriculum.chains import compose_chain
from cuda_agent.rl.curriculum.families import (
    FAMILIES,
    FamilyError,
    candidate_of,
    family_of,
    launch_name,
    launch_signature,
    spec_family,
    supports,
)
from cuda_agent.rl.curriculum.kernel_prompts import kernel_prompt
from cuda_agent.rl.curriculum.ops import compose
from cuda_agent.rl.curriculum.problem_set import (
    SPLITS,
    CurriculumError,
    CurriculumSpec,
    build_problem_set,
    problem_set_folder,
    read_split,
    row_spec,
)
from cuda_agent.rl.curriculum.reference import reference_kernel
from cuda_agent.rl.curriculum.reply_kernels import reply_kernel
from cuda_agent.rl.curriculum.row_ops import draw_row, screen
from cuda_agent.rl.curriculum.sampling import reference_samples
from cuda_agent.rl.curriculum.scaffold import CPU_BINDING, LAUNCH_SIGNATURES, write_workdir
from cuda_agent.rl.curriculum.sources import problem_source
from cuda_agent.rl.curriculum.tasks import (
    TaskError,
    extract_kernel,
    messages,
    outcome,
    score_reply,
    torch_expression,
)
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.filters import exact_key, structure_key
from tests.helpers import fast_options, inline_module

SPEC = CurriculumSpec(n_train=160, n_heldout=48, families=FAMILIES)
SMALL = CurriculumSpec(n_train=12, n_heldout=4, families=FAMILIES)
# Outputs that zeros or a constant pass at the 1e-2 tolerance on randn inputs (plain softmax:
# values near 1/1024, all below the absolute tolerance but a few).
TRIVIAL = (
    "torch.amax(torch.tanh(x), dim=-1)",
    "torch.relu(torch.log_softmax(x, dim=-1))",
    "torch.amin(torch.abs(x), dim=-1)",
    "torch.softmax(x, dim=-1)",
)


@pytest.fixture(scope="module")
def families_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("families") / "set"
    build_problem_set(folder, SPEC)
    return folder


@pytest.fixture(scope="module")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("families-small") / "set"
    build_problem_set(folder, SMALL)
    return folder


def every_row(folder: Path) -> list[dict[str, Any]]:
    return read_split(folder, "train") + read_split(folder, "heldout")


def first_of(folder: Path, family: str, split: str = "train") -> dict[str, Any]:
    return next(r for r in read_split(folder, split) if r["family"] == family)


def test_a_family_is_told_by_the_id_and_has_one_kernel_contract() -> None:
    assert [family_of(i) for i in ("ew_00001", "ch_00002", "rw_00003", "rd_00004")] == list(
        FAMILIES
    )
    assert family_of("relu") == family_of("log_softmax_rows") == "elementwise"  # not ours
    assert spec_family("/sets/train.jsonl#rd_00012") == "reduction"
    assert spec_family("relu") == "elementwise" and spec_family("p/rw_00001.py") == "rowwise"
    assert launch_signature("elementwise", "cuda") == LAUNCH_SIGNATURES["cuda"]
    assert launch_signature("chain", "cpu") == LAUNCH_SIGNATURES["cpu"]
    assert launch_signature("rowwise", "cpu") == (
        'extern "C" void rowwise_launch(const float* x, float* y, int64_t rows, int64_t cols)'
    )
    assert launch_signature("reduction", "cuda") == (
        'extern "C" cudaError_t reduce_launch(const float* x, float* y, int64_t rows, '
        "int64_t cols, cudaStream_t stream)"
    )
    assert [f for f in FAMILIES if supports("fill-in", f)] == ["elementwise", "chain"]
    assert all(supports(t, f) for t in ("model-new", "kernel") for f in FAMILIES)
    assert candidate_of("ew_00007") == compose(7) and candidate_of("ch_00007") == compose_chain(7)
    assert candidate_of("rw_00007") == draw_row("rowwise", 7)
    with pytest.raises(FamilyError, match="not a curriculum problem id"):
        candidate_of("relu")
    with pytest.raises(FamilyError, match="choose from"):
        supports("kernel", "matmul")


def test_the_draws_are_deterministic_finite_and_not_trivial() -> None:
    import torch
    import torch.nn.functional as F

    chains = [compose_chain(s) for s in range(60)]
    assert chains == [compose_chain(s) for s in range(60)]
    assert {len(c.steps) for c in chains} == {3, 4, 5}
    rows = [draw_row(f, s) for f in ("rowwise", "reduction") for s in range(60)]
    assert rows == [draw_row(f, s) for f in ("rowwise", "reduction") for s in range(60)]
    assert {r.op for r in rows} == {
        "softmax", "log_softmax", "layer_norm", "rms_norm", "l2_normalize",
        "sum", "mean", "amax", "amin", "sum_squares", "l2_norm",
    }  # fmt: skip
    assert all(
        len(r.pre) + len(r.post) <= 2 and not (r.family == "reduction" and r.post) for r in rows
    )
    for trivial in TRIVIAL:  # what the screen keeps out
        assert not screen(trivial), trivial
    x = torch.randn(64, 1024, generator=torch.Generator().manual_seed(1))
    for problem in [*chains, *rows]:
        y = eval(problem.torch_expr, {"torch": torch, "F": F, "x": x})  # our own text
        assert bool(torch.isfinite(y).all()), problem
        assert float((y.abs() <= 1e-2 + 1e-2 * y.abs()).float().mean()) < 0.95, problem
        reduced = getattr(problem, "family", None) == "reduction"
        assert tuple(y.shape) == ((64,) if reduced else (64, 1024)), problem


def test_a_four_family_set_has_every_family_in_both_splits_and_stays_decontaminated(
    families_set: Path,
) -> None:
    train, heldout = read_split(families_set, "train"), read_split(families_set, "heldout")
    assert Counter(r["family"] for r in train) == {f: 40 for f in FAMILIES}
    assert Counter(r["family"] for r in heldout) == {f: 12 for f in FAMILIES}
    for key in ("id", "torch_expr"):
        assert not {r[key] for r in train} & {r[key] for r in heldout}, key
    for keyer in (exact_key, structure_key):
        assert not {keyer(r["code"]) for r in train} & {keyer(r["code"]) for r in heldout}
    benchmark = {p.id: p.source for p in load_problem_set("bundled")}
    against = Decontaminator({**benchmark, **{r["id"]: r["code"] for r in heldout}})
    for row in train:
        assert against.best_match(row["code"]).score <= SPEC.threshold, row["id"]
    for row in heldout:
        assert Decontaminator(benchmark).best_match(row["code"]).score <= SPEC.threshold
    for row in train + heldout:
        family = row["family"]
        assert family_of(row["id"]) == family and row["ops"] and row["torch_expr"]
        assert (row["answer"] is not None) == supports("fill-in", family), row["id"]
        assert candidate_of(row["id"]).torch_expr == row["torch_expr"]
        assert problem_source(row["id"], candidate_of(row["id"]), "small") == row["code"]
    rowwise = first_of(families_set, "rowwise")
    assert "y has the shape of x" in rowwise["code"] and "dim = 1024" in rowwise["code"]
    assert "one value per row (256)" in first_of(families_set, "reduction")["code"]
    stats = json.loads((families_set / "stats.json").read_text())
    assert stats["splits"]["heldout"]["families"] == {f: 12 for f in FAMILIES}
    for split in SPLITS:  # every row is a problem anywhere a problem spec is taken
        problems = load_problem_set(str(families_set / f"{split}.jsonl"))
        assert len(problems) == len(read_split(families_set, split))
    problem = resolve_problem(row_spec(families_set, rowwise))
    assert torch_expression(problem) == rowwise["torch_expr"]


def test_the_default_set_is_the_elementwise_one_and_specs_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert CurriculumSpec().families == ("elementwise",)
    assert CurriculumSpec().digest() != CurriculumSpec(families=("elementwise", "chain")).digest()
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    folder = problem_set_folder(
        CurriculumSpec(n_train=8, n_heldout=4, families=("chain", "reduction"))
    )
    assert folder.name.startswith("chain-reduction-")
    assert Counter(r["family"] for r in read_split(folder, "train")) == {"chain": 4, "reduction": 4}
    for bad in (("matmul",), ("chain", "chain"), ()):
        with pytest.raises(CurriculumError, match="families"):
            CurriculumSpec(families=bad).check()
    with pytest.raises(CurriculumError, match="every family"):
        CurriculumSpec(n_heldout=2, families=FAMILIES).check()


def test_the_kernel_prompt_states_the_family_contract_and_one_example(families_set: Path) -> None:
    expressions = {r["torch_expr"] for r in every_row(families_set)}
    for family in FAMILIES:
        row = first_of(families_set, family)
        problem = resolve_problem(row_spec(families_set, row))
        for backend in ("cpu", "cuda"):
            prompt = messages("kernel", problem, backend)
            system, example, code = kernel_prompt(family, backend)
            assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
            assert launch_signature(family, backend) in prompt[0]["content"] == system
            assert prompt[1]["content"] == f"y = {example}" and example not in expressions
            assert launch_name(family) in prompt[2]["content"] and code in prompt[2]["content"]
            assert prompt[-1]["content"] == f"y = {row['torch_expr']}"
    assert kernel_prompt("rowwise", "cpu")[1] == "x - x.mean(dim=-1, keepdim=True)"
    assert kernel_prompt("reduction", "cuda")[1] == "torch.exp(x).sum(dim=-1)"
    assert "y has rows elements" in kernel_prompt("reduction", "cpu")[0]
    assert kernel_prompt("chain", "cuda") == kernel_prompt("elementwise", "cuda")


@pytest.mark.parametrize(
    ("family", "reply", "found"),
    [
        ("rowwise", '```cpp\nextern "C" void rowwise_launch() {}\n```', True),
        ("rowwise", '```cpp\nextern "C" void elementwise_launch() {}\n```', False),
        ("reduction", '```cuda\nextern "C" cudaError_t reduce_launch() {}\n```', True),
        ("reduction", '```cpp\nextern "C" void rowwise_launch() {}\n```', False),
        ("chain", '```cpp\nextern "C" void elementwise_launch() {}\n```', True),
        ("reduction", 'extern "C" void reduce_launch() {}', False),  # no fenced block
        (None, '```cpp\nextern "C" void reduce_launch() {}\n```', True),  # any family's
        (None, "```cpp\nvoid launch() {}\n```", False),
    ],
)
def test_a_kernel_answer_must_define_its_family_launch(
    family: str | None, reply: str, found: bool
) -> None:
    assert (extract_kernel(reply, family) is not None) == found


def test_fill_in_is_for_elementwise_and_chain_problems_only(families_set: Path) -> None:
    for family in ("rowwise", "reduction"):
        row = first_of(families_set, family)
        spec = row_spec(families_set, row)
        problem = resolve_problem(spec)
        with pytest.raises(TaskError, match="fill-in task is for elementwise and chain"):
            messages("fill-in", problem, "cpu")
        with pytest.raises(TaskError, match="fill-in"):
            score_reply("fill-in", spec, "x", "cpu")
        assert messages("model-new", problem, "cpu")[-1]["content"].startswith("```python")
    chain = resolve_problem(row_spec(families_set, first_of(families_set, "chain")))
    assert messages("fill-in", chain, "cuda")[-1]["content"].startswith("y = ")
    rows = every_row(families_set)
    pairs = [(t, r["id"]) for t in ("fill-in", "kernel") for r in rows if supports(t, r["family"])]
    assert len(pairs) == 104 + 208  # fill-in: the elementwise and chain half


def test_the_scaffold_binds_each_family_kernel(families_set: Path, tmp_path: Path) -> None:
    for family, name in (("rowwise", "rowwise"), ("reduction", "reduce"), ("chain", "elementwise")):
        row = first_of(families_set, family)
        spec = row_spec(families_set, row)
        workdir = write_workdir(
            resolve_problem(spec), spec, "cpu", tmp_path / family, "// kernel\n", family
        )
        kernels = workdir / "kernels"
        assert (kernels / f"{name}.cpp").read_text() == "// kernel\n"
        binding = (kernels / f"{name}_binding.cpp").read_text()
        assert f"cuda_extension.{name}(x)" in (workdir / "model_new.py").read_text()
        if name == "elementwise":
            assert binding == CPU_BINDING
        else:
            assert "x.dim() == 2" in binding and f"REGISTER_BINDING({name}, bind);" in binding
            assert launch_signature(family, "cpu") + ";" in binding
    reduce = (tmp_path / "reduction" / "kernels" / "reduce_binding.cpp").read_text()
    assert "torch::empty({xc.size(0)}, xc.options())" in reduce
    row = dict(first_of(families_set, "rowwise"), torch_expr="torch.softmax(x, dim=-1)")
    with pytest.raises(FamilyError, match="another version"):
        reference_kernel(row, "cpu")


def test_reply_kernels_are_short_answers_in_the_prompt_form(families_set: Path) -> None:
    """The cold-start replies fit the model's reply budget (384-512 new tokens, about 3
    characters a token) where the long reference kernels of row problems do not, and each is
    read back by the kernel task as its family's answer."""
    longest: dict[str, int] = {}
    for row in every_row(families_set):
        family = row["family"]
        short = reply_kernel(row, "cuda")
        assert extract_kernel(f"```cuda\n{short}```", family) == short
        assert launch_signature(family, "cuda") + " {" in short
        longest[family] = max(longest.get(family, 0), len(short))
        if family in ("rowwise", "reduction"):
            assert len(reference_kernel(row, "cuda")) > 2_000
        assert reply_kernel(row, "cpu") == reference_kernel(row, "cpu")
    assert set(longest) == set(FAMILIES)
    assert max(longest.values()) <= 1_400, longest


def _combined(kernels: list[tuple[str, str]], prelude: str) -> str:
    """One translation unit holding every (launch name, kernel file), each in its namespace
    with its launch renamed ``NAME_i`` (C linkage ignores namespaces)."""
    parts = [prelude]
    for i, (launch, code) in enumerate(kernels):
        body = "\n".join(line for line in code.splitlines() if not line.startswith("#include"))
        parts.append(
            f"#define {launch} {launch}_{i}\nnamespace k{i} {{\n{body}\n}}\n#undef {launch}\n"
        )
    return "\n".join(parts)


def _kernels(folder: Path, backend: str) -> list[tuple[str, str, str]]:
    """(family, torch expression, kernel file) of every problem and of each family's example."""
    out = [(r["family"], r["torch_expr"], reference_kernel(r, backend)) for r in every_row(folder)]
    if backend == "cuda":  # the short replies too (on cpu, reply_kernel is reference_kernel)
        out += [(r["family"], r["torch_expr"], reply_kernel(r, backend)) for r in every_row(folder)]
    for family in ("elementwise", "rowwise", "reduction"):
        _, example, code = kernel_prompt(family, backend)
        out.append((family, example, code))
    return out


@pytest.mark.slow  # compiles one extension with every reference kernel of a small set
def test_every_cpu_reference_kernel_computes_its_torch_expression(small_set: Path) -> None:
    import torch
    import torch.nn.functional as F

    kernels = _kernels(small_set, "cpu")
    counts = Counter(family for family, _, _ in kernels)
    assert counts == {"elementwise": 5, "chain": 4, "rowwise": 5, "reduction": 5}
    wrappers = []
    for i, (family, _, _) in enumerate(kernels):
        launch = f"k{i}::{launch_name(family)}_{i}"
        alloc = (
            "torch::empty({x.size(0)}, x.options())"
            if family == "reduction"
            else ("torch::empty_like(x)")
        )
        sizes = "x.numel()" if family in ("elementwise", "chain") else "x.size(0), x.size(1)"
        call = f"{launch}(a, b, {sizes});"
        wrappers.append(
            f"torch::Tensor f{i}(torch::Tensor x) {{ auto y = {alloc}; "
            f"const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>(); {call} "
            "return y; }"
        )
    prelude = (
        "#include <torch/extension.h>\n#include <math.h>\n#include <cmath>\n#include <cstdint>\n"
    )
    source = _combined([(launch_name(f), code) for f, _, code in kernels], prelude)
    module = inline_module(
        "ca_curriculum_family_kernels",
        source + "\n" + "\n".join(wrappers),
        [f"f{i}" for i in range(len(kernels))],
    )
    generator = torch.Generator().manual_seed(0)
    for shape in ((64, 1024), (7, 333)):  # the problems' rows, and an odd row length
        x = torch.randn(*shape, generator=generator)
        for i, (family, expression, _) in enumerate(kernels):
            expected = eval(expression, {"torch": torch, "F": F, "x": x})  # our own text
            got = getattr(module, f"f{i}")(x)
            assert got.shape == expected.shape, (family, expression)
            assert torch.allclose(got, expected, atol=1e-3, rtol=1e-3), (shape, expression)


@pytest.mark.slow  # nvcc compiles (does not run) every cuda reference kernel of a small set
def test_every_cuda_reference_kernel_compiles(small_set: Path, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    kernels = _kernels(small_set, "cuda")
    prelude = "#include <cuda_runtime.h>\n#include <math.h>\n\n#include <cstdint>\n"
    source = tmp_path / "kernels.cu"
    source.write_text(_combined([(launch_name(f), code) for f, _, code in kernels], prelude))
    command = [nvcc, "-c", "-std=c++17", "-Werror", "all-warnings", str(source)]
    done = subprocess.run(
        [*command, "-o", str(tmp_path / "kernels.o")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow  # evaluations: builds, workers and AddressSanitizer
@pytest.mark.parametrize("family", ["rowwise", "reduction"])
def test_row_family_kernels_are_scored_and_an_out_of_bounds_write_is_rejected(
    small_set: Path, family: str
) -> None:
    row = first_of(small_set, family, "heldout")
    spec = row_spec(small_set, row)
    code = reference_kernel(row, "cpu")
    options = fast_options()

    def reply(kernel: str) -> str:
        return f"Here:\n```cpp\n{kernel}```\n"

    right = score_reply("kernel", spec, reply(code), "cpu", options)
    assert right.reward >= 1.0 and outcome(right) == "pass", right.result
    assert right.result is not None and right.result.flags == []
    store = "yr[c] = post(" if family == "rowwise" else "y[row] = "
    assert store in code
    wrong = score_reply(
        "kernel", spec, reply(code.replace(store, f"{store}0.5f + ")), "cpu", options
    )
    assert wrong.reward == -1.0 and outcome(wrong) == "wrong"
    assert wrong.result is not None and wrong.result.error is not None
    assert wrong.result.error.stage == "verify"
    past_the_end = "y[rows * cols] = 0.0f;" if family == "rowwise" else "y[rows] = 0.0f;"
    out_of_bounds = code.rstrip().removesuffix("}") + f"  {past_the_end}\n}}\n"
    checked = fast_options(memory_check=True)
    written = score_reply("kernel", spec, reply(out_of_bounds), "cpu", checked)
    assert written.reward == -1.0 and outcome(written) == "wrong"
    assert written.result is not None and "memory_error:access" in written.result.flags
    other = "elementwise_launch" if family == "rowwise" else "rowwise_launch"
    unlaunched = score_reply("kernel", spec, reply(f"void {other}() {{}}\n"), "cpu", options)
    assert outcome(unlaunched) == "format"  # the reply must define its family's launch


@pytest.mark.slow  # one evaluation (a C++ build and a worker) per reference
def test_reference_samples_are_the_families_references_scored_as_replies(small_set: Path) -> None:
    rows = [r for r in read_split(small_set, "train") if r["family"] == "rowwise"][:2]
    assert rows, "the small set has row-wise train problems"
    limit = read_split(small_set, "train").index(rows[-1]) + 1
    samples = reference_samples(
        "cpu", small_set, "train", ("rowwise",), limit=limit, options=fast_options()
    )
    assert [s.problem for s in samples] == [row_spec(small_set, r) for r in rows]
    for sample, row in zip(samples, rows, strict=True):
        assert (sample.task, sample.family, sample.outcome) == ("kernel", "rowwise", "pass")
        assert sample.answer == reply_kernel(row, "cpu")  # the reply holds it, whole
        assert sample.reply.startswith("```cpp\n") and not sample.truncated
        assert sample.flags == ()
