import math

import torch

from cuda_agent.evaluator.worker.compare import compare


class Lazy(torch.Tensor):
    pass


def ok(ref, cand, atol=1e-2, rtol=1e-2):
    return compare(ref, cand, atol, rtol)


def test_equal_and_within_tolerance() -> None:
    ref = torch.linspace(-2, 2, 100)
    assert ok(ref, ref.clone()).ok
    result = ok(ref, ref + 0.005)
    assert result.ok and math.isclose(result.max_abs_error, 0.005, rel_tol=1e-3)


def test_value_mismatch_names_the_worst_element() -> None:
    ref = torch.zeros(4, 4)
    cand = ref.clone()
    cand[2, 3] = 0.5
    result = ok(ref, cand)
    assert not result.ok
    assert "1 of 16 elements" in result.message
    assert "[2, 3]" in result.message and "got 0.5" in result.message


def test_structure_type_shape_dtype_device() -> None:
    ref = torch.ones(3)
    assert "plain torch.Tensor" in ok(ref, ref.as_subclass(Lazy)).message
    assert "shape [1, 3]" in ok(ref, ref.view(1, 3)).message
    assert "dtype torch.float64" in ok(ref, ref.double()).message
    assert "sequence of 2 items" in ok((ref, ref), (ref,)).message
    assert ok((ref, [ref, 2.0]), (ref.clone(), [ref.clone(), 2.001])).ok


def test_broadcast_views_are_refused() -> None:
    ref = torch.ones(4, 3)
    cand = torch.ones(1, 3).expand(4, 3)
    assert "broadcast view" in ok(ref, cand).message


def test_nan_and_inf_rules() -> None:
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert ok(ref, ref.clone()).ok
    assert (
        "NaN where the reference is finite"
        in ok(torch.ones(3), torch.full((3,), float("nan"))).message
    )
    assert (
        "a number where the reference is NaN"
        in ok(ref, torch.tensor([1.0, 0.0, float("inf")])).message
    )
    assert "infinities differ" in ok(ref, torch.tensor([1.0, float("nan"), -float("inf")])).message
    assert "infinities differ" in ok(torch.ones(2), torch.tensor([1.0, float("inf")])).message


def test_integer_outputs_need_an_exact_match() -> None:
    ref = torch.arange(5)
    assert ok(ref, ref.clone()).ok
    assert "exact match" in ok(ref, ref + 1).message


def test_chunked_comparison_finds_the_worst_element_in_any_chunk(monkeypatch) -> None:
    from cuda_agent.evaluator.worker import compare as module

    monkeypatch.setattr(module, "CHUNK", 7)
    ref = torch.zeros(5, 6)
    cand = ref.clone()
    cand[1, 2] = 0.2  # chunk 1
    cand[4, 5] = 0.9  # last chunk, the worst
    result = ok(ref, cand)
    assert "2 of 30 elements" in result.message and "[4, 5]" in result.message
    assert math.isclose(result.max_abs_error, 0.9, rel_tol=1e-6)
    nan = cand.clone()
    nan[3, 0] = float("nan")
    assert "NaN where the reference is finite (1 elements)" in ok(ref, nan).message


def _exact_float64_verdict(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float):
    r, c = ref.double(), cand.double()
    return bool(((c - r).abs() <= atol + rtol * r.abs()).all())


def test_fast_test_agrees_with_the_exact_float64_rule_at_the_boundary(monkeypatch) -> None:
    """Errors placed on, just inside and just outside the tolerance, in every float dtype:
    the verdict is the exact float64 rule's, whichever path (fast or exact) decides it."""
    from cuda_agent.evaluator.worker import compare as module

    monkeypatch.setattr(module, "CHUNK", 64)
    gen = torch.Generator().manual_seed(0)
    atol, rtol = 1e-2, 1e-2
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        ref = (torch.randn(512, generator=gen) * 3).to(dtype)
        bound = atol + rtol * ref.double().abs()
        for scale in (0.5, 0.9999, 1.0, 1.0001, 1.5):
            cand = (ref.double() + bound * scale).to(dtype)
            expected = _exact_float64_verdict(ref, cand, atol, rtol)
            assert ok(ref, cand, atol, rtol).ok == expected, (dtype, scale)
        far = ref.clone()
        far[300] = far[300] + 1  # one bad element in one chunk: the others pass fast
        result = ok(ref, far, atol, rtol)
        assert not result.ok and "1 of 512 elements" in result.message and "[300]" in result.message


def test_statistics_come_from_every_chunk_fast_or_exact(monkeypatch) -> None:
    from cuda_agent.evaluator.worker import compare as module

    monkeypatch.setattr(module, "CHUNK", 10)
    ref = torch.ones(100)
    cand = ref.clone()
    cand[95] = 1.004  # passes the fast test: its chunk's statistics are the fast test's
    result = ok(ref, cand)
    assert result.ok and math.isclose(result.max_abs_error, 0.004, rel_tol=1e-3)
    assert math.isclose(result.max_rel_error, 0.004, rel_tol=1e-3)
