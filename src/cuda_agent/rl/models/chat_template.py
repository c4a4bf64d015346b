"""The chat templates shipped as package data (``rl/templates/*.jinja``), read by name.

``read_template(name)`` is the text of ``rl/templates/<name>.jinja`` as it is (a template as
a GGUF carries it stays byte for byte). ``read_template(name, **constants)`` puts one
``{%- set NAME = "..." %}`` in front of it per constant (the value written as a JSON string,
which Jinja reads back as the same text): for the parts of a template that come from code,
such as the agent's tool prompt, which the file then uses by name. The result is the whole
template, as a tokenizer saves and every server renders it.

What it does not do: render anything (the tokenizer's ``apply_chat_template`` does), or
check that the file uses every constant.
"""

from __future__ import annotations

import importlib.resources
import json


def read_template(name: str, **constants: str) -> str:
    resource = importlib.resources.files("cuda_agent.rl") / "templates" / f"{name}.jinja"
    sets = [f"{{%- set {key} = {json.dumps(value)} %}}" for key, value in constants.items()]
    return "".join(sets) + resource.read_text(encoding="utf-8")
