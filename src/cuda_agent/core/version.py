"""The package's version, low in ``core`` so that any module can name it without importing the
package root (``cuda_agent/__init__.py`` re-exports it as ``cuda_agent.__version__``). It
matches ``version`` in pyproject.toml (tests/test_packaging_metadata.py checks)."""

__version__ = "0.1.0"
