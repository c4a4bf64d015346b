"""``--model tiny``, local folders, and hub ids that cannot be had failing fast in one line."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("transformers", minversion="5.15")

from cuda_agent.rl.models import ModelPathError
from cuda_agent.rl.models.path import (
    resolve_config_models,
    resolve_model_path,
    tiny_model_path,
)
from tests.helpers import run_cli


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"HF_HUB_DISABLE_UPDATE_CHECK": "1", **env}, timeout=900)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_local_folder_is_itself_and_a_missing_path_is_one_line(tmp_path: Path) -> None:
    assert resolve_model_path(str(tmp_path)) == str(tmp_path.resolve())
    with pytest.raises(ModelPathError, match=r"no such folder.*--model tiny"):
        resolve_model_path(str(tmp_path / "nope"))


@pytest.mark.slow
def test_tiny_is_built_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    folder = tiny_model_path()
    assert folder.parent == tmp_path / "models" and folder.name.startswith("tiny-")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in folder.iterdir()
    }
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert resolve_model_path("tiny") == str(folder)  # found, not built again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "models").iterdir()] == [folder.name]  # no leftovers


def unreachable(how: str, tmp_path: Path) -> dict[str, str]:
    env = {"HF_HOME": str(tmp_path / "hf")}  # an empty hub cache
    if how == "HF_HUB_OFFLINE":
        env["HF_HUB_OFFLINE"] = "1"
    else:
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{closed_port()}"
        env["HF_HUB_OFFLINE"] = "0"
    return env


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable hub"])
def test_a_hub_id_that_cannot_be_had_is_refused_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    for key, value in unreachable(how, tmp_path).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ModelPathError, match="offline") as caught:
        resolve_config_models({"model": {"path": "cuda-agent-tests/no-such-model"}}, True)
    assert "--model tiny" in str(caught.value)
    config = {"model": {"path": "cuda-agent-tests/no-such-model"}}
    resolve_config_models(config, check_hub=False)  # plans for a cluster are not checked here
    assert config["model"]["path"] == "cuda-agent-tests/no-such-model"


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable hub"])
def test_train_grpo_with_a_model_that_cannot_be_had_is_one_line(tmp_path: Path, how: str) -> None:
    """A hub id that cannot be had ends ``train grpo`` with one line, no traceback."""
    result = cli(
        "train", "grpo", "--model", "Qwen/Qwen2.5-7B-Instruct", "--steps", "1", "--backend",
        "cpu", f"out={tmp_path / 'run'}", **unreachable(how, tmp_path),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-1500:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "offline" in lines[0] and "--model /path/to/model" in lines[0]
    assert "--model tiny" in lines[0]


@pytest.mark.slow
def test_model_tiny_in_the_plans_and_in_a_real_grpo_step(tmp_path: Path) -> None:
    env = {"CUDA_AGENT_CACHE": str(tmp_path / "cache")}
    result = cli("models", "path", "tiny", **env)
    assert result.returncode == 0, result.stderr
    folder = result.stdout.strip()
    assert Path(folder, "config.json").is_file()
    plan = cli("train", "agentic-ppo", "--model", "tiny", "--dry-run", "--json", **env)
    assert json.loads(plan.stdout)["engine_options"]["actor_rollout_ref.model.path"] == folder
    step = cli(
        "train", "grpo", "--model", "tiny", "--steps", "1", "--backend", "cpu",
        f"out={tmp_path / 'run'}", "grpo.max_completion_length=16",
        "grpo.max_tool_calling_iterations=1", **env,
    )  # fmt: skip
    assert step.returncode == 0, step.stderr[-2000:]
    summary = json.loads(step.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 1 and summary["rewards"] == [-1.0, -1.0]


@pytest.mark.parametrize("stage", ["grpo", "rft"])
def test_a_dry_run_names_the_built_in_models_folder_and_builds_nothing(
    tmp_path: Path, stage: str
) -> None:
    """``--dry-run`` starts nothing: the tiny model's folder is named in the plan, with a note
    that it is built on first use, and is not built (issue 50: a dry run converted the 0.5B)."""
    cache = tmp_path / "cache"
    plan = cli(
        "train", stage, "--model", "tiny", "--task", "fill-in", "--dry-run", "--json",
        CUDA_AGENT_CACHE=str(cache),
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-1500:]
    data = json.loads(plan.stdout)
    folder = Path(data["engine_options"]["model_path"])
    assert folder.parent == cache / "models" and folder.name.startswith("tiny-")
    assert not folder.exists()
    assert any("built into" in note for note in data["notes"])
    built = cli("models", "path", "tiny", CUDA_AGENT_CACHE=str(cache))
    assert built.stdout.strip() == str(folder)  # the folder the real run uses
