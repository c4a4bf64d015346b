"""Reading the memory checkers' reports: compute-sanitizer's memcheck log, AddressSanitizer's
report files.

Each parser returns ``(errors, findings)``: the number of invalid accesses the checker counted
and the first few findings, one line each, paths cut to their last part. Used by
``memory_safety.py``; reads text only.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_FINDINGS = 3
_SANITIZER_RECORD = re.compile(r"^=+ (?! )(.*)$")
_PATH = re.compile(r"/(?:[^\s/()]+/)+([^\s/()]+)")  # a path: its last part is enough
_SANITIZER_SUMMARY = re.compile(r"ERROR SUMMARY: ([\d,]+) error")
_SANITIZER_NOISE = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "Saved host backtrace",
    "Target application returned",
    "This application",
    "Note:",
)


def read_reports(log: Path, backend: str) -> str:
    """The checker's report: memcheck's log file, or every ``asan.<pid>`` file ASan wrote."""
    if backend == "cuda":
        return log.read_text(errors="replace") if log.exists() else ""
    parts = sorted(log.parent.glob(f"{log.name}.*"))
    return "\n".join(p.read_text(errors="replace") for p in parts)


def parse_memcheck(text: str) -> tuple[int, list[str]]:
    """(errors, findings) from compute-sanitizer's memcheck log."""
    findings: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        match = _SANITIZER_RECORD.match(line)
        if match:
            head = match.group(1).strip()
            if current:
                findings.append(_one_line(current))
            current = [] if head.startswith(_SANITIZER_NOISE) or not head else [head]
            continue
        detail = line.lstrip("= ").strip()
        if current and detail.startswith(("at ", "Address ", "and is ")):
            current.append(detail)
    if current:
        findings.append(_one_line(current))
    summary = _SANITIZER_SUMMARY.search(text)
    errors = int(summary.group(1).replace(",", "")) if summary else len(findings)
    unique = list(dict.fromkeys(findings))
    return errors, unique[:MAX_FINDINGS]


def parse_asan(text: str) -> tuple[int, list[str]]:
    """(errors, findings) from AddressSanitizer's report files."""
    findings: list[str] = []
    errors = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "ERROR: AddressSanitizer:" not in line:
            continue
        errors += 1
        kind = line.split("ERROR: AddressSanitizer:", 1)[1].split(" on ", 1)[0].strip()
        access = frame = located = None
        for follow in lines[i + 1 :]:  # to the report's end: a torch stack is long
            text_line = follow.strip()
            if "ERROR: AddressSanitizer:" in text_line or text_line.startswith("SUMMARY: "):
                break
            if access is None and text_line.startswith(("READ of size", "WRITE of size")):
                access = text_line.split(" at ", 1)[0]
            elif frame is None and text_line.startswith("#0 ") and " in " in text_line:
                frame = "in " + text_line.split(" in ", 1)[1]
            elif located is None and " is located " in text_line:
                located = text_line.split(" is ", 1)[1]
        findings.append(_one_line([kind, *(p for p in (access, frame, located) if p)]))
    return errors, list(dict.fromkeys(findings))[:MAX_FINDINGS]


def _one_line(parts: list[str]) -> str:
    text = _PATH.sub(lambda m: m.group(1), " ".join(" ".join(parts).split()))
    return text[:300]
