"""The evaluation worker: the only code that runs candidate code and touches the device.

It runs as its own process (``python -m cuda_agent.evaluator.worker``), one evaluation per
process, and needs only torch, numpy and the standard library (GPU hosts run a fixed image).
The parent sends one JSON request on stdin and reads JSON lines from a dedicated pipe whose
file descriptor is named in the request; the candidate's own stdout/stderr go to files the
parent never parses.

Each mode of a request is the module of that name in ``modes/``, with
``run(request, channel)``; the parent-side module that asks for it and reads its record:

=================  =====================================  =====================================
mode               worker module (here)                   parent module
=================  =====================================  =====================================
evaluate           ``modes/evaluate.py``                  ``evaluator/pipeline.py``
problem_check      ``modes/problem_check.py``             ``evaluator/checks/problem_runtime.py``
compile_baseline   ``modes/compile_baseline.py``          ``evaluator/checks/compile_ratio.py``
ncu_profile        ``modes/ncu_profile.py``               ``evaluator/checks/ncu_metrics.py``
shape_plan         ``modes/shape_plan.py``                ``evaluator/checks/shapes.py``
synth_check        ``modes/synth_check.py``               ``synth/run.py``
memory_check       ``modes/memory_check.py``              ``evaluator/checks/memory_safety.py``
=================  =====================================  =====================================

``protocol.py`` holds the request, the settings it shares with the parent and the record an
``evaluate`` worker returns; ``policies.py`` holds what each policy decides. ``modes/evaluate.py``
is the order of its stages; the stages share an ``EvaluationSession`` (``session.py``) and live
in ``verify.py`` (correctness) and ``timed.py`` (timing, stream check, profile), which are
not modes.
"""
