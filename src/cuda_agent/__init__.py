"""CUDA Agent: agents that turn PyTorch modules into fast, correct CUDA kernels.

The package is layered (imports point down): ``core`` <- ``problems``, ``solutions``,
``workspace`` <- ``evaluator`` <- ``cli``. Heavy dependencies (torch) are imported lazily where
possible so that ``cuda-agent --help`` stays fast.
"""

__version__ = "0.1.0"
