"""The policy table: the names of policies and precision settings, and what each policy decides.

Importable by the CLI, options and clients. ``rules(policy)`` is the one place where a policy's
decisions live; the worker reads them, ``docs/policy.md`` explains them rule by rule.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("strict", "kernelbench", "off")
PRECISIONS = ("ieee", "tf32", "torch-default")

# Notes: warning-level findings a correct result may carry (``details.notes``), never flags.
NOTE_WEIGHTS_NOT_TRANSFERRED = "weights_not_transferred"
NOTE_CUDNN_BENCHMARK = "cudnn_benchmark"
NOTE_BUILD_FAILED_CAUGHT = "build_failed_caught"
NOTE_DECOY_CHECK_SKIPPED = "decoy_check_skipped"  # Triton: no unused input set to run it on


@dataclass(frozen=True)
class PolicyRules:
    """What a policy decides (see docs/policy.md).

    * ``op_policy``: only creation, views and vendor GEMM/convolution ATen ops in a forward;
    * ``custom_kernel_required``: every forward must call a compiled extension function, and a
      solution that caught its own build failure and fell back to PyTorch is rejected;
    * ``strict_weights``: the reference's weights arrive by strict ``load_state_dict``, and a
      ModelNew whose parameter names or shapes differ is rejected; otherwise they are loaded
      when names and shapes match and the seeded construction is kept when not (noted);
    * ``weight_probe``: after verification, both models get the same new parameter values
      and must still agree (catches solutions correct only at the initial weights);
    * ``tolerated_switches``: global switches the candidate may flip (restored after every
      call and noted); any other switch change is flagged;
    * ``compile_disabled``: ``torch.compile`` inside ModelNew runs eagerly (its ops judged).
    """

    op_policy: bool
    custom_kernel_required: bool
    strict_weights: bool
    weight_probe: bool
    tolerated_switches: frozenset[str]
    compile_disabled: bool


_RULES = {
    "strict": PolicyRules(
        op_policy=True,
        custom_kernel_required=True,
        strict_weights=True,
        weight_probe=False,
        tolerated_switches=frozenset(),
        compile_disabled=True,
    ),
    "kernelbench": PolicyRules(
        op_policy=False,
        custom_kernel_required=True,
        strict_weights=False,
        weight_probe=True,
        tolerated_switches=frozenset({"cudnn_benchmark"}),
        compile_disabled=False,
    ),
    "off": PolicyRules(
        op_policy=False,
        custom_kernel_required=False,
        strict_weights=False,
        weight_probe=True,
        tolerated_switches=frozenset({"cudnn_benchmark"}),
        compile_disabled=False,
    ),
}


def rules(policy: str) -> PolicyRules:
    """The rules of ``policy`` (one of ``POLICIES``)."""
    if policy not in _RULES:
        raise ValueError(f"unknown policy {policy!r} (choose from {', '.join(POLICIES)})")
    return _RULES[policy]
