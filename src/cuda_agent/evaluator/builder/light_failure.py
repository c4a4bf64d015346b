"""Is a failed light compile the sources' own failure, so that stock would fail the same way?

The light layout of a unit (``light.py``) includes a subset of the headers stock
``load_inline`` includes. When its compile fails, the builder normally compiles the stock
text too and reports that result, so that no source fails here that builds with stock torch.
That second compile is the slow one (stock headers, no precompiled header under nvcc): on the
public KernelBench corpora, every one of about 130 light failures failed under stock as well,
and the retry cost 20-130 s each, on the GPU's clock when the build ran inside the worker.

A failure needs no retry when every error of the log is one that more headers cannot undo:

* ``'NAME' was not declared in this scope`` (g++) or ``identifier "NAME" is undefined``
  (nvcc), at a line of the unit's own text, for a NAME that appears nowhere in the stock
  umbrella's headers (not in any branch of any of them, not in the preprocessed umbrella:
  ``light_index.umbrella_identifiers``). No header stock adds declares it, so stock's lookup
  fails there too. (The typical case: a function named in ``functions=`` but declared only in
  ``cuda_sources``, which the generated bindings in ``main.cpp`` cannot see.)
* ``redefinition of '...'`` (g++) at a line of the unit's own text whose "previously defined
  here" note is in the unit's own text as well: two definitions in the candidate's code (the
  typical case: a ``PYBIND11_MODULE`` of its own besides the one ``functions=`` generates).

Anything else (a name some header mentions, a conversion, a missing member, a timeout) is
retried with stock, as before. g++'s spelling hints (``; did you mean 'X'?``) depend on the
names in scope, which differ between the layouts, so they are removed from the reported log.
"""

from __future__ import annotations

import re

from cuda_agent.evaluator.builder.compiler_log import DIAGNOSTIC

OWN_LABEL = re.compile(r'^#line \d+ "([^"]+)"', re.M)
LOCATION = re.compile(r"^(?P<file>[^\s:(][^:(]*?)(?::\d+(?::\d+)?:|\(\d+\):?)\s")
NOT_DECLARED = re.compile(r"error: [‘'](?P<name>[A-Za-z_]\w*)[’'] was not declared in this scope")
UNDEFINED = re.compile(r'error: identifier "(?P<name>[A-Za-z_]\w*)" is undefined')
REDEFINITION = re.compile(r"error: redefinition of ")
PREVIOUS = re.compile(r"note: .* previously (?:defined|declared) here")
HINT = re.compile(r"; did you mean [‘'][^’']*[’']\?")


def own_labels(body: str) -> frozenset[str]:
    """The file names a unit's own text reports its lines under (its ``#line`` markers)."""
    return frozenset(OWN_LABEL.findall(body))


def is_own_failure(log: str, labels: frozenset[str], identifiers: frozenset[str]) -> bool:
    """Whether every error of ``log`` is one of the kinds above (and there is at least one)."""
    lines = log.splitlines()
    errors = 0
    for i, line in enumerate(lines):
        line = line.strip()
        if not DIAGNOSTIC.match(line):
            continue
        errors += 1
        location = LOCATION.match(line)
        if location is None or location["file"] not in labels:
            return False
        missing = NOT_DECLARED.search(line) or UNDEFINED.search(line)
        if missing is not None:
            if missing["name"] in identifiers:
                return False
            continue
        if REDEFINITION.search(line) and _previous_is_own(lines[i + 1 : i + 3], labels):
            continue
        return False
    return errors > 0


def without_hints(log: str) -> str:
    """``log`` without g++'s spelling suggestions (they depend on the headers seen)."""
    return HINT.sub("", log)


def _previous_is_own(following: list[str], labels: frozenset[str]) -> bool:
    for line in following:
        line = line.strip()
        if PREVIOUS.search(line):
            location = LOCATION.match(line)
            return location is not None and location["file"] in labels
    return False
