"""Small HTML builders for the report pages: elements, escaped text, tables, notes.

Every function returns a string of HTML. ``el`` takes a body that is already safe HTML; data
goes through ``txt`` (escaped, quotes included) first. Nothing here reads or writes files.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any


def attrs_html(attrs: dict[str, Any] | None) -> str:
    if not attrs:
        return ""
    parts = []
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")
        parts.append(f" {key}" if value is True else f' {key}="{escape(str(value))}"')
    return "".join(parts)


def el(tag: str, body: str = "", attrs: dict[str, Any] | None = None) -> str:
    """An element whose ``body`` is already-safe HTML (escape data with ``txt`` first)."""
    return f"<{tag}{attrs_html(attrs)}>{body}</{tag}>"


def txt(value: Any) -> str:
    return escape(str(value), quote=True)


def section(title: str, anchor: str, body: str) -> str:
    return el("section", el("h2", txt(title)) + body, {"id": anchor})


def table(
    head_rows: Iterable[str], body_rows: Iterable[str], attrs: dict[str, Any] | None = None
) -> str:
    head = el("thead", "".join(head_rows))
    return el("table", head + el("tbody", "".join(body_rows)), attrs)


def note(text: str) -> str:
    return el("p", txt(text), {"class": "note"})
