"""Commands' help as the terminal shows it: docstrings are written for the source (reST
double backticks, lines broken at 100 columns); ``--help`` gets plain text whose paragraphs
the terminal wraps (a line that starts with ``\\b`` or is indented keeps its breaks). A plain
flag's row shows no type (typer 0.29 writes ``<bool>`` beside ``--json``, a flag that takes no
value: ``hide_flag_types``)."""

from __future__ import annotations

import inspect

import typer


def tidy(text: str) -> str:
    """``x`` -> `x`; the lines of each paragraph joined with spaces."""
    paragraphs = inspect.cleandoc(text).replace("``", "`").split("\n\n")
    return "\n\n".join(_join(p) for p in paragraphs)


def _join(paragraph: str) -> str:
    lines = paragraph.splitlines()
    if any(line.startswith(("\b", " ")) for line in lines):
        return paragraph  # preformatted: lists, examples
    return " ".join(line.strip() for line in lines)


def tidy_commands(app: typer.Typer) -> None:
    """Set every command's help (its docstring unless given) through ``tidy``, in sub-apps too."""
    for command in app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = tidy(text)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            tidy_commands(group.typer_instance)


def hide_flag_types() -> None:
    """Typer's help shows a ``<bool>`` type column for flags, which take no value; show none.
    Options with a value keep theirs. Does nothing where typer has no such method."""
    option = getattr(getattr(typer, "core", None), "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if option is None or shown is None or getattr(shown, "_flags_hidden", False):
        return

    def display_type_rich(self: object, ctx: object) -> str | None:
        if getattr(self, "is_flag", False) and getattr(self, "metavar", None) is None:
            return None
        return shown(self, ctx)

    display_type_rich._flags_hidden = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich
