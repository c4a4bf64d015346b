"""The evaluation worker: the only code that runs candidate code and touches the device.

It runs as its own process (``python -m cuda_agent.evaluator.worker``), one evaluation per
process, and needs only torch, numpy and the standard library (GPU hosts run a fixed image).
The parent sends one JSON request on stdin and reads JSON lines from a dedicated pipe whose
file descriptor is named in the request; the candidate's own stdout/stderr go to files the
parent never parses.

Each mode of a request is the worker module of that name, with ``run(request, channel)``;
the parent-side module that asks for it and reads its record:

=================  =====================================  =====================================
mode               worker module (here)                   parent module
=================  =====================================  =====================================
evaluate           ``evaluate.py``                        ``evaluator/pipeline.py``
problem_check      ``problem_check.py``                   ``evaluator/problem_check.py``
compile_baseline   ``compile_baseline.py``                ``evaluator/compile_baseline.py``
ncu_profile        ``ncu_profile.py``                     ``evaluator/ncu_profile.py``
shape_plan         ``shape_plan.py``                      ``evaluator/shapes.py``
synth_check        ``synth_check.py``                     ``synth/run.py``
memory_check       ``memory_check.py``                    ``evaluator/memory_check.py``
=================  =====================================  =====================================

``protocol.py`` holds the request, the settings it shares with the parent and the record an
``evaluate`` worker returns; ``policies.py`` holds what each policy decides. ``evaluate.py``
is the order of its stages; the stages share an ``EvaluationSession`` (``session.py``) and live
in ``verify.py`` (correctness) and ``timed.py`` (timing, stream check, profile), which are
not modes.
"""
