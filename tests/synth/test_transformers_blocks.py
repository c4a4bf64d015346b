"""Standalone transformers blocks: crawled, rendered as problems that run, drawn at 1.18%."""

from __future__ import annotations

import random

import pytest
import torch

from cuda_agent.problems.source import check_problem_source
from cuda_agent.synth.compose import ScaleProfile, compose
from cuda_agent.synth.transformers_blocks import BlockScale, transformers_catalogue

pytest.importorskip("transformers")
CPU = ScaleProfile.named("cpu")


def test_catalogue_has_mlps_norms_and_attention() -> None:
    names = {spec.name for spec in transformers_catalogue()}
    assert {"LlamaMLP", "LlamaRMSNorm", "BertSelfAttention", "T5DenseGatedActDense"} <= names
    assert not any("Head" in name or "Embedding" in name for name in names)


@pytest.mark.parametrize("spec", transformers_catalogue(), ids=lambda s: s.name)
def test_every_block_renders_a_problem_that_runs(spec: object) -> None:
    from cuda_agent.synth.compose import _block_candidate

    candidate = _block_candidate(7, spec, BlockScale.named("cpu"))  # type: ignore[arg-type]
    check_problem_source(candidate.source, candidate.id)
    namespace: dict[str, object] = {}
    exec(compile(candidate.source, candidate.id, "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()  # type: ignore[operator]
    (x,) = namespace["get_inputs"]()  # type: ignore[operator]
    assert tuple(x.shape) == candidate.input_shape
    with torch.no_grad():
        out = model(x)
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == candidate.output_shape
    assert candidate.data_source == "transformers#1" and candidate.ops == [spec.name]  # type: ignore[attr-defined]


def test_composer_draws_blocks_at_the_papers_share_and_leaves_other_seeds_alone() -> None:
    forced = compose(3, scale=CPU, transformers_share=1.0)
    assert forced.data_source == "transformers#1"
    assert compose(3, scale=CPU, transformers_share=1.0).source == forced.source
    drawn = [s for s in range(2000) if random.Random(f"{s}:transformers").random() < 0.0118]
    assert 10 <= len(drawn) <= 40  # about 1.18% of 2000
    for seed in range(20):
        default = compose(seed, scale=CPU)
        if seed not in drawn:
            assert default.source == compose(seed, scale=CPU, transformers_share=0.0).source
        else:
            assert default.data_source == "transformers#1"
