"""The operator catalogue's shape inference and the programmatic composer's determinism."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn as nn

from cuda_agent.problems.source import check_problem_source
from cuda_agent.synth.catalogue import function_for, torch_catalogue
from cuda_agent.synth.compose import ScaleProfile, _infer, compose

SMALL = {2: (4, 24), 3: (2, 8, 24), 4: (2, 8, 12, 12), 5: (2, 8, 6, 6, 6)}


def test_catalogue_is_large_and_deterministic_only() -> None:
    catalogue = torch_catalogue()
    names = {spec.name for spec in catalogue}
    assert len(catalogue) >= 60
    assert {"Linear", "Conv2d", "LayerNorm", "relu", "softmax"} & names
    assert not any("dropout" in name.lower() for name in names)  # stochastic ops excluded
    assert "RReLU" not in names


@pytest.mark.parametrize("spec", torch_catalogue(), ids=lambda s: s.name)
def test_meta_shape_inference_matches_a_real_run(spec: object) -> None:
    """For every op and every rank it claims, the meta-inferred shape is the real one."""
    checked = 0
    for rank in spec.ranks:  # type: ignore[attr-defined]
        shape = SMALL[rank]
        args = spec.module_args(shape, 16) if spec.kind == "module" else {}  # type: ignore[attr-defined]
        inferred = _infer(spec, args, shape)  # type: ignore[arg-type]
        if inferred is None:
            continue  # the op refuses this exact shape; the composer then tries another
        torch.manual_seed(0)
        x = torch.randn(shape)
        with torch.no_grad():
            if spec.kind == "module":  # type: ignore[attr-defined]
                out = getattr(nn, spec.name)(**args).eval()(x)  # type: ignore[attr-defined]
            else:
                fn = function_for(spec.name)  # type: ignore[attr-defined]
                assert fn is not None
                out = fn(x)
        assert tuple(out.shape) == inferred, (spec, rank)
        checked += 1
    assert checked, f"{spec}: no rank it claims could be inferred"


def test_compose_is_deterministic_and_well_formed() -> None:
    scale = ScaleProfile.named("cpu")
    first = [compose(seed, scale=scale) for seed in range(30)]
    again = [compose(seed, scale=scale) for seed in range(30)]
    assert [c.source for c in first] == [c.source for c in again]
    assert len({c.source for c in first}) == 30  # different seeds, different problems
    for candidate in first:
        check_problem_source(candidate.source, candidate.id)
        assert candidate.data_source == f"torch#{len(candidate.ops)}"
        assert 1 <= len(candidate.ops) <= 5


def test_op_counts_follow_the_papers_composition() -> None:
    scale = ScaleProfile.named("cpu")
    counts = Counter(len(compose(seed, scale=scale).ops) for seed in range(200))
    assert counts[2] / 200 > 0.7  # the paper: 83.8% two-op problems
    limited = Counter(len(compose(seed, max_ops=2, scale=scale).ops) for seed in range(50))
    assert set(limited) <= {1, 2}


def test_composed_problem_runs_and_has_the_inferred_output_shape() -> None:
    candidate = compose(3, scale=ScaleProfile.named("cpu"))
    namespace: dict[str, object] = {}
    exec(compile(candidate.source, candidate.id, "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]())  # type: ignore[operator]
    with torch.no_grad():
        out = model(*namespace["get_inputs"]())  # type: ignore[operator]
    assert tuple(out.shape) == candidate.output_shape
