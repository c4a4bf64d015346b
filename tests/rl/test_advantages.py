"""Masked GAE and friends, checked token by token against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.rl.advantages import (
    _discounted_reverse_cumsum,
    masked_gae,
    place_outcome_reward,
    token_mean_loss,
    value_targets,
    whiten,
)

F64 = torch.float64

# One row: prompt(0) model(1) model(1) tool(0) tool(0) model(1) pad(0)
MASK = torch.tensor([[0, 1, 1, 0, 0, 1, 0]])
VALUES = torch.tensor([[0.5, 0.2, 0.4, 9.0, -7.0, 0.6, 3.0]], dtype=F64)
REWARD = 1.0


def _close(actual: torch.Tensor, expected: list[list[float]]) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=F64), rtol=0, atol=1e-12)


def _reference_gae(
    rewards: list[float], values: list[float], mask: list[int], gamma: float, lam: float
) -> tuple[list[float], list[float]]:
    """verl-style reverse loop over T, carrying next value / next advantage across mask-0."""
    adv = [0.0] * len(mask)
    ret = [0.0] * len(mask)
    next_v, next_a = 0.0, 0.0
    for t in reversed(range(len(mask))):
        if not mask[t]:
            continue
        delta = rewards[t] + gamma * next_v - values[t]
        next_a = delta + gamma * lam * next_a
        next_v = values[t]
        adv[t], ret[t] = next_a, next_a + values[t]
    return adv, ret


def test_place_outcome_reward_puts_reward_on_last_model_token() -> None:
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0], [1, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]])
    out = place_outcome_reward(mask, torch.tensor([1.0, -0.5, 3.0], dtype=F64))
    _close(
        out,
        [
            [0, 0, 0, 0, 0, 1.0, 0],
            [0, -0.5, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0],  # no model token: the reward has nowhere to go
        ],
    )
    assert place_outcome_reward(mask.bool(), torch.tensor([1, 2, 3])).is_floating_point()


def test_gae_single_row_by_hand_gamma_1() -> None:
    gamma, lam = 1.0, 0.95
    # Model tokens at 1, 2, 5; next(1) = 2, next(2) = 5 (tool block skipped), 5 is the last.
    d5 = REWARD + gamma * 0.0 - 0.6  # 0.4
    a5 = d5  # 0.4
    d2 = 0.0 + gamma * 0.6 - 0.4  # 0.2
    a2 = d2 + gamma * lam * a5  # 0.2 + 0.95 * 0.4 = 0.58
    d1 = 0.0 + gamma * 0.4 - 0.2  # 0.2
    a1 = d1 + gamma * lam * a2  # 0.2 + 0.95 * 0.58 = 0.751
    assert (a1, a2, a5) == pytest.approx((0.751, 0.58, 0.4))

    rewards = place_outcome_reward(MASK, torch.tensor([REWARD], dtype=F64))
    adv, ret = masked_gae(rewards, VALUES, MASK, gamma=gamma, lam=lam)
    _close(adv, [[0.0, a1, a2, 0.0, 0.0, a5, 0.0]])
    _close(ret, [[0.0, a1 + 0.2, a2 + 0.4, 0.0, 0.0, a5 + 0.6, 0.0]])
    _close(ret, [[0.0, 0.951, 0.98, 0.0, 0.0, 1.0, 0.0]])


def test_gae_single_row_by_hand_discounted() -> None:
    # gamma < 1: the tool block between positions 2 and 5 costs no extra discount.
    gamma, lam = 0.9, 0.8
    a5 = REWARD - 0.6  # 0.4
    a2 = (gamma * 0.6 - 0.4) + gamma * lam * a5  # 0.14 + 0.72 * 0.4 = 0.428
    a1 = (gamma * 0.4 - 0.2) + gamma * lam * a2  # 0.16 + 0.72 * 0.428 = 0.46816
    assert (a1, a2, a5) == pytest.approx((0.46816, 0.428, 0.4))

    rewards = place_outcome_reward(MASK, torch.tensor([REWARD], dtype=F64))
    adv, ret = masked_gae(rewards, VALUES, MASK, gamma=gamma, lam=lam)
    _close(adv, [[0.0, a1, a2, 0.0, 0.0, a5, 0.0]])
    _close(ret, [[0.0, 0.66816, 0.828, 0.0, 0.0, 1.0, 0.0]])


def test_tool_and_pad_positions_are_skipped_by_the_recursion() -> None:
    rewards = place_outcome_reward(MASK, torch.tensor([REWARD], dtype=F64))
    base_adv, base_ret = masked_gae(rewards, VALUES, MASK)
    # Change values (even to NaN) and rewards at the prompt, tool and pad positions only.
    other_values = VALUES.clone()
    other_values[0, [0, 3, 4, 6]] = torch.tensor(
        [-100.0, float("nan"), 55.0, float("inf")], dtype=F64
    )
    other_rewards = rewards.clone()
    other_rewards[0, [3, 4, 6]] = torch.tensor([5.0, -5.0, 7.0], dtype=F64)
    adv, ret = masked_gae(other_rewards, other_values, MASK)
    torch.testing.assert_close(adv, base_adv, rtol=0, atol=0)
    torch.testing.assert_close(ret, base_ret, rtol=0, atol=0)
    # Removing the tool block altogether gives the same numbers on the model tokens.
    adv2, ret2 = masked_gae(
        torch.tensor([[0.0, 0.0, REWARD]], dtype=F64),
        torch.tensor([[0.2, 0.4, 0.6]], dtype=F64),
        torch.ones(1, 3),
    )
    torch.testing.assert_close(adv2[0], base_adv[0, [1, 2, 5]], rtol=0, atol=1e-12)
    torch.testing.assert_close(ret2[0], base_ret[0, [1, 2, 5]], rtol=0, atol=1e-12)


def test_gamma_1_lam_1_return_is_the_outcome_reward_at_every_model_token() -> None:
    rewards = torch.tensor([0.7], dtype=F64)
    ret = value_targets(MASK, rewards, VALUES, gamma=1.0, lam=1.0)
    _close(ret, [[0.0, 0.7, 0.7, 0.0, 0.0, 0.7, 0.0]])
    adv, _ = masked_gae(place_outcome_reward(MASK, rewards), VALUES, MASK, gamma=1.0, lam=1.0)
    _close(adv, [[0.0, 0.7 - 0.2, 0.7 - 0.4, 0.0, 0.0, 0.7 - 0.6, 0.0]])


def test_value_targets_default_is_gae_returns_with_lambda_095() -> None:
    ret = value_targets(MASK, torch.tensor([REWARD], dtype=F64), VALUES)
    _close(ret, [[0.0, 0.951, 0.98, 0.0, 0.0, 1.0, 0.0]])


def test_row_without_model_token_is_all_zero() -> None:
    mask = torch.zeros(1, 5, dtype=torch.bool)
    values = torch.arange(5, dtype=F64).unsqueeze(0)
    adv, ret = masked_gae(torch.ones(1, 5, dtype=F64), values, mask)
    _close(adv, [[0.0] * 5])
    _close(ret, [[0.0] * 5])
    _close(value_targets(mask, torch.tensor([1.0], dtype=F64), values), [[0.0] * 5])


def test_batch_of_two_rows_of_different_lengths() -> None:
    # Row 0: the row above. Row 1: prompt model tool model pad pad pad (shorter, padded).
    # Row 2: no model token at all.
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0], [0, 1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]])
    values = torch.tensor(
        [
            [0.5, 0.2, 0.4, 9.0, -7.0, 0.6, 3.0],
            [1.0, 0.3, 2.0, -0.1, 4.0, 4.0, 4.0],
            [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        ],
        dtype=F64,
    )
    rewards = torch.tensor([1.0, 0.0, 1.0], dtype=F64)
    gamma, lam = 1.0, 0.95
    # Row 1: model tokens at 1 and 3, reward 0 at 3.
    b3 = 0.0 + gamma * 0.0 - (-0.1)  # 0.1
    b1 = (0.0 + gamma * (-0.1) - 0.3) + gamma * lam * b3  # -0.4 + 0.095 = -0.305
    assert (b1, b3) == pytest.approx((-0.305, 0.1))

    adv, ret = masked_gae(place_outcome_reward(mask, rewards), values, mask, gamma, lam)
    _close(
        adv,
        [
            [0.0, 0.751, 0.58, 0.0, 0.0, 0.4, 0.0],
            [0.0, b1, 0.0, b3, 0.0, 0.0, 0.0],
            [0.0] * 7,
        ],
    )
    _close(
        ret,
        [
            [0.0, 0.951, 0.98, 0.0, 0.0, 1.0, 0.0],
            [0.0, b1 + 0.3, 0.0, b3 - 0.1, 0.0, 0.0, 0.0],  # -0.005, 0.0
            [0.0] * 7,
        ],
    )


def test_gae_matches_reference_loop_on_long_random_rows() -> None:
    # Long enough that the blocked scan recurses twice (more than 256 * 256 model tokens).
    gen = torch.Generator().manual_seed(0)
    bsz, length = 2, 80_000
    mask = torch.rand(bsz, length, generator=gen) < 0.9
    mask[1, 50_000:] = False  # padding at the end of the second row
    values = torch.randn(bsz, length, generator=gen, dtype=F64)
    rewards = torch.randn(bsz, length, generator=gen, dtype=F64)
    for gamma, lam in [(1.0, 0.95), (0.99, 0.9), (1.0, 1.0)]:
        adv, ret = masked_gae(rewards, values, mask, gamma, lam)
        for b in range(bsz):
            ref_adv, ref_ret = _reference_gae(
                rewards[b].tolist(), values[b].tolist(), mask[b].tolist(), gamma, lam
            )
            torch.testing.assert_close(
                adv[b], torch.tensor(ref_adv, dtype=F64), atol=1e-9, rtol=1e-9
            )
            torch.testing.assert_close(
                ret[b], torch.tensor(ref_ret, dtype=F64), atol=1e-9, rtol=1e-9
            )


def test_gae_float32_inputs_stay_float32() -> None:
    rewards = place_outcome_reward(MASK, torch.tensor([REWARD]))
    adv, ret = masked_gae(rewards, VALUES.float(), MASK)
    assert adv.dtype == ret.dtype == torch.float32
    torch.testing.assert_close(
        ret, torch.tensor([[0.0, 0.951, 0.98, 0.0, 0.0, 1.0, 0.0]]), rtol=0, atol=1e-6
    )


@pytest.mark.parametrize("n", [1, 5, 256, 257, 1000])
def test_discounted_reverse_cumsum_matches_loop(n: int) -> None:
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(n), dtype=F64)
    for c in [0.0, 0.5, 0.95, 1.0]:
        expected = torch.zeros_like(x)
        carry = torch.zeros(3, dtype=F64)
        for i in reversed(range(n)):
            carry = x[:, i] + c * carry
            expected[:, i] = carry
        torch.testing.assert_close(_discounted_reverse_cumsum(x, c, block=16), expected)
        torch.testing.assert_close(_discounted_reverse_cumsum(x, c), expected)


def test_whiten_keeps_zeros_and_normalises_model_tokens() -> None:
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0], [0, 1, 0, 1, 0, 0, 0]], dtype=torch.bool)
    adv = torch.tensor(
        [[7.0, 1.0, 2.0, -9.0, 4.0, 3.0, 8.0], [5.0, 4.0, 6.0, 6.0, 0.0, 1.0, 2.0]], dtype=F64
    )
    out = whiten(adv, mask)
    assert torch.all(out[~mask] == 0)
    # Model-token values 1, 2, 3, 4, 6: mean 3.2, unbiased variance 14.8 / 4 = 3.7.
    mean, std = 3.2, math.sqrt(3.7)
    expected = torch.zeros_like(adv)
    expected[mask] = (torch.tensor([1.0, 2.0, 3.0, 4.0, 6.0], dtype=F64) - mean) / std
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-8)
    assert out[mask].mean().item() == pytest.approx(0.0, abs=1e-12)
    assert out[mask].std().item() == pytest.approx(1.0, abs=1e-6)
    assert torch.all(whiten(adv, torch.zeros_like(mask)) == 0)


def test_token_mean_loss_is_the_mean_over_model_tokens_of_the_batch() -> None:
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0], [0, 1, 0, 0, 0, 0, 0]])
    loss = torch.tensor(
        [[9.0, 1.0, 2.0, float("nan"), 9.0, 3.0, float("inf")], [9.0, 10.0, 9.0, 9.0, 9, 9, 9]],
        dtype=F64,
        requires_grad=True,
    )
    out = token_mean_loss(loss, mask)
    # (1 + 2 + 3 + 10) / 4 tokens = 4.0, not the mean of per-row means ((2 + 10) / 2 = 6).
    assert out.item() == pytest.approx(4.0)
    out.backward()
    assert loss.grad is not None
    _close(loss.grad, [[0, 0.25, 0.25, 0, 0, 0.25, 0], [0, 0.25, 0, 0, 0, 0, 0]])
    assert token_mean_loss(torch.ones(2, 3), torch.zeros(2, 3)).item() == 0.0
