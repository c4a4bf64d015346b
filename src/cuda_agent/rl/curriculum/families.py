"""The curriculum's problem families: what each draws, its id prefix, its kernel contract.

* ``elementwise`` (``ew_``): 1 to 3 unary ops of ``ops.OPS`` (``ops.compose``);
* ``chain`` (``ch_``): fused elementwise chains of 3 to 5 ops (``chains.compose_chain``);
* ``rowwise`` (``rw_``): softmax (rescaled by the row length), log_softmax, layer norm, RMS
  norm or L2 normalize over the last dim, with up to two elementwise ops of ``ops.OPS`` around
  it (before it, or one before and one after: ``row_ops``); y has x's shape;
* ``reduction`` (``rd_``): sum, mean, amax, amin, sum of squares or L2 norm over the last dim,
  after up to two elementwise ops; y has one value per row.

A problem's id is its family's prefix and its draw seed (``rw_00013`` is ``draw("rowwise",
13)``), so ``family_of(problem_id)`` is the one place that tells a problem's family, and
``candidate_of(problem_id)`` draws the problem again (``reference`` writes its kernel from it).

Each family has a kernel contract (``KERNELS``: the name of its launch function, binding and
kernel file; ``launch_signature``): ``elementwise`` and ``chain`` share
``elementwise_launch(x, y, n)``, ``rowwise`` has ``rowwise_launch(x, y, rows, cols)`` and
``reduction`` ``reduce_launch(x, y, rows, cols)`` (on cuda each also takes the stream and
returns a ``cudaError_t``). ``supports(task, family)`` says which tasks a family has: the
``fill-in`` task writes one C expression per element, so only ``elementwise`` and ``chain``
problems have it; ``model-new`` and ``kernel`` apply to every family.

What it does not do: build problem sets (``problem_set``), or write the scaffold
(``scaffold``) or the prompts (``tasks``, ``kernel_prompts``).
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.rl.curriculum.chains import compose_chain
from cuda_agent.rl.curriculum.ops import Composition, compose
from cuda_agent.rl.curriculum.row_ops import RowProblem, draw_row

FAMILIES = ("elementwise", "chain", "rowwise", "reduction")
PREFIXES = {"elementwise": "ew", "chain": "ch", "rowwise": "rw", "reduction": "rd"}
FAMILY_OF_PREFIX = {prefix: family for family, prefix in PREFIXES.items()}
KERNELS = {
    "elementwise": "elementwise",
    "chain": "elementwise",
    "rowwise": "rowwise",
    "reduction": "reduce",
}
FILL_IN_FAMILIES = ("elementwise", "chain")
_CPU_PARAMS = {
    "elementwise": "const float* x, float* y, int64_t n",
    "rowwise": "const float* x, float* y, int64_t rows, int64_t cols",
    "reduce": "const float* x, float* y, int64_t rows, int64_t cols",
}

Candidate = Composition | RowProblem
_FORWARD = re.compile(r"def forward\(self, x[^)]*\)[^:]*:\n\s+return (.+)\n")


class FamilyError(CudaAgentError):
    """A family name or problem id the curriculum does not know."""


def check_family(family: str) -> str:
    if family not in FAMILIES:
        raise FamilyError(f"curriculum family {family!r}: choose from {', '.join(FAMILIES)}")
    return family


def family_of(problem_id: str) -> str:
    """The family of a curriculum problem id (``rw_00013``: ``rowwise``); an id without a
    family prefix (a problem from elsewhere) is ``elementwise``, the kernel contract every
    curriculum prompt had before there were families."""
    prefix, separator, _ = problem_id.partition("_")
    return FAMILY_OF_PREFIX.get(prefix, "elementwise") if separator else "elementwise"


def forward_expression(source: str) -> str:
    """What a curriculum problem's ``Model.forward`` returns (its one ``return`` line)."""
    match = _FORWARD.search(source)
    if match is None:
        raise FamilyError("not a curriculum problem (no forward(self, x) returning one line)")
    return match.group(1).strip()


def spec_family(problem_spec: str) -> str:
    """The family of the problem a spec names (``FILE.jsonl#ID``, a file ``ID.py``, a bundled
    id), from its id, without loading it."""
    ident = problem_spec.rpartition("#")[2] if "#" in problem_spec else Path(problem_spec).stem
    return family_of(ident)


def problem_id(family: str, seed: int) -> str:
    return f"{PREFIXES[check_family(family)]}_{seed:05d}"


def kernel_name(family: str) -> str:
    """The name of the family's kernel: ``NAME_launch``, ``kernels/NAME.cu``, the binding's
    ``cuda_extension.NAME``."""
    return KERNELS[check_family(family)]


def launch_name(family: str) -> str:
    return f"{kernel_name(family)}_launch"


def launch_signature(family: str, backend: str) -> str:
    """The launch function a kernel-task reply defines, as the harness declares it."""
    name = kernel_name(family)
    params = _CPU_PARAMS[name]
    if backend == "cuda":
        return f'extern "C" cudaError_t {name}_launch({params}, cudaStream_t stream)'
    return f'extern "C" void {name}_launch({params})'


def supports(task: str, family: str) -> bool:
    """Whether problems of ``family`` have ``task`` (``fill-in``: elementwise and chain only)."""
    check_family(family)
    return task != "fill-in" or family in FILL_IN_FAMILIES


def draw(family: str, seed: int) -> Candidate:
    """The problem ``family`` draws for ``seed``."""
    if check_family(family) == "elementwise":
        return compose(seed)
    if family == "chain":
        return compose_chain(seed)
    return draw_row(family, seed)


def candidate_of(problem_id: str) -> Candidate:
    """The problem a curriculum id names, drawn again (``FamilyError`` for an id that is not
    ``PREFIX_SEED``)."""
    prefix, _, number = problem_id.partition("_")
    if prefix not in FAMILY_OF_PREFIX or not number.isdigit():
        raise FamilyError(f"{problem_id!r}: not a curriculum problem id (PREFIX_NNNNN)")
    return draw(FAMILY_OF_PREFIX[prefix], int(number))
