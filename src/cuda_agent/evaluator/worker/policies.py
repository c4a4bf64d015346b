"""The policy table: precision settings, and what each policy decides.

Importable by the CLI, options and clients. A policy's name is ``core/policy.py``'s ``Policy``
(with ``DEFAULT_POLICY`` and ``parse_policy``); ``rules(policy)`` is the one place where a
policy's decisions live; the worker reads them, ``docs/policy.md`` explains them rule by rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_agent.core.policy import Policy, parse_policy

PRECISIONS = ("ieee", "tf32", "torch-default")

# Notes: warning-level findings a correct result may carry (``details.notes``), never flags.
NOTE_WEIGHTS_NOT_TRANSFERRED = "weights_not_transferred"
NOTE_CUDNN_BENCHMARK = "cudnn_benchmark"
NOTE_TIMED_BESIDE_OTHER_JOBS = "timed_beside_other_jobs"  # worker/device_turn.py
NOTE_BUILD_FAILED_CAUGHT = "build_failed_caught"
NOTE_DECOY_CHECK_SKIPPED = "decoy_check_skipped"  # Triton: no unused input set to run it on


@dataclass(frozen=True)
class PolicyRules:
    """What a policy decides (see docs/policy.md).

    * ``op_policy``: only creation, views and vendor GEMM/convolution ATen ops in a forward
      (``guards.forbidden_ops`` names the others);
    * ``custom_kernel_required``: every forward must call a compiled extension function, and a
      solution that caught its own build failure and fell back to PyTorch is rejected;
    * ``strict_weights``: the reference's weights arrive by strict ``load_state_dict``, and a
      ModelNew whose parameter names or shapes differ is rejected; otherwise they are loaded
      when names and shapes match and the seeded construction is kept when not (noted);
    * ``weight_probe``: after verification, both models get the same new parameter values
      and must still agree (catches solutions correct only at the initial weights);
    * ``tolerated_switches``: global switches the candidate may flip (restored after every
      call and noted); any other switch change is flagged;
    * ``compile_disabled``: ``torch.compile`` inside ModelNew runs eagerly (its ops judged);
    * ``min_custom_kernel_coverage``: on the GPU, the least share of a call's device time the
      candidate's own kernels must take (``custom_kernels_idle`` below it); ``0.0`` checks
      nothing (``strict`` needs no such check: its op rule leaves no torch compute to hide
      behind);
    * ``reference_namespace``: a single-file solution runs in a namespace that already holds
      what the problem's file defines and imports (``Model``, ``get_inputs``, its imports and
      helpers), as KernelBench's evaluator runs it (both sources executed in one dict); the
      names come from a second execution of the problem's source, never from the reference
      the harness compares against. Without it a solution is a module of its own, and a name
      it takes for granted from the problem's file is named in the verdict.

    The worker reads these fields, never the policy's name: a structure test
    (``tests/evaluator/worker/test_policy_table.py``) fails on a comparison with a policy's
    name anywhere else in the package.
    """

    op_policy: bool
    custom_kernel_required: bool
    strict_weights: bool
    weight_probe: bool
    tolerated_switches: frozenset[str]
    compile_disabled: bool
    min_custom_kernel_coverage: float
    reference_namespace: bool


_RULES = {
    Policy.STRICT: PolicyRules(
        op_policy=True,
        custom_kernel_required=True,
        strict_weights=True,
        weight_probe=False,
        tolerated_switches=frozenset(),
        compile_disabled=True,
        min_custom_kernel_coverage=0.0,
        reference_namespace=False,
    ),
    Policy.KERNELBENCH: PolicyRules(
        op_policy=False,
        custom_kernel_required=True,
        strict_weights=False,
        weight_probe=True,
        tolerated_switches=frozenset({"cudnn_benchmark"}),
        compile_disabled=False,
        min_custom_kernel_coverage=0.01,
        reference_namespace=True,
    ),
    Policy.OFF: PolicyRules(
        op_policy=False,
        custom_kernel_required=False,
        strict_weights=False,
        weight_probe=True,
        tolerated_switches=frozenset({"cudnn_benchmark"}),
        compile_disabled=False,
        min_custom_kernel_coverage=0.0,
        reference_namespace=True,
    ),
}


def rules(policy: Policy) -> PolicyRules:
    """The rules of ``policy`` (a name is parsed: ``ConfigError`` for one not known)."""
    return _RULES[parse_policy(policy)]
