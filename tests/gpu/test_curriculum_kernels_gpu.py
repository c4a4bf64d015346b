"""The curriculum's cuda kernels on a GPU: the short replies of the cold-start set pass.

``reply_kernels.reply_kernel`` writes the replies ``kernel_learning.py reference`` trains on
(a warp per row for row problems); the CPU suite compiles them with nvcc and checks their
length and form, not their numbers. Here each is scored by the evaluator on the cuda backend
exactly as a model's reply is (``sampling.reference_samples``, the kernel task, the ``strict``
policy with the memory check: fresh inputs, the compute-sanitizer run): every family's replies
of a small four-family set must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.rl.curriculum.families import FAMILIES
from cuda_agent.rl.curriculum.problem_set import CurriculumSpec, build_problem_set
from cuda_agent.rl.curriculum.sampling import reference_samples
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_every_short_reply_of_a_small_set_passes_on_the_gpu(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    build_problem_set(folder, CurriculumSpec(n_train=12, n_heldout=4, families=FAMILIES))
    samples = reference_samples(
        "cuda",
        folder,
        "train",
        tuple(FAMILIES),
        jobs=4,
        options=fast_options(backend="cuda", memory_check=True),
    )
    assert {s.family for s in samples} == set(FAMILIES)
    failed = [(s.problem, s.outcome, s.error_stage) for s in samples if s.outcome != "pass"]
    assert not failed, failed
    assert all(s.flags == () for s in samples)
