"""The light layout of a ``load_inline`` unit: stock's headers minus those the source cannot see.

Stock ``load_inline`` compiles ``main.cpp`` with ``torch/extension.h`` and ``cuda.cu`` with
``torch/types.h`` (plus whatever the candidate includes, often ``torch/extension.h`` again).
Parsing those headers is most of a build. The light layout keeps, of the stock umbrella's
headers (``torch/types.h`` or ``torch/extension.h``, whichever stock would see):

* a fixed base (``Tensor``, ``TensorOptions``, the dispatch macros, the ``torch`` namespace
  aliases; for ``main.cpp`` also torch's pybind11 casters), and
* every other header of the umbrella that declares, at namespace scope, a name the unit uses
  (``light_index.py`` finds them; names used inside the macros the unit uses count too).

Operator headers (``ATen/ops/<op>.h``) come from a shadow folder whose copies leave out the
two heavy includes every generated operator header carries (``ATen/Context.h``,
``ATen/DeviceGuard.h``); those are still added when a name they declare is used.

So the unit's own names resolve to the same declarations as under stock, with one documented
exception: ``torch::<factory>`` (``torch::empty``, ``torch::zeros``...) resolves to the
``at::`` function of the same name instead of the autograd wrapper of
``torch/csrc/autograd/generated/variable_factories.h`` (same result unless the options ask for
``requires_grad``; a source that names ``requires_grad`` gets no light layout).

This module only writes text. Whether the light text compiles is the builder's question: if it
does not, the builder compiles the stock text and reports that result (``builder.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuda_agent.evaluator.builder.cxxscan import used_names

# candidate includes replaced by the light set, and the stock umbrella each one implies
UMBRELLAS = {
    "torch/extension.h": "extension",
    "torch/torch.h": "extension",
    "torch/all.h": "extension",
    "torch/python.h": "extension",
    "torch/types.h": "types",
    "ATen/ATen.h": "types",
}
LEVELS = {"none": 0, "types": 1, "extension": 2}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"][^\n]*$', re.M)
NO_LIGHT_NAMES = frozenset({"requires_grad", "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL"})
EXCLUDED_FILES = frozenset({"torch/csrc/autograd/generated/variable_factories.h"})
ALWAYS_VISIBLE_NAMESPACES = frozenset({"", "std", "at", "c10", "torch"})


@dataclass(frozen=True)
class LightIndex:
    """Which header declares which name, for one toolchain (built by ``light_index.py``)."""

    files: tuple[str, ...]  # each header's own spelling (``bits/stl_vector.h``), in stock order
    include_as: tuple[str, ...]  # how to include it (``vector``): itself or an includer
    levels: tuple[int, ...]  # per file: 1 = in torch/types.h's closure, 2 = only extension.h's
    names: dict[str, tuple[tuple[int, str], ...]]  # name -> ((file index, namespace), ...)
    macro_names: dict[str, tuple[str, ...]]  # macro -> identifiers of its definition
    base: dict[str, frozenset[int]]  # kind ("cuda", "cxx") -> files the base header pulls in
    base_header: dict[str, str] = field(default_factory=dict)  # kind -> spelling of base header
    namespaces: frozenset[str] = frozenset()  # names that some header opens as a namespace
    shadow_dir: str = ""
    key: str = ""  # identifies the index (and its shadow folder) in cache keys


def unit_level(prelude: str, body: str) -> int:
    """The stock umbrella the unit sees: 0 none, 1 ``torch/types.h``, 2 ``torch/extension.h``."""
    level = 0
    for text in (prelude, body):
        for match in INCLUDE.finditer(text):
            level = max(level, LEVELS[UMBRELLAS.get(match.group(1).strip(), "none")])
    return level


def blank_umbrellas(body: str) -> str:
    """The body with its umbrella ``#include`` lines emptied (line numbers unchanged)."""

    def blank(match: re.Match[str]) -> str:
        return "" if match.group(1).strip() in UMBRELLAS else match.group(0)

    return INCLUDE.sub(blank, body)


def light_prelude(index: LightIndex, kind: str, level: int, body: str) -> str | None:
    """The ``#include`` lines replacing stock's prelude, or None where no light layout applies."""
    if level == 0 or kind not in index.base:
        return None
    names, qualifiers = used_names(body)
    if names & NO_LIGHT_NAMES:
        return None
    if kind == "cuda" and "PYBIND11_MODULE" in names:
        return None  # pybind11's module machinery under nvcc: only stock's full headers hold it
    base = index.base[kind]
    looked_up = {n for n in names if n not in qualifiers or n not in index.namespaces}
    wanted: set[int] = set()
    for name in looked_up | _macro_names(index, set(names), base):
        for file_index, namespace in index.names.get(name, ()):
            if file_index in base or index.levels[file_index] > level:
                continue
            if namespace in ALWAYS_VISIBLE_NAMESPACES or namespace in names:
                wanted.add(file_index)
    spellings = [index.include_as[i] for i in sorted(wanted)]
    lines = [f"#include <{index.base_header[kind]}>"]
    lines += [f"#include <{s}>" for s in dict.fromkeys(spellings) if s not in EXCLUDED_FILES]
    return "\n".join(lines) + "\n"


def _macro_names(index: LightIndex, names: set[str], base: frozenset[int]) -> set[str]:
    """Names the unit's macros use (transitively) that the base header does not declare.

    A macro written against its own header's declarations (``AT_DISPATCH_*`` calling
    ``toString``) finds them in the base; only names the base lacks entirely (the pybind11
    machinery behind ``PYBIND11_MODULE``) bring their headers in.
    """
    todo = [n for n in names if n in index.macro_names]
    seen: set[str] = set()
    found: set[str] = set()
    while todo:
        macro = todo.pop()
        if macro in seen:
            continue
        seen.add(macro)
        for ident in index.macro_names[macro]:
            if ident in index.macro_names:
                todo.append(ident)
            declared = index.names.get(ident, ())
            if declared and not any(i in base for i, _ in declared):
                found.add(ident)
    return found
