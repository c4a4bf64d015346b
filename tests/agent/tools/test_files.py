import json
from pathlib import Path

import pytest

from cuda_agent.agent.tools.base import ToolContext
from cuda_agent.agent.tools.registry import default_tools


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model.py").write_text("a = 1\nb = 2\nb = 2\n")
    return ToolContext(workdir=tmp_path)


def call(ctx: ToolContext, name: str, **args: object):
    return default_tools().call(ctx, name, json.dumps(args))


def test_read_numbers_lines_and_pages(ctx: ToolContext) -> None:
    out = call(ctx, "read_file", path="model.py", offset=2, limit=1)
    assert not out.is_error
    assert out.text.splitlines()[0] == "     2\tb = 2"
    assert "1 more lines; use offset=3" in out.text


def test_write_guard_requires_a_read_first(ctx: ToolContext) -> None:
    refused = call(ctx, "write_file", path="model.py", content="x = 0\n")
    assert refused.is_error and "read it first" in refused.text
    assert (ctx.workdir / "model.py").read_text().startswith("a = 1")
    call(ctx, "read_file", path="model.py")
    assert not call(ctx, "write_file", path="model.py", content="x = 0\n").is_error
    created = call(ctx, "write_file", path="kernels/new.cu", content="// k\n")
    assert created.text == "wrote kernels/new.cu (1 lines)"


def test_edit_needs_a_unique_match_and_multi_edit_is_all_or_nothing(ctx: ToolContext) -> None:
    assert (
        "read it first"
        in call(ctx, "edit_file", path="model.py", old_string="a", new_string="c").text
    )
    call(ctx, "read_file", path="model.py")
    assert (
        "occurs 2 times"
        in call(ctx, "edit_file", path="model.py", old_string="b = 2", new_string="b = 3").text
    )
    assert not call(
        ctx, "edit_file", path="model.py", old_string="b = 2", new_string="b = 3", replace_all=True
    ).is_error
    bad = call(
        ctx,
        "multi_edit",
        path="model.py",
        edits=[
            {"old_string": "a = 1", "new_string": "a = 5"},
            {"old_string": "missing", "new_string": "x"},
        ],
    )
    assert bad.is_error and "edit 2 of 2" in bad.text
    assert (ctx.workdir / "model.py").read_text() == "a = 1\nb = 3\nb = 3\n"


def test_paths_outside_the_workdir_are_refused(ctx: ToolContext, tmp_path: Path) -> None:
    outside = tmp_path.parent / "outside.txt"
    for path in ("../outside.txt", str(outside), "/etc/passwd"):
        out = call(ctx, "write_file", path=path, content="x")
        assert out.is_error and "outside the workdir" in out.text
    assert not outside.exists()
    (ctx.workdir / "link").symlink_to("/etc")
    assert "outside the workdir" in call(ctx, "read_file", path="link/passwd").text


def test_glob_grep_todo(ctx: ToolContext) -> None:
    (ctx.workdir / "kernels" / "a.cu").write_text("__global__ void a() {}\n")
    (ctx.workdir / "kernels" / "b.cpp").write_text("int b;\n")
    assert call(ctx, "glob", pattern="kernels/*.cu").text == "kernels/a.cu"
    assert (
        call(ctx, "grep", pattern=r"__global__", glob="*.cu").text
        == "kernels/a.cu:1:__global__ void a() {}"
    )
    assert call(ctx, "grep", pattern="nothing").text == "no matches"
    todo = call(ctx, "todo_write", todos=[{"content": "fuse", "status": "in_progress"}])
    assert todo.text == "[~] fuse" and ctx.todos == [{"content": "fuse", "status": "in_progress"}]


def test_malformed_calls_are_format_errors(ctx: ToolContext) -> None:
    registry = default_tools()
    assert registry.call(ctx, "nope", "{}").format_error
    assert registry.call(ctx, "read_file", "{not json").format_error
    assert registry.call(ctx, "read_file", "{}").format_error
    assert not registry.call(ctx, "read_file", '{"path": "missing.py"}').format_error
