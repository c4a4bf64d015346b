"""Rejection fine-tuning (RFT) data: keep the successful, clean agent trajectories as SFT rows.

The paper's staged recipe has a rejection fine-tuning stage: collect agent trajectories
(``cuda-agent bench run --model ...``, agent mode), keep only those that succeeded cleanly and
fine-tune on them. ``build_rft_dataset`` reads bench run folders (every attempt of
``results.jsonl``, each trajectory judged on its own) and writes the kept ones as chat
transcripts; ``judge_trajectory`` is the filter.

A trajectory is kept only if every rule holds (``RFTRules``, defaults in brackets):

1. reward: the harness's reward of the attempt (the record's ``result.reward``) is strictly
   greater than ``min_reward`` [0.0]. Every reward is -1 when the solution is not correct, so
   the default keeps exactly the correct attempts (milestone reward 1, 2 or 3).
   Reason: ``reward<=0`` (``reward<=<min_reward>``).
2. exit: with ``require_submitted`` [True], the episode's last ``exit`` event is ``submitted``
   (the model stopped on its own), not ``turn_limit``, ``token_budget``, ``wall_clock``,
   ``format_errors`` or ``model_error``. Reason: ``exit:<reason>``, or ``exit:missing`` when
   the trajectory has no exit event.
3. malformed tool calls: at most ``max_malformed_calls`` [0] tool calls that name an unknown
   tool, whose arguments are not a JSON object, or that lack a required argument (the loop's
   own format errors). Tools are those of the start event's ``tools`` when recorded, else the
   default tool set. Reason: ``malformed_tool_calls:<n>``.
4. redundant loops: the same tool call (same tool name, identical arguments after JSON
   normalisation), counted over all tool calls in order, may be issued at most
   ``max_repeated_calls`` [2] times in a row and at most ``max_identical_calls`` [4] times in
   the whole trajectory. Reasons: ``repeated_call:<tool> x<run>`` (the longest run) and
   ``identical_call:<tool> x<count>``, each named once per trajectory.
5. tool errors (optional): with ``max_tool_errors_ratio`` [None: off] set, the share of tool
   results recorded with ``is_error`` may not exceed it. Reason: ``tool_errors:<errors>/<n>``.

A record without a readable trajectory (none recorded, a missing file, or no complete event in
it) is rejected with ``no_trajectory``. A torn last line (a crash mid-write) is skipped and the
rest is judged. A rejected trajectory names every rule it breaks.

Output, in ``out``: ``rft.jsonl``, one row per kept trajectory: ``problem_id``, ``attempt``,
``reward``, ``messages`` (the chat transcript in OpenAI format, system, user, assistant with
its ``tool_calls`` and tool messages, in order, rebuilt by ``agent.trajectory.load_messages``),
``tools`` (the tool schemas, only when the start event recorded them), and ``run`` and
``trajectory`` (where it came from); and ``rft_stats.json``: counts (total, kept, rejected),
a count of each reason and of each kind of reason (the part before ``:``), the rules used.

It does not run SFT (the training engine does, from ``rft.jsonl``), does not re-evaluate
solutions (the reward is the harness's, from the records), and does not deduplicate or
balance trajectories across problems.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import load_messages, read_events
from cuda_agent.bench.records import read_records

RFT_FILE = "rft.jsonl"
STATS_FILE = "rft_stats.json"


@dataclass
class RFTRules:
    min_reward: float = 0.0
    require_submitted: bool = True
    max_malformed_calls: int = 0
    max_repeated_calls: int = 2
    max_identical_calls: int = 4
    max_tool_errors_ratio: float | None = None


@dataclass
class Verdict:
    kept: bool
    reasons: list[str] = field(default_factory=list)
    turns: int = 0
    tool_calls: int = 0


def judge_trajectory(
    events: list[dict[str, Any]], reward: float | None, rules: RFTRules | None = None
) -> Verdict:
    """Whether one trajectory (its events, ``read_events``) is kept, and every rule it breaks."""
    rules = rules or RFTRules()
    if not events:
        return Verdict(False, ["no_trajectory"])
    reasons: list[str] = []
    if reward is None or reward <= rules.min_reward:
        reasons.append(f"reward<={rules.min_reward:g}")

    exits = [e for e in events if e.get("kind") == "exit"]
    exit_reason = str(exits[-1].get("reason")) if exits else "missing"
    if rules.require_submitted and exit_reason != "submitted":
        reasons.append(f"exit:{exit_reason}")

    assistant = [
        e["message"]
        for e in events
        if e.get("kind") == "message" and (e.get("message") or {}).get("role") == "assistant"
    ]
    calls = [c for m in assistant for c in m.get("tool_calls") or []]
    tools = _tool_schemas(events)

    malformed = sum(1 for c in calls if _malformed(c, tools))
    if malformed > rules.max_malformed_calls:
        reasons.append(f"malformed_tool_calls:{malformed}")

    reasons.extend(_loops(calls, rules))

    if rules.max_tool_errors_ratio is not None:
        results = [e for e in events if e.get("kind") == "tool_result"]
        errors = sum(1 for e in results if e.get("is_error"))
        if results and errors / len(results) > rules.max_tool_errors_ratio:
            reasons.append(f"tool_errors:{errors}/{len(results)}")

    return Verdict(not reasons, reasons, len(assistant), len(calls))


def build_rft_dataset(
    run_dirs: list[Path], out: Path, rules: RFTRules | None = None
) -> dict[str, Any]:
    """Judge every attempt of the bench run folders; write ``rft.jsonl`` and ``rft_stats.json``."""
    rules = rules or RFTRules()
    out.mkdir(parents=True, exist_ok=True)
    reasons: Counter[str] = Counter()
    kept = rejected = 0
    rows: list[str] = []
    for run_dir in run_dirs:
        for record in read_records(run_dir):
            reward = record.result.reward
            path = run_dir / record.trajectory if record.trajectory else None
            events = read_events(path) if path is not None and path.is_file() else []
            verdict = judge_trajectory(events, reward, rules)
            if not verdict.kept:
                rejected += 1
                reasons.update(verdict.reasons)
                continue
            kept += 1
            row: dict[str, Any] = {
                "problem_id": record.problem_id,
                "attempt": record.attempt,
                "reward": reward,
                "messages": load_messages(events),
            }
            start = _start(events)
            if start.get("tools"):
                row["tools"] = start["tools"]
            row["run"] = str(run_dir)
            row["trajectory"] = record.trajectory
            rows.append(json.dumps(row, default=str))
    stats: dict[str, Any] = {
        "runs": [str(d) for d in run_dirs],
        "total": kept + rejected,
        "kept": kept,
        "rejected": rejected,
        "reasons": dict(reasons.most_common()),
        "reason_kinds": dict(_kinds(reasons).most_common()),
        "rules": asdict(rules),
    }
    _write_atomic(out / RFT_FILE, "".join(r + "\n" for r in rows))
    _write_atomic(out / STATS_FILE, json.dumps(stats, indent=1) + "\n")
    return stats


def _start(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next((e for e in events if e.get("kind") == "start"), {})


def _tool_schemas(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool name -> JSON-schema parameters: the start event's tools, else the default set."""
    schemas = _start(events).get("tools") or default_tools().schemas()
    out = {}
    for schema in schemas:
        function = schema.get("function", schema) if isinstance(schema, dict) else {}
        if isinstance(function, dict) and "name" in function:
            out[str(function["name"])] = function.get("parameters") or {}
    return out


def _arguments(call: dict[str, Any]) -> Any:
    raw = (call.get("function") or {}).get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        return None


def _malformed(call: dict[str, Any], tools: dict[str, dict[str, Any]]) -> bool:
    name = (call.get("function") or {}).get("name")
    if name not in tools:
        return True
    arguments = _arguments(call)
    if not isinstance(arguments, dict):
        return True
    return any(k not in arguments for k in tools[name].get("required", []))


def _call_key(call: dict[str, Any]) -> tuple[str, str]:
    function = call.get("function") or {}
    arguments = _arguments(call)
    if arguments is None:
        text = str(function.get("arguments"))
    else:
        text = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return str(function.get("name")), text


def _loops(calls: list[dict[str, Any]], rules: RFTRules) -> list[str]:
    """``repeated_call`` / ``identical_call`` reasons, each named once, in order."""
    keys = [_call_key(c) for c in calls]
    longest: dict[tuple[str, str], int] = {}
    run = 0
    for i, key in enumerate(keys):
        run = run + 1 if i and keys[i - 1] == key else 1
        longest[key] = max(longest.get(key, 0), run)
    totals = Counter(keys)
    reasons = []
    for key, run_length in longest.items():
        if run_length > rules.max_repeated_calls:
            reasons.append(f"repeated_call:{key[0]} x{run_length}")
    for key, count in totals.items():
        if count > rules.max_identical_calls:
            reasons.append(f"identical_call:{key[0]} x{count}")
    return list(dict.fromkeys(reasons))  # two calls of one tool breaking a rule alike: once


def _kinds(reasons: Counter[str]) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for reason, count in reasons.items():
        kinds[reason.split(":", 1)[0]] += count
    return kinds


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
