"""Policy decisions live in the policy table (``worker/policies.py``, ``PolicyRules``) only.

A structure test: no code outside ``policies.py`` compares a policy with a policy's name
(``policy == "kernelbench"``, ``policy != "strict"``, ``policy in ("strict", "off")``, or a
``match`` on it); such a site is a decision the table does not show. It reads the fields of
``rules(policy)`` instead. Validating a name against ``POLICIES`` is not a decision and passes.

And the policy is a typed value (``Policy``) with one default: no parameter or field named
``policy`` in the package is a bare string (``Policy``, or another policy type such as the
sandbox's), except where an outside caller's string or another kind of policy is meant
(``UNTYPED``, each with its reason),
and no policy's name is written as a default outside ``policies.py`` (``DEFAULT_POLICY`` is).
"""

from __future__ import annotations

import ast
import json
import pprint
import re
from itertools import pairwise
from pathlib import Path

import pytest

import cuda_agent
from cuda_agent.core.errors import ConfigError
from cuda_agent.core.policy import DEFAULT_POLICY, POLICIES, Policy, parse_policy

PACKAGE = Path(cuda_agent.__file__).resolve().parent
TABLE = PACKAGE / "evaluator" / "worker" / "policies.py"
NAMES = PACKAGE / "core" / "policy.py"  # the names and their one default
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


# where ``policy`` is not this package's Policy, and why
UNTYPED = {
    # the export runtime's dispatch policy: "error", "warn" or "allow", another kind of policy
    ("export/runtime.py", "set_policy"),
    # verl's keyword arguments: a string from verl's config, parsed by
    # EvaluationSettings.from_mapping (rl/verl/evaluation_config.py)
    ("rl/verl/reward.py", "compute_score"),
    ("rl/service_reward.py", "compute_score_batch"),
}


def _words(annotation: str) -> set[str]:
    return set(re.findall(r"\w+", annotation))


def untyped_policies(source: str) -> list[tuple[int, str, str]]:
    """``(line, owner, annotation)`` of each parameter or class field named ``policy`` that is
    a bare string (``str``, ``Any``, ``object`` or no annotation; a type of its own, such as
    ``Policy`` or the sandbox's ``SandboxPolicy``, passes); ``owner``: its function or class."""
    found = []
    for owner in ast.walk(ast.parse(source)):
        if isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef):
            args = owner.args
            named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            slots = [(a.lineno, a.annotation) for a in named if a.arg == "policy"]
        elif isinstance(owner, ast.ClassDef):
            slots = [
                (item.lineno, item.annotation)
                for item in owner.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.target.id == "policy"
            ]
        else:
            continue
        for line, annotation in slots:
            text = ast.unparse(annotation) if annotation is not None else "(none)"
            if annotation is None or {"str", "Any", "object"} & _words(text):
                found.append((line, owner.name, text))
    return found


def policy_name_defaults(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each default of a parameter or field named ``policy`` that spells a
    policy's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        pairs: list[tuple[str, ast.expr | None]] = []
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            pairs = [(node.target.id, node.value)]
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = list(zip([a.arg for a in positional][::-1], node.defaults[::-1], strict=False))
            pairs += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)]
        elif isinstance(node, ast.keyword) and node.arg is not None:
            pairs = [(node.arg, node.value)]
        for name, value in pairs:
            if name == "policy" and value is not None:
                spelled = _names(value) | {
                    c.value
                    for c in ast.walk(value)
                    if isinstance(c, ast.Constant) and c.value in POLICIES
                }
                found += [(node.lineno if hasattr(node, "lineno") else 0, n) for n in spelled]
    return found


@pytest.mark.parametrize(
    "code",
    [
        "def f(policy: str) -> None:\n    pass",
        "def f(*, policy: str | None = None) -> None:\n    pass",
        "class C:\n    policy: str = DEFAULT_POLICY",
        "def f(policy) -> None:\n    pass",
    ],
)
def test_the_scan_finds_an_untyped_policy(code: str) -> None:
    assert untyped_policies(code)


@pytest.mark.parametrize(
    "code",
    [
        'def f(policy: str = "strict") -> None:\n    pass',
        'class C:\n    policy: Policy = "kernelbench"',
        'def g(policy: Policy = typer.Option("off")) -> None:\n    pass',
        'EvalOptions(policy="kernelbench")',
    ],
)
def test_the_scan_finds_a_policy_name_as_a_default(code: str) -> None:
    assert policy_name_defaults(code)


def test_the_scans_pass_a_typed_policy() -> None:
    code = (
        "def f(policy: Policy = DEFAULT_POLICY, other: str = 'strict') -> None:\n    pass\n"
        "class C:\n    policy: Policy | None = None\n    op_policy: bool = True"
    )
    assert untyped_policies(code) == [] and policy_name_defaults(code) == []


def test_every_policy_in_the_package_is_typed_with_one_default() -> None:
    untyped, spelled = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        source = path.read_text(encoding="utf-8")
        untyped += [
            f"{rel}:{line}: {owner}: policy: {text}"
            for line, owner, text in untyped_policies(source)
            if (rel, owner) not in UNTYPED
        ]
        if path not in (TABLE, NAMES):
            spelled += [f"{rel}:{line}: {name}" for line, name in policy_name_defaults(source)]
    assert not untyped, "annotate policy as Policy (core/policy.py):\n" + "\n".join(untyped)
    assert not spelled, "the default is DEFAULT_POLICY, written once:\n" + "\n".join(spelled)


def test_a_policy_is_a_string_everywhere_it_is_read() -> None:
    assert DEFAULT_POLICY is Policy.STRICT and f"{DEFAULT_POLICY}" == "strict"
    # written as Python source (an exported package's VERIFIED) or JSON, it is plain text
    assert pprint.pformat({"policy": Policy.KERNELBENCH}) == "{'policy': 'kernelbench'}"
    assert json.dumps(Policy.OFF) == '"off"'
    assert parse_policy("kernelbench") is Policy.KERNELBENCH
    with pytest.raises(
        ConfigError, match="unknown policy 'lenient' \\(choose from strict, kernelbench, off\\)"
    ):
        parse_policy("lenient")
