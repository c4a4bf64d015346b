"""A tiny, random, fully local chat model for exercising RL training code paths on a CPU.

``build_tiny_model(folder)`` makes a randomly initialised Llama-architecture causal LM (hidden
64, 2 layers, 2 heads) and a byte-level BPE tokenizer *trained here* with the ``tokenizers``
library on a corpus built in code (the workspace's SKILL.md, the agent's prompts, the tool
names and schemas, JSON punctuation, the chat-template text). Both are saved to ``folder`` with
``save_pretrained`` so trainers can load them by path. Nothing is downloaded: no model, no
tokenizer, nothing from the Hugging Face hub. Same seed, same files.

The tokenizer carries what a tool-calling trainer needs:

* a hermes/Qwen-style chat template (``<|im_start|>role ... <|im_end|>``) that renders the
  ``tools`` schemas in the system turn, assistant tool calls as
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` and tool results as
  ``<tool_response>`` blocks in a user turn; it is prefix-preserving (earlier turns render the
  same whatever follows) and marks assistant turns with ``{% generation %}``
  (``rl/templates/tiny.jinja``; its tool preamble and footer are ``TOOLS_PREAMBLE`` and
  ``TOOLS_FOOTER``, which the tokenizer's corpus also holds);
* a ``response_template`` (transformers' declarative response parser, saved in
  ``tokenizer_config.json``) that turns a generated assistant turn back into
  ``{"role": "assistant", "content": ..., "tool_calls": [...]}``; TRL's GRPOTrainer reads it
  (``tokenizer.parse_response``) to find tool calls, since it cannot recognise a template it
  does not ship;
* ``<|im_end|>`` as EOS, ``<|endoftext|>`` as padding, left padding.

What it is not: a model that can do anything. It produces random tokens; it exists so that a
whole training step (generation, tool parsing, environment, reward, loss, optimizer) runs in
CI in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from string import Template
from typing import Any

from cuda_agent.rl.models.chat_template import read_template

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, IM_END)
# Added as ordinary (non-special) added tokens, so decoding with skip_special_tokens keeps them.
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

# Hermes/Qwen2.5-style, written for this tokenizer (TRL does not need to recognise it: the
# tokenizer brings its own ``response_template``). Consecutive tool messages share one user turn.
CHAT_TEMPLATE = read_template("tiny", tools_preamble=TOOLS_PREAMBLE, tools_footer=TOOLS_FOOTER)

# transformers' declarative response parser (``tokenizer.parse_response``), for the template
# above: the last ``<|im_start|>assistant\n`` of the prompt starts the turn, each
# ``<tool_call>...</tool_call>`` is one JSON tool call, the rest up to ``<|im_end|>`` is content.
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def training_corpus() -> list[str]:
    """The texts the tokenizer is trained on (all from this package, built in code)."""
    from cuda_agent.agent.prompts import SYSTEM_PROMPT, task_prompt
    from cuda_agent.agent.tools.registry import default_tools
    from cuda_agent.workspace.init import BACKEND_TEXT
    from cuda_agent.workspace.template_files import template_root

    root = template_root()
    texts = [SYSTEM_PROMPT, TOOLS_PREAMBLE, TOOLS_FOOTER]
    for backend, values in sorted(BACKEND_TEXT.items()):
        for name in ("SKILL.md", "kernels/README.md"):
            texts.append(Template((root / name).read_text(encoding="utf-8")).substitute(values))
        texts.append(task_prompt("relu", backend, "/tmp/ca-trl-episode/workdir"))
    texts.append((root / "model_new.py").read_text(encoding="utf-8"))
    schemas = default_tools().schemas()
    texts.append("\n".join(json.dumps(schema) for schema in schemas))
    for schema in schemas:
        name = schema["function"]["name"]
        arguments = {key: "model_new.py" for key in schema["function"]["parameters"]["required"]}
        texts.append(
            "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
        )
    texts.append('{}[]:,"\\n ' * 4 + " ".join(s["function"]["name"] for s in schemas))
    return texts


def build_tokenizer(vocab_size: int = 1024) -> Any:
    """A byte-level BPE tokenizer trained on ``training_corpus()``, as a
    ``PreTrainedTokenizerFast`` with the chat template and response template above."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(training_corpus(), trainer=trainer)
    raw.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        response_template=RESPONSE_TEMPLATE,
        model_max_length=4096,
    )


def build_tiny_model(
    folder: Path, seed: int = 0, hidden_size: int = 64, layers: int = 2, heads: int = 2
) -> tuple[Any, Any]:
    """Build, save to ``folder`` and return ``(model, tokenizer)``; both load back by path
    (``AutoModelForCausalLM.from_pretrained(folder)``, ``AutoTokenizer.from_pretrained(folder)``).
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer
