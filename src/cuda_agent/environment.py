"""The episode environment: one kernel-writing episode's world, and the harness's reward for it.

``KernelEnvironment`` owns every part of an episode: the workdir made from the problem
(``workspace.init``), the sandbox around the agent's commands (``episode_sandbox``: the one
sandbox policy for episodes in the package), the persistent shell inside it, the agent's tools
and their context, the workspace tool server (so ``cuda-agent tool compile|verify|profile``
work from the shell; every evaluation it makes is seen by the best tracker), the episode's
trajectory file, and the final reward: the harness's own evaluation of the final workdir, and
the best of that and the verified evaluations made during the episode (the paper reports the
best solution of a trajectory). Nothing is parsed from tool output.

Drivers run a model over it and nothing else:

* ``rollout.run_episode`` (``solve``, ``bench run``, ``demo``): the ReAct loop over a chat model;
* ``rl.trl.env.KernelEnv``: TRL's ``environment_factory`` (TRL generates and calls the tools);
* ``rl.verl.agent_loop.CudaAgentLoop``: verl's agent loop, at the token level.

Layout of an episode folder: ``workdir/`` (the agent's), ``.tmp/`` (the sandbox's /tmp),
``best/`` (the best verified workdir, once there is one) and ``trajectory.jsonl``.

What it does not do: run a model or a loop, count turns or tokens, or record messages (the
drivers do, in the same trajectory).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuda_agent.agent.shell import PersistentShell
from cuda_agent.agent.tool_server import ToolServer
from cuda_agent.agent.tools.base import ToolContext, ToolOutcome, ToolRegistry
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import Trajectory
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.paths import cache_root
from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator, ToolReply
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.init import init_workspace
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy
from cuda_agent.workspace.tool_client import SOCKET_ENV

EPISODE_OVER = "error: the episode is over"


@dataclass
class EpisodeScore:
    """The harness's verdict on an episode."""

    final: EvalResult  # the evaluation of the final workdir (an unloadable one: no_solution)
    best: EvalResult | None  # the best correct evaluation of the episode, the final included
    reward: float  # the better of the final's and the best's reward


def episode_sandbox(
    workdir: Path,
    tmpdir: Path,
    ipc: Path,
    use_bwrap: bool | None,
    allow_unsandboxed: bool,
) -> Sandbox:
    """The sandbox of an episode's shell: writes only in the workdir and its own /tmp, the
    evaluator's cache hidden, the tool server's socket folder reachable (and named in the
    environment). The only place an episode's sandbox policy is written."""
    policy = SandboxPolicy(
        workdir=workdir,
        tmpdir=tmpdir,
        hidden=(cache_root(),),
        bind_rw=(ipc,),
        extra_env={SOCKET_ENV: str(ipc / "tool.sock")},
    )
    return Sandbox(policy, use_bwrap=use_bwrap, allow_unsandboxed=allow_unsandboxed)


def ipc_base() -> str | None:
    """A short path outside /tmp (the sandbox replaces /tmp) for the tool server's socket."""
    return "/var/tmp" if os.access("/var/tmp", os.W_OK) else None


class BestTracker:
    """Keeps the best verified state of the workdir (copied to ``best/``)."""

    def __init__(self, workdir: Path, best_dir: Path, trajectory: Trajectory) -> None:
        self.workdir, self.best_dir, self.trajectory = workdir, best_dir, trajectory
        self.best: EvalResult | None = None
        self.count = 0

    def observe(self, command: str, reply: ToolReply) -> None:
        result = reply.result
        self.trajectory.event(
            "evaluation",
            source=f"tool {command}",
            exit_code=reply.exit_code,
            result=result.to_dict() if result else None,
        )
        if result is None:
            return
        self.count += 1
        self.offer(result)

    def offer(self, result: EvalResult, ties_win: bool = False) -> None:
        """Keep ``result`` (and copy the workdir) if it is correct and ranks above the best."""
        if not result.correct:
            return
        if self.best is not None:
            mine, theirs = rank(result), rank(self.best)
            if mine < theirs or (mine == theirs and not ties_win):
                return
        self.best = result
        copy_solution(self.workdir, self.best_dir)


class KernelEnvironment:
    """One episode (see the module docstring). Build it with ``open`` or ``temporary``."""

    def __init__(
        self,
        problem: Problem,
        folder: Path,
        options: EvalOptions,
        evaluator: Evaluator,
        trajectory: Trajectory,
        sandbox: Sandbox,
        ipc: Path,
        tool_timeout_s: float,
        owns_folder: bool,
    ) -> None:
        self.problem = problem
        self.folder = folder
        self.workdir = folder / "workdir"
        self.options = options
        self.evaluator = evaluator
        self.trajectory = trajectory
        self.sandbox = sandbox
        self.tools: ToolRegistry = default_tools()
        self.tracker = BestTracker(self.workdir, folder / "best", trajectory)
        self.score: EpisodeScore | None = None
        self.language = "cuda"  # the kernel language of the workspace (``open`` sets it)
        self._ipc = ipc
        self._owns_folder = owns_folder
        self._shell = PersistentShell(sandbox)
        self.context = ToolContext(
            workdir=self.workdir, shell=self._shell, default_timeout_s=tool_timeout_s
        )
        self._stack = contextlib.ExitStack()
        self._tools_open = True
        self._closed = False

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        problem: Problem,
        problem_spec: str,
        folder: Path,
        *,
        backend: str = "cpu",
        eval_options: EvalOptions | None = None,
        evaluator: Evaluator = evaluate,
        use_bwrap: bool | None = None,
        tool_timeout_s: float = 120.0,
        start: dict[str, Any] | None = None,
        resume: bool = False,
        owns_folder: bool = False,
        language: str = "cuda",
    ) -> KernelEnvironment:
        """An episode in ``folder``: a fresh workdir for ``problem`` (or, with ``resume``, the
        one already there), its trajectory started with ``start``'s fields (or marked
        resumed), the shell and the tool server running."""
        folder = folder.resolve()
        folder.mkdir(parents=True, exist_ok=True)
        workdir = folder / "workdir"
        if not resume:
            init_workspace(problem, workdir, backend, problem_spec, language=language)
        options = replace(eval_options, backend=backend) if eval_options else None
        options = options or EvalOptions(backend=backend)
        trajectory = Trajectory(folder / "trajectory.jsonl")
        if not resume:
            trajectory.event(
                "start",
                problem=problem.id,
                problem_hash=problem.content_hash,
                backend=backend,
                **(start or {}),
            )
        ipc = Path(tempfile.mkdtemp(prefix="ca-ipc-", dir=ipc_base()))
        try:
            sandbox = episode_sandbox(
                workdir, folder / ".tmp", ipc, use_bwrap, options.allow_unsandboxed
            )
            env = cls(
                problem, folder, options, evaluator, trajectory, sandbox, ipc, tool_timeout_s,
                owns_folder,
            )  # fmt: skip
            env.language = language
        except BaseException:
            shutil.rmtree(ipc, ignore_errors=True)
            trajectory.close()
            raise
        try:
            server = ToolServer(ipc / "tool.sock", workdir, options, env.tracker.observe, evaluator)
            env._stack.enter_context(server)
        except BaseException:
            env.close()
            raise
        return env

    @classmethod
    def temporary(
        cls, problem_spec: str, size: str, root: Path | None = None, **kwargs: Any
    ) -> KernelEnvironment:
        """An episode for a problem spec (a bundled id or a path, ``resolve_problem``) in a
        new folder under ``root`` (the system's temporary folder by default), removed when
        the environment is closed."""
        problem = resolve_problem(problem_spec, size)
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="ca-episode-", dir=root))
        try:
            return cls.open(problem, problem_spec, folder, owns_folder=True, **kwargs)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    # -- the episode ---------------------------------------------------------------------------

    @property
    def isolation(self) -> str:
        """How the agent's commands are isolated (``bwrap``, ``user+landlock+netns``...)."""
        return self.sandbox.isolation

    def call_tool(self, name: str, raw_arguments: str) -> ToolOutcome:
        """Run any of the agent's tools with the arguments as the model wrote them (JSON)."""
        if self.score is not None or self._closed:
            return ToolOutcome(EPISODE_OVER, is_error=True)
        return self.tools.call(self.context, name, raw_arguments)

    def finish(self) -> EpisodeScore:
        """Stop the tools, evaluate the final workdir once, and score the episode (again:
        the same score)."""
        if self.score is not None:
            return self.score
        self.stop_tools()
        final = self._final_evaluation()
        self.tracker.offer(final, ties_win=True)  # an equal final is the one kept
        best = self.tracker.best
        reward = max(final.reward, best.reward if best is not None else final.reward)
        self.score = EpisodeScore(final, best, reward)
        self.trajectory.event("end", reward=reward)
        return self.score

    def stop_tools(self) -> None:
        """End the shell and the tool server (idempotent)."""
        if not self._tools_open:
            return
        self._tools_open = False
        try:
            self._shell.close()
            self._stack.close()
        finally:
            shutil.rmtree(self._ipc, ignore_errors=True)

    def close(self) -> None:
        """Tear everything down; an owned folder is removed (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stop_tools()
        finally:
            with contextlib.suppress(Exception):
                self.trajectory.close()
            if self._owns_folder:
                shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> KernelEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _final_evaluation(self) -> EvalResult:
        try:
            solution = load_solution(self.workdir)
        except CudaAgentError as err:
            final = EvalResult(problem_id=self.problem.id, backend=self.options.backend)
            final.error = StageError("static", f"the final workdir is not a solution: {err}")
            final.flags.append("no_solution")
            self.trajectory.event("evaluation", source="final", error=str(err))
            return final
        final = self.evaluator(self.problem, solution, self.options)
        self.trajectory.event("evaluation", source="final", result=final.to_dict())
        return final


def rank(result: EvalResult) -> tuple[float, float, float]:
    """How results compare: reward, then speed-up over torch.compile, then over eager."""
    return (result.reward, result.speedup_compile or 0.0, result.speedup_eager or 0.0)


def copy_solution(workdir: Path, target: Path) -> None:
    """Replace ``target`` with a snapshot of the workdir's solution files (and its metadata)."""
    solution = load_solution(workdir)
    staging = Path(tempfile.mkdtemp(prefix="best-", dir=target.parent))
    for rel, text in solution.files.items():
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    meta = workdir / ".cuda_agent"
    if meta.is_dir():
        shutil.copytree(meta, staging / ".cuda_agent")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
