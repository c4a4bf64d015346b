from pathlib import Path

import pytest

from cuda_agent.core.errors import ProblemError
from cuda_agent.problems.sets import (
    bundled_entries,
    bundled_problems,
    load_problem_set,
    resolve_problem,
)
from tests.problems.test_source import GOOD


def test_bundled_set_spans_three_levels() -> None:
    problems = bundled_problems()
    assert len(problems) >= 12
    assert {p.level for p in problems} == {1, 2, 3}
    assert len({p.id for p in problems}) == len(problems)
    assert all(p.set_name == "bundled" for p in problems)


def test_every_bundled_problem_has_a_distinct_small_size() -> None:
    for entry in bundled_entries():
        small = resolve_problem(entry.id, size="small")
        standard = resolve_problem(entry.id, size="standard")
        assert entry.small, entry.id
        assert small.content_hash != standard.content_hash, entry.id


def test_resolve_problem_by_id_path_and_typo(tmp_path: Path) -> None:
    assert resolve_problem("relu").id == "relu"
    path = tmp_path / "mine.py"
    path.write_text(GOOD)
    assert resolve_problem(str(path)).id == "mine"
    with pytest.raises(ProblemError, match=r"did you mean: .*\brelu\b"):
        resolve_problem("rel")


def test_kernelbench_checkout_is_read_in_place(tmp_path: Path) -> None:
    for level, names in {1: ["1_Scale.py", "10_Other.py", "2_Two.py"], 2: ["1_Fused.py"]}.items():
        folder = tmp_path / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text(GOOD)
    problems = load_problem_set(str(tmp_path))
    assert [p.id for p in problems] == ["L1_1_Scale", "L1_2_Two", "L1_10_Other", "L2_1_Fused"]
    assert [p.level for p in problems] == [1, 1, 1, 2]
    assert all(p.path.parent.parent.parent == tmp_path for p in problems)
    assert [p.id for p in load_problem_set(str(tmp_path), levels=(2,))] == ["L2_1_Fused"]
