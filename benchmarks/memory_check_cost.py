"""What the memory check costs: each bundled example solution evaluated with and without it.

``python benchmarks/memory_check_cost.py [--backend cuda] [--size standard] [--out FILE.jsonl]``

For every example of the backend (``cuda_agent.examples``), one evaluation with the memory
check (``--memory-check``, the default) and one without, same seed: the verdicts, the seconds of
the whole evaluation and of the check (``details.memory_check.seconds``: the checker's worker,
its start included, and on the cpu backend the AddressSanitizer builds), and what the check
found. Prints a line per evaluation as it finishes and a table at the end; ``--out`` keeps the
rows as JSON lines. This measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.examples import example_solutions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution


def measure(problem_id: str, path: Path, backend: str, size: str, check: bool) -> dict[str, Any]:
    opts = EvalOptions(backend=backend, baselines=("eager",), seed=1234, memory_check=check)
    started = time.monotonic()
    result = evaluate(resolve_problem(problem_id, size), load_solution(path), opts.validate())
    memory = result.details.memory_check or {}
    return {
        "problem": problem_id,
        "memory_check": check,
        "correct": result.correct,
        "flags": result.flags,
        "seconds": round(time.monotonic() - started, 2),
        "worker_s": (result.details.timings_s or {}).get("worker"),
        "check_s": memory.get("seconds"),
        "errors": memory.get("errors"),
        "incomplete": memory.get("incomplete"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--size", default="standard")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for problem_id, path in example_solutions(args.backend):
        for check in (False, True):
            row = measure(problem_id, path, args.backend, args.size, check)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with args.out.open("a") as out:
                    out.write(json.dumps(row) + "\n")
    print("| problem | verdict (check off / on) | worker s | memory check s | found |")
    print("| --- | --- | ---: | ---: | --- |")
    for off, on in zip(rows[::2], rows[1::2], strict=True):
        found = on["incomplete"] or (f"{on['errors']} errors" if on["errors"] else "clean")
        print(
            f"| {on['problem']} | {off['correct']} / {on['correct']} | {on['worker_s']} "
            f"| {on['check_s']} | {found} |"
        )


if __name__ == "__main__":
    main()
