"""A policy's name as a typed value: ``Policy``, its one default and the one parser.

``Policy`` is a ``StrEnum`` (JSON, the CLI and messages see ``"strict"``); ``DEFAULT_POLICY``
is the one default; ``parse_policy`` is the one place a name from outside (a flag, a request,
a config, a result line) becomes one. It lives in ``core`` so that records (``EvalDetails``)
can hold it. What each policy decides is ``evaluator/worker/policies.py``'s ``rules``.
"""

from __future__ import annotations

from enum import StrEnum

from cuda_agent.core.errors import ConfigError


class Policy(StrEnum):
    """The rules a verdict is judged by (docs/policy.md)."""

    STRICT = "strict"  # the paper's rules
    KERNELBENCH = "kernelbench"  # KernelBench's evaluator's
    OFF = "off"  # correctness and timing only

    def __repr__(self) -> str:
        # its value's repr: a record written as Python source (pprint, repr) stays plain data
        return repr(self.value)


POLICIES: tuple[Policy, ...] = tuple(Policy)
DEFAULT_POLICY = Policy.STRICT  # the one default (CLI options, requests, configs)


def parse_policy(value: str) -> Policy:
    """``value`` as a ``Policy``; ``ConfigError`` naming the choices where it is none."""
    try:
        return Policy(value)
    except ValueError:
        choices = ", ".join(POLICIES)
        raise ConfigError(f"unknown policy {value!r} (choose from {choices})") from None
