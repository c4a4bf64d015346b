"""The models a training stage starts from, made into local folders that every loader takes.

``path`` (what ``--model`` names resolve to: a built-in name, a folder or a hub id), ``tiny``
(a random tiny model built here, for CI), ``smollm2`` and ``qwen_coder`` (GGUF files from
installed packages, converted by ``gguf_convert``, which de-quantises Q5_0 and Q8_0 with
``gguf_dequant``; ``gguf_parts`` assembles a GGUF cut into parts), ``smollm2_template``
(SmolLM2's chat template with tool calls). The chat templates themselves are package data,
``rl/templates/*.jinja``. Here: the built-in names and
``ModelPathError``, which all of them share (importing this package loads only
``core.errors``).
"""

from cuda_agent.core.errors import CudaAgentError

TINY = "tiny"
SMOLLM2 = "smollm2"
QWEN_CODER = ("qwen-coder-0.5b", "qwen-coder-1.5b")


class ModelPathError(CudaAgentError):
    """A model that is neither built in, nor a local folder, nor reachable."""
