"""The evaluation worker: the only code that runs candidate code and touches the device.

It runs as its own process (``python -m cuda_agent.evaluator.worker``), one evaluation per
process, and needs only torch, numpy and the standard library (GPU hosts run a fixed image).
The parent sends one JSON request on stdin and reads JSON lines from a dedicated pipe whose
file descriptor is named in the request; the candidate's own stdout/stderr go to files the
parent never parses.
"""
