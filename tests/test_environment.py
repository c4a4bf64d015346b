"""The one episode environment: its drivers share it, and no other episode sandbox exists."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.environment import EPISODE_OVER, KernelEnvironment
from cuda_agent.evaluator.options import EvalOptions

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "cuda_agent"
DRIVERS = ("rollout.py", "rl/trl/env.py", "rl/verl/agent_loop.py")
# the parts of an episode that only the environment may put together
EPISODE_PARTS = {"Sandbox", "SandboxPolicy", "PersistentShell", "ToolServer", "BestTracker"}


def _calls(path: Path, name: str) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)
    )


def _imported_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_one_sandbox_policy_for_episodes_in_the_whole_package() -> None:
    """An episode's shell is sandboxed in one place: the policy naming the tool server's
    socket is written once, in the environment; the other policies are the evaluation
    workers' and the compilers'."""
    writers = {
        str(path.relative_to(PACKAGE)): _calls(path, "SandboxPolicy")
        for path in PACKAGE.rglob("*.py")
        if _calls(path, "SandboxPolicy")
    }
    assert writers == {
        "environment.py": 1,
        "workspace/sandbox.py": 2,  # the module's own probe of the isolation modes
        "evaluator/launch/worker_spawn.py": 1,
        "evaluator/builder/compile_sandbox.py": 1,
    }
    socket_users = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "SOCKET_ENV" in _imported_names(p)
    }
    assert socket_users <= {"environment.py", "cli/tool_cmd.py", "agent/tool_server.py"}


def test_the_drivers_build_no_episode_part_of_their_own() -> None:
    for rel in DRIVERS:
        path = PACKAGE / rel
        assert "KernelEnvironment" in _imported_names(path), rel
        own = EPISODE_PARTS & _imported_names(path)
        assert not own, f"{rel} imports {own}: episodes are put together in environment.py"


def test_an_episode_tools_best_and_score(tmp_path: Path) -> None:
    """Tools run in the workdir; a verified evaluation is kept as the best; the final one is
    made once and scored with it; tools are refused once the episode is over."""
    calls: list[tuple[str, str]] = []

    def evaluator(problem: Problem, solution: Solution, options: EvalOptions) -> EvalResult:
        calls.append((problem.id, options.backend))
        correct = "fast" in solution.files.get("model_new.py", "")
        speedup = 2.0 if len(calls) == 1 else 1.5  # the tool's verify beats the final
        return EvalResult(
            problem_id=problem.id,
            backend=options.backend,
            correct=correct,
            reward=2.0 if correct else -1.0,
            speedup_eager=speedup if correct else None,
        )

    with KernelEnvironment.temporary("relu", "small", tmp_path, evaluator=evaluator) as env:
        workdir = env.workdir
        assert workdir.is_dir() and (workdir / "model.py").exists()
        out = env.call_tool("bash", json.dumps({"command": "pwd"}))
        assert out.text.strip() == str(workdir) and not out.is_error
        env.call_tool("read_file", json.dumps({"path": "model_new.py"}))
        text = (workdir / "model_new.py").read_text() + "\n# fast\n"
        env.call_tool("write_file", json.dumps({"path": "model_new.py", "content": text}))
        verify = env.call_tool("bash", json.dumps({"command": "cuda-agent tool verify"}))
        assert env.tracker.count == 1, verify.text
        assert env.tracker.best is not None and env.tracker.best.speedup_eager == 2.0
        assert (env.folder / "best" / "model_new.py").read_text().endswith("# fast\n")
        score = env.finish()
        assert env.finish() is score and len(calls) == 2  # the final evaluation ran once
        assert score.final.speedup_eager == 1.5 and score.best is env.tracker.best
        assert score.reward == 2.0 and score.best.speedup_eager == 2.0
        assert env.call_tool("bash", json.dumps({"command": "ls"})).text == EPISODE_OVER
        events = [
            json.loads(line)["kind"]
            for line in (env.folder / "trajectory.jsonl").read_text().splitlines()
        ]
        assert events[0] == "start" and events[-2:] == ["evaluation", "end"]
        folder = env.folder
    assert not folder.exists() and list(tmp_path.iterdir()) == []


def test_a_final_workdir_that_is_no_solution_scores_minus_one(tmp_path: Path) -> None:
    def never(problem: Problem, solution: Solution, options: EvalOptions) -> EvalResult:
        raise AssertionError("nothing to evaluate")

    with KernelEnvironment.temporary("relu", "small", tmp_path, evaluator=never) as env:
        env.call_tool("bash", json.dumps({"command": "rm -f model_new.py"}))
        score = env.finish()
    assert score.reward == -1.0 and score.best is None
    assert score.final.flags == ["no_solution"] and score.final.error is not None
