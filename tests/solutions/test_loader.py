from pathlib import Path

import pytest

from cuda_agent.core.errors import SolutionError
from cuda_agent.core.types import SolutionKind
from cuda_agent.solutions.loader import load_solution


def test_single_file(tmp_path: Path) -> None:
    path = tmp_path / "sol.py"
    path.write_text("class ModelNew: pass\n")
    solution = load_solution(path)
    assert solution.kind is SolutionKind.SINGLE_FILE
    assert solution.entry_file == "sol.py"
    assert solution.files == {"sol.py": "class ModelNew: pass\n"}


def test_workdir_snapshot_skips_build_outputs(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "model_new.py").write_text("x = 1\n")
    (tmp_path / "kernels" / "a.cu").write_text("// a\n")
    (tmp_path / "kernels" / "a_binding.cpp").write_text("// b\n")
    (tmp_path / "build" / "junk.cpp").write_text("// junk\n")
    (tmp_path / "cuda_extension.so").write_bytes(b"\x7fELF")
    solution = load_solution(tmp_path)
    assert solution.kind is SolutionKind.WORKDIR
    assert sorted(solution.files) == ["kernels/a.cu", "kernels/a_binding.cpp", "model_new.py"]


def test_snapshot_hash_tracks_content(tmp_path: Path) -> None:
    (tmp_path / "model_new.py").write_text("x = 1\n")
    first = load_solution(tmp_path).content_hash
    (tmp_path / "model_new.py").write_text("x = 2\n")
    assert load_solution(tmp_path).content_hash != first


@pytest.mark.parametrize("name", ["missing.py", "notes.txt", "emptydir"])
def test_unusable_paths(tmp_path: Path, name: str) -> None:
    if name == "notes.txt":
        (tmp_path / name).write_text("hi")
    if name == "emptydir":
        (tmp_path / name).mkdir()
    with pytest.raises(SolutionError):
        load_solution(tmp_path / name)
