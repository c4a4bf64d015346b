"""Policy decisions live in the policy table (``worker/policies.py``, ``PolicyRules``) only.

A structure test: no code outside ``policies.py`` compares a policy with a policy's name
(``policy == "kernelbench"``, ``policy != "strict"``, ``policy in ("strict", "off")``, or a
``match`` on it); such a site is a decision the table does not show. It reads the fields of
``rules(policy)`` instead. Validating a name against ``POLICIES`` is not a decision and passes.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

import pytest

import cuda_agent
from cuda_agent.evaluator.worker.policies import POLICIES

PACKAGE = Path(cuda_agent.__file__).resolve().parent
TABLE = PACKAGE / "evaluator" / "worker" / "policies.py"
COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _names(node: ast.expr) -> set[str]:
    """The policy names ``node`` spells as string literals (itself, or in a tuple/list/set)."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return {
        item.value for item in items if isinstance(item, ast.Constant) and item.value in POLICIES
    }


def _mentions_policy(node: ast.AST) -> bool:
    return "policy" in ast.unparse(node).lower()


def policy_decisions(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each comparison or ``match`` of a policy with a policy's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            pairs = pairwise([node.left, *node.comparators])
            for op, (a, b) in zip(node.ops, pairs, strict=True):
                if not isinstance(op, COMPARISONS):
                    continue
                if (_names(a) and _mentions_policy(b)) or (_names(b) and _mentions_policy(a)):
                    found.append((node.lineno, ast.unparse(node)))
                    break
        elif isinstance(node, ast.Match) and _mentions_policy(node.subject):
            for case in node.cases:
                values = [p for p in ast.walk(case.pattern) if isinstance(p, ast.MatchValue)]
                if any(_names(v.value) for v in values):
                    found.append((case.pattern.lineno, f"match {ast.unparse(node.subject)}"))
    return found


@pytest.mark.parametrize(
    "code",
    [
        'if req.settings.policy == "kernelbench" and coverage < 0.01:\n    pass',
        'if policy != "strict":\n    pass',
        'ok = "off" == options.policy',
        'ok = policy_name in ("strict", "kernelbench")',
        'ok = self.policy not in ["off"]',
        'match req.settings.policy:\n    case "strict":\n        pass',
        'match policy:\n    case "kernelbench" | "off":\n        pass',
    ],
)
def test_the_scan_finds_a_decision_outside_the_table(code: str) -> None:
    assert policy_decisions(code)


@pytest.mark.parametrize(
    "code",
    [
        'if value in ("0", "off", "none"):\n    pass',  # memory_cap.py
        'OFF = "off"\nok = budget == OFF',  # device_budget.py
        'ok = mode == "off"',
        "ok = policy in POLICIES",
        "ok = policy == other_policy",
        'policy = "strict"',
        'config = dict(lifespan="off")',
        'match mode:\n    case "off":\n        pass',
        'match policy:\n    case "lenient":\n        pass',
    ],
)
def test_the_scan_passes_unrelated_strings(code: str) -> None:
    assert policy_decisions(code) == []


def test_no_policy_decision_outside_the_policy_table() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {code}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != TABLE
        for line, code in policy_decisions(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "decide by a field of PolicyRules (evaluator/worker/policies.py), not by the policy's "
        "name:\n" + "\n".join(found)
    )
