"""A bundled problem named by its file path gets the same sizes as by its id."""

from __future__ import annotations

from cuda_agent.problems.sets import bundled_root, load_problem_set, resolve_problem


def test_a_bundled_file_path_takes_the_small_size_of_its_id() -> None:
    path = str(bundled_root() / "level1" / "relu.py")
    by_id = resolve_problem("relu", "small")
    by_path = resolve_problem(path, "small")
    assert by_path.source == by_id.source and by_path.content_hash == by_id.content_hash
    assert "dim = 1024" in by_path.source
    assert load_problem_set(path, size="small")[0].source == by_id.source


def test_the_standard_size_of_a_path_is_the_file_itself() -> None:
    path = bundled_root() / "level1" / "relu.py"
    assert resolve_problem(str(path), "standard").source.strip() == path.read_text().strip()
