"""File tools: read_file, write_file, edit_file, multi_edit, glob, grep, todo_write.

All paths resolve inside the workdir (symlinks included); anything else is refused.
``write_file`` refuses to overwrite a file the agent has not read (or written) in this episode,
and the edit tools require a prior read too, so the agent never clobbers what it has not seen.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

from cuda_agent.agent.tools.base import Tool, ToolContext, ToolError, object_schema, string_param

MAX_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_FILE_BYTES = 2 << 20
MAX_MATCHES = 200
SKIP_DIRS = {".git", "__pycache__", ".cuda_agent"}


def read_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    path = ctx.resolve(args["path"], must_exist=True)
    if path.is_dir():
        raise ToolError(f"{args['path']}: is a folder (use glob to list it)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ToolError(f"{args['path']}: larger than {MAX_FILE_BYTES >> 20} MiB")
    offset = max(1, int(args.get("offset") or 1))
    limit = max(1, min(int(args.get("limit") or MAX_READ_LINES), MAX_READ_LINES))
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    ctx.read_files.add(path)
    if not lines:
        return f"({ctx.relative(path)} is empty)"
    chosen = lines[offset - 1 : offset - 1 + limit]
    body = "\n".join(
        f"{n:>6}\t{line[:MAX_LINE_CHARS]}" for n, line in enumerate(chosen, start=offset)
    )
    shown_to = offset - 1 + len(chosen)
    if shown_to < len(lines):
        body += f"\n... ({len(lines) - shown_to} more lines; use offset={shown_to + 1})"
    return body


def write_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    path = ctx.resolve(args["path"])
    content = args["content"]
    if not isinstance(content, str):
        raise ToolError("content must be a string")
    if path.is_dir():
        raise ToolError(f"{args['path']}: is a folder")
    if path.exists() and path not in ctx.read_files:
        raise ToolError(
            f"{args['path']}: exists and was not read in this session; "
            "read it first (read_file), then write"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    ctx.read_files.add(path)
    return f"wrote {ctx.relative(path)} ({len(content.splitlines())} lines)"


def edit_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    path = _readable_for_edit(ctx, args["path"])
    text = path.read_text(encoding="utf-8")
    text, count = _replace(
        text, args["old_string"], args["new_string"], bool(args.get("replace_all"))
    )
    path.write_text(text, encoding="utf-8")
    return f"edited {ctx.relative(path)} ({count} replacement{'s' if count != 1 else ''})"


def multi_edit(ctx: ToolContext, args: dict[str, Any]) -> str:
    path = _readable_for_edit(ctx, args["path"])
    edits = args["edits"]
    if not isinstance(edits, list) or not edits:
        raise ToolError("edits must be a non-empty list of {old_string, new_string}")
    text = path.read_text(encoding="utf-8")
    for i, edit in enumerate(edits, 1):
        if not isinstance(edit, dict) or "old_string" not in edit or "new_string" not in edit:
            raise ToolError(f"edit {i}: needs old_string and new_string")
        try:
            text, _ = _replace(
                text, edit["old_string"], edit["new_string"], bool(edit.get("replace_all"))
            )
        except ToolError as err:
            raise ToolError(f"edit {i} of {len(edits)}: {err} (no edit was applied)") from None
    path.write_text(text, encoding="utf-8")
    return f"applied {len(edits)} edits to {ctx.relative(path)}"


def glob_files(ctx: ToolContext, args: dict[str, Any]) -> str:
    pattern = args["pattern"]
    if not isinstance(pattern, str) or pattern.startswith("/") or ".." in Path(pattern).parts:
        raise ToolError("pattern must be relative to the workdir, without '..'")
    root = ctx.workdir.resolve()
    matches = sorted(
        ctx.relative(p)
        for p in root.glob(pattern)
        if not (set(p.relative_to(root).parts) & SKIP_DIRS) and ctx.resolve(str(p)) == p.resolve()
    )
    if not matches:
        return f"no files match {pattern}"
    more = f"\n... and {len(matches) - MAX_MATCHES} more" if len(matches) > MAX_MATCHES else ""
    return "\n".join(matches[:MAX_MATCHES]) + more


def grep_files(ctx: ToolContext, args: dict[str, Any]) -> str:
    try:
        regex = re.compile(args["pattern"])
    except re.error as err:
        raise ToolError(f"bad regular expression: {err}") from None
    base = ctx.resolve(args.get("path") or ".", must_exist=True)
    file_glob = args.get("glob")
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    hits: list[str] = []
    for file in files:
        rel = ctx.relative(file)
        if set(Path(rel).parts) & SKIP_DIRS or file.stat().st_size > MAX_FILE_BYTES:
            continue
        if (
            file_glob
            and not fnmatch.fnmatch(file.name, file_glob)
            and not fnmatch.fnmatch(rel, file_glob)
        ):
            continue
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(lines, 1):
            if regex.search(line):
                hits.append(f"{rel}:{n}:{line[:MAX_LINE_CHARS]}")
                if len(hits) >= MAX_MATCHES:
                    return "\n".join(hits) + f"\n... (stopped at {MAX_MATCHES} matches)"
    return "\n".join(hits) if hits else "no matches"


def todo_write(ctx: ToolContext, args: dict[str, Any]) -> str:
    todos = args["todos"]
    if not isinstance(todos, list):
        raise ToolError("todos must be a list of {content, status}")
    cleaned = []
    for item in todos:
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            raise ToolError("each todo needs a content string")
        status = item.get("status", "pending")
        if status not in ("pending", "in_progress", "completed"):
            raise ToolError(f"status must be pending, in_progress or completed (got {status!r})")
        cleaned.append({"content": item["content"], "status": status})
    ctx.todos = cleaned
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    return "\n".join(f"{marks[t['status']]} {t['content']}" for t in cleaned) or "(no todos)"


def _readable_for_edit(ctx: ToolContext, raw: str) -> Path:
    path = ctx.resolve(raw, must_exist=True)
    if path not in ctx.read_files:
        raise ToolError(f"{raw}: read it first (read_file), then edit")
    return path


def _replace(text: str, old: Any, new: Any, replace_all: bool) -> tuple[str, int]:
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolError("old_string and new_string must be strings")
    if old == new:
        raise ToolError("old_string and new_string are the same")
    count = text.count(old) if old else 0
    if count == 0:
        raise ToolError("old_string not found in the file")
    if count > 1 and not replace_all:
        raise ToolError(f"old_string occurs {count} times; make it unique or set replace_all")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1), count


PATH = string_param("File path, relative to the workdir (or absolute inside it).")
EDIT = object_schema(
    {
        "old_string": string_param("Exact text to replace."),
        "new_string": string_param("Replacement text."),
        "replace_all": {"type": "boolean"},
    },
    ["old_string", "new_string"],
)

FILE_TOOLS = [
    Tool(
        "read_file",
        "Read a text file with line numbers (records that you have read it).",
        object_schema(
            {
                "path": PATH,
                "offset": {"type": "integer", "description": "First line (1-based)."},
                "limit": {"type": "integer", "description": "Number of lines."},
            },
            ["path"],
        ),
        read_file,
    ),
    Tool(
        "write_file",
        "Create or overwrite a file. Existing files must be read first.",
        object_schema(
            {"path": PATH, "content": string_param("The whole new content.")}, ["path", "content"]
        ),
        write_file,
    ),
    Tool(
        "edit_file",
        "Replace an exact string in a file you have read (unique unless replace_all).",
        object_schema(
            {
                "path": PATH,
                "old_string": string_param("Exact text to replace."),
                "new_string": string_param("Replacement text."),
                "replace_all": {"type": "boolean"},
            },
            ["path", "old_string", "new_string"],
        ),
        edit_file,
    ),
    Tool(
        "multi_edit",
        "Apply several exact-string edits to one file, all or none.",
        object_schema({"path": PATH, "edits": {"type": "array", "items": EDIT}}, ["path", "edits"]),
        multi_edit,
    ),
    Tool(
        "glob",
        "List files matching a glob pattern relative to the workdir (e.g. kernels/*.cu).",
        object_schema({"pattern": string_param("Glob pattern, e.g. **/*.py")}, ["pattern"]),
        glob_files,
    ),
    Tool(
        "grep",
        "Search file contents with a regular expression; prints path:line:text.",
        object_schema(
            {
                "pattern": string_param("Python regular expression."),
                "path": string_param("File or folder to search (default: workdir)."),
                "glob": string_param("Only files matching this glob, e.g. *.cu"),
            },
            ["pattern"],
        ),
        grep_files,
    ),
    Tool(
        "todo_write",
        "Replace your task list (a plan you keep up to date).",
        object_schema(
            {
                "todos": {
                    "type": "array",
                    "items": object_schema(
                        {
                            "content": string_param("The task."),
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                            },
                        },
                        ["content", "status"],
                    ),
                }
            },
            ["todos"],
        ),
        todo_write,
    ),
]
