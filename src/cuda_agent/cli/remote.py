"""``cuda-agent eval ... --service URL``: one evaluation through a reward service.

The problem and the solution are read here as for a local evaluation; the options that a
client may set travel with them (the seed stays the service's secret); the token comes from
``CUDA_AGENT_TOKEN``. The result is an ``EvalResult`` like a local one, so it prints the same.
A refused token, an unreachable service or a refused submission is one line (exit 2).
"""

from __future__ import annotations

import asyncio
import os

import httpx

from cuda_agent.cli.common import EvalArgs, err_console, one_line_errors, resolve_size
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.types import EvalResult
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.service.client import (
    TOKEN_ENV,
    ServiceClient,
    ServiceFailed,
    ServiceRefused,
    client_options,
)
from cuda_agent.solutions.loader import load_solution


@one_line_errors
def evaluate_at(url: str, args: EvalArgs) -> EvalResult:
    """Evaluate through the reward service at ``url``; the result prints as a local one does."""
    token = os.environ.get(TOKEN_ENV) or None
    opts = args.opts

    async def run() -> EvalResult:
        async with ServiceClient(url, token, retries=2) as client:
            health = await client.health()
            served = str(health.get("backend"))
            if args.backend not in ("auto", served):
                raise CudaAgentError(
                    f"the service at {url} evaluates on {served}, not {args.backend}"
                )
            prob = resolve_problem(args.problem, resolve_size(args.size, served))
            sol = load_solution(args.solution)
            timeout = opts.worker_timeout_s + opts.build_timeout_s + opts.baseline_timeout_s
            return await client.evaluate(prob, sol, client_options(opts), timeout_s=timeout)

    try:
        if args.quiet:
            return asyncio.run(run())
        with err_console.status(f"evaluating {args.solution.name} at {url}"):
            return asyncio.run(run())
    except ServiceRefused as err:
        if err.status in (401, 403):
            raise CudaAgentError(
                f"the service at {url} refused the token: set {TOKEN_ENV} to a token it accepts"
            ) from None
        raise CudaAgentError(f"the service at {url} refused the evaluation: {err.detail}") from None
    except (httpx.TransportError, httpx.HTTPStatusError) as err:
        raise CudaAgentError(f"cannot reach the service at {url}: {err}") from None
    except (ServiceFailed, TimeoutError) as err:
        raise CudaAgentError(str(err)) from None
