"""Token-level rewards, masked GAE, value targets, whitening and loss aggregation for
multi-turn agentic PPO (the "CUDA Agent" recipe).

A trajectory is one token sequence per row of a ``[B, T]`` batch. The loss mask is 1 on
tokens the policy generated and 0 on the prompt, on tool / environment output and on padding.
The only reward is the outcome reward, placed on the last model token of the row.

What this module does:

* :func:`place_outcome_reward` turns one scalar reward per row into token-level rewards.
* :func:`masked_gae` runs GAE over model tokens only. Tool tokens are skipped, not treated as
  states: for a model token the "next state" is the next model token of the same row (after
  a tool block, the first model token that follows it), and after the last one the value is
  0. This is the same recursion as verl's multi-turn GAE, which carries ``nextvalues`` and
  ``lastgaelam`` unchanged across positions whose response mask is 0.
* :func:`value_targets` gives the critic's regression targets used for value pretraining
  (GAE returns with gamma = 1, lambda = 0.95 by default).
* :func:`whiten` is PPO's masked advantage normalisation; :func:`token_mean_loss` is the
  paper's "token-mean" loss aggregation (one mean over all model tokens in the batch).

What it does not do: no policy or value losses (clipping, KL), no rollout, tokenisation or
mask construction, no distributed reductions (``whiten`` and ``token_mean_loss`` reduce over
the local batch only), and no gradient: everything here is meant to run under
``torch.no_grad()`` on detached tensors (``token_mean_loss`` excepted, which is differentiable).

Masks may be ``bool`` or numeric (nonzero means model token). Tensors may live on any device;
the computation stays on the device of the inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "masked_gae",
    "place_outcome_reward",
    "token_mean_loss",
    "value_targets",
    "whiten",
]

# Block length of the blocked reverse scan used by masked_gae (see _discounted_reverse_cumsum).
_SCAN_BLOCK = 256


def _as_bool_mask(mask: Tensor) -> Tensor:
    if mask.dim() != 2:
        raise ValueError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    return mask if mask.dtype == torch.bool else mask != 0


def _check_same_shape(mask: Tensor, **tensors: Tensor) -> None:
    for name, t in tensors.items():
        if t.shape != mask.shape:
            raise ValueError(
                f"{name} must have the shape of mask {tuple(mask.shape)}, got {tuple(t.shape)}"
            )


def place_outcome_reward(mask: Tensor, rewards: Tensor) -> Tensor:
    """Token-level rewards: ``rewards[b]`` on the last mask-1 token of row ``b``, 0 elsewhere.

    ``mask`` is ``[B, T]``, ``rewards`` is ``[B]``. A row without any model token gets all
    zeros (its reward has nowhere to go). The result has the dtype of ``rewards`` if that is a
    floating dtype, else the default float dtype.
    """
    m = _as_bool_mask(mask)
    if rewards.shape != (m.shape[0],):
        raise ValueError(f"rewards must be [B] = [{m.shape[0]}], got {tuple(rewards.shape)}")
    dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    out = torch.zeros(m.shape, dtype=dtype, device=m.device)
    if m.shape[1] == 0:
        return out
    # Position of the last True in each row: T - 1 - (index of the first True of the flipped row).
    last = m.shape[1] - 1 - torch.argmax(m.flip(1).to(torch.int8), dim=1)
    has_model = m.any(dim=1)
    vals = torch.where(has_model, rewards.to(dtype), torch.zeros((), dtype=dtype, device=m.device))
    out.scatter_(1, last.unsqueeze(1), vals.unsqueeze(1))
    return out


def _discounted_reverse_cumsum(x: Tensor, c: float, block: int = _SCAN_BLOCK) -> Tensor:
    """``y[:, i] = sum_{j >= i} c**(j - i) * x[:, j]`` along the last dim of ``x`` ([B, L]).

    Equivalent to the loop ``y_i = x_i + c * y_{i+1}`` (``y_L = 0``) but vectorised: the row is
    cut into blocks of ``block`` elements, each block's local scan is one matmul with the
    ``[block, block]`` matrix of powers ``c**(j - i)`` (powers <= ``block`` only, so nothing
    under- or overflows for ``|c| <= 1``), and the values at block starts -- themselves a
    discounted reverse cumsum with factor ``c**block`` -- are computed recursively.
    Work ``O(B * L * block)``, ``O(log_block L)`` Python-level steps.
    """
    b, n = x.shape
    if n == 0:
        return x.clone()
    nblocks = -(-n // block)
    k = block if nblocks > 1 else n
    padded = nblocks * k
    xp = torch.nn.functional.pad(x, (0, padded - n)) if padded != n else x
    xb = xp.reshape(b, nblocks, k)

    idx = torch.arange(k, device=x.device)
    expo = idx.unsqueeze(1) - idx.unsqueeze(0)  # expo[j, i] = j - i
    base = torch.tensor(c, dtype=torch.float64, device=x.device)
    w = torch.where(
        expo >= 0,
        torch.pow(base, expo.clamp(min=0).to(torch.float64)),
        torch.zeros((), dtype=torch.float64, device=x.device),
    ).to(x.dtype)
    local = xb @ w  # local[..., i] = sum_{j >= i in block} c**(j - i) x_j
    if nblocks == 1:
        return local.reshape(b, padded)[:, :n]

    # Scan value at the start of every block, then add each block's carried-in tail.
    starts = _discounted_reverse_cumsum(local[:, :, 0], c**k, block)
    carry_in = torch.nn.functional.pad(starts[:, 1:], (0, 1))  # value at the next block start
    tail = torch.pow(base, (k - idx).to(torch.float64)).to(x.dtype)  # c**(k - i)
    y = local + carry_in.unsqueeze(2) * tail
    return y.reshape(b, padded)[:, :n]


@torch.no_grad()
def masked_gae(
    token_rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[Tensor, Tensor]:
    """GAE over the model tokens of each row; returns ``(advantages, returns)``, both [B, T].

    For a model token ``t`` (``mask[t] == 1``) let ``n(t)`` be the next model token of the
    same row (none after the last one)::

        V_next(t) = values[n(t)]      (0 if t is the last model token)
        delta_t   = r_t + gamma * V_next(t) - values[t]
        A_t       = delta_t + gamma * lam * A_{n(t)}      (A after the last one = 0)
        R_t       = A_t + values[t]

    Positions with mask 0 (prompt, tool output, padding) get ``A = R = 0`` and are invisible to
    the recursion: their ``values`` and ``token_rewards`` are ignored (they may even be NaN),
    so a tool block between two model tokens is not a state and costs no discount.

    Implementation: the model tokens of each row are packed to the left (a stable argsort of
    the mask), the deltas are computed in one vectorised step, the reverse recursion
    ``A_i = delta_i + gamma*lam*A_{i+1}`` is a blocked scan (see
    ``_discounted_reverse_cumsum``) and the result is scattered back. Cost: ``O(B*T log T)``
    for the sort plus ``O(B*L*256)`` for the scan, ``L`` = most model tokens in a row; memory
    ``O(B*T)``. It agrees with the plain reverse loop over T to float rounding.
    """
    m = _as_bool_mask(mask)
    _check_same_shape(m, token_rewards=token_rewards, values=values)
    dtype = torch.promote_types(token_rewards.dtype, values.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    bsz, _ = m.shape
    zero = torch.zeros((), dtype=dtype, device=m.device)
    advantages = torch.zeros(m.shape, dtype=dtype, device=m.device)
    returns = torch.zeros(m.shape, dtype=dtype, device=m.device)
    counts = m.sum(dim=1)
    width = int(counts.max().item()) if bsz > 0 and m.shape[1] > 0 else 0
    if width == 0:
        return advantages, returns

    # Model-token positions first, in their original order; the rest follow.
    order = torch.argsort((~m).to(torch.int8), dim=1, stable=True)[:, :width]
    valid = torch.arange(width, device=m.device).unsqueeze(0) < counts.unsqueeze(1)
    v = torch.where(valid, values.to(dtype).gather(1, order), zero)
    r = torch.where(valid, token_rewards.to(dtype).gather(1, order), zero)
    v_next = torch.nn.functional.pad(v[:, 1:], (0, 1))  # 0 past the last model token
    delta = torch.where(valid, r + gamma * v_next - v, zero)
    adv = _discounted_reverse_cumsum(delta, gamma * lam)
    adv = torch.where(valid, adv, zero)
    ret = torch.where(valid, adv + v, zero)
    # `order` is a permutation prefix, so no index repeats; invalid slots write 0 to mask-0 spots.
    advantages.scatter_(1, order, adv)
    returns.scatter_(1, order, ret)
    return advantages, returns


@torch.no_grad()
def value_targets(
    mask: Tensor,
    rewards: Tensor,
    values: Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> Tensor:
    """Regression targets for the critic (value pretraining), [B, T].

    The returns of :func:`masked_gae` with the outcome reward ``rewards`` ([B]) placed on the
    last model token of each row (:func:`place_outcome_reward`); 0 on mask-0 positions. These
    are lambda-returns: they mix the outcome with the critic's own ``values`` of later model
    tokens. With ``gamma = 1`` and ``lam = 1`` the deltas telescope and the target equals the
    outcome reward at every model token, whatever ``values`` are (Monte Carlo targets).
    """
    token_rewards = place_outcome_reward(mask, rewards)
    _, returns = masked_gae(token_rewards, values, mask, gamma=gamma, lam=lam)
    return returns


def whiten(advantages: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Masked normalisation as PPO does: ``(A - mean) / sqrt(var + eps)`` over mask-1 tokens.

    Mean and (unbiased) variance are taken over all mask-1 tokens of the batch; mask-0
    positions come out 0. With ``shift_mean=False`` the mean is added back (scale only). With
    fewer than two model tokens the variance is taken as 0, so the result is ``~0``.
    """
    m = _as_bool_mask(mask)
    _check_same_shape(m, advantages=advantages)
    zero = torch.zeros((), dtype=advantages.dtype, device=advantages.device)
    count = m.sum()
    if int(count.item()) == 0:
        return torch.zeros_like(advantages)
    x = torch.where(m, advantages, zero)
    mean = x.sum() / count
    centred = torch.where(m, advantages - mean, zero)
    var = centred.square().sum() / (count - 1).clamp(min=1)
    out = centred * torch.rsqrt(var + eps)
    if not shift_mean:
        out = torch.where(m, out + mean, zero)
    return out


def token_mean_loss(per_token_loss: Tensor, mask: Tensor) -> Tensor:
    """The paper's "token-mean" aggregation: sum of the loss over every mask-1 token of the
    batch divided by the number of those tokens (each token weighs the same, whatever its
    row's length). Mask-0 entries are ignored even if NaN/inf; an all-zero mask gives 0.
    Differentiable with respect to ``per_token_loss``.
    """
    m = _as_bool_mask(mask)
    _check_same_shape(m, per_token_loss=per_token_loss)
    zero = torch.zeros((), dtype=per_token_loss.dtype, device=per_token_loss.device)
    total = torch.where(m, per_token_loss, zero).sum()
    return total / m.sum().clamp(min=1).to(per_token_loss.dtype)
