"""Replay scripts: recorded agent turns that solve a bundled problem, for the demo and tests.

``demo_script`` builds the turns of an engineer-like session from the bundled example solution
of ``bias_gelu_scale`` (no code is duplicated here): read SKILL.md and model.py, plan, write a
kernel with a slip in it, write the binding and ``model_new.py``, compile, read the error, fix
it, compile again, verify, profile, stop. Scripts can also come from a JSON file
(``{"turns": [...]}``) or from a recorded ``trajectory.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_agent.agent.trajectory import assistant_turns, read_events
from cuda_agent.examples import examples_root

DEMO_PROBLEM = "bias_gelu_scale"


def load_script(path: Path) -> list[dict[str, Any]]:
    """Turns from a replay JSON (``{"turns": [...]}`` or a list) or a ``trajectory.jsonl``."""
    if path.suffix == ".jsonl":
        return assistant_turns(read_events(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = data["turns"] if isinstance(data, dict) else data
    if not isinstance(turns, list):
        raise ValueError(f"{path}: expected a list of turns")
    return turns


def demo_script(backend: str) -> list[dict[str, Any]]:
    example = examples_root() / DEMO_PROBLEM / backend
    kernel_path = next(
        p
        for p in sorted((example / "kernels").iterdir())
        if p.suffix in (".cu", ".cpp") and not p.stem.endswith("_binding")
    )
    binding_path = example / "kernels" / f"{kernel_path.stem}_binding.cpp"
    kernel = kernel_path.read_text(encoding="utf-8")
    broken, fixed_line, broken_line = _drop_a_semicolon(kernel)
    kernel_rel = f"kernels/{kernel_path.name}"

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "arguments": arguments}

    return [
        {
            "content": "I'll start by reading the rules of this workspace.",
            "tool_calls": [call("read_file", path="SKILL.md")],
        },
        {"content": "Now the reference model.", "tool_calls": [call("read_file", path="model.py")]},
        {
            "content": "The model adds a bias, applies GELU and scales: three elementwise passes "
            "that one fused kernel can do in a single pass.",
            "tool_calls": [
                call(
                    "todo_write",
                    todos=[
                        {"content": "fused bias + GELU + scale kernel", "status": "in_progress"},
                        {"content": "binding and ModelNew", "status": "pending"},
                        {"content": "compile, verify, profile", "status": "pending"},
                    ],
                )
            ],
        },
        {
            "content": "Writing the fused kernel.",
            "tool_calls": [call("write_file", path=kernel_rel, content=broken)],
        },
        {
            "content": "And its binding.",
            "tool_calls": [
                call(
                    "write_file",
                    path=f"kernels/{binding_path.name}",
                    content=binding_path.read_text(encoding="utf-8"),
                )
            ],
        },
        {
            "content": "ModelNew must keep Model's parameters; let me look at the placeholder.",
            "tool_calls": [call("read_file", path="model_new.py")],
        },
        {
            "content": "Replacing it with a ModelNew that calls the kernel.",
            "tool_calls": [
                call(
                    "write_file",
                    path="model_new.py",
                    content=(example / "model_new.py").read_text(encoding="utf-8"),
                )
            ],
        },
        {"content": "Compiling.", "tool_calls": [call("bash", command="cuda-agent tool compile")]},
        {
            "content": "A missing semicolon in the kernel; fixing it.",
            "tool_calls": [
                call("read_file", path=kernel_rel),
                call("edit_file", path=kernel_rel, old_string=broken_line, new_string=fixed_line),
            ],
        },
        {
            "content": "Compiling again.",
            "tool_calls": [call("bash", command="cuda-agent tool compile")],
        },
        {
            "content": "Now correctness and timing.",
            "tool_calls": [call("bash", command="cuda-agent tool verify")],
        },
        {
            "content": "Profiling to see where the time goes.",
            "tool_calls": [call("bash", command="cuda-agent tool profile")],
        },
        {
            "content": "Done: one fused kernel computes gelu(x + bias) * scale in a single "
            "pass over memory, verified on fresh inputs; see the verify and profile output."
        },
    ]


def _drop_a_semicolon(text: str) -> tuple[str, str, str]:
    """The text with one assignment's ``;`` removed, the intact line, and the broken line."""
    skip = ("//", "#", "constexpr", "static", "extern", "const int")
    for line in text.splitlines():
        stripped = line.strip()
        if not (line.startswith(" ") and " = " in stripped and stripped.endswith(";")):
            continue
        if stripped.startswith(skip) or text.count(line) != 1:
            continue
        broken = line[: line.rindex(";")]
        broken_text = text.replace(line, broken, 1)
        if broken_text.count(broken) == 1:
            return broken_text, line, broken
    raise ValueError("no statement to break in the example kernel")
