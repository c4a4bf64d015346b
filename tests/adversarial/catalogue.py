"""The red-team catalogue: every fixture, the exploit family it tries, and its required verdict.

Families follow ``shared/exploits.md`` (A: correctness-side, B: timing-side, C: harness and
environment); ``F`` marks the fault suite, ``K`` KernelBench's semantics (module mode), ``M``
memory safety. ``rejected`` means reward -1 with at least one of
the named flags; ``scored`` means the trick is legitimate (or has no effect) under the active
policy and the solution is scored honestly: correct, no flags (``notes`` lists the
warning-level notes it must carry). ``known_gap`` marks what the evaluator does not catch today
(run as an expected failure, and listed in docs/security.md). One fixture file may be judged
under several policies: each entry is named ``<file>@<policy>`` then. ``message_has`` is text
the error message must contain (the compiler diagnostic a fallback caught, say). GPU-only
families (B1 other streams, B5 persisting L2, A9 TF32 switch) live in tests/gpu.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from cuda_agent.solutions.static import analyse

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEMS = Path(__file__).parent / "problems"
LAYER_NORM = str(PROBLEMS / "layer_norm_plain.py")  # default init: weight ones, bias zeros
BATCH_NORM = str(PROBLEMS / "batch_norm_shifted.py")  # training mode, shifted inputs


@dataclass(frozen=True)
class Fixture:
    name: str
    family: str
    problem: str
    expect: str  # "rejected" or "scored"
    flags: tuple[str, ...] = ()
    defence: str = ""
    needs_sandbox: bool = False
    known_gap: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    message_has: str = ""
    needs_triton: bool = False  # a Triton fixture (the interpreter on the cpu backend)
    stage: str = ""  # the stage a rejection must name ("": any)

    @property
    def file(self) -> str:
        return self.name.partition("@")[0]

    @property
    def path(self) -> Path:
        return FIXTURES / f"{self.file}.py"


def R(
    name: str, family: str, flags: tuple[str, ...], defence: str, problem: str = "relu", **kw: Any
) -> Fixture:
    return Fixture(name, family, problem, "rejected", flags, defence, **kw)


def S(name: str, family: str, defence: str, problem: str = "relu", **kw: Any) -> Fixture:
    return Fixture(name, family, problem, "scored", (), defence, **kw)


def under(policy: str) -> dict[str, Any]:
    return {"options": {"policy": policy}}


CHECKED: dict[str, Any] = {"options": {"memory_check": True}}  # tests turn it off elsewhere
MISMATCH = ("output_mismatch:value",)
GARBAGE = ("output_mismatch:value", "output_mismatch:nan", "output_mismatch:inf")  # any bits

CATALOGUE: list[Fixture] = [
    R("a1_unwritten_output", "A1", GARBAGE, "fresh inputs per trial, candidate runs first"),
    R("a1_half_written", "A1", GARBAGE, "every element compared"),
    R("a2_zeros", "A2", MISMATCH, "non-degenerate problems (task lint), element-wise tolerance"),
    R("a3_stale_memory", "A3", GARBAGE, "candidate first: no reference output exists yet"),
    R("a4_zero_inputs", "A4", ("input_mutated",), "own input clones, compared after the call"),
    R(
        "a4_inplace_relu_input@kernelbench",
        "A4",
        ("input_mutated",),
        "own input clones, compared with the reference's after both calls",
        **under("kernelbench"),
    ),
    R(
        "a4_own_weights",
        "A4",
        ("param_mutated",),
        "weight fingerprints after every call",
        problem="bias_gelu_scale",
    ),
    R(
        "a4_reference_weights_gc",
        "A4",
        ("reference_weights_mutated",),
        "reference weights fingerprinted before the import",
        problem="bias_gelu_scale",
    ),
    R(
        "a4_pristine_inputs_gc",
        "A4/B8",
        ("reference_inputs_mutated",),
        "pristine inputs fingerprinted before the import",
    ),
    R(
        "a4_pristine_inputs_between_trials",
        "A4/B8",
        ("reference_inputs_mutated",),
        "each trial's pristine set fingerprinted after both copies are made",
        options={"policy": "off"},
    ),
    R("a5_reference_code", "A5", ("forbidden_op:relu",), "dispatcher hook, strict policy"),
    R("a5_getattr_alias", "A5/C3", ("forbidden_op:relu",), "dispatcher hook (names irrelevant)"),
    R("a5_call_reference_via_gc", "A5/A12", ("forbidden_op:relu",), "dispatcher hook"),
    R("a5_cpp_aten", "A5", ("forbidden_op:relu",), "dispatcher hook sees C++ calls"),
    R(
        "a6_fallback_except",
        "A6",
        ("no_custom_kernel",),
        "the shim records the caught build failure; no custom call in the forward",
        message_has="not_declared",
    ),
    R(
        "a6_fallback_except@kernelbench",
        "A6",
        ("no_custom_kernel",),
        "as under strict: a custom call is required in every forward",
        message_has="not_declared",
        **under("kernelbench"),
    ),
    S(
        "a6_fallback_except@off",
        "A6",
        "no kernel requirement under off: scored, with the caught build error noted",
        notes=("build_failed_caught",),
        **under("off"),
    ),
    R(
        "a6_fallback_bare_except",
        "A6",
        ("no_custom_kernel",),
        "the shim records the failure",
        message_has="not_declared",
    ),
    R(
        "a6_fallback_in_init",
        "A6",
        ("no_custom_kernel",),
        "run-time builds go through the shim; the caught failure is named",
        message_has="missing_symbol",
        **under("kernelbench"),
    ),
    R("a7_decoy_kernel", "A7", ("forbidden_op:relu", "forbidden_op:cat"), "dispatcher hook"),
    R("a8_lazy_subclass", "A8", ("output_mismatch:type",), "plain torch.Tensor required"),
    S("a9_bf16_inside", "A9", "lower precision inside own kernels allowed within tolerance"),
    R(
        "a9_cudnn_benchmark",
        "A9",
        ("global_state_changed:cudnn_benchmark",),
        "global switches snapshotted (strict: none may change)",
    ),
    S(
        "a9_cudnn_benchmark@kernelbench",
        "A9",
        "kernelbench tolerates cudnn.benchmark: restored after every call, noted",
        notes=("cudnn_benchmark",),
        **under("kernelbench"),
    ),
    R(
        "a9_cudnn_benchmark_tf32@kernelbench",
        "A9",
        ("global_state_changed:cudnn_tf32",),
        "switches that change precision stay flagged under kernelbench",
        **under("kernelbench"),
    ),
    R("a10_fixed_seed", "A10", MISMATCH, "secret per-evaluation seed"),
    R("a11_nan_output", "A11", ("output_mismatch:nan",), "NaN positions must match"),
    R("a11_inf_output", "A11", ("output_mismatch:inf",), "infinities must match"),
    R(
        "a11_intermittent_nan@kernelbench",
        "A11",
        ("timed_output_mismatch", "output_mismatch:nan"),
        "timed outputs are checked (the first timed round always)",
        **under("kernelbench"),
    ),
    R("a12_gc_steal_output", "A12", MISMATCH, "candidate first; only fingerprints kept"),
    R(
        "a15_init_values_renamed",
        "A15",
        ("load_failed",),
        "strict load_state_dict: ModelNew's parameter names must be Model's",
        problem=LAYER_NORM,
    ),
    R(
        "a15_init_values_renamed@kernelbench",
        "A15",
        ("init_values_only",),
        "parameters matched by shape and initial value get the same new values on both sides",
        problem=LAYER_NORM,
        **under("kernelbench"),
    ),
    R(
        "a15_init_values_reshaped",
        "A15",
        ("load_failed",),
        "strict load_state_dict: shapes must match",
        problem=LAYER_NORM,
    ),
    S(
        "a15_init_values_reshaped@kernelbench",
        "A15",
        "not detectable (no parameter correspondence): scored as KernelBench scores it, with "
        "the note weights_not_transferred saying so",
        problem=LAYER_NORM,
        notes=("weights_not_transferred",),
        **under("kernelbench"),
    ),
    S(
        "a15_renamed_params_honest@kernelbench",
        "A15",
        "renamed parameters are legitimate under kernelbench: matched, probed, scored",
        problem=LAYER_NORM,
        notes=("weights_not_transferred",),
        **under("kernelbench"),
    ),
    R(
        "m1_read_past_end",
        "M",
        ("memory_error:access",),
        "a correct candidate runs once more under a memory checker (AddressSanitizer here)",
        **CHECKED,
    ),
    R(
        "m1_read_past_end@kernelbench",
        "M",
        ("memory_error:access",),
        "the memory check runs under every policy",
        options={"memory_check": True, "policy": "kernelbench"},
    ),
    R(
        "m2_write_past_end",
        "M",
        ("memory_error:access",),
        "a correct candidate runs once more under a memory checker (AddressSanitizer here)",
        **CHECKED,
    ),
    R(
        "m3_uninitialized_read",
        "M",
        ("memory_error:uninitialized", *GARBAGE),
        "uninitialised allocations filled with NaN in the checked run (and garbage in the "
        "verified one, where the host's memory held some)",
        **CHECKED,
    ),
    S("m0_honest_relu", "M", "an honest kernel passes the memory check", **CHECKED),
    R(
        "m4_read_before_start",
        "M",
        ("memory_error:access",),
        "the memory check (AddressSanitizer here): a read before the start of the input",
        stage="memory",
        **CHECKED,
    ),
    R(
        "m5_write_between_outputs",
        "M",
        ("memory_error:access",),
        "the memory check: a write past the end of a buffer the candidate allocated, which "
        "the guarded trial does not guard",
        stage="memory",
        **CHECKED,
    ),
    R(
        "m6_read_past_end_discarded",
        "M",
        ("memory_error:access",),
        "the memory check: a read whose value never reaches the output (the guarded trial "
        "cannot see it)",
        stage="memory",
        **CHECKED,
    ),
    R(
        "m7_uninitialized_scratch",
        "M",
        ("memory_error:uninitialized", "output_mismatch:nan"),
        "uninitialised allocations filled with NaN in the checked run (a small scratch; a NaN "
        "already in the recycled bytes fails the verified run)",
        **CHECKED,
    ),
    R(
        "m8_device_fault_after_spill",
        "M",
        ("memory_error:access",),
        "a forward that raised CUDA's illegal-address fault (device_fault) is run again under "
        "the memory check, which names the access",
        stage="memory",
        **CHECKED,
    ),
    R(
        "r1_read_past_end_reaches_output",
        "M",
        ("memory_error:access",),
        "the guarded trial: inputs inside buffers whose edges hold NaN (memory check off)",
        stage="verify",
    ),
    R(
        "r2_write_into_guard",
        "M",
        ("memory_error:access",),
        "the guarded trial: the NaN edges around each input must stay as they were "
        "(memory check off)",
        stage="verify",
    ),
    R(
        "k1_batchnorm_running_stats",
        "K1",
        MISMATCH,
        "modules run in the mode their constructor left them, training mode (as KernelBench)",
        problem=BATCH_NORM,
    ),
    R(
        "k1_batchnorm_running_stats@kernelbench",
        "K1",
        MISMATCH,
        "modules run in training mode, as KernelBench runs them: it rejects this too",
        problem=BATCH_NORM,
        **under("kernelbench"),
    ),
    S(
        "k1_batchnorm_batch_stats",
        "K1",
        "BatchNorm with batch statistics is the training-mode function: scored (KernelBench too)",
        problem=BATCH_NORM,
    ),
    S(
        "k1_batchnorm_batch_stats@kernelbench",
        "K1",
        "BatchNorm with batch statistics is the training-mode function: scored (KernelBench too)",
        problem=BATCH_NORM,
        **under("kernelbench"),
    ),
    R(
        "a13_cache_by_shape",
        "A13",
        ("no_custom_kernel", *MISMATCH),
        "fresh inputs per trial; a custom call required in every forward",
    ),
    S("a13_cache_by_content", "A13/B7", "fresh perturbed inputs for every timed call"),
    R("a14_call_count", "A14", ("timed_output_mismatch",), "timed outputs are checked"),
    R(
        "a14_detect_recorder",
        "A14",
        ("custom_kernel_skipped_in_timing",),
        "custom calls counted in every timed call",
    ),
    R(
        "a14_detect_recorder_keep_token_call",
        "A14",
        ("forbidden_op:relu",),
        "",
        known_gap="in-process hooks are detectable; a candidate that keeps a token custom call "
        "and uses torch only when unobserved is not caught",
    ),
    R(
        "b2_thread_writes_later",
        "B2",
        ("threads_started", *GARBAGE),  # the copy holds whatever bits empty_like left
        "output copied right after the call; thread count",
    ),
    R(
        "b3_patch_allclose",
        "B3",
        ("harness_patched:torch.allclose",),
        "function identities; comparisons use functions bound before the import",
    ),
    R(
        "b3_patch_timer",
        "B3",
        ("harness_patched:time.perf_counter_ns",),
        "the timer is bound before the import",
    ),
    R("b4_forge_result", "B4", ("crashed",), "nonce-tagged private pipe; exit codes ignored"),
    S("b8_shrink_sizes", "B8", "inputs drawn from a private copy before the import"),
    R(
        "a4_slow_reference_in_timing",
        "A4/B",
        ("reference_weights_mutated", "timed_output_mismatch"),
        "reference weights fingerprinted on secret timing rounds and after the last",
        problem="bias_gelu_scale",
        options={"policy": "off"},
    ),
    R("b9_threads", "B9", ("global_state_changed:num_threads",), "global switches snapshotted"),
    R(
        "b10_torch_compile_inside",
        "B10",
        ("forbidden_op:relu",),
        "torch.compile runs eagerly under strict",
    ),
    S("b11_library_gemm", "B11", "vendor GEMM allowed under strict", problem="square_matmul"),
    R(
        "c1_write_outside",
        "C1",
        ("load_failed",),
        "sandbox: read-only file system",
        needs_sandbox=True,
    ),
    R("c1_network", "C1", ("load_failed",), "sandbox: no network", needs_sandbox=True),
    S(
        "c1_forge_baselines",
        "C1",
        "baselines read-only to candidates; signed with a key they cannot read",
        needs_sandbox=True,
    ),
    S(
        "c1_replace_module",
        "C1",
        "build cache read-only to candidates; modules sealed and checked before use",
        needs_sandbox=True,
    ),
    R("c3_token_paste", "C3", ("forbidden_op:relu",), "dispatcher hook (C++ text irrelevant)"),
    R("c4_zero_small_values", "C4", MISMATCH, "element-wise atol + rtol, not scaled by the max"),
    R("f_segfault", "F", ("crashed",), "one process per evaluation"),
    R(
        "f_infinite_loop",
        "F",
        ("timeout",),
        "hard deadline, process group killed",
        # the spin holds a core until the deadline: the shortest that still leaves a forked or
        # bubblewrapped worker its start before the spin begins
        options={"worker_timeout_s": 5.0},
    ),
    R(
        "f_slow_correct_kernel",
        "F",
        ("device_budget_exceeded",),
        "device budget from the reference's call time, kept by the parent; process group killed",
        # the default timeout: the budget, not the timeout, stops it; the rule scaled by 0.1
        # (about 6 s here: the kernel spins a core until then)
        options={"worker_timeout_s": 600.0, "device_budget": "x0.1"},
    ),
    R("f_host_oom", "F", ("forward_raised",), "address-space limit in the worker"),
    R(
        "f_compile_hangs",
        "F",
        ("build_failed",),
        "build deadline, compiler killed",
        options={"build_timeout_s": 15.0},
    ),
    R("f_compile_log_flood", "F", ("build_failed",), "log trimmed to the first errors"),
    R("f_fork_children", "F", ("processes_started",), "child processes counted; group killed"),
    S("f_huge_stdout", "F", "candidate output goes to a file; only its tail is kept"),
    # Triton (run by its interpreter on the cpu backend; GPU-only ones live in tests/gpu)
    S("t_honest_relu", "T", "launches counted by the harness's own hook", needs_triton=True),
    S(
        "t_honest_relu@kernelbench",
        "T",
        "the same under kernelbench",
        needs_triton=True,
        **under("kernelbench"),
    ),
    R(
        "t_decoy_launch",
        "T/A7",
        ("forbidden_op:relu",),
        "dispatcher hook: the torch compute beside the launch",
        needs_triton=True,
    ),
    R(
        "t_decoy_launch@kernelbench",
        "T/A7",
        ("custom_kernel_unused",),
        "one call with every Triton launch skipped still gives the right output",
        needs_triton=True,
        **under("kernelbench"),
    ),
    R(
        "t_cache_across_calls",
        "T/A13",
        (*MISMATCH, "no_custom_kernel"),
        "fresh inputs per trial; a custom call required in every forward",
        needs_triton=True,
    ),
    R(
        "t_reads_outside_inputs",
        "T/A12",
        (*MISMATCH,),
        "fresh inputs per trial: a kernel reading anything but its own input is wrong",
        needs_triton=True,
    ),
    R(
        "t_patch_launch",
        "T/B3",
        ("harness_patched:JITFunction.run", "harness_patched:InterpretedFunction.run"),
        "the hook's identity checked like the other harness functions",
        needs_triton=True,
    ),
]


def build_calls(fixture: Fixture) -> tuple[str, ...]:
    """The extension builds the static pass finds in the fixture (its ``load_inline`` calls)."""
    report = analyse(fixture.path.read_text(), fixture.path.name)
    calls = [*report.inline_calls, *report.local_inline_calls]
    return tuple(json.dumps(call, sort_keys=True, default=str) for call in calls)


@cache
def cheap_fixture_names() -> frozenset[str]:
    """Fixtures whose verdict costs one worker and no build of its own: their only extension is
    the one most fixtures share (built once per cache, then found in it), and they wait for no
    deadline. These run in the fast test tier; the others (their own sources, run-time builds,
    hangs and timeouts) in the slow one."""
    counts = Counter(build_calls(f) for f in CATALOGUE)
    shared = max((calls for calls in counts if len(calls) == 1), key=lambda c: counts[c])
    deadlines = {"worker_timeout_s", "build_timeout_s"}
    return frozenset(
        f.name for f in CATALOGUE if build_calls(f) == shared and not deadlines & set(f.options)
    )


@cache
def shared_build_groups() -> dict[str, str]:
    """Fixture name -> an xdist group, for the slow fixtures whose extension another slow
    fixture also builds (a fixture under several policies, fixtures of one source): in one
    group they run on one worker in turn, and the later ones find the build in the cache, where
    side by side one worker would wait on the other's build lock. The group is named after the
    first of them."""
    cheap = cheap_fixture_names()
    by_build: dict[tuple[str, ...], list[str]] = {}
    for fixture in CATALOGUE:
        calls = build_calls(fixture)
        if fixture.name not in cheap and calls:
            by_build.setdefault(calls, []).append(fixture.name)
    return {
        name: f"build-of-{names[0]}"
        for names in by_build.values()
        if len(names) > 1
        for name in names
    }
