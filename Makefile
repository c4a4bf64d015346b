# CUDA Agent: two commands do everything on a fresh machine.
#   make demo   creates .venv, installs the locked dependencies, evaluates the bundled examples
#   make test   creates .venv the same way and runs the test suite (no GPU needed)

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck gpu-test clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cuda-agent demo

test: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/pytest -q -n auto

gpu-test: $(STAMP)
	$(BIN)/pytest -q -m gpu

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
