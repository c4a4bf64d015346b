"""How many input sets an evaluation holds at once when they are large (device memory)."""

import torch

from cuda_agent.evaluator.worker import reference
from cuda_agent.evaluator.worker.reference import MIN_VERIFY_SETS, _affordable_sets


class FakeCudaDevice:
    """Only the two attributes the budget reads (a cuda device's name and torch device)."""

    name = "cuda"
    torch_device = torch.device("cpu")


def budget(monkeypatch, set_gib: float, free_gib: float, trials: int = 5, timing: int = 3):
    monkeypatch.setattr(reference.torch.cuda, "mem_get_info", lambda _d: (free_gib * 2**30, 0))
    first = [torch.empty(1).expand(int(set_gib * 2**28))]  # a float32 view: set_gib GiB
    notes: list[str] = []
    return _affordable_sets(first, trials, timing, FakeCudaDevice(), notes), notes


def test_small_inputs_keep_every_set(monkeypatch) -> None:
    assert budget(monkeypatch, 0.5, 130) == ((5, 3), [])


def test_timing_sets_shrink_first(monkeypatch) -> None:
    (verify, timing), notes = budget(monkeypatch, 8, 138)  # 6 sets fit in 40%
    assert (verify, timing) == (5, 1) and "1 timing input set(s) instead of 3" in notes[0]


def test_huge_inputs_share_sets_and_cut_trials(monkeypatch) -> None:
    """KernelBench L1_45 (16 GiB a set on a 140 GB GPU): three sets, timing reuses them."""
    (verify, timing), notes = budget(monkeypatch, 16, 138)
    assert (verify, timing) == (3, 0)
    assert "3 verification trial(s) instead of 5" in notes[0]
    assert budget(monkeypatch, 60, 138)[0] == (MIN_VERIFY_SETS, 0)


def test_cpu_backend_is_not_budgeted() -> None:
    class Cpu:
        name = "cpu"

    assert _affordable_sets([torch.ones(4)], 5, 3, Cpu(), []) == (5, 3)  # type: ignore[arg-type]
