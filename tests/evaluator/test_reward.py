import pytest

from cuda_agent.evaluator.reward import compute_reward, milestone_reward


@pytest.mark.parametrize(
    ("correct", "eager", "compile_", "expected"),
    [
        (False, 10.0, 10.0, -1.0),
        (True, None, None, 1.0),
        (True, 1.05, 2.0, 1.0),  # 5% faster is not *more than* 5% faster
        (True, 1.06, None, 2.0),
        (True, 1.06, 1.04, 2.0),
        (True, 1.06, 1.06, 3.0),
        (True, 0.5, 3.0, 1.0),  # faster than compile alone does not count
    ],
)
def test_milestones(
    correct: bool, eager: float | None, compile_: float | None, expected: float
) -> None:
    assert milestone_reward(correct, eager, compile_) == expected


def test_continuous_variant() -> None:
    assert compute_reward("continuous", True, 2.0, 1.5) == 1.5
    assert compute_reward("continuous", True, 2.0, None) == 2.0
    assert compute_reward("continuous", False, 2.0, 1.5) == -1.0
