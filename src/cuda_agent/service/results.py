"""What a result may carry out of the service: no hidden seed, no path of the harness.

An ``EvalResult`` made for a local user names the evaluation's secret seed
(``details.seed``: with it, inputs could be predicted) and paths on the evaluating machine (the
build cache's modules, scratch folders, the harness's own files) in its details and messages.
``public_result`` returns a copy with every ``seed`` key removed, ``path`` keys dropped, and
those machine paths replaced by ``<cache>``, ``<scratch>`` and ``<harness>``.

What it does not do: change a verdict, a flag, a reward or a measured time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root, package_root, scratch_dir

DROPPED_KEYS = ("seed", "path")


def _roots() -> list[tuple[str, str]]:
    package = str(package_root())
    pairs = [
        (str(scratch_dir()), "<scratch>"),
        (str(cache_root()), "<cache>"),
        (package, "<harness>"),
    ]
    resolved = [(str(Path(p).resolve()), name) for p, name in pairs]
    # the longest first, so a scratch folder inside the cache keeps its own name
    return sorted({*pairs, *resolved}, key=lambda pair: -len(pair[0]))


def public_result(result: dict[str, Any]) -> dict[str, Any]:
    out = _clean(result, _roots())
    assert isinstance(out, dict)
    return out


def _clean(value: Any, roots: list[tuple[str, str]]) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v, roots) for k, v in value.items() if k not in DROPPED_KEYS}
    if isinstance(value, list):
        return [_clean(v, roots) for v in value]
    if isinstance(value, str):
        for root, name in roots:
            if root and root in value:
                value = value.replace(root, name)
        return value
    return value
