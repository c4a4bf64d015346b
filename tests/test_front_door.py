"""``import cuda_agent``: a short public API, imported lazily, and the documented snippet runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import cuda_agent

REPO = Path(__file__).resolve().parent.parent
MARKER = "<!-- python-api-example -->"


def snippet(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.S)
    assert found, f"{doc}: no example after {MARKER}"
    return found.group(1)


def test_the_public_names_are_there_and_nothing_heavy_is_imported() -> None:
    code = (
        "import sys, cuda_agent\n"
        "names = [n for n in cuda_agent.__all__ if n != '__version__']\n"
        "assert 'torch' not in sys.modules\n"
        "assert all(n in dir(cuda_agent) for n in names)\n"
        "print(len(names), 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(cuda_agent.__all__) - 1), "False"]


def test_all_lists_exactly_the_lazy_names() -> None:
    assert set(cuda_agent.__all__) == {"__version__", *cuda_agent._EXPORTS}


def test_each_name_resolves_to_its_defining_object() -> None:
    from cuda_agent.environment import KernelEnvironment
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.problems.sets import resolve_problem

    assert cuda_agent.evaluate is evaluate
    assert cuda_agent.load_problem is resolve_problem
    assert cuda_agent.KernelEnvironment is KernelEnvironment
    for name in cuda_agent.__all__:
        assert getattr(cuda_agent, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = cuda_agent.nothing_here  # type: ignore[attr-defined]


def test_the_docs_show_the_same_snippet() -> None:
    assert snippet(REPO / "README.md") == snippet(REPO / "docs" / "evaluation.md")
    assert snippet(REPO / "README.md") in (cuda_agent.__doc__ or "").replace("\n    ", "\n")


@pytest.mark.slow  # a build and a worker
def test_the_readme_snippet_evaluates_a_solution() -> None:
    """Run as a user would, from the repository root, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", snippet(REPO / "README.md")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    correct, reward, speedup, *flags = done.stdout.strip().split(maxsplit=3)
    assert correct == "True" and float(reward) >= 1 and float(speedup) > 0
    assert flags == ["[]"]
