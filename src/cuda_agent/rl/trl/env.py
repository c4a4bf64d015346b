"""``KernelEnv``: TRL's ``environment_factory`` driver over one episode environment.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one instance per concurrent rollout (and
reuses instances across batches), calls ``reset(**row)`` with the dataset row before
generation (the returned text is appended to the row's last user message), exposes every
public method other than ``reset`` and ``get_reward`` as a tool (schema from its type hints
and Google-style docstring), runs the tool calls the model makes, and calls ``get_reward()``
once when the rollout is over.

Each episode is an ``environment.KernelEnvironment`` (the one that ``rollout.run_episode`` and
the verl agent loop drive too): ``reset(problem=..., size=...)`` opens a temporary one for the
row's problem and returns the task prompt (``agent.prompts.task_prompt``, which names the
workdir); ``bash``, ``read_file``, ``write_file`` and ``edit_file`` are the environment's tools
(the agent's own, with their checks and error texts); ``get_reward()`` is the environment's
score (the evaluator on the final workdir, and the best of that and the verified evaluations
made during the episode; a workdir that is not a solution scores -1).

What it does not do: run the agent loop (TRL generates and calls the tools); keep a
trajectory of messages (the trainer has them; only evaluation events are recorded, in the
episode's ``trajectory.jsonl``); enforce turn/token budgets (TRL's
``max_tool_calling_iterations`` and ``max_completion_length`` do); expose ``multi_edit``,
``glob``, ``grep`` and ``todo_write`` to TRL (the system prompt names them; TRL answers a call
to one with a "not found" error); add the system prompt (the dataset's prompt carries it, see
``grpo.build_dataset``).

Episode folders live under ``root`` (the system temporary folder by default) and are removed
at the next ``reset``, when the instance is used as a context manager and exits, or when it is
collected. The backend comes from the constructor, else the ``CUDA_AGENT_RL_BACKEND``
environment variable, else ``cpu``.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.agent.prompts import task_prompt
from cuda_agent.core.types import EvalResult
from cuda_agent.environment import KernelEnvironment
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator

BACKEND_ENV = "CUDA_AGENT_RL_BACKEND"


class KernelEnv:
    """A kernel-writing episode for TRL's ``environment_factory`` (see the module docstring).

    Only ``reset``, ``get_reward`` and the four tool methods are public methods: TRL turns
    every other public method into a tool. ``on_reward(problem_id, reward)`` is called once
    per episode, when its reward is first computed (``evaluation_seconds`` then says how long
    that took).
    """

    def __init__(
        self,
        backend: str | None = None,
        size: str = "small",
        eval_options: EvalOptions | None = None,
        evaluator: Evaluator = evaluate,
        root: Path | None = None,
        use_bwrap: bool | None = None,
        tool_timeout_s: float = 120.0,
        on_reward: Callable[[str, float], None] | None = None,
    ) -> None:
        self._backend = backend or os.environ.get(BACKEND_ENV) or "cpu"
        self._size = size
        self._eval_options = eval_options
        self._evaluator = evaluator
        self._root = root
        self._use_bwrap = use_bwrap
        self._tool_timeout_s = tool_timeout_s
        self._on_reward = on_reward
        self._env: KernelEnvironment | None = None
        self._evaluation_s = 0.0
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- the environment protocol -------------------------------------------------------------

    def reset(self, **row: Any) -> str:
        """Start a fresh episode for a dataset row and return the task prompt.

        The row's ``problem`` is a bundled id or a path (``resolve_problem``); its optional
        ``size`` overrides the constructor's. Other fields (``prompt``...) are ignored.
        """
        self._discard()
        self._evaluation_s = 0.0
        if "problem" not in row:
            raise KeyError("KernelEnv.reset: the dataset row has no 'problem' field")
        env = KernelEnvironment.temporary(
            str(row["problem"]),
            str(row.get("size") or self._size),
            self._root,
            backend=self._backend,
            eval_options=self._eval_options,
            evaluator=self._evaluator,
            use_bwrap=self._use_bwrap,
            tool_timeout_s=self._tool_timeout_s,
            start={"source": "trl"},
        )
        self._env = env
        self._finalizer = weakref.finalize(self, env.close)
        return task_prompt(env.problem.id, self._backend, str(env.workdir))

    def get_reward(self) -> float:
        """The harness's reward of the episode (evaluates the final workdir once)."""
        env = self._require()
        first = env.score is None
        began = time.monotonic()
        score = env.finish()
        if first:
            self._evaluation_s = time.monotonic() - began
        if first and self._on_reward is not None:
            self._on_reward(env.problem.id, score.reward)
        return score.reward

    # -- tools (TRL builds their schemas from these signatures and docstrings) ----------------

    def bash(self, command: str) -> str:
        """Run a shell command in the workdir: a persistent bash session (cd and exports
        carry over), sandboxed (no network; writes only in the workdir and /tmp). Use it for
        `cuda-agent tool compile`, `cuda-agent tool verify` and `cuda-agent tool profile`.

        Args:
            command: The command line.
        """
        return self._call("bash", command=command)

    def read_file(self, path: str) -> str:
        """Read a text file with line numbers (records that you have read it).

        Args:
            path: File path, relative to the workdir (or absolute inside it).
        """
        return self._call("read_file", path=path)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file. Existing files must be read first.

        Args:
            path: File path, relative to the workdir (or absolute inside it).
            content: The whole new content.
        """
        return self._call("write_file", path=path, content=content)

    def edit_file(self, path: str, old_string: str, new_string: str) -> str:
        """Replace an exact, unique string in a file you have read.

        Args:
            path: File path, relative to the workdir (or absolute inside it).
            old_string: Exact text to replace.
            new_string: Replacement text.
        """
        return self._call("edit_file", path=path, old_string=old_string, new_string=new_string)

    # -- lifetime (dunder methods are not tools either) ----------------------------------------

    def __enter__(self) -> KernelEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        """Tear down the current episode and remove its folder now."""
        self._discard()

    # -- internals ----------------------------------------------------------------------------

    # Properties are not tools (TRL only collects functions).
    @property
    def workdir(self) -> Path | None:
        """The current episode's workdir (None before the first reset)."""
        return self._env.workdir if self._env is not None else None

    @property
    def final_result(self) -> EvalResult | None:
        """The final evaluation of the current episode, once ``get_reward`` has run."""
        score = self._env.score if self._env is not None else None
        return score.final if score is not None else None

    @property
    def evaluation_seconds(self) -> float:
        """How long the current episode's final evaluation took (0 before ``get_reward``)."""
        return self._evaluation_s

    @property
    def best_result(self) -> EvalResult | None:
        """The best verified evaluation of the current episode."""
        return self._env.tracker.best if self._env is not None else None

    def _call(self, name: str, **arguments: Any) -> str:
        return self._require().call_tool(name, json.dumps(arguments)).text

    def _require(self) -> KernelEnvironment:
        if self._env is None:
            raise RuntimeError("KernelEnv: call reset() first")
        return self._env

    def _discard(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs KernelEnvironment.close once
        self._finalizer = None
        self._env = None
