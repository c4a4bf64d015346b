"""The LLM composer: a chat model writes one fused problem from a few sampled catalogue operators.

As in the CUDA Agent paper's data pipeline, ``LLMComposer.compose(seed)`` samples 1-5 operators
from the catalogue (the count follows ``compose.OP_COUNT_WEIGHTS``, renormalised to
``max_ops``; all sampled operators accept one common input rank, drawn from
``compose.RANK_WEIGHTS``; everything is drawn from ``random.Random(seed)``, so the same seed
always gives the same prompt) and asks the model for ONE KernelBench-format file that stacks
them: ``class Model(nn.Module)`` with ``__init__``/``forward``, ``get_inputs()`` and
``get_init_inputs()``, deterministic, sized so that eager ``forward`` takes about
``runtime_ms`` on the backend (an H200 for ``cuda``; small sizes for ``cpu``).

The reply's last fenced ``python`` block (else its last fenced block, else the whole reply) is
checked statically: it must parse and follow the KernelBench layout
(``problems.source.check_problem_source``, the check the problem loader runs), import only
``torch`` and ``math`` (plus ``__future__``), not call ``__import__``/``exec``/``eval``, and
use no random operator (dropout, ``rand``, ``randn``, ``bernoulli``, ``normal_``...) in
``Model``'s methods other than ``__init__`` (random parameter initialisation in ``__init__``
and random inputs in ``get_inputs`` are fine) nor any dropout module anywhere in ``Model``. An
invalid reply is sent back to the model with the reason, up to ``max_retries`` times; then
``CompositionFailed``.
Whether the model used every sampled operator is not enforced: ``extra["missing_ops"]`` lists
those whose name does not appear in the file.

What it does not do: it runs nothing. Whether the file really executes, how long it takes and
whether its output is deterministic are for the execution filter, which runs candidates in the
sandboxed worker; the static checks here are a cheap first sieve, not a security boundary. So
``Candidate.input_shape`` and ``Candidate.output_shape`` are ``()`` (unknown) for LLM
candidates. Endpoint failures (``ModelError``, raised by the client after its own retries) are
not composition failures and propagate unchanged.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from dataclasses import dataclass
from typing import Any

from cuda_agent.agent.models import AssistantTurn, ChatModel
from cuda_agent.core.errors import ProblemError
from cuda_agent.core.hashing import normalise_text
from cuda_agent.core.pyparse import parse_module
from cuda_agent.problems.source import check_problem_source
from cuda_agent.synth.catalogue import OpSpec, function_code, torch_catalogue
from cuda_agent.synth.compose import OP_COUNT_WEIGHTS, RANK_WEIGHTS, Candidate

BACKENDS = ("cuda", "cpu")
ALLOWED_IMPORTS = ("torch", "math")
HARMLESS_IMPORTS = ("__future__",)  # ``from __future__ import annotations`` changes nothing here
FORBIDDEN_CALLS = frozenset({"__import__", "exec", "eval"})
RANDOM_NAMES = frozenset(
    {
        "dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "bernoulli",
        "bernoulli_",
        "multinomial",
        "normal",
        "normal_",
        "uniform_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "random_",
        "poisson",
        "rrelu",
        "rrelu_",
    }
)
LABEL = "llm reply"

SYSTEM_PROMPT = """\
You write benchmark problems for GPU kernel optimisation in the KernelBench format: one \
self-contained Python file that defines
- `class Model(nn.Module)` with `__init__` and `forward` (the reference computation),
- `get_inputs()`, returning a list of input tensors for `forward`,
- `get_init_inputs()`, returning a list of arguments for `Model(...)` (often empty).
Sizes are module-level constants (for example `batch_size = 128`) used by `get_inputs` and \
`__init__`. Import only `torch` (`import torch`, `import torch.nn as nn`, \
`import torch.nn.functional as F`) and `math`; nothing else. `forward` must be deterministic: \
no dropout and no random operations (rand, randn, randint, bernoulli, multinomial, normal_...) \
in it. Reply with the complete file in a single ```python fenced block."""


class CompositionFailed(Exception):
    """The model gave no usable problem within its attempts; ``reason`` says why (last error)."""

    def __init__(self, reason: str, attempts: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts


@dataclass(frozen=True)
class OpSample:
    """What a seed draws: the operators and the input rank they all accept."""

    ops: tuple[OpSpec, ...]
    rank: int


def sample_ops(seed: int, catalogue: tuple[OpSpec, ...], max_ops: int = 5) -> OpSample:
    """1-``max_ops`` distinct operators accepting one common rank (the same for the same seed)."""
    if not catalogue:
        raise ValueError("the operator catalogue is empty")
    if max_ops < 1:
        raise ValueError(f"max_ops must be at least 1 (got {max_ops})")
    rng = random.Random(seed)
    count = _weighted(rng, {k: w for k, w in OP_COUNT_WEIGHTS.items() if k <= max_ops})
    ranks = {r: w for r, w in RANK_WEIGHTS.items() if any(r in s.ranks for s in catalogue)}
    rank = _weighted(rng, ranks) if ranks else 0
    pool = [s for s in catalogue if rank in s.ranks] if ranks else list(catalogue)
    return OpSample(tuple(rng.sample(pool, min(count, len(pool)))), rank)


def build_messages(
    sample: OpSample, backend: str = "cuda", runtime_ms: tuple[float, float] = (1.0, 100.0)
) -> list[dict[str, Any]]:
    """The system and user messages asking for one problem that stacks ``sample.ops``."""
    low, high = runtime_ms
    lines = [f"{i}. {_describe(spec)}" for i, spec in enumerate(sample.ops, 1)]
    if backend == "cuda":
        where = (
            f"one eager forward pass takes roughly {low:g}-{high:g} ms on an NVIDIA H200 GPU "
            "(backend: cuda)"
        )
    else:
        where = (
            f"one eager forward pass takes roughly {low:g}-{high:g} ms on a CPU (backend: cpu); "
            "keep sizes small: tensors of thousands to tens of thousands of elements, "
            "layer widths of 16-64"
        )
    rank = f"a rank-{sample.rank} input tensor" if sample.rank else "an input tensor"
    user = "\n".join(
        [
            f"Write one fused problem whose `Model.forward` stacks these {len(sample.ops)} "
            "torch operator(s), in this order where shapes allow:",
            *lines,
            "",
            f"All of them accept {rank}; start from one. You may add reshapes "
            "(view, flatten, permute) between operators so that shapes fit, and you may "
            "reorder them if an order does not work, but use every one of them.",
            f"Choose the sizes so that {where}.",
            "Reply with the complete file in a single ```python fenced block.",
        ]
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def extract_source(reply: str) -> str:
    """The last ```python fenced block of ``reply`` (else its last fenced block, else all of it)."""
    blocks = re.findall(r"```[ \t]*(\w*)[^\n]*\n(.*?)```", reply, flags=re.DOTALL)
    python = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    chosen = python or [body for _, body in blocks]
    text = chosen[-1] if chosen else reply
    return normalise_text(text).strip("\n") + "\n"


def validate_problem_source(source: str) -> None:
    """Raise ``ProblemError`` (one clear line) unless ``source`` is a usable problem file."""
    check_problem_source(source, LABEL)
    tree = parse_module(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_IMPORTS:
                    raise ProblemError(_not_allowed(node, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            top = module.split(".")[0]
            if node.level or top not in (*ALLOWED_IMPORTS, *HARMLESS_IMPORTS):
                raise ProblemError(_not_allowed(node, f"from {'.' * node.level}{module} import"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_CALLS
        ):
            raise ProblemError(
                f"{LABEL}: line {node.lineno}: `{node.func.id}(...)` is not allowed "
                "(plain torch code only)"
            )
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    for node in ast.walk(model):
        name = _name_of(node)
        if name is not None and "dropout" in name.lower():
            raise ProblemError(
                f"{LABEL}: line {getattr(node, 'lineno', '?')}: `{name}` in class Model: "
                "dropout is random; the problem must be deterministic"
            )
    for method in model.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if method.name == "__init__":
            continue
        for node in ast.walk(method):
            name = _called_or_attribute(node)
            if name is not None and name in RANDOM_NAMES:
                raise ProblemError(
                    f"{LABEL}: line {getattr(node, 'lineno', '?')}: `{name}` in Model.{method.name}"
                    " is a random operation; forward must be deterministic"
                )


class LLMComposer:
    """Compose problems with a chat model (see the module docstring)."""

    def __init__(
        self,
        model: ChatModel,
        catalogue: tuple[OpSpec, ...] | None = None,
        backend: str = "cuda",
        runtime_ms: tuple[float, float] = (1.0, 100.0),
        max_ops: int = 5,
        max_retries: int = 2,
        max_tokens: int = 4096,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
        if not 0 < runtime_ms[0] <= runtime_ms[1]:
            raise ValueError(
                f"runtime_ms must be (low, high) with 0 < low <= high (got {runtime_ms})"
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be at least 0 (got {max_retries})")
        self.model = model
        self.catalogue = catalogue if catalogue is not None else torch_catalogue()
        self.backend = backend
        self.runtime_ms = runtime_ms
        self.max_ops = max_ops
        self.max_retries = max_retries
        self.max_tokens = max_tokens

    def sample(self, seed: int) -> OpSample:
        return sample_ops(seed, self.catalogue, self.max_ops)

    def messages(self, seed: int) -> list[dict[str, Any]]:
        """The opening conversation for ``seed`` (the same seed, the same text)."""
        return build_messages(self.sample(seed), self.backend, self.runtime_ms)

    def compose(self, seed: int) -> Candidate:
        """One problem for ``seed``; ``CompositionFailed`` when every attempt was unusable."""
        sample = self.sample(seed)
        messages = build_messages(sample, self.backend, self.runtime_ms)
        names = [spec.name for spec in sample.ops]
        tokens = 0
        reason = ""
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            turn = self.model.complete(messages, [], self.max_tokens)
            tokens += turn.usage.total if turn.usage else 0
            try:
                source = self._source_of(turn)
            except ProblemError as err:
                reason = str(err)
                messages.append(turn.as_message())
                messages.append({"role": "user", "content": _retry_prompt(reason)})
                continue
            digest = hashlib.sha256(source.encode()).hexdigest()[:10]
            return Candidate(
                id=f"llm_{seed}_{digest}",
                seed=seed,
                source=source,
                ops=names,
                composer="llm",
                input_shape=(),
                output_shape=(),
                data_source=f"torch#{len(names)}",
                extra={
                    "model": self.model.name,
                    "attempts": attempt,
                    "usage": tokens,
                    "missing_ops": missing_ops(source, names),
                },
            )
        raise CompositionFailed(
            f"seed {seed}: no usable problem from {self.model.name} in {attempts} attempt(s); "
            f"last error: {reason}",
            attempts,
        )

    @staticmethod
    def _source_of(turn: AssistantTurn) -> str:
        reply = turn.content or ""
        if not reply.strip():
            raise ProblemError(f"{LABEL}: the reply was empty")
        source = extract_source(reply)
        try:
            validate_problem_source(source)
        except ProblemError as err:
            if turn.finish_reason == "length":
                raise ProblemError(f"{err} (the reply was cut off at the token limit)") from None
            raise
        return source


def missing_ops(source: str, names: list[str]) -> list[str]:
    """The sampled operators whose name does not appear in ``source`` (a hint, not a check)."""
    return [name for name in names if not re.search(rf"\b{re.escape(name)}\b", source)]


def _retry_prompt(reason: str) -> str:
    return (
        f"That file cannot be used: {reason}\n"
        "Fix it and reply with the complete corrected file in a single ```python fenced block."
    )


def _describe(spec: OpSpec) -> str:
    if spec.kind == "module":
        return f"nn.{spec.name} (module; accepts input ranks {_ranks(spec)})"
    return f"{function_code(spec.name, 'x')} (function; accepts input ranks {_ranks(spec)})"


def _ranks(spec: OpSpec) -> str:
    return ", ".join(str(r) for r in spec.ranks)


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _called_or_attribute(node: ast.AST) -> str | None:
    """``torch.randn`` / ``x.normal_`` (any attribute), or a plain name that is called."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _not_allowed(node: ast.stmt, what: str) -> str:
    allowed = " and ".join(ALLOWED_IMPORTS)
    return f"{LABEL}: line {node.lineno}: `{what}` is not allowed (import only {allowed})"


def _weighted(rng: random.Random, weights: dict[int, float]) -> int:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]
