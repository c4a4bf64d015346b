"""``KernelEnv``: one CUDA-Agent episode as an environment for TRL's ``environment_factory``.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one instance per concurrent rollout (and
reuses instances across batches), calls ``reset(**row)`` with the dataset row before
generation (the returned text is appended to the row's last user message), exposes every
public method other than ``reset`` and ``get_reward`` as a tool (schema from its type hints
and Google-style docstring), runs the tool calls the model makes, and calls ``get_reward()``
once when the rollout is over.

Here an episode is built from the same parts as ``cuda_agent.rollout.run_episode``:

* ``reset(problem=..., size=...)`` resolves the problem (``resolve_problem``), creates a fresh
  workdir with ``init_workspace``, the sandboxed persistent shell, the tool context and the
  workspace tool server (so ``cuda-agent tool compile|verify|profile`` work from ``bash``, and
  every evaluation they make is tracked by rollout's ``BestTracker``), and returns the task
  prompt (``agent.prompts.task_prompt``, which names the workdir);
* ``bash``, ``read_file``, ``write_file`` and ``edit_file`` dispatch to the agent's real tools
  (``agent.tools.registry.default_tools``), with their checks (paths stay in the workdir, a
  file must be read before it is overwritten or edited) and their error texts;
* ``get_reward()`` is the harness's reward, computed as ``run_episode`` does: the evaluator
  (``evaluator.pipeline.evaluate`` by default) on the final workdir as a solution, and the best
  of that and the verified evaluations made during the episode. A workdir that cannot be
  loaded as a solution scores -1, like any incorrect solution.

The verl agent loop (``verl_agent_loop``) uses the same class for its episodes: ``reset``,
``call_tool`` (a module function dispatching any of the agent's tools by name with the
model's raw JSON arguments), ``get_reward``, ``final_result`` and ``best_result``.

What it does not do: run the agent loop (TRL generates and calls the tools); keep a
trajectory of messages (the trainer has them; only evaluation events are recorded, in the
episode's ``trajectory.jsonl``); enforce turn/token budgets (TRL's
``max_tool_calling_iterations`` and ``max_completion_length`` do); expose ``multi_edit``,
``glob``, ``grep`` and ``todo_write`` to TRL (the system prompt names them; TRL answers a call
to one with a "not found" error; ``call_tool`` reaches them); add the system prompt (the
dataset's prompt carries it, see ``trl_grpo.build_dataset``).

Episode folders live under ``root`` (the system temporary folder by default) and are removed
at the next ``reset``, when the instance is used as a context manager and exits, or when it is
collected. The backend comes from the constructor, else the ``CUDA_AGENT_RL_BACKEND``
environment variable, else ``cpu``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cuda_agent.agent.prompts import task_prompt
from cuda_agent.agent.shell import PersistentShell
from cuda_agent.agent.tool_server import ToolServer
from cuda_agent.agent.tools.base import ToolContext, ToolOutcome, ToolRegistry
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import Trajectory
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.paths import cache_root
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rollout import BestTracker, ipc_base
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.init import init_workspace
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy
from cuda_agent.workspace.tool_client import SOCKET_ENV

BACKEND_ENV = "CUDA_AGENT_RL_BACKEND"
NO_SOLUTION_REWARD = -1.0


@dataclass
class _Episode:
    """The live parts of one episode; ``close`` tears them down (idempotent)."""

    problem: Problem
    folder: Path
    workdir: Path
    options: EvalOptions
    trajectory: Trajectory
    tracker: BestTracker
    context: ToolContext
    shell: PersistentShell
    ipc: Path
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    reward: float | None = None
    final: EvalResult | None = None

    def stop_tools(self) -> None:
        self.shell.close()
        self.stack.close()  # the tool server
        shutil.rmtree(self.ipc, ignore_errors=True)

    def close(self) -> None:
        self.stop_tools()
        with contextlib.suppress(Exception):
            self.trajectory.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class KernelEnv:
    """A kernel-writing episode for TRL's ``environment_factory`` (see the module docstring).

    Only ``reset``, ``get_reward`` and the four tool methods are public methods: TRL turns
    every other public method into a tool. ``on_reward(problem_id, reward)`` is called once
    per episode, when its reward is first computed.
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
        self._registry: ToolRegistry = default_tools()
        self._episode: _Episode | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- the environment protocol -------------------------------------------------------------

    def reset(self, **row: Any) -> str:
        """Start a fresh episode for a dataset row and return the task prompt.

        The row's ``problem`` is a bundled id or a path (``resolve_problem``); its optional
        ``size`` overrides the constructor's. Other fields (``prompt``...) are ignored.
        """
        self._discard()
        if "problem" not in row:
            raise KeyError("KernelEnv.reset: the dataset row has no 'problem' field")
        spec = str(row["problem"])
        resolved = resolve_problem(spec, str(row.get("size") or self._size))
        if self._root is not None:
            self._root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="ca-trl-", dir=self._root)).resolve()
        try:
            self._episode = self._start(resolved, spec, folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._finalizer = weakref.finalize(self, self._episode.close)
        return task_prompt(resolved.id, self._backend, str(self._episode.workdir))

    def get_reward(self) -> float:
        """The harness's reward of the episode (evaluates the final workdir once)."""
        episode = self._require()
        if episode.reward is None:
            episode.stop_tools()
            final = self._final_evaluation(episode)
            best = episode.tracker.best
            episode.final = final
            episode.reward = max(
                final.reward if final is not None else NO_SOLUTION_REWARD,
                best.reward if best is not None else NO_SOLUTION_REWARD,
            )
            episode.trajectory.event("end", reward=episode.reward)
            if self._on_reward is not None:
                self._on_reward(episode.problem.id, episode.reward)
        return episode.reward

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
        return self._episode.workdir if self._episode is not None else None

    @property
    def final_result(self) -> EvalResult | None:
        """The final evaluation of the current episode, once ``get_reward`` has run."""
        return self._episode.final if self._episode is not None else None

    @property
    def best_result(self) -> EvalResult | None:
        """The best verified evaluation made during the current episode's tool calls."""
        return self._episode.tracker.best if self._episode is not None else None

    def _start(self, problem: Problem, spec: str, folder: Path) -> _Episode:
        """The episode's parts, put together as ``rollout.run_episode`` does."""
        workdir = folder / "workdir"
        init_workspace(problem, workdir, self._backend, spec)
        options = _options(self._eval_options, self._backend)
        trajectory = Trajectory(folder / "trajectory.jsonl")
        trajectory.event(
            "start",
            problem=problem.id,
            problem_hash=problem.content_hash,
            backend=self._backend,
            source="trl",
        )
        tracker = BestTracker(workdir, folder / "best", trajectory)
        ipc = Path(tempfile.mkdtemp(prefix="ca-ipc-", dir=ipc_base()))
        socket_path = ipc / "tool.sock"
        sandbox = Sandbox(
            SandboxPolicy(
                workdir=workdir,
                tmpdir=folder / ".tmp",
                hidden=(cache_root(),),
                bind_rw=(ipc,),
                extra_env={SOCKET_ENV: str(socket_path)},
            ),
            use_bwrap=self._use_bwrap,
            allow_unsandboxed=options.allow_unsandboxed,
        )
        shell = PersistentShell(sandbox)
        context = ToolContext(workdir=workdir, shell=shell, default_timeout_s=self._tool_timeout_s)
        episode = _Episode(
            problem, folder, workdir, options, trajectory, tracker, context, shell, ipc
        )
        try:
            episode.stack.enter_context(
                ToolServer(socket_path, workdir, options, tracker.observe, self._evaluator)
            )
        except BaseException:
            episode.close()
            raise
        return episode

    def _final_evaluation(self, episode: _Episode) -> EvalResult | None:
        try:
            solution = load_solution(episode.workdir)
        except CudaAgentError as err:
            episode.trajectory.event("evaluation", source="final", error=str(err))
            return None
        final = self._evaluator(episode.problem, solution, episode.options)
        episode.trajectory.event("evaluation", source="final", result=final.to_dict())
        return final

    def _call(self, name: str, **arguments: Any) -> str:
        return call_tool(self, name, json.dumps(arguments)).text

    def _require(self) -> _Episode:
        if self._episode is None:
            raise RuntimeError("KernelEnv: call reset() first")
        return self._episode

    def _discard(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs _Episode.close once
        self._finalizer = None
        self._episode = None


def call_tool(env: KernelEnv, name: str, raw_arguments: str) -> ToolOutcome:
    """Run any of the agent's tools (``default_tools``: all of them, not only the four methods
    TRL sees) in ``env``'s current episode, with the arguments as the model wrote them (a JSON
    object). The outcome says whether the call was malformed, as the agent loop counts it. A
    function, not a method: TRL would expose a public method as a tool."""
    episode = env._require()
    if episode.reward is not None:
        return ToolOutcome("error: the episode is over", is_error=True)
    return env._registry.call(episode.context, name, raw_arguments)


def _options(options: EvalOptions | None, backend: str) -> EvalOptions:
    """A copy of ``options`` (default ``EvalOptions()``) on ``backend``, as ``run_episode``
    sets it."""
    if options is None:
        return EvalOptions(backend=backend)
    return replace(options, backend=backend)
