"""How the reference's weights reach ModelNew, and the probe of solutions tuned to initial weights.

Both models are constructed from the same seed (as KernelBench does). Then, by policy:

* strict weights (``strict``, the paper's rule): the reference's ``state_dict`` is loaded with
  ``load_state_dict(strict=True)``; different names or shapes reject the solution
  (``WeightsMismatch``);
* otherwise (``kernelbench``, ``off``): it is loaded when the names and shapes match exactly;
  when they do not, the seeded construction is kept and ``Transfer.note`` says why. The
  evaluation then compares the two models only at their initial weights.

The probe (``probe_pairs``, ``perturbed``): after verification, the same new values are given to
the learnable parameters of both models and they must still agree (varied tensors get their own
values shuffled, as another seed would draw them; constant ones are moved). This catches a solution
that is right only at the initial values (a LayerNorm whose kernel ignores its weight and
bias, which start as ones and zeros; a cache of weights made at construction). It needs a
one-to-one correspondence between the two models' parameters: by name when the weights were
transferred, else by shape and identical initial values (renamed parameters). It is skipped,
and says why, when no such correspondence exists or when ModelNew's state_dict holds buffers
Model's does not: they may be derived from the weights and are consistent whenever ModelNew's
own state_dict is loaded, so changing the parameters alone would be a false rejection. Copies
kept outside the state_dict (plain attributes, non-persistent buffers, a cache filled on the
first call) do not get that excuse: no ``load_state_dict`` would update them either. Buffers
are never perturbed (masks and other constants may legitimately be built into a kernel).

This module only plans and applies; running the two models and judging belong to
``verify.py`` (``weight_probe``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

MAX_LISTED = 4
RELATIVE_STEP = 0.25  # constants move by up to 25% of their magnitude (at least 0.25)


class WeightsMismatch(Exception):
    """Strict ``load_state_dict`` failed: ModelNew's parameter names or shapes differ."""


@dataclass
class Transfer:
    transferred: bool
    note: str | None = None  # why the weights were not transferred


def transfer(model: torch.nn.Module, state: dict[str, torch.Tensor], strict: bool) -> Transfer:
    """Load ``state`` (the reference's weights) into ``model`` according to the policy."""
    if strict:
        try:
            model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
        except RuntimeError as err:
            first = str(err).strip().splitlines()
            raise WeightsMismatch(" ".join(line.strip() for line in first[:3])[:800]) from None
        return Transfer(True)
    difference = state_difference(model.state_dict(), state)
    if difference:
        return Transfer(False, difference)
    model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return Transfer(True)


def state_difference(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> str:
    """How ModelNew's ``state_dict`` (``ours``) differs from Model's; empty when they match."""
    missing = [k for k in theirs if k not in ours]
    extra = [k for k in ours if k not in theirs]
    shapes = [
        f"{k} {tuple(ours[k].shape)} vs {tuple(theirs[k].shape)}"
        for k in theirs
        if k in ours and tuple(ours[k].shape) != tuple(theirs[k].shape)
    ]
    parts = []
    for label, items in (
        ("Model's keys missing", missing),
        ("extra keys", extra),
        ("shapes differ", shapes),
    ):
        if items:
            listed = ", ".join(items[:MAX_LISTED]) + (" ..." if len(items) > MAX_LISTED else "")
            parts.append(f"{label}: {listed}")
    return "; ".join(parts)


Pairs = list[tuple[str, torch.Tensor, torch.Tensor]]  # (Model's name, Model's, ModelNew's)


def probe_pairs(
    reference: torch.nn.Module, candidate: torch.nn.Module, transferred: bool
) -> tuple[Pairs, str | None]:
    """(name, reference parameter, candidate parameter) to perturb alike, or a reason not to.

    An empty list with no reason means there is nothing to perturb.
    """
    ref_params = _learnable(reference)
    if not ref_params:
        return [], None
    cand_params = _learnable(candidate)
    if transferred:
        if cand_params.keys() != ref_params.keys():
            return [], "ModelNew's learnable parameters are not Model's"
        pairs = [(n, t, cand_params[n]) for n, t in ref_params.items()]
    else:
        matched = _match_by_value(list(ref_params.items()), list(cand_params.values()))
        if matched is None:
            return [], "ModelNew's parameters do not correspond one to one to Model's"
        pairs = matched
    extra = _extra_buffers(reference, candidate)
    if extra:
        return [], f"ModelNew holds buffers that Model does not ({extra})"
    return pairs, None


def perturbed(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """New values for ``t``, drawn as a second initialisation would draw them.

    A tensor with varied values gets its own values in a random order: the same distribution
    (independently initialised weights look like another seed's draw), so the model's
    numerics stay as tame as at construction. A constant tensor (LayerNorm's ones and zeros,
    a scalar) gets each element moved by up to 25% of its magnitude (at least 0.25).
    """
    flat = t.detach().reshape(-1)
    if flat.numel() > 1 and not bool((flat == flat[0]).all()):
        order = torch.randperm(flat.numel(), generator=generator, device=flat.device)
        return flat[order].reshape(t.shape).clone()
    base = flat.float()
    step = RELATIVE_STEP * base.abs().clamp(min=1.0)
    w = torch.rand(base.shape, generator=generator, device=base.device) * 2 - 1
    return (base + step * w).to(t.dtype).reshape(t.shape)


@contextmanager
def same_new_weights(
    pairs: Pairs, generator: torch.Generator, pristine: dict[str, torch.Tensor]
) -> Iterator[None]:
    """Give each pair the same ``perturbed`` values for the ``with`` block; then restore the
    reference's from ``pristine`` (its state_dict copy) and the candidate's from a copy."""
    saved = [c.detach().clone() for _, _, c in pairs]
    try:
        with torch.no_grad():
            for _, r, c in pairs:
                new = perturbed(r, generator)
                r.copy_(new)
                c.copy_(new)
        yield
    finally:
        with torch.no_grad():
            for (name, r, c), old in zip(pairs, saved, strict=True):
                r.copy_(pristine[name])
                c.copy_(old)


def not_transferred_text(moved: Transfer, probed: bool, skipped: str | None) -> str:
    """The text of the note ``weights_not_transferred``: what was compared, and what cannot be
    told when the probe did not run."""
    text = (
        f"ModelNew's state_dict differs from Model's ({moved.note}), so Model's weights were "
        "not loaded; both models were constructed from the same seed and compared as built"
    )
    if probed:
        return text + (
            "; both then received the same new values for their parameters (matched by shape "
            "and initial value) and still agreed"
        )
    return text + (
        ". The evaluation therefore cannot tell a solution that works only at these initial "
        f"weight values (the perturbed-weights check was not possible: "
        f"{skipped or 'the policy does not ask for it'})"
    )


def _learnable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {
        n: p
        for n, p in model.named_parameters()
        if p.requires_grad and p.is_floating_point() and p.numel() > 0
    }


def _match_by_value(ref: list[tuple[str, torch.Tensor]], cand: list[torch.Tensor]) -> Pairs | None:
    """Pair each reference tensor with the first unused candidate tensor of the same shape,
    dtype, device and identical values (both models come from the same seed); None unless
    every tensor on both sides is paired."""
    if len(ref) != len(cand):
        return None
    used: set[int] = set()
    pairs: Pairs = []
    for name, r in ref:
        for j, c in enumerate(cand):
            if j not in used and _equal(c.detach(), r.detach()):
                used.add(j)
                pairs.append((name, r, c))
                break
        else:
            return None
    return pairs


def _extra_buffers(reference: torch.nn.Module, candidate: torch.nn.Module) -> str:
    """Floating buffers in ModelNew's state_dict equal to none in Model's: the one of the same
    name first, then those of the same shape (one comparison each in the usual case, so a
    network with hundreds of norm layers stays cheap)."""
    theirs = _persistent_buffers(reference)
    extra = []
    for name, b in _persistent_buffers(candidate).items():
        same = theirs.get(name)
        if same is not None and _equal(same, b):
            continue
        if not any(_equal(t, b) for t in theirs.values()):
            extra.append(name)
    return ", ".join(extra[:MAX_LISTED])


def _persistent_buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    params = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    return {
        n: t
        for n, t in model.state_dict(keep_vars=True).items()
        if n not in params and t.is_floating_point()
    }


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)
