"""``rl/trl/flat_groups.py``: which GRPO micro-batches skip their forward and backward.

Only one whose advantages are all 0 with no KL term, in a single process: its loss and gradient
are exactly 0. The GRPO steps of ``test_grpo.py`` check the whole trainer: a flat step is
skipped and moves nothing, a step with a reward that differs runs and moves the weights.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from cuda_agent.rl.trl.flat_groups import has_no_signal  # noqa: E402

ONE = SimpleNamespace(num_processes=1)


def test_only_all_zero_advantages_without_a_kl_term_in_one_process_are_skipped() -> None:
    flat = {"advantages": torch.zeros(4)}
    assert has_no_signal(0.0, ONE, flat)
    assert not has_no_signal(0.04, ONE, flat)  # the KL term has a gradient of its own
    assert not has_no_signal(0.0, SimpleNamespace(num_processes=2), flat)  # collectives wait
    assert not has_no_signal(0.0, ONE, {"advantages": torch.tensor([0.0, 0.5, -0.5, 0.0])})
    per_token = torch.zeros((2, 3))
    per_token[1, 2] = 1e-6  # a subclass's (B, T) advantages: one token's is enough
    assert not has_no_signal(0.0, ONE, {"advantages": per_token})
    assert not has_no_signal(0.0, ONE, {"advantages": torch.zeros(0)})
    assert not has_no_signal(0.0, ONE, {})
