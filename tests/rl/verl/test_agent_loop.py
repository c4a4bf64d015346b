"""The verl agent loop, driven by a scripted rollout server, and the single-turn reward.

The server is the only fake: it plays scripted replies as token ids with distinctive
log-probs and records every request. Everything else is real: the tiny local tokenizer (a
Qwen-style chat template), the tool parser (verl's ``hermes`` when verl imports, else
``rl.verl.compat``'s stand-in), ``KernelEnv`` with the sandboxed shell and the agent's tools, and
the cpu-backend evaluator (wrapped only to record what it was asked and what it said).

Where verl 0.9.1 imports (``PYTHONPATH`` with verl installed, see docs/training.md), the same
tests run on verl's own ``AgentLoopBase``, ``AgentLoopOutput`` and ``TokenOutput`` and check
``AgentLoopOutput.as_dict`` as well.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from cuda_agent.agent.loop import CUT_OFF_NUDGE
from cuda_agent.agent.prompts import SYSTEM_PROMPT
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.examples import examples_root
from cuda_agent.rl.models.tiny import build_tokenizer
from cuda_agent.rl.recipe import load_config, plan
from cuda_agent.rl.reply import extract_solution
from cuda_agent.rl.verl import compat
from cuda_agent.rl.verl.agent_loop import CudaAgentLoop
from cuda_agent.rl.verl.episode_tokens import ChatTokens
from cuda_agent.rl.verl.evaluation_config import EvaluationSettings
from cuda_agent.rl.verl.reward import compute_score
from tests.helpers import fast_options

RT = compat.runtime()
SOLUTION = examples_root() / "bias_gelu_scale" / "cpu"  # a workdir: kernels/ and model_new.py
KERNEL = "kernels/bias_gelu_scale.cpp"
BINDING = "kernels/bias_gelu_scale_binding.cpp"
FILES = {name: (SOLUTION / name).read_text(encoding="utf-8") for name in (KERNEL, BINDING)}
MODEL_NEW = (SOLUTION / "model_new.py").read_text(encoding="utf-8")
MOVE = "mv new_model.py model_new.py && echo moved"
FINAL = "The kernels are in place.<|im_end|>"
ROW = {
    "raw_prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ""}],
    "extra_info": {"problem": "bias_gelu_scale", "size": "small"},
    "reward_model": {"ground_truth": "bias_gelu_scale"},
    "data_source": "cuda_agent",
}
SINGLE_FILE = (examples_root() / "relu" / "cpu.py").read_text(encoding="utf-8")


def block(name: str, **arguments: Any) -> str:
    """One tool call, as the chat template renders it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def call(name: str, **arguments: Any) -> str:
    """A reply with one tool call."""
    return block(name, **arguments) + "<|im_end|>"


def script(kernel: str) -> list[str]:
    """Write the kernel, its binding and a new model_new.py in one reply (three calls), move
    the model into place with bash, then answer."""
    writes = [
        block("write_file", path=KERNEL, content=kernel),
        block("write_file", path=BINDING, content=FILES[BINDING]),
        block("write_file", path="new_model.py", content=MODEL_NEW),
    ]
    return ["\n".join(writes) + "<|im_end|>", call("bash", command=MOVE), FINAL]


def logprob(turn: int, index: int) -> float:
    return -(turn + 1) - index / 1024  # distinct for every token of every turn


@dataclass
class ScriptedServer:
    """verl's server manager, playing ``replies`` in order (``generate`` as in verl 0.9.1)."""

    tokenizer: Any
    replies: list[str]
    honour_max_tokens: bool = True
    logprobs: bool = True  # without: [] as verl's client returns when none were asked for
    requests: list[dict[str, Any]] = field(default_factory=list)

    def ids(self, turn: int) -> list[int]:
        return list(self.tokenizer.encode(self.replies[turn], add_special_tokens=False))

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        **kwargs: Any,
    ) -> Any:
        turn = len(self.requests)
        self.requests.append(
            {"id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)}
        )
        ids = self.ids(turn)
        if self.honour_max_tokens:
            ids = ids[: sampling_params[compat.MAX_TOKENS_KEY]]
        return RT.TokenOutput(
            token_ids=ids,
            log_probs=[logprob(turn, i) for i in range(len(ids))] if self.logprobs else [],
            stop_reason="completed",
            num_preempted=0,
        )


@dataclass
class RecordingEvaluator:
    """The real evaluator; keeps each job's solution files and verdict."""

    calls: list[tuple[dict[str, str], EvalResult]] = field(default_factory=list)

    def __call__(self, problem: Problem, solution: Solution, options: EvalOptions) -> EvalResult:
        result = evaluate(problem, solution, options)
        self.calls.append((dict(solution.files), result))
        return result


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer()


def run_episode(
    tokenizer: Any,
    replies: list[str],
    tmp_path: Path,
    *,
    turns: int = 10,
    response: int = 8192,
    honour_max_tokens: bool = True,
    logprobs: bool = True,
    **loop_kwargs: Any,
) -> tuple[Any, ScriptedServer, RecordingEvaluator]:
    server = ScriptedServer(tokenizer, replies, honour_max_tokens, logprobs)
    evaluator = RecordingEvaluator()
    config = {
        "actor_rollout_ref": {
            "rollout": {
                "prompt_length": 4096,
                "response_length": response,
                "multi_turn": {"max_assistant_turns": turns, "format": "hermes"},
            }
        },
        "data": {},
    }
    loop = compat.make_agent_loop(
        CudaAgentLoop,
        config,
        server,
        tokenizer,
        name=compat.AGENT_LOOP_NAME,
        evaluation={"backend": "cpu", "policy": "strict", "baselines": ["eager"], "pool": "local"},
        eval_options=fast_options(),
        evaluator=evaluator,
        size="small",
        episode_root=tmp_path / "episodes",
        **loop_kwargs,
    )
    output = asyncio.run(loop.run({"temperature": 1.0, "logprobs": True}, **ROW))
    assert list((tmp_path / "episodes").iterdir()) == []  # the episode folder is gone
    return output, server, evaluator


def segments(output: Any) -> list[tuple[int, list[int]]]:
    """The response as runs of equal mask: [(mask, ids), ...]."""
    runs: list[tuple[int, list[int]]] = []
    for token, mask in zip(output.response_ids, output.response_mask, strict=True):
        if runs and runs[-1][0] == mask:
            runs[-1][1].append(token)
        else:
            runs.append((mask, [token]))
    return runs


def check_alignment(output: Any, server: ScriptedServer) -> None:
    """Model runs are the server's tokens with their log-probs; context runs have 0.0; every
    request saw the prompt and the response so far; the budget was asked for."""
    assert len(output.response_ids) == len(output.response_mask)
    logprobs = output.response_logprobs
    assert (logprobs is not None) is server.logprobs
    if logprobs is None:
        logprobs = [logprob(0, 0)] * len(output.response_ids)  # nothing to compare
    assert len(logprobs) == len(output.response_ids)
    position, turn = 0, 0
    for mask, ids in segments(output):
        span = logprobs[position : position + len(ids)]
        if mask == 1:
            assert ids == server.ids(turn)[: len(ids)]
            if server.logprobs:
                assert span == [logprob(turn, i) for i in range(len(ids))]
            asked = server.requests[turn]["prompt_ids"]
            assert asked == output.prompt_ids + output.response_ids[:position]
            turn += 1
        elif server.logprobs:
            assert span == [0.0] * len(ids)
        position += len(ids)
    assert turn == len(server.requests)
    assert len({r["id"] for r in server.requests}) == 1  # one sticky session


def check_verl_output(output: Any, tokenizer: Any) -> None:
    """On verl: the output is verl's, and verl's own post-processing (the worker's padding and
    batching, here without Ray or servers) puts the reward on the last response token, a
    model token, and logs our numbers."""
    if not RT.available:
        return
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    assert isinstance(output, RT.AgentLoopOutput)
    single = output.as_dict()
    assert single["rm_scores"][-1] == output.reward_score and single["rm_scores"][:-1].eq(0).all()
    if output.response_logprobs is None:
        assert "rollout_log_probs" not in single
    else:
        assert single["rollout_log_probs"].tolist() == pytest.approx(output.response_logprobs)
    worker = AgentLoopWorker.__new__(AgentLoopWorker)  # its post-processing only
    worker.rollout_config = SimpleNamespace(
        prompt_length=4096, response_length=len(output.response_ids) + 5
    )
    worker.tokenizer, worker.processor, worker.mm_processor_kwargs = tokenizer, None, {}
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    padded = asyncio.run(worker._agent_loop_postprocess(output, False, **ROW))
    batch = worker._postprocess([padded], input_non_tensor_batch=None)
    last = int(batch.batch["attention_mask"][0, 4096:].sum()) - 1
    assert last == len(output.response_ids) - 1
    rm_scores = batch.batch["rm_scores"][0]
    assert rm_scores[last] == output.reward_score and rm_scores.sum() == output.reward_score
    assert batch.batch["response_mask"][0, last] == 1
    assert batch.batch["response_mask"][0].tolist()[: last + 1] == output.response_mask
    assert batch.meta_info["reward_extra_keys"] == list(output.extra_fields["reward_extra_info"])


@pytest.mark.slow  # episodes with evaluations
@pytest.mark.parametrize("kernel", ["correct", "wrong"])
def test_episode_tokens_masks_logprobs_and_reward(
    tokenizer: Any, tmp_path: Path, kernel: str
) -> None:
    source = FILES[KERNEL] if kernel == "correct" else FILES[KERNEL].replace("0.5f * v", "0.6f * v")
    replies = script(source)
    output, server, evaluator = run_episode(tokenizer, replies, tmp_path)

    # Token by token: model, tools, model, tool, model; log-probs aligned; budgets asked for.
    runs = segments(output)
    assert [mask for mask, _ in runs] == [1, 0, 1, 0, 1]
    check_alignment(output, server)
    assert [r["params"][compat.MAX_TOKENS_KEY] for r in server.requests] == [
        min(8192 - len(r["prompt_ids"]) + len(output.prompt_ids), 16384) for r in server.requests
    ]
    assert len(output.prompt_ids) <= 4096 and len(output.response_ids) <= 8192

    # The token stream is exactly what the chat template renders for the conversation.
    prompt = tokenizer.decode(output.prompt_ids)
    task = prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
    assert task.startswith("Problem `bias_gelu_scale`. Workspace: ")
    assert prompt.endswith("<|im_start|>assistant\n")
    results = [
        re.findall(r"<tool_response>\n(.*?)\n</tool_response>", tokenizer.decode(ids), re.DOTALL)
        for mask, ids in runs
        if mask == 0
    ]
    written = {KERNEL: source, BINDING: FILES[BINDING], "new_model.py": MODEL_NEW}
    assert results == [
        [f"wrote {name} ({len(text.splitlines())} lines)" for name, text in written.items()],
        ["moved\n"],  # the shell's output, as is
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task},
    ]
    for reply, texts in zip(replies, [*results, None], strict=True):
        if texts is None:
            messages.append({"role": "assistant", "content": reply.removesuffix("<|im_end|>")})
            break
        calls = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", reply, re.DOTALL)
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": json.loads(c)} for c in calls],
            }
        )
        messages.extend({"role": "tool", "content": text} for text in texts)
    rendered = tokenizer.apply_chat_template(
        messages, tools=default_tools().schemas(), tokenize=False
    )
    assert rendered == tokenizer.decode(output.prompt_ids + output.response_ids) + "\n"
    encoded = tokenizer.encode(rendered.removesuffix("\n"), add_special_tokens=False)
    assert encoded == output.prompt_ids + output.response_ids

    # The reward is the real evaluator's verdict on the final workdir.
    (files, result), *others = evaluator.calls[::-1]
    assert others == []  # no evaluation during the episode: only the final one
    ours = {KERNEL: source, BINDING: FILES[BINDING], "model_new.py": MODEL_NEW}
    assert {name: files.get(name) for name in ours} == ours and "new_model.py" not in files
    assert output.reward_score == result.reward
    details = output.extra_fields["cuda_agent"]
    assert details["exit_reason"] == "submitted" and details["turns"] == 3
    assert details["tools_used"] == ["write_file"] * 3 + ["bash"] and details["tool_calls"] == 4
    assert details["correct"] is result.correct and details["evaluation"] == "final"
    assert output.extra_fields["reward_extra_info"]["score"] == output.reward_score
    assert output.num_turns == 3 + 2 + 1
    if kernel == "correct":
        assert result.correct and result.error is None and output.reward_score >= 1.0
        assert details["speedup_eager"] == result.speedup_eager is not None
    else:
        assert not result.correct and output.reward_score == -1.0
        assert result.error is not None and result.error.stage == "verify"
        assert details["error"].startswith("verify: ")
    check_verl_output(output, tokenizer)


@pytest.mark.slow  # episodes with evaluations
def test_turn_and_token_budgets_end_on_a_model_token(tokenizer: Any, tmp_path: Path) -> None:
    replies = script(FILES[KERNEL])
    # Turn budget: two replies. The second reply's call still runs (it changes the workdir
    # that is scored), but its result is not appended: nothing follows it.
    output, server, evaluator = run_episode(tokenizer, replies, tmp_path / "turns", turns=2)
    assert len(server.requests) == 2
    assert [mask for mask, _ in segments(output)] == [1, 0, 1]
    check_alignment(output, server)
    assert output.extra_fields["cuda_agent"]["exit_reason"] == "turn_limit"
    assert output.extra_fields["cuda_agent"]["tool_calls"] == 4
    assert evaluator.calls[-1][0]["model_new.py"] == MODEL_NEW and output.reward_score >= 1.0
    check_verl_output(output, tokenizer)
    first_reply, context, _ = (ids for _, ids in segments(output))

    # Token budget inside the second reply: it is cut at the budget, its call does not run.
    budget = len(first_reply) + len(context) + 7
    output, server, evaluator = run_episode(tokenizer, replies, tmp_path / "cut", response=budget)
    assert server.requests[1]["params"][compat.MAX_TOKENS_KEY] == 7
    assert len(output.response_ids) == budget and output.response_mask[-7:] == [1] * 7
    check_alignment(output, server)
    details = output.extra_fields["cuda_agent"]
    assert details["exit_reason"] == "token_budget" and details["tool_calls"] == 3
    assert "new_model.py" in evaluator.calls[-1][0] and output.reward_score == -1.0

    # A server that ignores max_tokens is cut by the loop all the same.
    output, server, _ = run_episode(
        tokenizer, replies, tmp_path / "over", response=budget, honour_max_tokens=False
    )
    assert len(output.response_ids) == budget and output.response_mask[-1] == 1
    check_alignment(output, server)

    # A tool result that does not fit (with room for one more reply token) is dropped.
    budget = len(first_reply) + len(context)
    output, server, _ = run_episode(tokenizer, replies, tmp_path / "drop", response=budget)
    assert output.response_ids == first_reply and output.response_mask == [1] * len(first_reply)
    assert len(server.requests) == 1
    details = output.extra_fields["cuda_agent"]
    assert details["exit_reason"] == "token_budget" and details["tool_calls"] == 3
    check_verl_output(output, tokenizer)


@pytest.mark.slow  # episodes with evaluations
def test_cut_off_replies_and_malformed_calls(tokenizer: Any, tmp_path: Path) -> None:
    # A reply cut by the per-reply limit gets the agent loop's nudge, after the turn's closing.
    long_reply = "I will now think about the kernel at length. " * 8 + "<|im_end|>"
    output, server, _ = run_episode(
        tokenizer,
        [long_reply, "Done.<|im_end|>"],
        tmp_path / "cut",
        logprobs=False,  # and a server without log-probs: none in the output either
        max_output_tokens=12,
    )
    assert output.response_logprobs is None
    check_verl_output(output, tokenizer)
    assert [mask for mask, _ in segments(output)] == [1, 0, 1]
    check_alignment(output, server)
    nudge = tokenizer.decode(segments(output)[1][1])
    assert nudge == (
        f"<|im_end|>\n<|im_start|>user\n{CUT_OFF_NUDGE}<|im_end|>\n<|im_start|>assistant\n"
    )
    details = output.extra_fields["cuda_agent"]
    assert details["exit_reason"] == "submitted" and details["format_errors"] == 1

    # Malformed calls in a row end the episode, as in the agent loop.
    bad = call("no_such_tool", path="x")
    output, server, _ = run_episode(tokenizer, [bad] * 6, tmp_path / "bad", max_format_errors=3)
    assert len(server.requests) == 3 and segments(output)[-1][0] == 1
    details = output.extra_fields["cuda_agent"]
    assert details["exit_reason"] == "format_errors" and details["format_errors"] == 3
    assert output.reward_score == -1.0 and details["flags"] is not None


@pytest.mark.slow  # episodes with evaluations
def test_the_single_turn_reward_scores_one_reply() -> None:
    common: dict[str, Any] = {
        "data_source": "cuda_agent",
        "ground_truth": "relu",
        "extra_info": {"size": "small"},
        "backend": "cpu",
        "policy": "strict",
        "baselines": ["eager"],
        "pool": "local",
        "eval_options": fast_options(),
        "reward_router_address": None,  # verl may add keyword arguments; they are ignored
    }
    reply = f"Here is my kernel.\n```python\n{SINGLE_FILE}```\nIt is one pass."
    good = compute_score(solution_str=reply, **common)
    assert good["score"] >= 1.0 and good["correct"] == 1.0 and good["no_solution"] == 0.0
    assert good["compiled"] == 1.0 and good["speedup_eager"] > 0.0
    # Wrong: the same kernel, but the output loses its last column (a view; no new build).
    wrong = SINGLE_FILE.replace("relu_ext.relu_forward(x)", "relu_ext.relu_forward(x)[..., :-1]")
    assert wrong != SINGLE_FILE
    bad = compute_score(solution_str=f"```python\n{wrong}```", **common)
    assert bad["score"] == -1.0 and bad["correct"] == 0.0 and bad["no_solution"] == 0.0
    assert (bad["speedup_eager"], bad["speedup_compile"]) == (0.0, 0.0)
    none = compute_score(solution_str="I could not do it.", **common)
    assert none["score"] == -1.0 and none["no_solution"] == 1.0
    assert list(good) == list(bad) == list(none)  # the same keys every time

    assert extract_solution(f"```\nx = 1\n```\n```cpp\n{SINGLE_FILE}```") == SINGLE_FILE
    assert extract_solution(SINGLE_FILE) == SINGLE_FILE
    assert extract_solution("```python\nclass Model: pass\n```") is None


def test_the_single_turn_stage_names_the_reward_function() -> None:
    options = plan("single-turn", load_config("single-turn")).engine_options
    path = options["reward.custom_reward_function.path"]
    name = options["reward.custom_reward_function.name"]
    assert str(path).startswith("pkg://")
    module = importlib.import_module(str(path).removeprefix("pkg://"))
    assert getattr(module, str(name)) is compute_score
    assert options["+reward.custom_reward_function.reward_kwargs.backend"] == "cuda"
    agentic = plan("agentic-ppo", load_config("agentic-ppo")).engine_options
    assert not any(key.startswith(("reward.", "+reward.")) for key in agentic)
    loop_file = plan("agentic-ppo", load_config("agentic-ppo")).files
    (entry,) = [e for content in loop_file.values() for e in yaml.safe_load(content)]
    target = entry["_target_"]
    module_name, class_name = target.rsplit(".", 1)
    assert getattr(importlib.import_module(module_name), class_name) is CudaAgentLoop


def test_verl_names_come_from_verl_when_it_imports(tokenizer: Any) -> None:
    importable = importlib.util.find_spec("verl") is not None
    assert RT.available is importable
    assert CudaAgentLoop.__mro__[1] is RT.AgentLoopBase
    expected = "verl.experimental.agent_loop.agent_loop" if importable else compat.__name__
    assert RT.AgentLoopBase.__module__ == expected
    if not importable:
        return
    # As verl's AgentLoopWorker does: the registry entry cuda-agent train writes, instantiated
    # by Hydra with the worker's keyword arguments.
    import hydra.utils
    from omegaconf import OmegaConf

    evaluation = {"backend": "cpu", "policy": "strict", "baselines": ["eager"], "pool": "local"}
    (entry,) = OmegaConf.create(compat.agent_loop_registry(evaluation))
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 100,
                    "response_length": 200,
                    "multi_turn": {"max_assistant_turns": 7, "format": "hermes"},
                }
            },
            "data": {},
        }
    )
    loop = hydra.utils.instantiate(
        entry,
        trainer_config=RT.DictConfigWrap(config=config),
        server_manager=None,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=None,
        data_config=RT.DictConfigWrap(config.data),
        tools=RT.ToolListWrap([]),
    )
    assert isinstance(loop, CudaAgentLoop)
    assert (loop.limits.prompt_tokens, loop.limits.response_tokens) == (100, 200)
    assert loop.limits.max_turns == 7 and loop.eval_options.baselines == ("eager",)


# A template (ours) that shows reasoning on the last assistant turn or on turns that have
# some, as Qwen3's does: a conversation rendered with and without what follows an assistant
# turn then differs in that turn. Context tokens must still come out right.
HIDING_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content }}"
    "{{- '\\n</tool_response><|im_end|>\\n' }}"
    "{%- elif m.role == 'assistant' %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if loop.last or m.reasoning_content %}"
    "{{- '<think>' + (m.reasoning_content or '') + '</think>' }}{%- endif %}"
    "{{- m.content }}"
    "{%- for c in m.tool_calls or [] %}{{- '<tool_call>' + c.function.name + '</tool_call>' }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_context_tokens_with_a_template_that_hides_past_reasoning() -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = HIDING_TEMPLATE
    chat = ChatTokens(tokenizer)
    talk: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash"}}]},
    ]
    generated = tokenizer.encode("<tool_call>bash</tool_call><|im_end|>", add_special_tokens=False)
    for appended in (
        [{"role": "tool", "content": "one"}, {"role": "tool", "content": "two"}],
        [{"role": "user", "content": CUT_OFF_NUDGE}],
    ):
        full = tokenizer.apply_chat_template(
            [*talk, *appended], tokenize=False, add_generation_prompt=True
        )
        text = tokenizer.decode(chat.context_ids(generated, appended))
        assert text.startswith("\n<|im_start|>user\n") and full.endswith(text)
        assert full.endswith("<tool_call>bash</tool_call><|im_end|>" + text)


def test_evaluation_settings_from_a_stage_section() -> None:
    section = {"backend": "cpu", "policy": "kernelbench", "baselines": ["eager"], "pool": "ray"}
    settings = EvaluationSettings.from_mapping(section)
    assert settings == EvaluationSettings("cpu", "kernelbench", ("eager",), "ray")
    assert settings.options().baselines == ("eager",) and settings.options().policy == "kernelbench"
    assert EvaluationSettings.from_mapping(None) == EvaluationSettings()
    assert EvaluationSettings.from_mapping({"pool": "local"}).evaluator() is evaluate
    collect = plan("collect", load_config("collect", None, ("evaluation.pool=ray",)))
    assert collect.command[-2:] == ["--ray", "local"]  # bench's name for the same thing
