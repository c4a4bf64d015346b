"""The LLM composer against a real local OpenAI-compatible HTTP server (ReplayServer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.agent.models import OpenAIChatModel
from cuda_agent.agent.replay_server import ReplayServer
from cuda_agent.core.errors import ProblemError
from cuda_agent.problems.loader import load_problem_file
from cuda_agent.synth.catalogue import OpSpec
from cuda_agent.synth.llm_compose import (
    CompositionFailed,
    LLMComposer,
    extract_source,
    sample_ops,
    validate_problem_source,
)

CATALOGUE = (
    OpSpec("Linear", "module", (2, 3, 4, 5), has_params=True),
    OpSpec("GELU", "module", (2, 3, 4, 5)),
    OpSpec("LayerNorm", "module", (2, 3, 4, 5), has_params=True),
    OpSpec("Conv2d", "module", (4,), has_params=True),
    OpSpec("relu", "function", (2, 3, 4, 5)),
    OpSpec("sum", "function", (2, 3, 4, 5), changes_shape=True),
)

VALID = '''\
"""Linear -> GELU -> sum over the last dimension."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
features = 32
width = 64


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(out_features) / math.sqrt(out_features))

    def forward(self, x):
        x = F.gelu(self.linear(x)) * self.scale
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, width]
'''

NO_GET_INPUTS = VALID.replace("def get_inputs():\n    return", "def inputs():\n    return")
IMPORTS_OS = "import os\n" + VALID
RANDOM_FORWARD = VALID.replace("dim=-1)\n", "dim=-1) + torch.rand(1)\n")


def fenced(source: str, chatter: str = "Here is the problem:") -> dict[str, Any]:
    return {"content": f"{chatter}\n\n```python\n{source}```\n\nIt stacks the operators."}


def composer(server: ReplayServer, **kwargs: Any) -> LLMComposer:
    model = OpenAIChatModel("composer-model", server.base_url, "key", max_retries=0)
    return LLMComposer(model, catalogue=kwargs.pop("catalogue", CATALOGUE), **kwargs)


def test_valid_reply_gives_a_loadable_candidate_with_a_stable_id(tmp_path: Path) -> None:
    with ReplayServer([fenced(VALID)]) as server:
        candidate = composer(server).compose(7)
    with ReplayServer([fenced(VALID, chatter="Sure.")]) as server:
        again = composer(server).compose(7)
    assert candidate.id == again.id and candidate.id.startswith("llm_7_")
    assert candidate.source == VALID
    assert (candidate.composer, candidate.seed) == ("llm", 7)
    assert candidate.data_source == f"torch#{len(candidate.ops)}"
    assert 1 <= len(candidate.ops) <= 5
    assert (candidate.input_shape, candidate.output_shape) == ((), ())
    assert candidate.extra["model"] == "composer-model"
    assert candidate.extra["attempts"] == 1 and candidate.extra["usage"] > 0
    # the request: no tools, the sampled operators named in the prompt
    assert len(server.requests) == 1
    request = server.requests[0]
    assert "tools" not in request and request["model"] == "composer-model"
    assert all(name in request["messages"][1]["content"] for name in candidate.ops)
    # the source is a problem the loader accepts, and it really runs
    path = tmp_path / "problem.py"
    path.write_text(candidate.source)
    problem = load_problem_file(path)
    assert problem.source == candidate.source
    namespace: dict[str, Any] = {}
    exec(compile(candidate.source, str(path), "exec"), namespace)
    out = namespace["Model"](*namespace["get_init_inputs"]())(*namespace["get_inputs"]())
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (16,)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [(NO_GET_INPUTS, "get_inputs"), (IMPORTS_OS, "import os"), (RANDOM_FORWARD, "rand")],
)
def test_an_invalid_reply_is_sent_back_and_retried(bad: str, expected: str) -> None:
    with ReplayServer([fenced(bad), fenced(VALID)]) as server:
        candidate = composer(server).compose(3)
    assert candidate.extra["attempts"] == 2
    assert candidate.source == VALID
    assert len(server.requests) == 2
    first, second = (r["messages"] for r in server.requests)
    assert second[: len(first)] == first  # the same conversation, continued
    assert second[len(first)]["role"] == "assistant" and bad in second[len(first)]["content"]
    feedback = second[len(first) + 1]
    assert feedback["role"] == "user" and expected in feedback["content"]
    assert "cannot be used" in feedback["content"]
    # usage adds up over both attempts
    assert candidate.extra["usage"] > 0


def test_all_replies_invalid_raise_composition_failed() -> None:
    turns = [fenced(IMPORTS_OS), {"content": "I cannot do that."}, fenced(NO_GET_INPUTS)]
    with (
        ReplayServer(turns) as server,
        pytest.raises(CompositionFailed, match="3 attempt") as caught,
    ):
        composer(server, max_retries=2).compose(5)
    assert len(server.requests) == 3
    assert caught.value.attempts == 3
    assert "get_inputs" in caught.value.reason  # the last error


def test_the_same_seed_gives_the_same_prompt() -> None:
    with ReplayServer([fenced(VALID)] * 3) as server:
        llm = composer(server, catalogue=None)  # the real torch catalogue
        first, second = llm.compose(11), llm.compose(11)
        llm.compose(12)
    assert first.ops == second.ops and first.id == second.id
    prompts = [r["messages"] for r in server.requests]
    assert prompts[0] == prompts[1] == llm.messages(11)
    seeds = range(40)
    assert len({tuple(o.name for o in sample_ops(s, llm.catalogue).ops) for s in seeds}) > 10
    assert len({llm.messages(s)[1]["content"] for s in seeds}) > 10


def test_sampling_follows_the_catalogue_ranks_and_max_ops() -> None:
    for seed in range(200):
        sample = sample_ops(seed, CATALOGUE, max_ops=2)
        assert 1 <= len(sample.ops) <= 2
        assert len({s.name for s in sample.ops}) == len(sample.ops)
        assert all(sample.rank in s.ranks for s in sample.ops)


def test_backend_and_runtime_window_are_in_the_prompt() -> None:
    with ReplayServer([]) as server:
        gpu = composer(server, runtime_ms=(2.0, 50.0)).messages(1)[1]["content"]
        cpu = composer(server, backend="cpu").messages(1)[1]["content"]
        with pytest.raises(ValueError, match="backend"):
            composer(server, backend="tpu")
    assert "2-50 ms" in gpu and "H200" in gpu
    assert "1-100 ms" in cpu and "CPU" in cpu and "small" in cpu


def test_extract_source_takes_the_last_python_block() -> None:
    reply = "```python\nfirst = 1\n```\ntext\n```bash\nls\n```\n```python\nsecond = 2\n```\n"
    assert extract_source(reply) == "second = 2\n"
    assert extract_source("```\nplain = 1\n```") == "plain = 1\n"
    assert extract_source("no_fence = 1") == "no_fence = 1\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def broken(:\n", "syntax error"),
        (VALID.replace("class Model", "class Net"), "class Model"),
        ("import numpy as np\n" + VALID, "import numpy"),
        ("from os import path\n" + VALID, "from os import"),
        (VALID.replace("x = F.gelu", "__import__('os')\n        x = F.gelu"), "__import__"),
        (VALID.replace("F.gelu(self.linear(x))", "F.dropout(self.linear(x), 0.1)"), "dropout"),
        (
            VALID.replace("self.scale =", "self.drop = nn.Dropout(0.1)\n        self.scale ="),
            "Dropout",
        ),
        (VALID.replace("return torch.sum(x, dim=-1)", "return x.normal_()"), "normal_"),
    ],
)
def test_validation_rejects_with_a_clear_reason(source: str, expected: str) -> None:
    with pytest.raises(ProblemError, match=expected):
        validate_problem_source(source)


def test_validation_accepts_random_init_and_random_inputs() -> None:
    validate_problem_source(VALID)  # torch.randn in __init__ and in get_inputs
    validate_problem_source(VALID.replace("import math\n", "from torch import nn\n"))
    validate_problem_source("from __future__ import annotations\n" + VALID)
